"""The profiler's tables of a run, in the spirit of the vendor's msprof: ``op_summary`` (msprof's
``op_summary_*.csv``: one row per op launch, its task) and ``pipe_utilization`` (one row per AI
core, as msprof's ``ai_core_utilization_*.csv``, with the PipeUtilization metrics). Columns are
named as theirs where they mean the same, and mean the same in both tables (``*_ratio``: a pipe's
busy time over the core's execution time, as msprof's is the pipe's cycles over the total cycles);
``docs/analysis.md`` documents each against theirs.

Times are in microseconds from the exact picoseconds of the run. A pipe's time is its busy time:
the events of its lane, less those that only wait (``wait_flag``, barriers), as in the summary.
"""

from __future__ import annotations

import csv
import io
import operator
from collections.abc import Sequence
from typing import Any

import numpy as np

from npusim.config.schema import SystemSpec
from npusim.trace.l2 import L2_METRICS, l2_metrics
from npusim.trace.record import RunRecord
from npusim.trace.recorder import WAIT_LANE_SUFFIX, first_seen
from npusim.trace.summary import Table, busy_ps, table_length
from npusim.trace.summary import ops as op_spans

PIPES = (("CUBE", "mac"), ("VECTOR", "vec"), ("SCALAR", "scalar"), ("MTE1", "mte1"), ("MTE2", "mte2"), ("FIXP", "fixpipe"), ("MTE3", "mte3"))
"""The pipes of an AI core, in msprof's column order, and the names msprof gives their columns
(``mac_ratio`` is the cube's, ``vec_time(us)`` the vector unit's ...)."""
COMPUTE_PIPES = ("CUBE", "VECTOR")
"""The pipes msprof's ``memory_bound`` sets MTE2 against: ``mte2_ratio / max(mac_ratio, vec_ratio)``."""

PIPE_COLUMNS = [column for _, short in PIPES for column in (f"{short}_time(us)", f"{short}_ratio")]

OP_COLUMNS = ["Device_id", "Op Name", "OP Type", "Task Type", "Task Start Time(us)", "Task Duration(us)", "Task Wait Time(us)",
              "Block Dim", "Mix Block Dim", "Input Shapes", "Input Data Types", "Output Shapes", "Output Data Types"]
"""The columns of ``op_summary`` before the per-core-kind ones (:func:`op_summary_columns`)."""
PIPE_UTILIZATION_COLUMNS = ["Device_id", "core", "kind", "ops", "time(us)", "total_cycles", *PIPE_COLUMNS, "memory_bound"]
"""The columns of ``pipe_utilization``, one row per AI core."""


def _kind_columns(kind: str, pipes: Sequence[str]) -> list[str]:
    """A core kind's columns of ``op_summary``, prefixed with the kind as msprof prefixes its
    ``aic_`` / ``aiv_`` columns: ``aiv_time(us)``, ``aiv_total_cycles``, then per pipe of the kind
    ``aiv_vec_time(us)``, ``aiv_vec_ratio`` ..., then ``aiv_memory_bound``."""
    return [f"{kind}_time(us)", f"{kind}_total_cycles",
            *(f"{kind}_{short}_{what}" for pipe, short in PIPES if pipe in pipes for what in ("time(us)", "ratio")), f"{kind}_memory_bound"]


def op_summary_columns(spec: SystemSpec) -> list[str]:
    """The columns of ``op_summary`` for a system, in their order (the one list of them: a column
    is added here and given a value by :func:`op_summary`): ``OP_COLUMNS``, the columns of each
    kind of AI core of its die (in the config's order; on A2 ``aic_...`` then ``aiv_...``),
    ``dma_bytes``, then the L2 columns of each kind (:func:`l2_columns`)."""
    return [*OP_COLUMNS, *(column for kind, core in spec.die.cores.items() for column in _kind_columns(kind, [str(p) for p in core.pipes])),
            "dma_bytes", *l2_columns(spec)]


def l2_columns(spec: SystemSpec) -> list[str]:
    """msprof's L2Cache columns per kind of AI core, in the config's order (``aic_write_cache_hit``
    ... ``aiv_total_hit_rate(%)``: :data:`~npusim.trace.l2.L2_METRICS`)."""
    return [f"{kind}_{metric}" for kind in spec.die.cores for metric in L2_METRICS]


def _l2_cells(record: RunRecord, counts_of: dict[str, list[float]]) -> list[int | float | str]:
    """The :func:`l2_columns` of a launch whose ops' L2 lines per kind of core are ``counts_of``
    (empty for a kind it did not run on)."""
    cells: list[int | float | str] = []
    for kind in record.spec.die.cores:
        counts = counts_of.get(kind)
        cells.extend(l2_metrics(counts) if counts is not None else [""] * len(L2_METRICS))
    return cells


def _l2_of_launches(record: RunRecord, launch_of: np.ndarray) -> dict[int, dict[str, list[float]]]:
    """Per launch, per kind of unit, the L2 lines of its ops (``record.l2.ops`` summed over them,
    in the order of their op ids: a 768-die all-gather has 97,536 (op, kind) rows)."""
    keyed = sorted((op, kind, counts) for (op, kind), counts in record.l2.ops.items() if 0 <= op < len(launch_of) - 1)
    if not keyed:
        return {}
    kind_index, kinds = first_seen([kind for _, kind, _ in keyed])
    groups, group_of = np.unique(launch_of[np.array([op for op, _, _ in keyed], dtype=np.int64)] * len(kinds) + kind_index,
                                 return_inverse=True)
    totals = np.zeros((len(groups), len(keyed[0][2])))
    np.add.at(totals, group_of, np.array([counts for _, _, counts in keyed], dtype=np.float64))  # in order: the sums a loop makes
    summed: dict[int, dict[str, list[float]]] = {}
    for group, total in zip(groups.tolist(), totals.tolist()):
        summed.setdefault(group // len(kinds), {})[kinds[group % len(kinds)]] = total
    return summed


OTHER_UNITS = {"aicpu": "AI_CPU", "sdma": "SDMA", "rdma": "RDMA", "host": "HOST"}
"""The Task Type of an op whose events are on no AI core, by the kind of unit they are on (msprof's
names; an AICPU's scheduler and control lanes are both ``AI_CPU``)."""


def _unit_kind(unit: str) -> str:
    """The kind of a unit: ``aiv`` of ``aiv3``, ``aicpu`` of ``aicpu1`` and of ``aicpu control``."""
    return unit.split(" ", 1)[0].rstrip("0123456789")


def _distinct(values: np.ndarray) -> np.ndarray:
    """The distinct values of an integer array, sorted: ``np.unique(values)`` without its check
    for masked arrays, which imports ``numpy.ma`` (~30 ms) into a run that needs nothing else of it."""
    ordered = np.sort(values)
    return ordered[np.concatenate(([True], ordered[1:] != ordered[:-1]))] if len(ordered) else ordered


def launches(record: RunRecord) -> np.ndarray:
    """Of each op id, the op launch (msprof's task) it is part of: the launch it names
    (``OpRecord.part_of``: a PyPTO op, part of its PE's kernel launch), else itself; one longer,
    indexed by the op -1 of events of no op: the number of ops (a launch of their own)."""
    ops = record.recorder.ops
    part_of = np.fromiter((op.part_of for op in ops), dtype=np.int64, count=len(ops))
    return np.append(np.where(part_of >= 0, part_of, np.arange(len(ops))), len(ops))


class CoreEvents:
    """The run's events, as columns, for both tables: of each op id its launch (``launch_of``,
    :func:`launches`); of every event its op launch (``n_ops`` for events of no op) and the kind of
    unit it is on; of each AI core with events its ``(die, unit)`` (``cores``) and the index of its
    kind in ``kinds`` (``core_kind``); of the events on AI cores their launch, core (an index into
    ``cores``), pipe (an index into ``PIPES``), start and end (ps) and busy time (ps); and per
    (launch, core) of a launch's events on a core the first start and last end
    (``pair_launch``, ``pair_core``, ``pair_first``, ``pair_last``: the core's execution of that
    launch). Made once per run folder."""

    def __init__(self, record: RunRecord) -> None:
        recorder = record.recorder
        kinds = list(record.spec.die.cores)
        tracks = recorder.tracks
        # of each track its unit and the kind of that unit, and its pipe (-1: a lane of no pipe); each
        # name's kind and pipe are found once
        unit_of_track, units = recorder.track_units()
        kind_of = {name: _unit_kind(name) for name in {name for _, name in units}}
        kind_of_unit, unit_kinds = first_seen([kind_of[name] for _, name in units])
        pipe_index = {pipe: i for i, (pipe, _) in enumerate(PIPES)}
        lane_pipe = {lane: pipe_index.get(lane.removesuffix(WAIT_LANE_SUFFIX), -1)  # a pipe's waits on a lane of their own are the pipe's
                     for lane in {track.lane for track in tracks}}
        track_pipe = np.fromiter((lane_pipe[track.lane] for track in tracks), dtype=np.int64, count=len(tracks))
        track_unit_kind = kind_of_unit[unit_of_track]
        # the AI cores: the units of a kind of the die's cores, on the tracks of their pipes, numbered as they first appear
        core_track = (track_pipe >= 0) & np.array([kind_of[name] in kinds for _, name in units], dtype=bool)[unit_of_track]
        core_of_track, core_units = first_seen(unit_of_track[core_track].tolist())
        track_core = np.full(len(tracks), -1, dtype=np.int64)
        track_core[core_track] = core_of_track
        self.cores: list[tuple[int, str]] = [units[unit] for unit in core_units]  # (die, unit) of each core with events
        self.kinds = kinds
        self.kind_order = {kind: order for order, kind in enumerate(kinds)}
        self.core_kind = np.array([self.kind_order[kind_of[name]] for _, name in self.cores], dtype=np.int64)  # of each core, its kind in kinds
        self.kind_pipes = {kind: {str(pipe) for pipe in spec.pipes} for kind, spec in record.spec.die.cores.items()}
        self.clock_hz = record.spec.die.clock.hz
        self.unit_kinds: list[str] = unit_kinds  # the kinds of unit of the tracks (aiv, aicpu, sdma ...)
        self.n_ops = len(recorder.ops)
        columns = recorder.columns()
        on_track = columns["track"]
        self.launch_of = launches(record)
        self.all_launch = self.launch_of[columns["op"].astype(np.int64)]
        self.all_unit_kind = track_unit_kind[on_track]
        core = track_core[on_track]
        on_core = core >= 0
        self.launch = self.all_launch[on_core]
        self.core = core[on_core]
        self.pipe = track_pipe[on_track][on_core]
        self.start, self.end = columns["start_ps"][on_core], columns["end_ps"][on_core]
        self.busy = busy_ps(recorder, columns)[on_core]
        n_cores = max(len(self.cores), 1)
        pairs, inverse = np.unique(self.launch * n_cores + self.core, return_inverse=True)
        self.pair_launch, self.pair_core = pairs // n_cores, pairs % n_cores
        self.pair_first = np.full(len(pairs), np.iinfo(np.int64).max)
        self.pair_last = np.zeros(len(pairs), dtype=np.int64)
        np.minimum.at(self.pair_first, inverse, self.start)
        np.maximum.at(self.pair_last, inverse, self.end)

    def cycles(self, ps: float) -> int:
        """A time as whole cycles of the AI cores' clock (``die.clock``)."""
        return round(ps * self.clock_hz / 1e12)

    def core_time_ps(self) -> np.ndarray:
        """Per core, its execution time (ps): the union of its executions of the launches it ran,
        the time it ran an op (gaps between them not counted; overlapping executions once)."""
        n_cores = len(self.cores)
        if not len(self.pair_core):
            return np.zeros(n_cores, dtype=np.int64)
        order = np.lexsort((self.pair_first, self.pair_core))
        core, first, last = self.pair_core[order], self.pair_first[order], self.pair_last[order]
        # the latest end among the earlier executions of the same core: a running maximum of the ends'
        # ranks, each core's ranks above every earlier core's, so that no maximum crosses to the next core
        ends, rank = np.unique(last, return_inverse=True)
        running = np.maximum.accumulate(core * len(ends) + rank)
        new_core = np.concatenate(([True], core[1:] != core[:-1]))
        before = np.where(new_core, first, ends[np.concatenate(([0], running[:-1])) % len(ends)])
        covered = np.maximum(0, last - np.maximum(first, before))
        return np.bincount(core, weights=covered, minlength=n_cores).astype(np.int64)


def _ratio(part: float, whole: float) -> float | str:
    return round(part / whole, 6) if whole > 0 else ""


def _us(ps: float) -> float:
    return round(ps / 1e6, 6)


def _memory_bound(ratios: dict[str, float | str]) -> float | str:
    """msprof's ``memory_bound``: ``mte2_ratio / max(mac_ratio, vec_ratio)`` over the compute pipes
    of the kind (a cube core's ``mac``, a vector core's ``vec``); empty where there is no MTE2 or
    the compute pipes did nothing (the quotient is undefined)."""
    compute = [float(value) for pipe, value in ratios.items() if pipe in COMPUTE_PIPES and value != ""]
    mte2 = ratios.get("MTE2", "")
    if mte2 == "" or not compute or max(compute) <= 0:
        return ""
    return round(float(mte2) / max(compute), 6)


def _shapes(tensors: Sequence[tuple[tuple[int, ...], str]]) -> tuple[str, str]:
    """msprof's notation: dimensions joined by ``,``, tensors by ``;`` (shapes), dtypes by ``;``."""
    return ";".join(",".join(str(d) for d in shape) for shape, _ in tensors), ";".join(dtype for _, dtype in tensors)


def op_summary(record: RunRecord, events: CoreEvents | None = None, spans: Table | None = None) -> list[dict[str, Any]]:
    """One row per op launch (msprof's task) that has events (:func:`op_summary_columns`), by start
    time. A launch is an op launched by itself (an aclnn op, a kernel, a transfer) or a PyPTO PE's
    kernel launch with all its ops (:func:`launches`). Per launch: its span over all its events; the
    wait since the latest end of the launches before it on its die; the AI cores it ran on
    (``Block Dim``: those of the first kind in the config's order, ``Mix Block Dim``: those of the
    other kinds, as msprof counts a MIX op's cube and vector cores); per kind of core it ran on, the
    mean of its execution time on one core (first start to last end of its events there:
    ``aiv_time(us)``), their sum in cycles of the die clock (``aiv_total_cycles``), per pipe of the
    kind the busy time per core and its share of the execution time (``aiv_vec_time(us)``,
    ``aiv_vec_ratio``), and ``aiv_memory_bound`` (:func:`_memory_bound`); empty for a kind it did not
    run on; the bytes its copies moved. ``events``: the run's :class:`CoreEvents`, if already made;
    ``spans``: the summary's ``ops`` (:func:`npusim.trace.summary.ops`), if already made."""
    recorder = record.recorder
    spans = op_spans(record) if spans is None else spans
    if not table_length(spans):
        return []
    events = events or CoreEvents(record)
    launch_of = events.launch_of
    # per launch with events: its first start, last end (ps, from the spans' us) and the bytes its copies moved
    tasks, task_of = np.unique(launch_of[np.array(spans["op"], dtype=np.int64)], return_inverse=True)
    task_start = np.full(len(tasks), np.iinfo(np.int64).max, dtype=np.int64)
    task_end, task_bytes = np.zeros(len(tasks), dtype=np.int64), np.zeros(len(tasks), dtype=np.int64)
    np.minimum.at(task_start, task_of, np.rint(np.array(spans["start_us"]) * 1e6).astype(np.int64))
    np.maximum.at(task_end, task_of, np.rint(np.array(spans["end_us"]) * 1e6).astype(np.int64))
    np.add.at(task_bytes, task_of, np.array(spans["dma_bytes"], dtype=np.int64))
    kinds = events.kinds
    n_launches, n_kinds, n_pipes = events.n_ops + 1, len(kinds), len(PIPES)  # the last: events of no op
    core_kind = events.core_kind
    # per (launch, kind of core): how many cores, their execution times summed, each pipe's busy time summed
    pair_kind = core_kind[events.pair_core]
    cores_of = np.bincount(events.pair_launch * n_kinds + pair_kind, minlength=n_launches * n_kinds).reshape(n_launches, n_kinds)
    span_of = np.bincount(events.pair_launch * n_kinds + pair_kind, weights=events.pair_last - events.pair_first,
                          minlength=n_launches * n_kinds).reshape(n_launches, n_kinds)
    busy = np.bincount((events.launch * n_kinds + core_kind[events.core]) * n_pipes + events.pipe, weights=events.busy,
                       minlength=n_launches * n_kinds * n_pipes).reshape(n_launches, n_kinds, n_pipes)
    task_list = tasks.tolist()  # only the launches with events: their rows as lists
    counts, spanned, busy_ps_of = (dict(zip(task_list, of_launch[tasks].tolist())) for of_launch in (cores_of, span_of, busy))
    kind_pipes = [[p for p, (pipe, _) in enumerate(PIPES) if pipe in events.kind_pipes[kind]] for kind in kinds]
    units: dict[int, set[str]] = {}  # launch -> the kinds of unit its events are on
    of_any = events.all_launch < events.n_ops
    n_units = max(len(events.unit_kinds), 1)
    placed = _distinct(events.all_launch[of_any] * n_units + events.all_unit_kind[of_any])
    for launch, unit in zip((placed // n_units).tolist(), (placed % n_units).tolist()):
        units.setdefault(launch, set()).add(events.unit_kinds[unit])
    columns = op_summary_columns(record.spec)
    l2_of = _l2_of_launches(record, launch_of)

    rows = []
    last_end: dict[int, int] = {}  # die -> latest end of the launches so far (ps)
    by_start = np.lexsort((tasks, task_start))
    for launch, start_ps, end_ps, dma_bytes in zip(*(column[by_start].tolist() for column in (tasks, task_start, task_end, task_bytes))):
        op = recorder.ops[launch]
        die = op.die
        wait = max(0, start_ps - last_end[die]) if die in last_end else 0
        last_end[die] = max(last_end.get(die, 0), end_ps)
        inputs, input_types = _shapes(op.inputs)
        outputs, output_types = _shapes(op.outputs)
        used = [k for k in range(n_kinds) if counts[launch][k]]
        row: dict[str, Any] = dict.fromkeys(columns, "")
        row.update({"Device_id": die, "Op Name": f"{op.name}#{launch}", "OP Type": op.name,
                    "Task Type": _task_type({kinds[k] for k in used}, events.kind_pipes, units.get(launch, set())),
                    "Task Start Time(us)": _us(start_ps), "Task Duration(us)": _us(end_ps - start_ps), "Task Wait Time(us)": _us(wait),
                    "Block Dim": counts[launch][used[0]] if used else 0, "Mix Block Dim": sum(counts[launch][k] for k in used[1:]),
                    "Input Shapes": inputs, "Input Data Types": input_types, "Output Shapes": outputs, "Output Data Types": output_types,
                    "dma_bytes": dma_bytes})
        for k in used:
            kind, n, total = kinds[k], counts[launch][k], spanned[launch][k]
            row[f"{kind}_time(us)"] = _us(total / n)
            row[f"{kind}_total_cycles"] = events.cycles(total)
            ratios: dict[str, float | str] = {}
            for p in kind_pipes[k]:
                pipe, short = PIPES[p]
                row[f"{kind}_{short}_time(us)"] = _us(busy_ps_of[launch][k][p] / n)
                row[f"{kind}_{short}_ratio"] = ratios[pipe] = _ratio(busy_ps_of[launch][k][p], total)
            row[f"{kind}_memory_bound"] = _memory_bound(ratios)
        row.update(zip(l2_columns(record.spec), _l2_cells(record, l2_of.get(launch, {}))))
        rows.append(row)
    return rows


def _task_type(kinds: set[str], kind_pipes: dict[str, set[str]], units: set[str]) -> str:
    """msprof's Task Type of an op: by the kinds of AI cores it ran on, ``AI_CORE`` on kinds with a
    CUBE pipe (the cube cores of A2/A3, the 300I Duo's AI cores), ``AI_VECTOR_CORE`` on kinds
    without one (vector cores), ``MIX_AIC`` on both; else by the units its events are on."""
    if kinds:
        cube = {"CUBE" in kind_pipes[kind] for kind in kinds}
        return "MIX_AIC" if len(cube) == 2 else "AI_CORE" if cube == {True} else "AI_VECTOR_CORE"
    return "+".join(sorted({OTHER_UNITS.get(unit, unit.upper()) for unit in units})) or "OTHER"


def pipe_utilization(record: RunRecord, events: CoreEvents | None = None) -> list[dict[str, Any]]:
    """One row per AI core with events (``PIPE_UTILIZATION_COLUMNS``), by die, kind and index: the
    op launches it ran; its execution time (:meth:`CoreEvents.core_time_ps`: the time it ran them,
    as msprof's ``aiv_time(us)`` is a block's) and that time in cycles of the die clock; per pipe of
    its kind the busy time and its share of the execution time (the ``*_ratio`` of ``op_summary``
    over every launch of the core); ``memory_bound`` (:func:`_memory_bound`). ``events``: the
    run's :class:`CoreEvents`, if already made."""
    recorder = record.recorder
    if not len(recorder):
        return []
    events = events or CoreEvents(record)
    index_of = {unit: int(unit[len(_unit_kind(unit)):] or 0) for unit in {unit for _, unit in events.cores}}  # aiv3's 3
    order = np.lexsort((np.array([index_of[unit] for _, unit in events.cores], dtype=np.int64), events.core_kind,
                        np.array([die for die, _ in events.cores], dtype=np.int64))).tolist()
    n_cores = len(events.cores)
    busy = np.bincount(events.core * len(PIPES) + events.pipe, weights=events.busy, minlength=n_cores * len(PIPES)).reshape(n_cores, len(PIPES))
    of_launch = events.pair_launch < events.n_ops
    ops = np.bincount(events.pair_core[of_launch], minlength=n_cores).tolist()
    time_ps = events.core_time_ps().tolist()
    busy_of = busy.tolist()
    core_kind = events.core_kind.tolist()
    # per kind of core, its pipes: index in PIPES, name and columns
    kind_pipes = [[(p, pipe, f"{short}_time(us)", f"{short}_ratio") for p, (pipe, short) in enumerate(PIPES) if pipe in events.kind_pipes[kind]]
                  for kind in events.kinds]
    rows = []
    for core in order:
        die, unit = events.cores[core]
        row: dict[str, Any] = dict.fromkeys(PIPE_UTILIZATION_COLUMNS, "")  # a pipe the core does not have stays empty
        row.update({"Device_id": die, "core": unit, "kind": events.kinds[core_kind[core]], "ops": ops[core], "time(us)": _us(time_ps[core]),
                    "total_cycles": events.cycles(time_ps[core])})
        ratios: dict[str, float | str] = {}
        for p, pipe, time_column, ratio_column in kind_pipes[core_kind[core]]:
            row[time_column] = _us(busy_of[core][p])
            row[ratio_column] = ratios[pipe] = _ratio(busy_of[core][p], time_ps[core])
        row["memory_bound"] = _memory_bound(ratios)
        rows.append(row)
    return rows


def csv_bytes(columns: Sequence[str], rows: Sequence[dict[str, Any]]) -> bytes:
    """``rows`` (each with every one of ``columns``) as CSV with a header of ``columns`` (UTF-8,
    ``\\n`` line ends)."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(columns)
    writer.writerows(map(operator.itemgetter(*columns), rows))
    return out.getvalue().encode("utf-8")
