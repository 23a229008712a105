"""Parameter sweeps: the cartesian product of config overrides and workload parameters, simulated
in parallel, one row per point.

Everything is checked before any point runs:

- the config with the fixed overrides, then each swept config value on its own (a typo in a key or
  a bad value fails the whole sweep at once, naming the ``--grid`` key and value), then the config
  of every point (built once here and sent to the worker that runs the point);
- the workload parameters, by a declaration pass that reads the workload's source without running
  it (:func:`~npusim.frontend.workload.scan_declared_params`): a swept value that does not convert
  to the type of a literal default is refused. A name the pass cannot find (declared under a
  computed name, or in a module the workload imports) is checked by running the first point alone
  before the others: if the workload does not declare it, the sweep stops there (nothing recorded).

Each point has a key: the first 16 hex digits of the sha256 of its overrides, its parameters, the
sha256 of its resolved config, the sha256 of the workload file, the data flag, the seed and the
npusim version. With ``out``, rows go to ``out/results.csv`` as points finish
(:mod:`~npusim.analysis.results`); ``resume`` skips the points whose last row there is ``ok`` and
simulates the others (failed ones included) again. At the end ``out`` also gets ``results.parquet``
(when pyarrow is installed), ``simulated_time.png`` and ``sweep.json`` (what was swept).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import secrets
import time
from collections.abc import Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

from npusim import __version__
from npusim.analysis.executors import default_workers, executor_for
from npusim.analysis.grid import Axis, Point, axes_from, points_of, value_text
from npusim.analysis.plot import plot_simulated_time
from npusim.analysis.points import PointTask
from npusim.analysis.report import output_console
from npusim.analysis.results import ResultsFile, cell_text, columns_for, typed_rows, write_parquet
from npusim.config import LoadedConfig, load_config
from npusim.engine import engine_record
from npusim.errors import ConfigError, OutputError, UnknownParameterError, UsageError
from npusim.files import MARKER, PARTIAL, FolderMark, folder_mark, not_npusims, write_json_atomically, write_marker
from npusim.frontend.session import check_seed
from npusim.frontend.workload import NOT_LITERAL, WorkloadSource, convert_param, parse_param_overrides, read_workload, scan_declared_params

RESULTS_CSV = "results.csv"
RESULTS_PARQUET = "results.parquet"
PLOT_PNG = "simulated_time.png"
MANIFEST_JSON = "sweep.json"


@dataclass
class SweepPlan:
    """Points ready to run: the base config (fixed overrides applied), the workload, the columns
    naming each point (``value_columns``), the points and their tasks, and whether some parameter
    names could only be checked by running the first point (``probe``)."""

    base: LoadedConfig
    workload: Path
    workload_sha256: str
    value_columns: list[str]
    points: list[Point]
    tasks: list[PointTask]
    probe: bool


@dataclass
class SweepOutcome:
    """What a sweep produced: one row per point in grid order (numbers as floats, swept values typed),
    the columns, how many points ran now, were reused from the results file, and failed, the files."""

    rows: list[dict[str, Any]]
    columns: list[str]
    ran: int
    reused: int
    failed: int
    files: dict[str, Path] = field(default_factory=dict)
    where: str = ""


def plan(config: str | Path, workload: str | Path, points: Sequence[Point], value_columns: Sequence[str], *,
         overrides: Sequence[str] | None = None, params: Mapping[str, Any] | Sequence[str] | None = None, data: bool = True,
         seed: int = 0, origin: str = "--grid") -> SweepPlan:
    """Check and prepare ``points`` (each with a value for every one of ``value_columns``) on
    ``config`` with the fixed ``overrides`` and ``params``; ``origin`` names where the points'
    overrides come from in error messages."""
    check_seed(seed)
    base_overrides = tuple(overrides or ())
    base = load_config(config, base_overrides)
    source = read_workload(workload)
    workload, workload_sha256 = source.path, source.sha256
    fixed_params = parse_param_overrides(params or {})
    probe = _check_params(source, fixed_params, points)

    configs: dict[tuple[str, ...], LoadedConfig] = {}
    tasks = []
    for index, point in enumerate(points):
        loaded = configs.get(point.overrides)
        if loaded is None:
            try:
                loaded = configs[point.overrides] = load_config(config, base_overrides + point.overrides, origin=origin)
            except ConfigError as error:
                described = ", ".join(f"{key}={value}" for key, value in point.values.items())
                raise ConfigError(f"the point {described}: {error}") from None
        point_params = {**fixed_params, **point.params}
        key = point_key(loaded, point.overrides, point_params, workload_sha256, data, seed)
        tasks.append(PointTask(index, key, loaded, str(workload.resolve()), source.data, workload_sha256, point_params, data, seed))
    return SweepPlan(base, workload, workload_sha256, list(value_columns), list(points), tasks, probe)


def point_key(config: LoadedConfig, overrides: Sequence[str], params: Mapping[str, Any], workload_sha256: str, data: bool, seed: int) -> str:
    """The identity of a point: equal keys simulate the same thing (see the module's notes)."""
    identity = {
        "npusim": __version__,
        "config_sha256": config.sha256,
        "overrides": list(overrides),
        "params": {name: value_text(value) for name, value in params.items()},
        "workload_sha256": workload_sha256,
        "data": data,
        "seed": seed,
    }
    return hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()[:16]


def _check_not_fixed_and_swept(overrides: Sequence[str] | None, params: Mapping[str, Any] | Sequence[str] | None, axes: Sequence[Axis]) -> None:
    """A key is either fixed for the whole sweep or swept, not both."""
    fixed_keys = {text.partition("=")[0].strip() for text in overrides or ()}
    fixed_params = set(parse_param_overrides(params or {}))
    both = sorted(fixed_keys & {axis.key for axis in axes if not axis.is_param})
    both += sorted(f"param.{name}" for name in fixed_params & {axis.param_name for axis in axes if axis.is_param})
    if both:
        raise UsageError(f"{', '.join(both)} is both fixed (--set / --param) and swept (--grid); keep one")


def _check_params(workload: WorkloadSource, fixed_params: dict, points: Sequence[Point]) -> bool:
    """Check the parameters against the workload's declarations; True when some name must be
    checked by running a point (the declaration pass did not find it)."""
    values: dict[str, list[Any]] = {name: [value] for name, value in fixed_params.items()}
    for point in points:
        for name, value in point.params.items():
            values.setdefault(name, []).append(value)
    if not values:
        return False
    declared = scan_declared_params(workload)
    for name, given in values.items():
        default = declared.defaults.get(name, NOT_LITERAL)
        if default is not NOT_LITERAL:
            for value in dict.fromkeys(map(value_text, given)):
                convert_param(name, value, default)
    return any(name not in declared.defaults for name in values)


def run_plan(sweep_plan: SweepPlan, *, workers: int | None = None, scheduler: str | None = None, results: ResultsFile | None = None,
             recorded: Mapping[str, dict[str, str]] | None = None, progress: bool = True, title: str = "sweep",
             point_timeout_s: float | None = None) -> SweepOutcome:
    """Simulate the points of ``sweep_plan`` whose key is not ``recorded`` as ``ok`` (rows already in
    ``results``) and return every point's row; each new row is appended to ``results`` as its point
    finishes. A point taking longer than ``point_timeout_s`` wall-clock seconds is stopped and
    recorded as failed (:mod:`~npusim.analysis.executors`)."""
    tasks = sweep_plan.tasks
    columns = columns_for(sweep_plan.value_columns)
    recorded = recorded or {}
    texts: dict[int, dict[str, str]] = {task.index: recorded[task.key] for task in tasks if task.key in recorded and recorded[task.key]["status"] == "ok"}
    reused = len(texts)
    todo = [task for task in tasks if task.index not in texts]
    if scheduler is None and workers is None:
        workers = min(default_workers(), max(len(todo), 1))
    executor = executor_for(workers, scheduler, point_timeout_s)
    failed = 0

    def record(index: int, outcome: dict[str, Any]) -> None:
        nonlocal failed
        row = {"key": tasks[index].key, **sweep_plan.points[index].values, **outcome}
        texts[index] = results.append(row) if results is not None else {column: cell_text(row[column]) for column in columns}
        failed += outcome["status"] != "ok"

    with executor, PointProgress(f"{title} on {executor.where}", len(todo), shown=progress and bool(todo)) as shown:
        if todo and sweep_plan.probe and not reused:
            first, todo = todo[0], todo[1:]
            index, outcome = run_point_alone(executor, first)
            if outcome["error_type"] == UnknownParameterError.__name__:
                raise UnknownParameterError(outcome["error"])
            record(index, outcome)
            shown.finished(failed)
        for index, outcome in executor.run(todo):
            record(index, outcome)
            shown.finished(failed)
    rows = typed_rows([texts[task.index] for task in tasks], sweep_plan.value_columns)
    return SweepOutcome(rows, columns, ran=len(tasks) - reused, reused=reused, failed=sum(row["status"] != "ok" for row in rows), where=executor.where)


class PointProgress:
    """How far a sweep has got, on stderr: a progress bar on a terminal; off one (a pipe, a file, a
    CI log) plain lines, never a bar: one as the sweep starts, then one as points finish, at most
    every :attr:`every_s` seconds, and one at the last point. Use as a context manager."""

    every_s = 10.0

    def __init__(self, title: str, total: int, *, shown: bool = True, console: Console | None = None) -> None:
        self.title, self.total, self.shown, self.done = title, total, shown, 0
        self.console = console or output_console(stderr=True)
        self.started = self.last_line = time.monotonic()
        self._bar: Progress | None = None
        if shown and self.console.is_terminal:
            self._bar = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TextColumn("{task.fields[failed]}"),
                                 TimeElapsedColumn(), TextColumn("ETA"), TimeRemainingColumn(), console=self.console)

    def __enter__(self) -> PointProgress:
        if self._bar is not None:
            self._bar.start()
            self._task = self._bar.add_task(self.title, total=self.total, failed="")
        elif self.shown:
            self.console.print(f"{self.title}: {self.total} point{'' if self.total == 1 else 's'} to simulate", markup=False, soft_wrap=True)
        return self

    def __exit__(self, *exc_info: object) -> None:
        if self._bar is not None:
            self._bar.stop()

    def finished(self, failed: int) -> None:
        """One more point finished; ``failed`` of those so far failed."""
        self.done += 1
        if self._bar is not None:
            self._bar.update(self._task, advance=1, failed=f"{failed} failed" if failed else "")
            return
        now = time.monotonic()
        if self.shown and (self.done == self.total or now - self.last_line >= self.every_s):
            self.last_line = now
            self.console.print(f"{self.title}: {self.done}/{self.total} points done, {failed} failed, {now - self.started:.0f} s", markup=False, soft_wrap=True)


def run_point_alone(executor, task: PointTask) -> tuple[int, dict[str, Any]]:
    """Run one point on ``executor`` and wait for it."""
    (outcome,) = executor.run([task])
    return outcome


def run_sweep(config: str | Path, workload: str | Path, grid: Mapping[str, Sequence[Any]] | Sequence[str], *,
              overrides: Sequence[str] | None = None, params: Mapping[str, Any] | Sequence[str] | None = None,
              workers: int | None = None, scheduler: str | None = None, data: bool = True, seed: int = 0,
              out: str | Path | None = None, resume: bool = False, progress: bool = True, command: Sequence[str] | None = None,
              point_timeout_s: float | None = None) -> SweepOutcome:
    """Sweep ``grid`` (``{KEY: [values]}`` or ``--grid`` texts; keys ``param.NAME`` are workload
    parameters) over ``workload`` on ``config``; see the module's notes. With ``out``, write the
    results file, Parquet, the plot and ``sweep.json`` there. ``point_timeout_s``: see :func:`run_plan`."""
    axes = axes_from(grid)
    _check_not_fixed_and_swept(overrides, params, axes)
    _check_swept_values(config, overrides, axes)
    sweep_plan = plan(config, workload, points_of(axes), [axis.key for axis in axes], overrides=overrides, params=params, data=data, seed=seed)
    out_dir = Path(out) if out is not None else None
    with contextlib.ExitStack() as held:
        results, recorded, folder = None, {}, None
        if out_dir is not None:
            folder = held.enter_context(sweep_folder(out_dir))
            results, recorded = ResultsFile.open(out_dir / RESULTS_CSV, columns_for(sweep_plan.value_columns), resume=resume)
            with written_in(out_dir):
                folder.mark(ended=False)  # running (a resumed sweep's folder too)
        title = f"{sweep_plan.workload.name} on {sweep_plan.base.name}"
        try:
            outcome = run_plan(sweep_plan, workers=workers, scheduler=scheduler, results=results, recorded=recorded, progress=progress,
                               title=f"sweep of {title}", point_timeout_s=point_timeout_s)
        finally:  # also when interrupted: the results file then says what was swept
            if folder is not None and results is not None and results.path.exists():
                with written_in(folder.path):
                    write_json_atomically(folder.path / MANIFEST_JSON, _manifest(sweep_plan, folder.id, axes, overrides, params, data, seed, command,
                                                                                 point_timeout_s))
        if out_dir is not None and folder is not None:
            outcome.files.update(csv=out_dir / RESULTS_CSV, manifest=out_dir / MANIFEST_JSON, plot=out_dir / PLOT_PNG)
            plotted = [{**point.values, "simulated_us": row["simulated_us"]} for point, row in zip(sweep_plan.points, outcome.rows)]
            with written_in(out_dir):
                if write_parquet(out_dir / RESULTS_PARQUET, outcome.rows, outcome.columns):
                    outcome.files["parquet"] = out_dir / RESULTS_PARQUET
                plot_simulated_time(out_dir / PLOT_PNG, axes, plotted, title=title)
                folder.mark(ended=True)
    return outcome


SWEEP_FILES = (RESULTS_CSV, RESULTS_PARQUET, PLOT_PNG, MANIFEST_JSON)
"""The files a sweep writes into its output folder: all that its marker (npusim.files.MARKER) lists."""
SWEEP = "sweep"
"""The kind of a sweep's folder, in its marker."""


@dataclass
class SweepFolder:
    """The output folder a sweep holds (:func:`sweep_folder`): where it is and its identity, the
    ``id`` of its marker that ``sweep.json`` records too."""

    path: Path
    id: str

    def mark(self, *, ended: bool) -> None:
        """Write the folder's marker: its sweep runs (``ended`` false) or ran to its end."""
        write_marker(self.path, FolderMark(self.id, SWEEP, ended, SWEEP_FILES))


@contextlib.contextmanager
def sweep_folder(out: Path) -> Iterator[SweepFolder]:
    """``out`` as the output folder of this sweep alone while the block runs. It must be absent,
    empty or a sweep folder of npusim's (npusim.files.folder_mark: its marker, or one written
    before markers, :func:`legacy_sweep_mark`), the one rule by which ``run`` knows its folders: a
    sweep writes its files into it in place, so a folder of the user's (its own ``sweep.json`` or
    plots) or a run's is refused before anything runs. It is created, then locked (``flock`` on
    the folder, released when this process ends, however): a second sweep into it meanwhile is
    refused, naming the first, instead of interleaving its rows in ``results.csv`` (UsageError,
    nothing written). Then a folder without a marker gets one (``ok`` false; an earlier sweep's
    marker and identity are kept, as ``--resume`` continues it: the sweep marks it as it runs and
    ends, :meth:`SweepFolder.mark`); a sweep that ends before writing anything else leaves the
    folder as it found it."""
    _check_sweep_folder(out)
    created = [folder for folder in (out, *out.parents) if not folder.exists()]  # made here, the innermost first
    try:
        out.mkdir(parents=True, exist_ok=True)
        descriptor = os.open(out, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError as error:
        raise UsageError(f"cannot write the sweep folder {str(out)!r}: {error.strerror or error}; choose another --out folder") from None
    marked = False
    try:
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise UsageError(f"another npusim sweep is writing to {str(out)!r} now; wait for it to end (then add --resume to continue "
                             "its sweep there), or choose another --out folder") from None
        _check_sweep_folder(out)  # again, now that no other sweep writes there
        earlier = folder_mark(out, legacy_sweep_mark, kind=SWEEP)
        folder = SweepFolder(out, earlier.id if earlier is not None and earlier.id else secrets.token_hex(16))
        if earlier is None or not earlier.id:  # this sweep gives the folder its marker
            marked = True
            try:
                folder.mark(ended=False)
            except OSError as error:
                raise UsageError(f"cannot write the sweep folder {str(out)!r}: {error.strerror or error}; choose another --out folder") from None
        yield folder
    finally:
        with contextlib.suppress(OSError):
            if marked and os.listdir(out) == [MARKER]:  # nothing written but the marker: as it was
                (out / MARKER).unlink()
        for created_folder in created:  # a sweep stopped before its first point leaves nothing
            try:
                created_folder.rmdir()  # only if empty
            except OSError:
                break
        os.close(descriptor)  # releases the lock


def _check_sweep_folder(out: Path) -> None:
    why = not_npusims(out, SWEEP, legacy_sweep_mark)
    if why is not None:
        raise UsageError(f"{why}: npusim sweep writes only into an empty folder or its own sweep folders; choose another --out folder")


def legacy_sweep_mark(out: Path, entries: Collection[str]) -> FolderMark | None:
    """A sweep folder of npusim from before markers (npusim.files.LegacyMark): nothing but
    :data:`SWEEP_FILES` (and their temporaries), a ``results.csv`` and a ``sweep.json`` of a
    sweep's (its header, its keys)."""
    if RESULTS_CSV not in entries or MANIFEST_JSON not in entries:
        return None
    if any(not (name in SWEEP_FILES or (name.startswith(".") and PARTIAL in name)) for name in entries):
        return None
    try:
        manifest = json.loads((out / MANIFEST_JSON).read_text(encoding="utf-8"))
        with open(out / RESULTS_CSV, encoding="utf-8") as handle:
            header = handle.readline()
    except (OSError, ValueError):
        return None
    if not (isinstance(manifest, dict) and {"npusim_version", "grid", "points"} <= manifest.keys() and header.startswith("key,")):
        return None
    return FolderMark("", SWEEP, False, SWEEP_FILES)


@contextlib.contextmanager
def written_in(out: Path) -> Iterator[None]:
    """An OSError writing a file of the sweep in ``out`` (a full disk) as one OutputError saying
    that the rows written are whole and how to go on."""
    try:
        yield
    except OSError as error:
        raise OutputError(f"cannot write the sweep's files in {str(out)!r}: {error.strerror or error}; the rows of the points that "
                          f"finished are whole in {str(out / RESULTS_CSV)!r}: free some space, then run the same command with --resume "
                          "to simulate only the others") from None


def _check_swept_values(config: str | Path, overrides: Sequence[str] | None, axes: Sequence[Axis]) -> None:
    """Each swept config value on its own over the fixed overrides: every bad key or value of the
    grid is reported at once, before any point is built."""
    base_overrides = tuple(overrides or ())
    load_config(config, base_overrides)
    errors = []
    for axis in axes:
        if axis.is_param:
            continue
        for value in axis.values:
            try:
                load_config(config, base_overrides + (f"{axis.key}={value_text(value)}",), origin="--grid")
            except ConfigError as error:
                errors.append(str(error))
    if errors:
        raise ConfigError("\n".join(dict.fromkeys(errors)))


def _manifest(sweep_plan: SweepPlan, sweep_id: str, axes, overrides, params, data, seed, command, point_timeout_s) -> dict:
    return {
        "npusim_version": __version__,
        "sweep_id": sweep_id,
        "config": sweep_plan.base.name,
        "config_source": sweep_plan.base.source,
        "config_sha256": sweep_plan.base.sha256,
        "overrides": list(overrides or ()),
        "params": {name: value_text(value) for name, value in parse_param_overrides(params or {}).items()},
        "grid": {axis.key: [value_text(value) for value in axis.values] for axis in axes},
        "workload": str(sweep_plan.workload),
        "workload_sha256": sweep_plan.workload_sha256,
        "data": data,
        "seed": seed,
        "points": len(sweep_plan.points),
        "point_timeout_s": point_timeout_s,
        "command": list(command) if command else None,
        **engine_record(),  # the engine of the process that ran the sweep (each point's is in the results: ``engine``)
    }


def sweep(config: str | Path, workload: str | Path, grid: Mapping[str, Sequence[Any]], *, overrides: Sequence[str] | None = None,
          params: Mapping[str, Any] | None = None, workers: int | None = None, scheduler: str | None = None, data: bool = True,
          seed: int = 0, out: str | Path | None = None, resume: bool = False, progress: bool = True, point_timeout_s: float | None = None):
    """:func:`run_sweep` as a pandas DataFrame: one row per point, in grid order (the last axis
    varies fastest), with the columns of the results file."""
    pandas = require_pandas()
    outcome = run_sweep(config, workload, grid, overrides=overrides, params=params, workers=workers, scheduler=scheduler, data=data,
                        seed=seed, out=out, resume=resume, progress=progress, point_timeout_s=point_timeout_s)
    frame = pandas.DataFrame(outcome.rows, columns=outcome.columns)
    frame.attrs.update(ran=outcome.ran, reused=outcome.reused, failed=outcome.failed, files={k: str(v) for k, v in outcome.files.items()})
    return frame


def require_pandas():
    """pandas, or a UsageError saying how to install it."""
    try:
        import pandas
    except ImportError:
        raise UsageError("DataFrames need pandas, which is not installed; install it with: pip install 'npusim[analysis]'") from None
    return pandas
