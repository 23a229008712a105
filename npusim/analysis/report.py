"""Reports of runs for people: the summary ``npusim run`` prints, ``npusim report DIR`` and
``npusim compare DIR_A DIR_B``. Everything is read from a run's ``summary.json`` (and
``manifest.json`` when present), so a report can be made again from a run folder at any time.
"""

from __future__ import annotations

import itertools
import json
import os
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console
from rich.table import Table

from npusim.errors import UsageError

MAX_ROWS = 16


@dataclass
class RunFolder:
    """A run's output folder: its summary and, when present, its manifest."""

    path: Path
    summary: dict
    manifest: dict

    @property
    def title(self) -> str:
        workload = Path(self.manifest.get("workload", self.path.name)).name
        return f"{workload} on {self.summary.get('config', '?')}"


READ_ATTEMPTS = 10


def _read_documents(path: Path, names: tuple[str, ...]) -> tuple[dict[str, dict | None], bool]:
    """The JSON documents ``names`` of the folder ``path`` (None for a missing one), all read from
    the same folder, and whether that folder is still the one at ``path`` (a run replaces its
    folder whole: npusim.files)."""
    documents: dict[str, dict | None] = {}
    folder_fd = os.open(path, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    try:
        for name in names:
            try:
                with open(f"{name}.json", encoding="utf-8", opener=lambda entry, flags: os.open(entry, flags, dir_fd=folder_fd)) as handle:
                    documents[name] = json.load(handle)
            except FileNotFoundError:
                documents[name] = None
            except json.JSONDecodeError as error:
                raise UsageError(f"{path / (name + '.json')}: not valid JSON ({error}); run `npusim run` again to rewrite it") from None
        opened, now = os.fstat(folder_fd), os.stat(path)
    finally:
        os.close(folder_fd)
    return documents, (opened.st_dev, opened.st_ino) == (now.st_dev, now.st_ino)


def load_run(folder: str | Path) -> RunFolder:
    """Read ``summary.json`` (required) and ``manifest.json`` (optional) of a run folder."""
    path = Path(folder)
    if not path.is_dir():
        raise UsageError(f"run folder {str(path)!r} does not exist; give the --out folder of an `npusim run` (default traces/<workload>-<config>)")
    summary_path = path / "summary.json"
    for _ in range(READ_ATTEMPTS):  # again when a run replaced the folder while it was read
        documents, whole = _read_documents(path, ("summary", "manifest"))
        if whole:
            break
    summary, manifest = documents["summary"], documents["manifest"] or {}
    if summary is None:
        raise UsageError(f"{str(path)!r} has no summary.json: it is not the output folder of `npusim run` (which writes trace.json, "
                         "summary.json, manifest.json)")
    missing = [key for key in ("simulated_time_us", "ops", "pipes", "bandwidth") if key not in summary]
    if missing:
        raise UsageError(f"{summary_path}: missing {', '.join(missing)}; it was written by another tool or an old npusim: run again")
    return RunFolder(path, summary, manifest)


# -- one run -----------------------------------------------------------------------------------

def ops_by_name(summary: dict) -> list[dict]:
    """The summary's ops grouped by name: launches, total / mean / longest duration (us),
    instructions; longest total first."""
    groups: dict[str, dict] = {}
    for op in summary.get("ops", []):
        group = groups.setdefault(op["name"], {"name": op["name"], "launches": 0, "total_us": 0.0, "max_us": 0.0, "instructions": 0})
        group["launches"] += 1
        group["total_us"] += op["duration_us"]
        group["max_us"] = max(group["max_us"], op["duration_us"])
        group["instructions"] += op["instructions"]
    for group in groups.values():
        group["mean_us"] = group["total_us"] / group["launches"]
    return sorted(groups.values(), key=lambda g: (-g["total_us"], g["name"]))


def _table(title: str, columns: list[str], rows, console: Console, limit: int, left: tuple[str, ...] = (), total: int | None = None) -> None:
    """The first ``limit`` of ``rows`` (an iterable of rows of texts; ``total``: how many there are,
    if ``rows`` is not a list) as a table, and how many more are in summary.json."""
    rows = list(itertools.islice(rows, limit))
    total = len(rows) if total is None else total
    if not rows:
        return
    table = Table(title=title, title_justify="left")
    for column in columns:
        table.add_column(column, justify="left" if column in left else "right")
    for row in rows:
        table.add_row(*row)
    console.print(table)
    if total > limit:
        console.print(f"  ... {total - limit} more rows in summary.json")


def print_report(summary: dict, *, title: str, console: Console | None = None, rows: int = MAX_ROWS) -> None:
    """Print a run's summary: the time, the bottleneck breakdown, ops and tiles, pipes, memories
    and links, warnings; each table keeps its ``rows`` largest rows."""
    console = console or Console(highlight=False)
    status = summary["status"]
    console.print(
        f"[bold]{title}[/bold]: simulated {summary['simulated_time_us']:.3f} us, {summary['events']} events, "
        f"wall {summary['wall_time_s']:.2f} s" + ("" if status == "ok" else f", [red]{status}[/red]")
    )
    found = summary.get("bottlenecks")
    if found and found["breakdown"]:
        console.print(f"[bold]bottlenecks[/bold] (critical path, {found['path_events']} events): {found['summary']}")
        _table("where the end-to-end time goes (critical path)", ["share", "time us", "on"],
               [[f"{r['share']:.1%}", f"{r['time_us']:.3f}", r["label"]] for r in found["breakdown"]], console, rows, left=("on",))
    _table("ops (by name)", ["op", "launches", "total us", "mean us", "max us", "instructions"],
           [[g["name"], str(g["launches"]), f"{g['total_us']:.3f}", f"{g['mean_us']:.3f}", f"{g['max_us']:.3f}", str(g["instructions"])]
            for g in ops_by_name(summary)], console, rows, left=("op",))
    tiles = summary.get("tiles", [])  # one row per tiled op: tens of thousands on a SuperPoD; only the first are formatted
    _table("tiles (first start to last end of each tile index)", ["op", "tiles", "mean us", "min us", "max us", "slowest"],
           ([f"{t['name']}#{t['op']}", str(t["tiles"]), f"{t['mean_us']:.3f}", f"{t['min_us']:.3f}", f"{t['max_us']:.3f}", str(t["slowest_tile"])]
            for t in sorted(tiles, key=lambda t: -t["max_us"])), console, rows, left=("op",), total=len(tiles))
    _table("pipes (busy time summed over the cores that used them)", ["die", "pipe", "cores", "busy us", "utilisation"],
           [[str(r["die"]), r["pipe"], str(r["cores"]), f"{r['busy_us']:.3f}", f"{r['utilisation']:.1%}"]
            for r in sorted(summary["pipes"], key=lambda r: -r["busy_us"])], console, rows, left=("pipe",))
    _table("memory and links (achieved over the whole run)", ["resource", "bytes", "achieved GB/s", "peak GB/s", "utilisation"],
           [[r["resource"], f"{r['bytes']:,}", f"{r['achieved_GBps']:.2f}", f"{r['peak_GBps']:.1f}", f"{r['utilisation']:.1%}"]
            for r in sorted(summary["bandwidth"], key=lambda r: -r["bytes"])], console, rows, left=("resource",))
    for warning in summary.get("warnings", [])[:rows]:
        console.print(f"[yellow]warning[/yellow] at {warning['time_us']:.3f} us on die {warning['die']}: {warning['message']}")


# -- two runs ----------------------------------------------------------------------------------

def _change(a: float | None, b: float | None) -> dict:
    delta = None if a is None or b is None else b - a
    ratio = None if delta is None or not a else b / a
    return {"a": a, "b": b, "delta": delta, "ratio": ratio}


def _paired(rows_a: list[dict], rows_b: list[dict], key, value) -> list[dict]:
    """Rows of both runs matched by ``key``, with ``value`` compared; biggest absolute change first."""
    a = {key(r): value(r) for r in rows_a}
    b = {key(r): value(r) for r in rows_b}
    names = list(a) + [k for k in b if k not in a]
    paired = [{"key": k, **_change(a.get(k), b.get(k))} for k in names]
    return sorted(paired, key=lambda r: (-(abs(r["delta"]) if r["delta"] is not None else float("inf")), str(r["key"])))


def compare(a: RunFolder, b: RunFolder) -> dict:
    """What changed from run ``a`` to run ``b``: end-to-end time, per op name (total time), per
    pipe (busy time), per HBM / link (achieved GB/s), per bottleneck (share of the critical path),
    and the config overrides and parameters that differ."""
    sa, sb = a.summary, b.summary
    settings = {}
    for field in ("config", "config_sha256", "overrides", "params", "data", "workload"):
        va = a.manifest.get(field, sa.get(field))
        vb = b.manifest.get(field, sb.get(field))
        if va != vb:
            settings[field] = {"a": va, "b": vb}
    return {
        "settings": settings,
        "end_to_end_us": _change(sa["simulated_time_us"], sb["simulated_time_us"]),
        "ops": _paired(ops_by_name(sa), ops_by_name(sb), lambda r: r["name"], lambda r: r["total_us"]),
        "pipes": _paired(sa["pipes"], sb["pipes"], lambda r: f"die{r['die']} {r['pipe']}", lambda r: r["busy_us"]),
        "bandwidth": _paired(sa["bandwidth"], sb["bandwidth"], lambda r: r["resource"], lambda r: r["achieved_GBps"]),
        "bottlenecks": _paired(sa.get("bottlenecks", {}).get("breakdown", []), sb.get("bottlenecks", {}).get("breakdown", []),
                               lambda r: r["label"], lambda r: r["share"]),
    }


def _number(value: float | None, fmt: str) -> str:
    return "-" if value is None else format(value, fmt)


def print_comparison(a: RunFolder, b: RunFolder, *, console: Console | None = None, rows: int = MAX_ROWS) -> dict:
    """Print :func:`compare` of the two runs side by side; returns it."""
    console = console or Console(highlight=False)
    result = compare(a, b)
    e2e = result["end_to_end_us"]
    console.print(f"[bold]A[/bold] = {a.path} ({a.title})")
    console.print(f"[bold]B[/bold] = {b.path} ({b.title})")
    for field, values in result["settings"].items():
        console.print(f"  {field}: A {values['a']!r}  B {values['b']!r}")
    verdict = "same time" if not e2e["delta"] else ("B faster" if e2e["delta"] < 0 else "B slower")
    console.print(f"[bold]end to end[/bold]: A {e2e['a']:.3f} us, B {e2e['b']:.3f} us, change {e2e['delta']:+.3f} us "
                  f"(x{_number(e2e['ratio'], '.3f')}): {verdict}")

    def side_by_side(title: str, unit: str, paired: list[dict], fmt: str) -> None:
        _table(title, ["", f"A {unit}", f"B {unit}", "change", "B/A"],
               [[str(r["key"]), _number(r["a"], fmt), _number(r["b"], fmt), _number(r["delta"], "+" + fmt), _number(r["ratio"], ".3f")]
                for r in paired], console, rows, left=("",))

    side_by_side("ops (total time per op name)", "us", result["ops"], ".3f")
    side_by_side("bottlenecks (share of the critical path)", "share", result["bottlenecks"], ".3f")
    side_by_side("memory and links (achieved bandwidth)", "GB/s", result["bandwidth"], ".2f")
    side_by_side("pipes (busy time)", "us", result["pipes"], ".3f")
    return result
