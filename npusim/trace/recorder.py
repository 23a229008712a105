"""The passive event recorder: one row per executed instruction, stored column by column.

Rows are appended to typed ``array`` columns (no object per event): 40 bytes per event. Names,
tracks and ops are interned in small tables that the columns refer to by index; (track, op) and
(name, tile) are packed in pairs of 32-bit halves, because the simulator's hot loop appends them.
"""

from __future__ import annotations

from array import array
from dataclasses import dataclass, field

import numpy as np


@dataclass(frozen=True)
class Track:
    """A lane of the timeline: ``lane`` (a pipe name, a link, an AICPU) of ``unit`` (``aiv3``,
    ``aic0``, ``links``...) on ``die``; ``order`` sorts lanes inside the die's process."""

    die: int
    unit: str
    lane: str
    order: tuple = ()

    @property
    def label(self) -> str:
        return f"{self.unit} {self.lane}" if self.unit else self.lane


@dataclass
class OpRecord:
    """One op a workload issued (a kernel launch, a tile op family): its name, die and details."""

    name: str
    die: int
    args: dict = field(default_factory=dict)


@dataclass(frozen=True)
class Instant:
    """A point event: a warning (race, overlapping scatter segment) or a marker, at ``time_ps``."""

    time_ps: int
    die: int
    name: str
    message: str
    category: str = "warning"


class Recorder:
    """Collects the events of one simulation (passive: it never changes what is simulated)."""

    def __init__(self) -> None:
        self.tracks: list[Track] = []
        self._track_ids: dict[tuple, int] = {}
        self.names: list[str] = []
        self._name_ids: dict[str, int] = {}
        self.wait_names: set[int] = set()  # names of events that only wait (flags, barriers): not busy time
        self.ops: list[OpRecord] = []
        self.instants: list[Instant] = []
        self.lane_col = array("q")  # track << 32 | (op + 1)
        self.label_col = array("q")  # name id << 32 | (tile + 1)
        self.start_col = array("q")
        self.end_col = array("q")
        self.bytes_col = array("q")

    def track(self, die: int, unit: str, lane: str, order: tuple = ()) -> int:
        """The id of a lane, created on first use."""
        key = (die, unit, lane)
        track_id = self._track_ids.get(key)
        if track_id is None:
            track_id = len(self.tracks)
            self.tracks.append(Track(die, unit, lane, order))
            self._track_ids[key] = track_id
        return track_id

    def op(self, name: str, die: int, **args) -> int:
        """Register an op and return its id (events of its instructions carry it)."""
        self.ops.append(OpRecord(name, die, args))
        return len(self.ops) - 1

    def name_id(self, name: str, *, waits: bool = False) -> int:
        """The id of an event name, interned on first use; ``waits`` marks events that only wait
        for another pipe (their span is a stall, not busy time)."""
        name_id = self._name_ids.get(name)
        if name_id is None:
            name_id = len(self.names)
            self.names.append(name)
            self._name_ids[name] = name_id
        if waits:
            self.wait_names.add(name_id)
        return name_id

    def record(self, track: int, name_id: int, start_ps: int, end_ps: int, nbytes: int, op: int, tile: int) -> None:
        """Append one executed instruction (times in ps, ``op``/``tile`` -1 when none)."""
        self.lane_col.append(pack(track, op))
        self.label_col.append(pack(name_id, tile))
        self.start_col.append(start_ps)
        self.end_col.append(end_ps)
        self.bytes_col.append(nbytes)

    def instant(self, time_ps: int, die: int, name: str, message: str, category: str = "warning") -> None:
        """Record a point event (e.g. a race warning)."""
        self.instants.append(Instant(time_ps, die, name, message, category))

    def __len__(self) -> int:
        return len(self.start_col)

    def columns(self) -> dict[str, np.ndarray]:
        """The event columns as numpy arrays: track, name, start_ps, end_ps, bytes, op, tile."""
        lane = np.frombuffer(self.lane_col, dtype=np.int64)
        label = np.frombuffer(self.label_col, dtype=np.int64)
        return {
            "track": (lane >> 32).astype(np.int32),
            "name": (label >> 32).astype(np.int32),
            "start_ps": np.frombuffer(self.start_col, dtype=np.int64),
            "end_ps": np.frombuffer(self.end_col, dtype=np.int64),
            "bytes": np.frombuffer(self.bytes_col, dtype=np.int64),
            "op": ((lane & 0xFFFFFFFF) - 1).astype(np.int32),
            "tile": ((label & 0xFFFFFFFF) - 1).astype(np.int32),
        }


def pack(high: int, low: int) -> int:
    """Two small ints in one int64 column entry (``low`` may be -1, stored as 0)."""
    return (high << 32) | (low + 1)
