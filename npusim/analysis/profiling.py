"""The profiler's tables of a run, in the spirit of the vendor's msprof (``op_summary_*.csv``) and
msopprof (``PipeUtilization.csv``): one row per op launch, one row per core. Columns are named as
theirs where they mean the same; ``docs/analysis.md`` documents each against theirs.

Times are in microseconds from the exact picoseconds of the run. A pipe's time is its busy time:
the events of its lane, less those that only wait (``wait_flag``, barriers), as in the summary.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Sequence
from typing import Any

import numpy as np

from npusim.config.schema import SystemSpec
from npusim.trace.record import RunRecord
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
    core of its die (in the config's order; on A2 ``aic_...`` then ``aiv_...``), ``dma_bytes``."""
    return [*OP_COLUMNS, *(column for kind, core in spec.die.cores.items() for column in _kind_columns(kind, [str(p) for p in core.pipes])),
            "dma_bytes"]


OTHER_UNITS = {"aicpu": "AI_CPU", "sdma": "SDMA", "rdma": "RDMA", "host": "HOST"}
"""The Task Type of an op whose events are on no AI core, by the kind of unit they are on."""


def _unit_kind(unit: str) -> str:
    """``aiv`` of ``aiv3``."""
    return unit.rstrip("0123456789")


class _Events:
    """The run's events on AI cores, as columns: op, core (an index into ``cores``), pipe (an
    index into ``PIPES``), start and end (ps), busy time (ps)."""

    def __init__(self, record: RunRecord) -> None:
        recorder = record.recorder
        kinds = list(record.spec.die.cores)
        self.cores: list[tuple[int, str]] = []  # (die, unit) of each core with events
        core_ids: dict[tuple[int, str], int] = {}
        track_core = np.full(len(recorder.tracks), -1, dtype=np.int64)
        track_pipe = np.full(len(recorder.tracks), -1, dtype=np.int64)
        pipe_index = {pipe: i for i, (pipe, _) in enumerate(PIPES)}
        for track_id, track in enumerate(recorder.tracks):
            if _unit_kind(track.unit) in kinds and track.lane in pipe_index:
                track_core[track_id] = core_ids.setdefault((track.die, track.unit), len(core_ids))
                track_pipe[track_id] = pipe_index[track.lane]
        self.cores = sorted(core_ids, key=core_ids.__getitem__)
        self.kind_order = {kind: order for order, kind in enumerate(kinds)}
        self.kind_pipes = {kind: {str(pipe) for pipe in spec.pipes} for kind, spec in record.spec.die.cores.items()}
        columns = recorder.columns()
        self.track_units = [(_unit_kind(t.unit), t.lane) for t in recorder.tracks]
        self.all_op, self.all_track = columns["op"].astype(np.int64), columns["track"].astype(np.int64)
        on_core = track_core[columns["track"]] >= 0
        self.op = self.all_op[on_core]
        self.core = track_core[columns["track"]][on_core]
        self.pipe = track_pipe[columns["track"]][on_core]
        self.start, self.end = columns["start_ps"][on_core], columns["end_ps"][on_core]
        self.busy = busy_ps(recorder, columns)[on_core]


def _ratio(part: float, whole: float) -> float | str:
    return round(part / whole, 6) if whole > 0 else ""


def _us(ps: float) -> float:
    return round(ps / 1e6, 6)


def _shapes(tensors: Sequence[tuple[tuple[int, ...], str]]) -> tuple[str, str]:
    """msprof's notation: dimensions joined by ``,``, tensors by ``;`` (shapes), dtypes by ``;``."""
    return ";".join(",".join(str(d) for d in shape) for shape, _ in tensors), ";".join(dtype for _, dtype in tensors)


def op_summary(record: RunRecord) -> list[dict[str, Any]]:
    """One row per op launch that has events (:func:`op_summary_columns`), by start time: its span
    over all its events; the wait since the latest end of the ops before it on its die; the AI
    cores it ran on (``Block Dim``: those of the first kind in the config's order, ``Mix Block
    Dim``: those of the other kinds, as msprof counts a MIX op's cube and vector cores); per kind
    of core it ran on, the mean span of its events on one core (``aiv_time(us)``) and per pipe of
    the kind the busy time per core and its share of that span (``aiv_vec_time(us)``,
    ``aiv_vec_ratio``; empty for a kind it did not run on); the bytes its copies moved."""
    recorder = record.recorder
    spans = sorted(op_spans(record), key=lambda r: (r["start_us"], r["op"]))
    if not spans:
        return []
    events = _Events(record)
    kinds = list(record.spec.die.cores)
    n_ops, n_cores, n_kinds = len(recorder.ops), max(len(events.cores), 1), len(kinds)
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
    busy = np.bincount((op * n_kinds + core_kind[core]) * len(PIPES) + events.pipe[of_op], weights=events.busy[of_op],
                       minlength=n_ops * n_kinds * len(PIPES)).reshape(n_ops, n_kinds, len(PIPES))
    units: dict[int, set[str]] = {}
    placed = np.unique(events.all_op[events.all_op >= 0] * len(events.track_units) + events.all_track[events.all_op >= 0])
    for op_id, track in zip((placed // len(events.track_units)).tolist(), (placed % len(events.track_units)).tolist()):
        units.setdefault(op_id, set()).add(events.track_units[track][0])
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
        used = [k for k in range(n_kinds) if cores_of[op_id, k]]
        row: dict[str, Any] = {
            **dict.fromkeys(columns, ""),
            "Device_id": die, "Op Name": f"{record_of_op.name}#{op_id}", "OP Type": record_of_op.name,
            "Task Type": _task_type({kinds[k] for k in used}, events.kind_pipes, units.get(op_id, set())),
            "Task Start Time(us)": _us(start_ps), "Task Duration(us)": _us(end_ps - start_ps), "Task Wait Time(us)": _us(wait),
            "Block Dim": int(cores_of[op_id, used[0]]) if used else 0, "Mix Block Dim": int(sum(cores_of[op_id, k] for k in used[1:])),
            "Input Shapes": inputs, "Input Data Types": input_types, "Output Shapes": outputs, "Output Data Types": output_types,
            "dma_bytes": span["dma_bytes"],
        }
        for k in used:
            kind, cores_used, time_on_cores = kinds[k], int(cores_of[op_id, k]), float(span_of[op_id, k])
            row[f"{kind}_time(us)"] = _us(time_on_cores / cores_used)
            for (pipe, short), pipe_busy in zip(PIPES, busy[op_id, k].tolist()):
                if pipe in events.kind_pipes[kind]:
                    row[f"{kind}_{short}_time(us)"] = _us(pipe_busy / cores_used)
                    row[f"{kind}_{short}_ratio"] = _ratio(pipe_busy, time_on_cores)
        rows.append(row)
    return rows


def _task_type(kinds: set[str], kind_pipes: dict[str, set[str]], units: set[str]) -> str:
    """msprof's Task Type of an op: by the kinds of AI cores it ran on, ``AI_CORE`` on kinds with a
    CUBE pipe (the cube cores of A2/A3, the 300I Duo's AI cores), ``AI_VECTOR_CORE`` on kinds
    without one (vector cores), ``MIX_AIC`` on both; else by the units its events are on."""
    if kinds:
        cube = {"CUBE" in kind_pipes[kind] for kind in kinds}
        return "MIX_AIC" if len(cube) == 2 else "AI_CORE" if cube == {True} else "AI_VECTOR_CORE"
    return "+".join(sorted(OTHER_UNITS.get(unit, unit.upper()) for unit in units)) or "OTHER"


def pipe_utilization(record: RunRecord) -> list[dict[str, Any]]:
    """One row per AI core with events (``PIPE_UTILIZATION_COLUMNS``), by die, kind and index: the
    ops it ran, its first start to last end, and per pipe of its kind the busy time over the run and
    its share of the simulated time (so an unevenly loaded core stands out)."""
    recorder = record.recorder
    if not len(recorder):
        return []
    events = _Events(record)
    simulated = max(record.simulated_ps, 1)
    rows = []
    order = sorted(range(len(events.cores)), key=lambda c: (events.cores[c][0], events.kind_order[_unit_kind(events.cores[c][1])],
                                                           int(events.cores[c][1][len(_unit_kind(events.cores[c][1])):] or 0)))
    n_cores = len(events.cores)
    busy = np.bincount(events.core * len(PIPES) + events.pipe, weights=events.busy, minlength=n_cores * len(PIPES)).reshape(n_cores, len(PIPES))
    first = np.full(n_cores, np.iinfo(np.int64).max)
    last = np.full(n_cores, np.iinfo(np.int64).min)
    np.minimum.at(first, events.core, events.start)
    np.maximum.at(last, events.core, events.end)
    of_op = events.op >= 0
    ops = np.bincount(np.unique(events.core[of_op] * (len(recorder.ops) + 1) + events.op[of_op]) // (len(recorder.ops) + 1), minlength=n_cores)
    for core in order:
        die, unit = events.cores[core]
        row: dict[str, Any] = {"Device_id": die, "core": unit, "kind": _unit_kind(unit), "ops": int(ops[core]),
                               "active_time(us)": _us(int(last[core]) - int(first[core])), **dict.fromkeys(PIPE_COLUMNS, "")}
        for (pipe, short), pipe_busy in zip(PIPES, busy[core].tolist()):
            if pipe in events.kind_pipes[row["kind"]]:  # else empty: the core has no such pipe
                row[f"{short}_time(us)"] = _us(pipe_busy)
                row[f"{short}_ratio"] = _ratio(pipe_busy, simulated)
        rows.append(row)
    return rows


def csv_bytes(columns: Sequence[str], rows: Sequence[dict[str, Any]]) -> bytes:
    """``rows`` as CSV with a header of ``columns`` (UTF-8, ``\\n`` line ends)."""
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=list(columns), lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    return out.getvalue().encode("utf-8")
