"""A run's events as a pandas DataFrame, one row per executed instruction (for notebooks).

pandas is an optional dependency (``pip install 'npusim[analysis]'``); everything else in npusim
works without it.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from npusim.errors import UsageError
from npusim.trace.recorder import Recorder

EVENT_COLUMNS = ("die", "unit", "lane", "name", "start_us", "end_us", "duration_us", "bytes", "op", "op_name", "tile")


def _pandas() -> Any:
    try:
        import pandas
    except ImportError:
        raise UsageError("result.events needs pandas, an optional dependency of npusim: pip install 'npusim[analysis]' "
                         "(or pip install pandas); the summary, trace and plots work without it") from None
    return pandas


def events_frame(recorder: Recorder) -> Any:
    """One row per event: ``die``, ``unit`` (``aiv3``), ``lane`` (pipe), ``name`` (instruction),
    ``start_us``, ``end_us``, ``duration_us``, ``bytes``, ``op`` (id, -1 if none), ``op_name``,
    ``tile`` (-1 if none), in the order the events were recorded. Text columns are categorical."""
    pd = _pandas()
    c = recorder.columns()
    tracks = recorder.tracks
    track_codes = c["track"]
    die_of_track = np.array([t.die for t in tracks] or [0], dtype=np.int64)
    units = sorted({t.unit for t in tracks})
    lanes = sorted({t.lane for t in tracks})
    unit_code = np.array([units.index(t.unit) for t in tracks] or [0], dtype=np.int32)
    lane_code = np.array([lanes.index(t.lane) for t in tracks] or [0], dtype=np.int32)
    op_names = sorted({op.name for op in recorder.ops})
    op_name_code = np.array([op_names.index(op.name) for op in recorder.ops] + [-1], dtype=np.int32)  # op -1 -> the last: -1
    start_us = c["start_ps"] / 1e6
    end_us = c["end_ps"] / 1e6
    return pd.DataFrame({
        "die": die_of_track[track_codes],
        "unit": pd.Categorical.from_codes(unit_code[track_codes], categories=units),
        "lane": pd.Categorical.from_codes(lane_code[track_codes], categories=lanes),
        "name": pd.Categorical.from_codes(c["name"], categories=recorder.names),
        "start_us": start_us,
        "end_us": end_us,
        "duration_us": end_us - start_us,
        "bytes": c["bytes"],
        "op": c["op"].astype(np.int64),
        "op_name": pd.Categorical.from_codes(op_name_code[c["op"]], categories=op_names),
        "tile": c["tile"].astype(np.int64),
    }, columns=list(EVENT_COLUMNS))
