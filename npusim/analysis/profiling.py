"""The profiler's tables of a run, in the spirit of the vendor's msprof (``op_summary_*.csv``) and
msopprof (``PipeUtilization.csv``): one row per op launch, one row per core. Columns are named as
theirs where they mean the same; ``docs/analysis.md`` documents each against theirs.

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
from npusim.trace.recorder import WAIT_LANE_SUFFIX
from npusim.trace.summary import busy_ps
from npusim.trace.summary import ops as op_spans

PIPES = (("CUBE", "mac"), ("VECTOR", "vec"), ("SCALAR", "scalar"), ("MTE1", "mte1"), ("MTE2", "mte2"), ("FIXP", "fixpipe"), ("MTE3", "mte3"))
"""The pipes of an AI core, in msprof's column order, and the names msprof gives their columns
(``mac_ratio`` is the cube's, ``vec_time(us)`` the vector unit's ...)."""

PIPE_COLUMNS = [column for _, short in PIPES for column in (f"{short}_time(us)", f"{short}_ratio")]

OP_COLUMNS = ["Device_id", "Op Name", "OP Type", "Task Type", "Task Start Time(us)", "Task Duration(us)", "Task Wait Time(us)",
              "Block Dim", "Mix Block Dim", "Input Shapes", "Input Data Types", "Output Shapes", "Output Data Types"]
"""The columns of ``op_summary`` before the per-core-kind ones (:func:`op_summary_columns`)."""
PIPE_UTILIZATION_COLUMNS = ["Device_id", "core", "kind", "ops", "active_time(us)", *PIPE_COLUMNS]


def _kind_columns(kind: str, pipes: Sequence[str]) -> list[str]:
    """A core kind's columns of ``op_summary``, prefixed with the kind as msprof prefixes its
    ``aic_`` / ``aiv_`` columns: ``aiv_time(us)``, then per pipe of the kind ``aiv_vec_time(us)``,
    ``aiv_vec_ratio`` ..."""
    return [f"{kind}_time(us)", *(f"{kind}_{short}_{what}" for pipe, short in PIPES if pipe in pipes for what in ("time(us)", "ratio"))]


def op_summary_columns(spec: SystemSpec) -> list[str]:
    """The columns of ``op_summary`` for a system: ``OP_COLUMNS``, the columns of each kind of AI
    core of its die (in the config's order; on A2 ``aic_...`` then ``aiv_...``), ``dma_bytes``, then
    the L2 columns of each kind (:func:`l2_columns`)."""
    return [*OP_COLUMNS, *(column for kind, core in spec.die.cores.items() for column in _kind_columns(kind, [str(p) for p in core.pipes])),
            "dma_bytes", *l2_columns(spec)]


def l2_columns(spec: SystemSpec) -> list[str]:
    """msprof's L2Cache columns per kind of AI core, in the config's order (``aic_write_cache_hit``
    ... ``aiv_total_hit_rate(%)``: :data:`~npusim.trace.l2.L2_METRICS`)."""
    return [f"{kind}_{metric}" for kind in spec.die.cores for metric in L2_METRICS]


def _l2_cells(record: RunRecord, op_id: int) -> list[int | float | str]:
    """The :func:`l2_columns` of op ``op_id``: per kind of core, its cores' L2 lines (empty for a
    kind it did not run on)."""
    cells: list[int | float | str] = []
    for kind in record.spec.die.cores:
        counts = record.l2.ops.get((op_id, kind))
        cells.extend(l2_metrics(counts) if counts is not None else [""] * len(L2_METRICS))
    return cells


OTHER_UNITS = {"aicpu": "AI_CPU", "sdma": "SDMA", "rdma": "RDMA", "host": "HOST"}
"""The Task Type of an op whose events are on no AI core, by the kind of unit they are on."""


def _unit_kind(unit: str) -> str:
    """``aiv`` of ``aiv3``."""
    return unit.rstrip("0123456789")


def _distinct(values: np.ndarray) -> np.ndarray:
    """The distinct values of an integer array, sorted: ``np.unique(values)`` without its check
    for masked arrays, which imports ``numpy.ma`` (~30 ms) into a run that needs nothing else of it."""
    ordered = np.sort(values)
    return ordered[np.concatenate(([True], ordered[1:] != ordered[:-1]))] if len(ordered) else ordered


class CoreEvents:
    """The run's events, as columns, for both tables: of every event its op and the kind of unit
    it is on; of the events on AI cores their op, core (an index into ``cores``), pipe (an index
    into ``PIPES``), start and end (ps) and busy time (ps). Made once per run folder."""

    def __init__(self, record: RunRecord) -> None:
        recorder = record.recorder
        kinds = list(record.spec.die.cores)
        core_ids: dict[tuple[int, str], int] = {}
        unit_kinds: dict[str, int] = {}
        track_core = np.full(len(recorder.tracks), -1, dtype=np.int64)
        track_pipe = np.full(len(recorder.tracks), -1, dtype=np.int64)
        track_unit_kind = np.zeros(len(recorder.tracks), dtype=np.int64)
        pipe_index = {pipe: i for i, (pipe, _) in enumerate(PIPES)}
        for track_id, track in enumerate(recorder.tracks):
            unit_kind = _unit_kind(track.unit)
            track_unit_kind[track_id] = unit_kinds.setdefault(unit_kind, len(unit_kinds))
            pipe = track.lane.removesuffix(WAIT_LANE_SUFFIX)  # a pipe's waits on a lane of their own are the pipe's
            if unit_kind in kinds and pipe in pipe_index:
                track_core[track_id] = core_ids.setdefault((track.die, track.unit), len(core_ids))
                track_pipe[track_id] = pipe_index[pipe]
        self.cores: list[tuple[int, str]] = sorted(core_ids, key=core_ids.__getitem__)  # (die, unit) of each core with events
        self.kinds = kinds
        self.kind_order = {kind: order for order, kind in enumerate(kinds)}
        self.kind_pipes = {kind: {str(pipe) for pipe in spec.pipes} for kind, spec in record.spec.die.cores.items()}
        self.unit_kinds = list(unit_kinds)  # the kinds of unit of the tracks (aiv, aicpu, sdma ...)
        columns = recorder.columns()
        on_track = columns["track"]
        self.all_op = columns["op"].astype(np.int64)
        self.all_unit_kind = track_unit_kind[on_track]
        core = track_core[on_track]
        on_core = core >= 0
        self.op = self.all_op[on_core]
        self.core = core[on_core]
        self.pipe = track_pipe[on_track][on_core]
        self.start, self.end = columns["start_ps"][on_core], columns["end_ps"][on_core]
        self.busy = busy_ps(recorder, columns)[on_core]


def _ratio(part: float, whole: float) -> float | str:
    return round(part / whole, 6) if whole > 0 else ""


def _us(ps: float) -> float:
    return round(ps / 1e6, 6)


def _shapes(tensors: Sequence[tuple[tuple[int, ...], str]]) -> tuple[str, str]:
    """msprof's notation: dimensions joined by ``,``, tensors by ``;`` (shapes), dtypes by ``;``."""
    return ";".join(",".join(str(d) for d in shape) for shape, _ in tensors), ";".join(dtype for _, dtype in tensors)


def op_summary(record: RunRecord, events: CoreEvents | None = None, spans: list[dict[str, Any]] | None = None) -> list[dict[str, Any]]:
    """One row per op launch that has events (:func:`op_summary_columns`), by start time: its span
    over all its events; the wait since the latest end of the ops before it on its die; the AI
    cores it ran on (``Block Dim``: those of the first kind in the config's order, ``Mix Block
    Dim``: those of the other kinds, as msprof counts a MIX op's cube and vector cores); per kind
    of core it ran on, the mean span of its events on one core (``aiv_time(us)``) and per pipe of
    the kind the busy time per core and its share of that span (``aiv_vec_time(us)``,
    ``aiv_vec_ratio``; empty for a kind it did not run on); the bytes its copies moved.
    ``events``: the run's :class:`CoreEvents`, if already made; ``spans``: the summary's ``ops``
    (:func:`npusim.trace.summary.ops`), if already made."""
    recorder = record.recorder
    spans = sorted(op_spans(record) if spans is None else spans, key=lambda r: (r["start_us"], r["op"]))
    if not spans:
        return []
    events = events or CoreEvents(record)
    kinds = events.kinds
    n_ops, n_cores, n_kinds, n_pipes = len(recorder.ops), max(len(events.cores), 1), len(kinds), len(PIPES)
    core_kind = np.array([kinds.index(_unit_kind(unit)) for _, unit in events.cores] or [0], dtype=np.int64)
    of_op = events.op >= 0
    op, core = events.op[of_op], events.core[of_op]
    # per (op, core): the first start and last end of the op's events there
    pairs, inverse = np.unique(op * n_cores + core, return_inverse=True)
    first = np.full(len(pairs), np.iinfo(np.int64).max)
    last = np.zeros(len(pairs), dtype=np.int64)
    np.minimum.at(first, inverse, events.start[of_op])
    np.maximum.at(last, inverse, events.end[of_op])
    pair_op, pair_kind = pairs // n_cores, core_kind[pairs % n_cores]
    cores_of = np.bincount(pair_op * n_kinds + pair_kind, minlength=n_ops * n_kinds).reshape(n_ops, n_kinds)
    span_of = np.bincount(pair_op * n_kinds + pair_kind, weights=last - first, minlength=n_ops * n_kinds).reshape(n_ops, n_kinds)
    busy = np.bincount((op * n_kinds + core_kind[core]) * n_pipes + events.pipe[of_op], weights=events.busy[of_op],
                       minlength=n_ops * n_kinds * n_pipes).reshape(n_ops, n_kinds, n_pipes)
    # per (op, kind of core), in us before rounding: the mean span on a core, each pipe's busy time per core and share of the span
    with np.errstate(divide="ignore", invalid="ignore"):
        time_per_core = (span_of / cores_of / 1e6).tolist()
        pipe_per_core = (busy / cores_of[:, :, None] / 1e6).tolist()
        pipe_share = (busy / span_of[:, :, None]).tolist()
    spanned = (span_of > 0).tolist()
    counts = cores_of.tolist()
    kind_pipes = [[p for p, (pipe, _) in enumerate(PIPES) if pipe in events.kind_pipes[kind]] for kind in kinds]
    unused = [[""] * (1 + 2 * len(pipes)) for pipes in kind_pipes]
    units: dict[int, set[str]] = {}  # op -> the kinds of unit its events are on
    of_any_op = events.all_op >= 0
    n_units = max(len(events.unit_kinds), 1)
    placed = _distinct(events.all_op[of_any_op] * n_units + events.all_unit_kind[of_any_op])
    for op_id, unit in zip((placed // n_units).tolist(), (placed % n_units).tolist()):
        units.setdefault(op_id, set()).add(events.unit_kinds[unit])
    columns = op_summary_columns(record.spec)

    rows = []
    last_end: dict[int, int] = {}  # die -> latest end of the ops so far (ps)
    for span in spans:
        op_id = span["op"]
        record_of_op = recorder.ops[op_id]
        start_ps, end_ps = round(span["start_us"] * 1e6), round(span["end_us"] * 1e6)
        die = record_of_op.die
        wait = max(0, start_ps - last_end[die]) if die in last_end else 0
        last_end[die] = max(last_end.get(die, 0), end_ps)
        inputs, input_types = _shapes(record_of_op.inputs)
        outputs, output_types = _shapes(record_of_op.outputs)
        cores_used = counts[op_id]
        used = [k for k in range(n_kinds) if cores_used[k]]
        row = [die, f"{record_of_op.name}#{op_id}", record_of_op.name,
               _task_type({kinds[k] for k in used}, events.kind_pipes, units.get(op_id, set())),
               _us(start_ps), _us(end_ps - start_ps), _us(wait),
               cores_used[used[0]] if used else 0, sum(cores_used[k] for k in used[1:]),
               inputs, input_types, outputs, output_types]
        for k in range(n_kinds):
            if not cores_used[k]:
                row.extend(unused[k])
                continue
            row.append(round(time_per_core[op_id][k], 6))
            pipe_times, shares = pipe_per_core[op_id][k], pipe_share[op_id][k]
            for p in kind_pipes[k]:
                row.append(round(pipe_times[p], 6))
                row.append(round(shares[p], 6) if spanned[op_id][k] else "")
        row.append(span["dma_bytes"])
        row.extend(_l2_cells(record, op_id))
        rows.append(dict(zip(columns, row)))
    return rows


def _task_type(kinds: set[str], kind_pipes: dict[str, set[str]], units: set[str]) -> str:
    """msprof's Task Type of an op: by the kinds of AI cores it ran on, ``AI_CORE`` on kinds with a
    CUBE pipe (the cube cores of A2/A3, the 300I Duo's AI cores), ``AI_VECTOR_CORE`` on kinds
    without one (vector cores), ``MIX_AIC`` on both; else by the units its events are on."""
    if kinds:
        cube = {"CUBE" in kind_pipes[kind] for kind in kinds}
        return "MIX_AIC" if len(cube) == 2 else "AI_CORE" if cube == {True} else "AI_VECTOR_CORE"
    return "+".join(sorted(OTHER_UNITS.get(unit, unit.upper()) for unit in units)) or "OTHER"


def pipe_utilization(record: RunRecord, events: CoreEvents | None = None) -> list[dict[str, Any]]:
    """One row per AI core with events (``PIPE_UTILIZATION_COLUMNS``), by die, kind and index: the
    ops it ran, its first start to last end, and per pipe of its kind the busy time over the run and
    its share of the simulated time (so an unevenly loaded core stands out). ``events``: the run's
    :class:`CoreEvents`, if already made."""
    recorder = record.recorder
    if not len(recorder):
        return []
    events = events or CoreEvents(record)
    simulated = max(record.simulated_ps, 1)
    order = sorted(range(len(events.cores)), key=lambda c: (events.cores[c][0], events.kind_order[_unit_kind(events.cores[c][1])],
                                                           int(events.cores[c][1][len(_unit_kind(events.cores[c][1])):] or 0)))
    n_cores = len(events.cores)
    busy = np.bincount(events.core * len(PIPES) + events.pipe, weights=events.busy, minlength=n_cores * len(PIPES)).reshape(n_cores, len(PIPES))
    first = np.full(n_cores, np.iinfo(np.int64).max)
    last = np.full(n_cores, np.iinfo(np.int64).min)
    np.minimum.at(first, events.core, events.start)
    np.maximum.at(last, events.core, events.end)
    of_op = events.op >= 0
    ops = np.bincount(_distinct(events.core[of_op] * (len(recorder.ops) + 1) + events.op[of_op]) // (len(recorder.ops) + 1),
                      minlength=n_cores).tolist()
    # per core and pipe, before rounding: the busy time (us) and its share of the simulated time
    busy_us, share = (busy / 1e6).tolist(), (busy / simulated).tolist()
    active = (last - first).tolist()
    kind_pipes = {kind: [p for p, (pipe, _) in enumerate(PIPES) if pipe in pipes] for kind, pipes in events.kind_pipes.items()}
    rows = []
    for core in order:
        die, unit = events.cores[core]
        kind = _unit_kind(unit)
        cells = [""] * len(PIPE_COLUMNS)
        for p in kind_pipes[kind]:  # the others stay empty: the core has no such pipe
            cells[2 * p] = round(busy_us[core][p], 6)
            cells[2 * p + 1] = round(share[core][p], 6)
        rows.append(dict(zip(PIPE_UTILIZATION_COLUMNS, [die, unit, kind, ops[core], _us(active[core]), *cells])))
    return rows


def csv_bytes(columns: Sequence[str], rows: Sequence[dict[str, Any]]) -> bytes:
    """``rows`` (each with every one of ``columns``) as CSV with a header of ``columns`` (UTF-8,
    ``\\n`` line ends)."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(columns)
    writer.writerows(map(operator.itemgetter(*columns), rows))
    return out.getvalue().encode("utf-8")
