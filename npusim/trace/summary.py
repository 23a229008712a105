"""The summary of a run: simulated time; time per op and per tile of each op; busy time and
utilisation per die and pipe; bytes and achieved bandwidth against the peak of each HBM / L2 / link /
NIC; the L2 hit rates per die and per op; the bottleneck breakdown of the critical path, with the
config values its time rests on and how far each can be trusted (:func:`with_confidence`); warnings;
the ops a torch program ran on the host, counted. Plain JSON-able data (``summary.json``).

Its tables (``ops``, ``tiles``, ``pipes``, ``bandwidth``, ``l2.dies``, ``l2.ops``) are columnar
(:data:`Table`): one list of values per column, a row being the values at one index
(:func:`records` gives the rows as dicts). A 768-die run's tables hold 366,000 rows: as columns
their JSON is half the size of one object per row and written in half the time.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from npusim import __version__
from npusim.config.annotated import short_where
from npusim.config.confidence import ABSENT, key_path, value_at
from npusim.trace.critical_path import bottlenecks
from npusim.trace.l2 import L2_METRICS, l2_metrics
from npusim.trace.record import RunRecord
from npusim.trace.recorder import Recorder, first_seen

Table = dict[str, list[Any]]
"""A table of the summary: per column its values, in row order (every column as long as the others)."""


def records(table: Table) -> list[dict[str, Any]]:
    """The rows of ``table``, each as a dict of its columns' values, in order."""
    names = list(table)
    return [dict(zip(names, values)) for values in zip(*table.values())]


def table_of(rows: list[dict[str, Any]]) -> Table:
    """The table whose :func:`records` are ``rows`` (its columns: the rows' keys, in the order first
    met; a row without one of them holds None there). No rows: no columns."""
    names = list(dict.fromkeys(name for row in rows for name in row))
    return {name: [row.get(name) for row in rows] for name in names}


def table_length(table: Table) -> int:
    """The rows of ``table``."""
    return len(next(iter(table.values()), ()))


TABLES = ((None, "ops"), (None, "tiles"), (None, "pipes"), (None, "bandwidth"), ("l2", "dies"), ("l2", "ops"))
"""Where the summary holds its tables: the section holding one (None: the summary itself) and its name."""


def with_tables(summary: dict[str, Any], convert: Callable[[Any], Any]) -> dict[str, Any]:
    """A copy of ``summary`` whose tables (:data:`TABLES`; those it has) are ``convert(table)``; the
    rest is shared with ``summary``, which is left as it is."""
    copied = dict(summary)
    for section, name in TABLES:
        if section is not None:
            if not isinstance(copied.get(section), dict):
                continue
            copied[section] = dict(copied[section])
        holder = copied if section is None else copied[section]
        if name in holder:
            holder[name] = convert(holder[name])
    return copied


def _table(names: tuple[str, ...], columns: list[list[Any]] | tuple[list[Any], ...]) -> Table:
    """The table of the columns named ``names``, ``columns`` in the same order."""
    assert len(names) == len(columns) and len({len(column) for column in columns}) <= 1, "one list per column, all of one length"
    return dict(zip(names, columns))


def _transposed(names: tuple[str, ...], rows: list[tuple[Any, ...]]) -> Table:
    """The table of ``rows`` (each a tuple of the values of ``names``, in that order)."""
    return _table(names, [list(column) for column in zip(*rows)] if rows else [[] for _ in names])


HOST_FALLBACK = "host fallback"
"""The category of the instants that mark an op a torch program ran on the host (``docs/torch.md``)."""


def busy_ps(recorder: Recorder, columns: dict[str, np.ndarray]) -> np.ndarray:
    """Each event's busy time in ps: its duration, 0 for events that only wait (flags, barriers)."""
    duration: np.ndarray = columns["end_ps"] - columns["start_ps"]
    if recorder.wait_names:
        duration = np.where(np.isin(columns["name"], sorted(recorder.wait_names)), 0, duration)
    return duration


PIPE_COLUMNS = ("die", "pipe", "cores", "busy_us", "utilisation")
"""The columns of the ``pipes`` table (:func:`pipe_busy`)."""


def pipe_busy(record: RunRecord) -> Table:
    """Per die and pipe: how many cores used it, their summed busy time (us) and the utilisation
    over those cores (busy / (cores x simulated time))."""
    recorder = record.recorder
    if not len(recorder):
        return _transposed(PIPE_COLUMNS, [])
    columns = recorder.columns()
    busy_per_track = np.bincount(columns["track"], weights=busy_ps(recorder, columns), minlength=len(recorder.tracks))
    simulated = max(record.simulated_ps, 1)
    busy_tracks = np.flatnonzero(busy_per_track > 0)
    # the busy tracks by (die, pipe): how many, and their busy times summed in track order
    group_of, groups = first_seen([(recorder.tracks[track_id].die, recorder.tracks[track_id].lane) for track_id in busy_tracks.tolist()])
    cores = np.bincount(group_of, minlength=len(groups)).tolist()
    busy = np.bincount(group_of, weights=busy_per_track[busy_tracks], minlength=len(groups)).tolist()
    rows = []
    for group in sorted(range(len(groups)), key=groups.__getitem__):
        die, lane = groups[group]
        rows.append((die, lane, cores[group], busy[group] / 1e6, busy[group] / (cores[group] * simulated)))
    return _transposed(PIPE_COLUMNS, rows)


BANDWIDTH_COLUMNS = ("resource", "kind", "die", "bytes", "transfers", "achieved_GBps", "peak_GBps", "utilisation")
"""The columns of the ``bandwidth`` table (:func:`bandwidth`)."""


def bandwidth(record: RunRecord) -> Table:
    """Per shared resource that moved bytes: bytes, achieved GB/s over the run, peak GB/s."""
    simulated = max(record.simulated_ps, 1)
    rows = []
    for resource in record.resources:
        if resource.kind == "engine" or not resource.bytes_moved:
            continue
        achieved = resource.bytes_moved / simulated * 1e3  # bytes/ps -> GB/s
        peak = resource.capacity * 1e3
        rows.append((resource.name, resource.kind, resource.die, int(resource.bytes_moved), resource.flows_done, achieved, peak, achieved / peak))
    return _transposed(BANDWIDTH_COLUMNS, rows)


DMA_LANES = ("MTE1", "MTE2", "MTE3", "FIXP")
"""Lanes whose events are copies: their bytes are data moved (a vector event's bytes are its output)."""


def _distinct(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``np.unique(keys, return_inverse=True, return_counts=True)`` of non-negative integer keys;
    counted instead of sorted when they are small (op ids: several times faster)."""
    if not len(keys) or int(keys.min()) < 0 or int(keys.max()) > 4 * len(keys):
        return np.unique(keys, return_inverse=True, return_counts=True)
    counts = np.bincount(keys)
    present = counts > 0
    rank = np.cumsum(present) - 1  # of each key present, its row among the distinct keys
    return np.flatnonzero(present).astype(keys.dtype), rank[keys], counts[present]


def _spans(keys: np.ndarray, columns: dict[str, np.ndarray]) -> tuple[np.ndarray, ...]:
    """Per distinct key: the key, first start, last end (ps) and event count; and the row of each
    event's key among them."""
    unique, inverse, counts = _distinct(keys)
    first = np.full(len(unique), np.iinfo(np.int64).max, dtype=np.int64)
    last = np.zeros(len(unique), dtype=np.int64)
    np.minimum.at(first, inverse, columns["start_ps"])
    np.maximum.at(last, inverse, columns["end_ps"])
    return unique, first, last, counts, inverse


OP_COLUMNS = ("op", "name", "die", "start_us", "end_us", "duration_us", "instructions", "busy_us", "dma_bytes")
"""The columns of the ``ops`` table (:func:`ops`)."""


def ops(record: RunRecord) -> Table:
    """Per op: name, die, first start and last end of its instructions (us), instruction count,
    busy time (us, summed over lanes) and ``dma_bytes``, the payload its copies moved
    (MTE1/MTE2/MTE3/FIXP events)."""
    recorder = record.recorder
    columns = recorder.columns()
    mask = columns["op"] >= 0
    if not mask.any():
        return _transposed(OP_COLUMNS, [])
    selected = {key: columns[key][mask] for key in ("op", "track", "start_ps", "end_ps", "bytes")}
    unique, first, last, counts, inverse = _spans(selected["op"], selected)
    busy = np.bincount(inverse, weights=busy_ps(recorder, columns)[mask], minlength=len(unique))
    dma_track = np.array([track.lane in DMA_LANES for track in recorder.tracks])
    dma_bytes = np.where(dma_track[selected["track"]], selected["bytes"], 0)
    moved = np.bincount(inverse, weights=dma_bytes, minlength=len(unique))
    op_ids = unique.tolist()
    launched = [recorder.ops[op_id] for op_id in op_ids]
    return _table(OP_COLUMNS, [op_ids, [op.name for op in launched], [op.die for op in launched], (first / 1e6).tolist(), (last / 1e6).tolist(),
                               ((last - first) / 1e6).tolist(), counts.tolist(), (busy / 1e6).tolist(), moved.astype(np.int64).tolist()])


TILE_COLUMNS = ("op", "name", "tiles", "mean_us", "min_us", "max_us", "slowest_tile")
"""The columns of the ``tiles`` table (:func:`tiles`)."""


def tiles(record: RunRecord) -> Table:
    """Per op with tiles: how many, the mean, shortest and longest tile time (us) and which tile
    took longest. A tile's time spans the first start to the last end of its instructions (on all
    the cores that worked on that tile index)."""
    recorder = record.recorder
    columns = recorder.columns()
    mask = (columns["op"] >= 0) & (columns["tile"] >= 0)
    if not mask.any():
        return _transposed(TILE_COLUMNS, [])
    selected = {key: columns[key][mask] for key in ("op", "tile", "start_ps", "end_ps")}
    tile_span = int(selected["tile"].max()) + 1
    keys = selected["op"].astype(np.int64) * tile_span + selected["tile"]  # (op, tile) in order; dense when ops have few tiles: counted, not sorted
    unique, first, last, counts, _ = _spans(keys, selected)
    duration = last - first
    op_ids, starts, tile_counts = np.unique(unique // tile_span, return_index=True, return_counts=True)  # keys are sorted: each op's tiles are contiguous
    # per op: its tiles' total (exact: integer ps), shortest and longest time, and its first longest tile
    total, shortest, longest = (ufunc.reduceat(duration, starts) for ufunc in (np.add, np.minimum, np.maximum))
    position = np.arange(len(duration))
    slowest = np.minimum.reduceat(np.where(duration == np.repeat(longest, tile_counts), position, len(duration)), starts)
    ids = op_ids.tolist()
    return _table(TILE_COLUMNS, [ids, [recorder.ops[op_id].name for op_id in ids], tile_counts.tolist(),
                                 (total.astype(np.float64) / tile_counts / 1e6).tolist(), (shortest / 1e6).tolist(), (longest / 1e6).tolist(),
                                 (unique[slowest] % tile_span).tolist()])


L2_COLUMNS = (*L2_METRICS, "written_back_bytes")
"""The columns of the L2 tables (:func:`l2`) after those naming the die, or the op and unit."""


def l2(record: RunRecord) -> dict[str, Any]:
    """The L2 caches of the run: its line size (``line_bytes``); per die that was accessed
    (``dies``), its :data:`L2_METRICS` and the bytes it wrote back to HBM; per op and kind of unit
    (``aic``, ``aiv``, ``sdma`` ...) the same for the accesses it made (on whichever die's L2)
    (``ops``: also the op's name and die)."""
    line = record.l2.line_bytes
    ops = record.recorder.ops
    made: dict[tuple[float, ...], tuple[Any, ...]] = {}  # counts -> their metrics: the tile ops of one kind mostly count alike (6 distinct of 16,128 ops' on a 256-die all-gather)

    def row(counts: list[float]) -> tuple[Any, ...]:
        key = tuple(counts)
        metrics = made.get(key)
        if metrics is None:
            metrics = made[key] = (*l2_metrics(counts), int(counts[4]) * line)
        return metrics

    dies = [(die, *row(counts)) for die, counts in sorted(record.l2.dies.items()) if any(counts[:4])]
    by_op = [(op, ops[op].name, ops[op].die, unit, *row(counts)) for (op, unit), counts in sorted(record.l2.ops.items())
             if 0 <= op < len(ops) and any(counts[:4])]
    return {"line_bytes": line, "dies": _transposed(("die", *L2_COLUMNS), dies), "ops": _transposed(("op", "name", "die", "unit", *L2_COLUMNS), by_op)}


MOSTLY = 0.5
"""A breakdown row rests *mostly* on a config value when more than this share of its time does."""

UNATTRIBUTED = "(no config key)"
"""How ``rests_on`` names time that no config key explains."""


def is_low(config: Any, key: str) -> bool:
    """Whether the value at ``key`` of ``config`` is of low confidence (a key the config does not set
    is not a value of it)."""
    return value_at(config.resolved, key_path(key)) is not ABSENT and config.confidence_of(key).low


def low_confidence(config: Any) -> Callable[[str], bool]:
    """:func:`is_low` for ``config``, each key's answer remembered (every span of a run asks again)."""
    known: dict[str, bool] = {}

    def low(key: str) -> bool:
        found = known.get(key)
        if found is None:
            found = known[key] = is_low(config, key)
        return found

    return low


def with_confidence(found: dict[str, Any], config: Any, low: Callable[[str], bool] | None = None) -> dict[str, Any]:
    """The ``bottlenecks`` section ``found`` with what its keys are in ``config`` (a
    :class:`~npusim.config.LoadedConfig`): each ``rests_on`` entry (of the whole path, and of each
    breakdown row) gets the value as the config writes it and its confidence (``confidence``: the
    tag as written or ``user``; ``level``: H, M, L, user or unrated; the path's entries also
    ``basis``, ``source`` and ``where``); a key the config does not set (a schema default, such as a
    link's efficiency of 1) is left out. A row whose time rests mostly (:data:`MOSTLY`) on one key
    names it (``mostly_on``; of several such keys, a low-confidence one first); a row is of low
    confidence (``low_confidence``) when mostly its time rests on low-confidence values (level L, or
    none stated: its ``low_confidence_share``, counted by :func:`~npusim.trace.critical_path.bottlenecks`,
    above :data:`MOSTLY`), whether one value or several."""

    low = low or low_confidence(config)

    def entries(listed: list[dict[str, Any]], detail: bool) -> list[dict[str, Any]]:
        kept = []
        for entry in listed:
            key = entry["key"]
            if not key:
                kept.append({**entry, "key": UNATTRIBUTED, "value": None, "confidence": "", "level": ""})
                continue
            value = value_at(config.resolved, key_path(key))
            if value is ABSENT:
                continue
            confidence = config.confidence_of(key)
            extra = {"basis": confidence.basis, "source": confidence.source, "where": short_where(confidence.where)} if detail else {}
            kept.append({**entry, "value": value, "confidence": confidence.tag, "level": confidence.level, **extra})
        return kept

    rows = []
    for row in found["breakdown"]:
        if "rests_on" not in row:  # the "other" row
            rows.append(row)
            continue
        listed = entries(row["rests_on"], False)
        mostly = [entry for entry in listed if entry["share"] > MOSTLY and entry["key"] != UNATTRIBUTED]
        marked: dict[str, Any] = {"low_confidence": row.get("low_confidence_share", 0.0) > MOSTLY}
        if mostly:  # of the keys it rests mostly on (a term may rest on several), the least trusted
            marked["mostly_on"] = min(mostly, key=lambda entry: (not low(entry["key"]), -entry["share"], entry["key"]))["key"]
        rows.append({**row, "rests_on": listed, **marked})
    return {**found, "breakdown": rows, "rests_on": entries(found["rests_on"], True)}


def summarize(record: RunRecord, config: Any, *, wall_seconds: float, status: str = "ok", error: str | None = None) -> dict[str, Any]:
    """The whole summary of a run."""
    low = low_confidence(config)
    return {
        "npusim_version": __version__,
        "status": status,
        "error": error,
        "config": config.name,
        "config_sha256": config.sha256,
        "data": record.with_data,
        "simulated_time_us": record.simulated_ps / 1e6,
        "events": len(record.recorder),
        "wall_time_s": wall_seconds,
        "ops": ops(record),
        "tiles": tiles(record),
        "pipes": pipe_busy(record),
        "bandwidth": bandwidth(record),
        "l2": l2(record),
        "bottlenecks": with_confidence(bottlenecks(record, low=low), config, low),
        "warnings": [{"time_us": i.time_ps / 1e6, "die": i.die, "name": i.name, "message": i.message} for i in record.recorder.instants
                     if i.category != HOST_FALLBACK],
        "host_fallbacks": host_fallbacks(record),
    }


def host_fallbacks(record: RunRecord) -> list[dict[str, Any]]:
    """One row per op that ran on the host instead of the device: how many times, the first time
    (us) and die, the first one's message and the program's line it names (``at``, "" if none), in
    order of first use."""
    rows: dict[str, dict[str, Any]] = {}
    for instant in record.recorder.instants:
        if instant.category != HOST_FALLBACK:
            continue
        row = rows.get(instant.key)
        if row is None:
            rows[instant.key] = {"op": instant.key, "count": 1, "first_us": instant.time_ps / 1e6, "die": instant.die,
                                 "message": instant.message, "at": instant.message.partition(" at ")[2]}
        else:
            row["count"] += 1
    return list(rows.values())
