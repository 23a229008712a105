"""The summary of a run: simulated time, busy time and utilisation per die and pipe, bytes and
achieved bandwidth per HBM / L2 / link / NIC, ops, event count, wall time. Plain JSON-able data."""

from __future__ import annotations

import numpy as np

from npusim import __version__


def pipe_busy(system) -> list[dict]:
    """Per die and pipe: how many cores used it, their summed busy time (us) and the utilisation
    over those cores (busy / (cores x simulated time))."""
    recorder = system.recorder
    columns = recorder.columns()
    if not len(recorder):
        return []
    duration = columns["end_ps"] - columns["start_ps"]
    if recorder.wait_names:
        duration = np.where(np.isin(columns["name"], sorted(recorder.wait_names)), 0, duration)
    busy_per_track = np.bincount(columns["track"], weights=duration, minlength=len(recorder.tracks))
    simulated = max(system.env.now, 1)
    groups: dict[tuple[int, str], list[float]] = {}
    for track_id, track in enumerate(recorder.tracks):
        if busy_per_track[track_id] > 0:
            groups.setdefault((track.die, track.lane), []).append(busy_per_track[track_id])
    rows = []
    for (die, lane), busy in sorted(groups.items()):
        used = sum(1 for b in busy if b > 0)
        total = float(sum(busy))
        rows.append({
            "die": die,
            "pipe": lane,
            "cores": used,
            "busy_us": total / 1e6,
            "utilisation": total / (max(used, 1) * simulated),
        })
    return rows


def bandwidth(system) -> list[dict]:
    """Per shared resource that moved bytes: bytes, achieved GB/s over the run, peak GB/s."""
    simulated = max(system.env.now, 1)
    rows = []
    for resource in system.network.resources:
        if resource.kind == "engine" or not resource.bytes_moved:
            continue
        achieved = resource.bytes_moved / simulated * 1e3  # bytes/ps -> GB/s
        peak = resource.capacity * 1e3
        rows.append({
            "resource": resource.name,
            "kind": resource.kind,
            "die": resource.die,
            "bytes": int(resource.bytes_moved),
            "transfers": resource.flows_done,
            "achieved_GBps": achieved,
            "peak_GBps": peak,
            "utilisation": achieved / peak,
        })
    return rows


DMA_LANES = ("MTE1", "MTE2", "MTE3", "FIXP")
"""Lanes whose events are copies: their bytes are data moved (a vector event's bytes are its output)."""


def ops(system) -> list[dict]:
    """Per op: name, die, first start and last end of its instructions (us), instruction count,
    and ``dma_bytes``, the payload its copies moved (MTE1/MTE2/MTE3/FIXP events)."""
    recorder = system.recorder
    columns = recorder.columns()
    rows = []
    if not len(recorder):
        return rows
    op_col = columns["op"]
    dma_track = np.array([track.lane in DMA_LANES for track in recorder.tracks])
    is_dma = dma_track[columns["track"]]
    for op_id, op in enumerate(recorder.ops):
        mask = op_col == op_id
        if not mask.any():
            continue
        start, end = int(columns["start_ps"][mask].min()), int(columns["end_ps"][mask].max())
        rows.append({"op": op_id, "name": op.name, "die": op.die, "start_us": start / 1e6, "end_us": end / 1e6,
                     "duration_us": (end - start) / 1e6, "instructions": int(mask.sum()),
                     "dma_bytes": int(columns["bytes"][mask & is_dma].sum())})
    return rows


def summarize(system, config, *, wall_seconds: float, status: str = "ok", error: str | None = None) -> dict:
    """The whole summary of a run."""
    return {
        "npusim_version": __version__,
        "status": status,
        "error": error,
        "config": config.name,
        "config_sha256": config.sha256,
        "data": system.with_data,
        "simulated_time_us": system.env.now / 1e6,
        "events": len(system.recorder),
        "wall_time_s": wall_seconds,
        "pipes": pipe_busy(system),
        "bandwidth": bandwidth(system),
        "ops": ops(system),
        "warnings": [{"time_us": i.time_ps / 1e6, "die": i.die, "name": i.name, "message": i.message} for i in system.recorder.instants],
    }
