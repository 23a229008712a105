"""Reports of runs for people: the summary ``npusim run`` prints, ``npusim report DIR`` and
``npusim compare DIR_A DIR_B``. Everything is read from a run's ``summary.json`` (and
``manifest.json`` and ``config.yaml`` when present), so a report can be made again from a run
folder at any time.
"""

from __future__ import annotations

import itertools
import json
import os
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import yaml
from pydantic import BaseModel, ConfigDict, ValidationError, model_validator
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from npusim import __version__
from npusim.config.confidence import without_tags
from npusim.errors import UsageError
from npusim.trace.l2 import l2_metrics
from npusim.trace.summary import records, table_length, table_of, with_tables

MAX_ROWS = 16
UNWRAPPED_WIDTH = 100_000
"""Columns of a console that is not a terminal (a pipe, a file, a CI log): wide enough that no line
or table is ever wrapped or cut (rich would otherwise assume 80 columns); a table takes only the
width its cells need."""


def output_console(*, stderr: bool = False) -> Console:
    """A console for the reports and tables of the commands: on a terminal, the terminal's width
    (a label column wraps, a number never: :func:`number_column`); off one, lines as long as they
    are (:data:`UNWRAPPED_WIDTH`)."""
    console = Console(highlight=False, stderr=stderr)
    if not console.is_terminal and not console.is_jupyter:
        console.width = UNWRAPPED_WIDTH
    return console


@dataclass
class RunFolder:
    """A run's output folder: its summary and, when present, its manifest and its resolved config
    (``config.yaml``; None in a folder written before npusim wrote it)."""

    path: Path
    summary: dict
    manifest: dict
    config: dict | None = None

    @property
    def title(self) -> str:
        workload = Path(self.manifest.get("workload", self.path.name)).name
        return f"{workload} on {self.summary.get('config', '?')}"


READ_ATTEMPTS = 10


class _Read(BaseModel):
    """Part of summary.json that the reports read: the keys and types they need (other keys are
    left alone); validated strictly (a number written as text is refused, not converted)."""

    model_config = ConfigDict(extra="allow", strict=True)


class _Columns(_Read):
    """A table of summary.json (``npusim.trace.summary.Table``): its columns' values, every column
    as long as the others; a table without columns has no rows."""

    @model_validator(mode="after")
    def _whole(self) -> _Columns:
        declared = type(self).model_fields
        given = {**{name: getattr(self, name) for name in declared if name in self.model_fields_set}, **(self.model_extra or {})}
        missing = [name for name in declared if name not in given]
        if given and missing:
            raise ValueError(f"it has no column {missing[0]!r}")
        lengths = {name: len(values) for name, values in given.items() if isinstance(values, list)}
        usual = Counter(lengths.values()).most_common(1)[0][0] if lengths else 0
        odd = [f"{name} has {length}" for name, length in lengths.items() if length != usual]
        if odd:
            raise ValueError(f"its columns differ in length: {', '.join(odd)} rows, the others {usual}")
        return self


class _Ops(_Columns):
    name: list[str] = []
    duration_us: list[float] = []
    instructions: list[int] = []


class _Tiles(_Columns):
    name: list[str] = []
    op: list[int] = []
    tiles: list[int] = []
    mean_us: list[float] = []
    min_us: list[float] = []
    max_us: list[float] = []
    slowest_tile: list[int] = []


class _Pipes(_Columns):
    die: list[int] = []
    pipe: list[str] = []
    cores: list[int] = []
    busy_us: list[float] = []
    utilisation: list[float] = []


class _Resources(_Columns):
    resource: list[str] = []
    utilisation: list[float] = []
    achieved_GBps: list[float] = []
    peak_GBps: list[float] = []
    bytes: list[float] = []


class _Share(_Read):
    share: float
    time_us: float
    label: str
    resource: str | None = None


class _Bottlenecks(_Read):
    path_events: int
    summary: str
    breakdown: list[_Share]


class _Warning(_Read):
    time_us: float
    die: int | None
    message: str


class SummaryRead(_Read):
    """What ``npusim report`` and ``npusim compare`` read of a run's summary.json."""

    status: str
    simulated_time_us: float
    events: int
    wall_time_s: float
    ops: _Ops
    pipes: _Pipes
    bandwidth: _Resources
    tiles: _Tiles | None = None
    bottlenecks: _Bottlenecks | None = None
    warnings: list[_Warning] = []


def _version(text: object) -> tuple[int, ...] | None:
    """A version ``1.2.3`` as numbers to compare (None for anything else)."""
    parts = str(text).split(".")
    return tuple(int(p) for p in parts) if all(p.isdigit() for p in parts) else None


def newer_writer(manifest: dict) -> str | None:
    """The npusim version that wrote a run folder (its manifest) when it is newer than this one, else None."""
    written, here = _version(manifest.get("npusim_version")), _version(__version__)
    return str(manifest["npusim_version"]) if written is not None and here is not None and written > here else None


def version_warning(run: RunFolder) -> str | None:
    """A warning for a run folder written by a newer npusim (what it added is not shown), else None."""
    newer = newer_writer(run.manifest)
    if newer is None:
        return None
    return (f"npusim: warning: {run.path} was written by npusim {newer}, newer than this npusim {__version__}: what it added is not "
            "shown; update npusim to see it")


def _read_files(path: Path, names: tuple[str, ...]) -> tuple[dict[str, str | None], bool]:
    """The text of the files ``names`` of the folder ``path`` (None for a missing one), all read
    from the same folder, and whether that folder is still the one at ``path`` (a run replaces its
    folder whole: npusim.files)."""
    texts: dict[str, str | None] = {}
    folder_fd = os.open(path, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    try:
        for name in names:
            try:
                with open(name, encoding="utf-8", opener=lambda entry, flags: os.open(entry, flags, dir_fd=folder_fd)) as handle:
                    texts[name] = handle.read()
            except FileNotFoundError:
                texts[name] = None
        opened, now = os.fstat(folder_fd), os.stat(path)
    finally:
        os.close(folder_fd)
    return texts, (opened.st_dev, opened.st_ino) == (now.st_dev, now.st_ino)


def _parsed_json(path: Path, text: str | None) -> dict | None:
    if text is None:
        return None
    try:
        document = json.loads(text)
    except json.JSONDecodeError as error:
        raise UsageError(f"{path}: not valid JSON ({error}); run `npusim run` again to rewrite it") from None
    return document if isinstance(document, dict) else None


def _parsed_config(path: Path, text: str | None) -> dict | None:
    if text is None:
        return None
    try:
        config = yaml.safe_load(text)
    except yaml.YAMLError as error:
        raise UsageError(f"{path}: not valid YAML ({error}); run `npusim run` again to rewrite it") from None
    if not isinstance(config, dict):
        raise UsageError(f"{path}: not a config (a mapping of keys); run `npusim run` again to rewrite it")
    return config


def load_run(folder: str | Path) -> RunFolder:
    """Read ``summary.json`` (required), ``manifest.json`` and ``config.yaml`` (optional) of a run folder."""
    path = Path(folder)
    if not path.is_dir():
        raise UsageError(f"run folder {str(path)!r} does not exist; give the --out folder of an `npusim run` (default traces/<workload>-<config>)")
    summary_path = path / "summary.json"
    for _ in range(READ_ATTEMPTS):  # again when a run replaced the folder while it was read
        texts, whole = _read_files(path, ("summary.json", "manifest.json", "config.yaml"))
        if whole:
            break
    summary = columnar(_parsed_json(summary_path, texts["summary.json"]))
    manifest = _parsed_json(path / "manifest.json", texts["manifest.json"]) or {}
    if texts["summary.json"] is None:
        raise UsageError(f"{str(path)!r} has no summary.json: it is not the output folder of `npusim run` (which writes trace.json, "
                         "summary.json, manifest.json)")
    if summary is None:
        raise UsageError(f"{summary_path} is not a JSON object: it was written by another tool or edited; run `npusim run` again to rewrite it")
    try:
        SummaryRead.model_validate(summary)
    except ValidationError as error:
        first = error.errors()[0]
        where = ".".join(str(part) for part in first["loc"])
        more = f" (and {error.error_count() - 1} more)" if error.error_count() > 1 else ""
        newer = newer_writer(manifest)
        who = (f"npusim {newer} wrote it, newer than this npusim {__version__}: update npusim to read it" if newer is not None else
               "it was written by another tool, an older npusim, or edited: run `npusim run` again to rewrite it")
        raise UsageError(f"{summary_path} is not a summary npusim can read: {where}: {first['msg'].lower()}{more}; {who}") from None
    return RunFolder(path, summary, manifest, _parsed_config(path / "config.yaml", texts["config.yaml"]))


def columnar(summary: dict | None) -> dict | None:
    """``summary`` as read, with the tables of a summary written before they were columnar (npusim
    before Dec 2026: each a list of one object per row) turned into columns, so that reports and
    comparisons read run folders of either form."""
    if summary is None:
        return None
    return with_tables(summary, lambda table: table_of(table) if isinstance(table, list) and all(isinstance(row, dict) for row in table) else table)


# -- one run -----------------------------------------------------------------------------------

def ops_by_name(summary: dict) -> list[dict]:
    """The summary's ops grouped by name: launches, total / mean / longest duration (us),
    instructions; longest total first."""
    groups: dict[str, dict] = {}
    ops = summary["ops"]
    if table_length(ops):  # an empty table of an older summary has no columns
        for name, duration, instructions in zip(ops["name"], ops["duration_us"], ops["instructions"]):
            group = groups.get(name)
            if group is None:
                group = groups[name] = {"name": name, "launches": 0, "total_us": 0.0, "max_us": 0.0, "instructions": 0}
            group["launches"] += 1
            group["total_us"] += duration
            group["max_us"] = max(group["max_us"], duration)
            group["instructions"] += instructions
    for group in groups.values():
        group["mean_us"] = group["total_us"] / group["launches"]
    return sorted(groups.values(), key=lambda g: (-g["total_us"], g["name"]))


def l2_by_op_name(summary: dict) -> list[dict]:
    """The summary's L2 rows of ops (``l2.ops``) grouped by op name and unit: their lines and hit
    rates (percent, empty without such accesses); most lines first."""
    groups: dict[tuple[str, str], list[float]] = {}
    table = (summary.get("l2") or {}).get("ops") or {}
    if table_length(table):
        for name, unit, read_hit, read_miss, write_hit, write_miss in zip(table["name"], table["unit"], table["r0_read_cache_hit"],
                                                                         table["r0_read_cache_miss_allocate"], table["write_cache_hit"],
                                                                         table["write_cache_miss_allocate"]):
            counts = groups.setdefault((name, unit), [0.0, 0.0, 0.0, 0.0])
            counts[0] += read_hit
            counts[1] += read_miss
            counts[2] += write_hit
            counts[3] += write_miss
    rows = []
    for (name, unit), (read_hit, read_miss, write_hit, write_miss) in groups.items():
        _, _, _, _, write_rate, read_rate, total_rate = l2_metrics([read_hit, read_miss, write_hit, write_miss])
        rows.append({"name": name, "unit": unit, "read_hit_rate(%)": read_rate, "write_hit_rate(%)": write_rate, "total_hit_rate(%)": total_rate,
                     "lines": round(read_hit + read_miss + write_hit + write_miss)})
    return sorted(rows, key=lambda r: (-r["lines"], r["name"], r["unit"]))


def _rate(percent: float | str) -> str:
    return f"{percent:.1f}%" if percent != "" else ""


def _table(title: str, columns: list[str], rows, console: Console, limit: int, left: tuple[str, ...] = (), total: int | None = None,
           summarise=None) -> None:
    """The first ``limit`` of ``rows`` (an iterable of rows of texts; ``total``: how many there are,
    if ``rows`` is not a list) as a table, and how many more are in summary.json (``summarise``:
    a function of the number shown that says more about the rest)."""
    if total is None:
        rows = list(rows)
        total = len(rows)
    rows = list(itertools.islice(rows, limit))
    if not rows:
        return
    table = Table(title=title, title_justify="left")
    for column in columns:
        if column in left:
            table.add_column(column, justify="left", overflow="fold")
        else:  # a number: never wrapped or cut (rich narrows the text columns first)
            table.add_column(column, justify="right", no_wrap=True)
    for row in rows:
        table.add_row(*row)
    console.print(table)
    if total > limit:
        console.print(summarise(limit) if summarise is not None else f"  ... {total - limit} more rows in summary.json")


def print_report(summary: dict, *, title: str, console: Console | None = None, rows: int = MAX_ROWS, engine: str | None = None) -> None:
    """Print a run's summary: the time (with the ``engine`` that ran it, its manifest's
    ``compiled`` / ``interpreted``, when given), the bottleneck breakdown, ops and tiles, pipes,
    memories and links, warnings; each table keeps its ``rows`` largest rows."""
    console = console or output_console()
    status = summary["status"]
    console.print(
        f"[bold]{title}[/bold]: simulated {summary['simulated_time_us']:.3f} us, {summary['events']} events, "
        f"wall {summary['wall_time_s']:.2f} s" + (f" ({engine} engine)" if engine else "") + ("" if status == "ok" else f", [red]{status}[/red]")
    )
    found = summary.get("bottlenecks")
    if found and found["breakdown"]:
        console.print(f"[bold]bottlenecks[/bold] (critical path, {found['path_events']} events): {found['summary']}")
        _table("where the end-to-end time goes (critical path)", ["share", "time us", "on"],
               [[f"{r['share']:.1%}", f"{r['time_us']:.3f}", r["label"] + low_confidence_mark(r)] for r in found["breakdown"]], console, rows,
               left=("on",))
        print_rests_on(found, console, rows)
    _table("ops (by name)", ["op", "launches", "total us", "mean us", "max us", "instructions"],
           [[g["name"], str(g["launches"]), f"{g['total_us']:.3f}", f"{g['mean_us']:.3f}", f"{g['max_us']:.3f}", str(g["instructions"])]
            for g in ops_by_name(summary)], console, rows, left=("op",))
    tiles = summary.get("tiles") or {}  # one row per tiled op: tens of thousands on a SuperPoD; only the first are formatted
    longest = tiles.get("max_us", [])
    _table("tiles (first start to last end of each tile index)", ["op", "tiles", "mean us", "min us", "max us", "slowest"],
           ([f"{tiles['name'][i]}#{tiles['op'][i]}", str(tiles["tiles"][i]), f"{tiles['mean_us'][i]:.3f}", f"{tiles['min_us'][i]:.3f}",
             f"{longest[i]:.3f}", str(tiles["slowest_tile"][i])] for i in sorted(range(len(longest)), key=lambda i: -longest[i])),
           console, rows, left=("op",), total=len(longest))
    _table("pipes (busy time summed over the cores that used them)", ["die", "pipe", "cores", "busy us", "utilisation"],
           [[str(r["die"]), r["pipe"], str(r["cores"]), f"{r['busy_us']:.3f}", f"{r['utilisation']:.1%}"]
            for r in sorted(records(summary["pipes"]), key=lambda r: -r["busy_us"])], console, rows, left=("pipe",))
    resources = resources_by_importance(summary)
    _table("memory and links (waited on by the critical path first, then by utilisation)",
           ["resource", "critical path", "utilisation", "GB/s of peak", "MiB"],
           [[r["resource"], f"{r['critical_share']:.1%}" if r["critical_share"] else "", f"{r['utilisation']:.1%}",
             f"{r['achieved_GBps']:.1f} / {r['peak_GBps']:.0f}", f"{r['bytes'] / 2**20:.1f}"] for r in resources], console, rows, left=("resource",),
           summarise=lambda shown: _the_rest(resources, shown))
    l2 = summary.get("l2") or {}
    _table("L2 per die (hit rates of the accesses to its memory, in lines)", ["die", "read hit", "write hit", "total hit", "lines read",
                                                                             "lines written", "written back MiB"],
           [[str(r["die"]), _rate(r["read_hit_rate(%)"]), _rate(r["write_hit_rate(%)"]), _rate(r["total_hit_rate(%)"]),
             str(r["r0_read_cache_hit"] + r["r0_read_cache_miss_allocate"]), str(r["write_cache_hit"] + r["write_cache_miss_allocate"]),
             f"{r['written_back_bytes'] / 2**20:.1f}"] for r in records(l2.get("dies") or {})], console, rows, left=("die",))
    _table("L2 by op (its accesses, on any die)", ["op", "unit", "read hit", "write hit", "total hit", "lines"],
           [[g["name"], g["unit"], _rate(g["read_hit_rate(%)"]), _rate(g["write_hit_rate(%)"]), _rate(g["total_hit_rate(%)"]), str(g["lines"])]
            for g in l2_by_op_name(summary)], console, rows, left=("op", "unit"))
    for warning in summary.get("warnings", [])[:rows]:
        console.print(f"[yellow]warning[/yellow] at {warning['time_us']:.3f} us on die {warning['die']}: {warning['message']}")
    fallbacks = summary.get("host_fallbacks", [])
    if fallbacks:
        ops = ", ".join(f"{row['op']}" + (f" x{row['count']}" if row["count"] > 1 else "") for row in fallbacks[:rows])
        lines = list(dict.fromkeys(row.get("at") or "?" for row in fallbacks))
        more = f" and {len(fallbacks) - rows} more ops" if len(fallbacks) > rows else ""
        console.print(f"[yellow]host fallbacks[/yellow] (ran on the host in no simulated time, torch's CPU results): {ops}{more}; "
                      f"first at {', '.join(lines[:3])}{' ...' if len(lines) > 3 else ''} (summary.json host_fallbacks)")


LOW_SHARE = 0.2
"""When this share of the end-to-end time rests on low-confidence values, the report's reading names them."""

NAMED_SHARE = 0.05
"""The reading names the low-confidence values that at least this share of the time rests on."""


MARKED_SHARE = 0.1
"""A low-confidence row's mark names the low-confidence value most of its time rests on, and counts
the others at least this share of its time rests on."""


def low_confidence_mark(row: dict) -> str:
    """For a breakdown row whose time rests mostly on low-confidence values, a second line naming
    them: ``rests on die.aicpu.control_read [L, knob]``; else nothing."""
    if not row.get("low_confidence"):
        return ""
    low = [entry for entry in row["rests_on"] if _low(entry) and entry["share"] >= MARKED_SHARE]
    if not low:
        return ""
    more = f" and {len(low) - 1} more" if len(low) > 1 else ""  # one line, short: the table keeps its columns on a narrow terminal
    return f"\n  [yellow]rests on {low[0]['key']} {escape(_mark(low[0]))}{more}[/yellow]"


def _mark(entry: dict) -> str:
    """A ``rests_on`` entry's confidence as reports write it: ``[L, knob]``, ``[your value]``."""
    level = entry.get("level", "")
    if level == "user":
        return "[your value]"
    if level == "unrated":
        return "[no confidence given]"
    return f"[{entry['confidence']}]" if entry.get("confidence") else ""


def _low(entry: dict) -> bool:
    return entry.get("level") in ("L", "unrated")


def print_rests_on(found: dict, console: Console, rows: int) -> None:
    """The config values the critical path's time rests on (the summary's ``bottlenecks.rests_on``),
    and a reading naming the low-confidence ones a large share rests on."""
    entries = [entry for entry in found.get("rests_on", []) if entry["share"] >= 0.005]
    _table("what that time rests on (config values; a time of several values counts for each)", ["share", "value of", "is", "confidence"],
           [[f"{e['share']:.1%}", e["key"], "" if e.get("value") is None else str(e["value"]),
             f"[yellow]{escape(_mark(e))}[/yellow]" if _low(e) else escape(_mark(e))] for e in entries], console, rows,
           left=("value of", "is", "confidence"))
    line = low_confidence_reading(found.get("rests_on", []), found.get("low_confidence_share", 0.0))
    if line:
        console.print(f"[bold yellow]note[/bold yellow]: {escape(line)}")


def low_confidence_reading(entries: list[dict], low_share: float) -> str:
    """One sentence on the low-confidence values (level L, or none stated) of ``entries`` (a
    summary's ``rests_on``) when ``low_share`` of the time rests on such values (at least
    :data:`LOW_SHARE`): the share, then each value at least :data:`NAMED_SHARE` of the time rests on;
    empty otherwise."""
    low = [entry for entry in entries if _low(entry) and entry["share"] >= NAMED_SHARE]
    if low_share < LOW_SHARE or not low:
        return ""
    said = "; ".join(f"{e['key']} = {e['value']} {_mark(e)} ({e['share']:.0%}" + (f"; {without_tags(e['source'])})" if e.get("source") else ")")
                     for e in low)
    one = len(low) == 1
    return (f"{low_share:.0%} of the time rests on low-confidence values: {said}. The verdict is only as good as "
            f"{'that value' if one else 'those values'}: measure {'it' if one else 'them'}, or see how the time moves with `npusim whatif`")


def resources_by_importance(summary: dict) -> list[dict]:
    """The summary's memories and links (``bandwidth``), each with ``critical_share``, the share of
    the end-to-end time the critical path spent waiting on it: those on the critical path first
    (most waited on first), then the rest by utilisation, highest first."""
    waited: dict[str, float] = {}
    for row in (summary.get("bottlenecks") or {}).get("breakdown", []):
        if row.get("resource"):
            waited[row["resource"]] = waited.get(row["resource"], 0.0) + row["share"]
    rows = [{**r, "critical_share": waited.get(r["resource"], 0.0)} for r in records(summary["bandwidth"])]
    return sorted(rows, key=lambda r: (-r["critical_share"], -r["utilisation"], r["resource"]))


def _the_rest(resources: list[dict], shown: int) -> str:
    """One line on the resources after the first ``shown``: how many of each kind, and the highest
    utilisation among them."""
    kinds: dict[str, list[float]] = {}
    for r in resources[shown:]:
        kinds.setdefault(r.get("kind", "other"), []).append(r["utilisation"])
    parts = ", ".join(f"{len(values)} {kind} (up to {max(values):.1%})" for kind, values in sorted(kinds.items(), key=lambda kv: -max(kv[1])))
    return f"  ... {len(resources) - shown} more, none on the critical path: {parts}; every row in summary.json"


# -- two runs ----------------------------------------------------------------------------------

def _change(a: float | None, b: float | None) -> dict:
    if a is None or b is None:
        return {"a": a, "b": b, "delta": None, "ratio": None}
    return {"a": a, "b": b, "delta": b - a, "ratio": b / a if a else None}


def _paired(rows_a: list[dict], rows_b: list[dict], key, value, share=None) -> list[dict]:
    """Rows of both runs matched by ``key``, with ``value`` compared (``a``, ``b``, ``delta``,
    ``ratio`` B/A) and, with ``share``, each side's share as a fraction (``share_a``, ``share_b``;
    None where a run lacks the row); biggest absolute change first."""
    a = {key(r): r for r in rows_a}
    b = {key(r): r for r in rows_b}
    names = list(a) + [k for k in b if k not in a]
    paired = []
    for k in names:
        row = {"key": k, **_change(value(a[k]) if k in a else None, value(b[k]) if k in b else None)}
        if share is not None:
            row.update(share_a=share(a[k]) if k in a else None, share_b=share(b[k]) if k in b else None)
        paired.append(row)
    return sorted(paired, key=lambda r: (-(abs(r["delta"]) if r["delta"] is not None else float("inf")), str(r["key"])))


def _leaves(value: object, path: str = "") -> dict[str, object]:
    """Every value of a config that is not a mapping or list, by its dotted key path (list items by index)."""
    children: list[tuple[object, object]]
    if isinstance(value, dict):
        children = list(value.items())
    elif isinstance(value, list) and value:
        children = list(enumerate(value))
    else:
        return {path: value}
    leaves: dict[str, object] = {}
    for key, child in children:
        leaves.update(_leaves(child, f"{path}.{key}" if path else str(key)))
    return leaves


def config_changes(a: dict, b: dict) -> list[dict]:
    """The keys whose values differ between two resolved configs, in the order of ``a`` (then the
    keys only ``b`` has): ``key`` (dotted path), ``a`` and ``b`` (None where a config lacks the key)."""
    leaves_a, leaves_b = _leaves(a), _leaves(b)
    keys = list(leaves_a) + [key for key in leaves_b if key not in leaves_a]
    return [{"key": key, "a": leaves_a.get(key), "b": leaves_b.get(key)} for key in keys if leaves_a.get(key) != leaves_b.get(key)]


def compare(a: RunFolder, b: RunFolder) -> dict:
    """What changed from run ``a`` to run ``b``: end-to-end time, per op name (total time), per
    pipe (busy time, with its utilisation), per HBM / link (achieved GB/s, with its utilisation),
    per bottleneck (time on the critical path, with its share of it): B/A is always a ratio of the
    compared values, never of shares; the config keys whose values differ (``config_keys``; None
    when a folder has no ``config.yaml``), and the config overrides and parameters that differ."""
    sa, sb = a.summary, b.summary
    settings = {}
    for field in ("config", "config_sha256", "overrides", "params", "data", "workload"):
        va = a.manifest.get(field, sa.get(field))
        vb = b.manifest.get(field, sb.get(field))
        if va != vb:
            settings[field] = {"a": va, "b": vb}
    return {
        "settings": settings,
        "config_keys": config_changes(a.config, b.config) if a.config is not None and b.config is not None else None,
        "end_to_end_us": _change(sa["simulated_time_us"], sb["simulated_time_us"]),
        "ops": _paired(ops_by_name(sa), ops_by_name(sb), lambda r: r["name"], lambda r: r["total_us"]),
        "pipes": _paired(records(sa["pipes"]), records(sb["pipes"]), lambda r: f"die{r['die']} {r['pipe']}", lambda r: r["busy_us"],
                         lambda r: r["utilisation"]),
        "bandwidth": _paired(records(sa["bandwidth"]), records(sb["bandwidth"]), lambda r: r["resource"], lambda r: r["achieved_GBps"],
                             lambda r: r["utilisation"]),
        "bottlenecks": _paired((sa.get("bottlenecks") or {}).get("breakdown", []), (sb.get("bottlenecks") or {}).get("breakdown", []),
                               lambda r: r["label"], lambda r: r["time_us"], lambda r: r["share"]),
    }


def _number(value: float | None, fmt: str) -> str:
    return "-" if value is None else format(value, fmt)


def print_comparison(a: RunFolder, b: RunFolder, *, console: Console | None = None, rows: int = MAX_ROWS) -> dict:
    """Print :func:`compare` of the two runs side by side; returns it."""
    console = console or output_console()
    result = compare(a, b)
    e2e = result["end_to_end_us"]
    console.print(f"[bold]A[/bold] = {a.path} ({a.title})")
    console.print(f"[bold]B[/bold] = {b.path} ({b.title})")
    for field, values in result["settings"].items():
        if field == "config_sha256":  # the keys that differ follow; the hashes only tell they do
            console.print(f"  {field}: A {str(values['a'])[:12]}...  B {str(values['b'])[:12]}...")
        else:
            console.print(f"  {field}: A {values['a']!r}  B {values['b']!r}")
    changed = result["config_keys"]
    if changed is None:
        older = " and ".join(name for name, run in (("A", a), ("B", b)) if run.config is None)
        console.print(f"  config keys: not compared, {older} has no config.yaml (written by an older npusim)")
    elif not changed:
        console.print("  config keys: the same")
    else:
        _table("config keys that differ (config.yaml)", ["key", "A", "B"],
               [[r["key"], "-" if r["a"] is None else str(r["a"]), "-" if r["b"] is None else str(r["b"])] for r in changed],
               console, rows, left=("key", "A", "B"))
    verdict = "same time" if not e2e["delta"] else ("B faster" if e2e["delta"] < 0 else "B slower")
    console.print(f"[bold]end to end[/bold]: A {e2e['a']:.3f} us, B {e2e['b']:.3f} us, change {e2e['delta']:+.3f} us "
                  f"(x{_number(e2e['ratio'], '.3f')}): {verdict}")

    def side_by_side(title: str, unit: str, paired: list[dict], fmt: str, shares: str = "") -> None:
        """The values of A and B in ``unit``, the change, B/A, and each side's ``shares`` in % (when named)."""
        columns = ["", f"A {unit}", f"B {unit}", f"change {unit}", "B/A"] + ([f"A {shares}", f"B {shares}"] if shares else [])
        _table(title, columns,
               [[str(r["key"]), _number(r["a"], fmt), _number(r["b"], fmt), _number(r["delta"], "+" + fmt), _number(r["ratio"], ".3f")]
                + ([_number(r["share_a"], ".1%"), _number(r["share_b"], ".1%")] if shares else []) for r in paired], console, rows, left=("",))

    side_by_side("ops (total time per op name)", "us", result["ops"], ".3f")
    side_by_side("bottlenecks (time on the critical path, and its share of it)", "us", result["bottlenecks"], ".3f", shares="%")
    side_by_side("memory and links (achieved bandwidth, and utilisation)", "GB/s", result["bandwidth"], ".2f", shares="%")
    side_by_side("pipes (busy time, and utilisation)", "us", result["pipes"], ".3f", shares="%")
    return result
