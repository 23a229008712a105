"""The passive event recorder: one row per executed instruction, stored column by column.

An event is one 40-byte row of five int64 (:data:`~npusim.trace.rows.EVENT_ROW`: lane, label,
start ps, end ps, bytes) packed into one growing buffer, no object per event: the recorder's
:class:`~npusim.trace.rows.EventRows` (``Recorder.rows``, compiled with the engine), which the
simulator's hot loop appends to directly. Names, tracks and ops are interned in small tables that
the rows refer to by index; (track, op) and (name, tile) are packed in pairs of 32-bit halves.
Readers get columns (copies, in chunks if they like) or, after a run, a view of the rows
(:meth:`Recorder.table`).

Besides the events, the recorder keeps what the analysis needs to follow dependencies:

- **flows**: "event B could not proceed before event A ended". A ``flag`` flow joins each
  ``wait_flag`` event to the ``set_flag`` that raised the flag it consumed. Nothing is recorded for
  them while simulating: a core's flags are first in, first out per kernel run and flag, so the
  n-th wait of a flag in a run consumed the n-th set, and :meth:`Recorder.flag_flow_pairs` pairs
  them from the events, the flag names (:meth:`Recorder.flag_name`) and where each kernel run
  starts (:meth:`Recorder.kernel_run`). Ops record their own flows with :meth:`Recorder.flow`
  (e.g. put -> signal -> wait -> load across PEs). :meth:`Recorder.flows` gives both.
- **transfers**: for each DMA event, the fixed part of its time (set-up, bursts, route latency) and
  the resource that limited its rate for most of its bytes (its bottleneck).
- **buffer spans**: how many bytes of each on-chip buffer a kernel's program reserved on a core,
  from the start to the end of its run there.
- **cost sources** (:attr:`Recorder.costs`): which config key each cost of the hardware model came
  from, said once per kind of event, engine, route and resource (:mod:`npusim.trace.costs`).
"""

from __future__ import annotations

from array import array
from collections.abc import Hashable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, NamedTuple, final

import numpy as np

from npusim.errors import UsageError
from npusim.trace.costs import CostSources
from npusim.trace.rows import EVENT_ROW, ROW_BYTES, EventRows, pack

WAIT_LANE_SUFFIX = " wait"
"""The lane of a pipe's wait_flags when its copy engine keeps several copies in flight (``MTE2 wait``:
they run while the copies stream, so they cannot share the pipe's lane): the pipe's name and this."""
CHUNK_EVENTS = 65536  # events unpacked at a time by consumers that stream over the columns


def first_seen(values: Sequence[Hashable]) -> tuple[np.ndarray, list[Any]]:
    """An id of each of ``values``, the distinct values numbered in the order they first appear (as
    ``ids.setdefault(value, len(ids))`` numbers them, value by value), and the distinct values in
    that order; by C loops (a run's tracks are hundreds of thousands)."""
    distinct = list(dict.fromkeys(values))
    number = dict(zip(distinct, range(len(distinct))))
    return np.fromiter(map(number.__getitem__, values), dtype=np.int64, count=len(values)), distinct


@final
class Track:
    """A lane of the timeline: ``lane`` (a pipe name, a link, an AICPU) of ``unit`` (``aiv3``,
    ``aic0``, ``links``...) on ``die``; ``order`` sorts lanes inside the die's process. Immutable
    (``Final`` fields); a class of its own, not a named tuple, whose construction runs the named
    tuple's ``__new__`` as Python (~2.5k instructions against ~0.2k compiled: every core a run uses
    makes one per pipe)."""

    __slots__ = ("die", "unit", "lane", "order")

    def __init__(self, die: int, unit: str, lane: str, order: tuple[int, ...] = ()) -> None:
        self.die: Final = die
        self.unit: Final = unit
        self.lane: Final = lane
        self.order: Final = order

    def __repr__(self) -> str:
        return f"Track(die={self.die!r}, unit={self.unit!r}, lane={self.lane!r}, order={self.order!r})"

    @property
    def label(self) -> str:
        return f"{self.unit} {self.lane}" if self.unit else self.lane


@dataclass
class OpRecord:
    """One op a workload issued (a kernel launch, a tile op family): its name, die and details;
    for an op launched with tensors (the aclnn ops), the ``(shape, dtype name)`` of its input
    tensors and of the one its kernels write; ``part_of``, the id of the launch it is part of (a
    PyPTO op: its PE's kernel launch, an op of its own with no events), -1 for an op launched by
    itself."""

    name: str
    die: int
    args: dict[str, Any] = field(default_factory=dict)
    inputs: list[tuple[tuple[int, ...], str]] = field(default_factory=list)
    outputs: list[tuple[tuple[int, ...], str]] = field(default_factory=list)
    part_of: int = -1


class BufferSpan(NamedTuple):
    """``bytes`` of ``buffer`` (UB, L1, L0A/B/C) of ``unit`` on ``die``, of ``capacity`` bytes,
    reserved by the program of op ``op`` from ``start_ps`` to ``end_ps`` (its run on that core; a
    named tuple: kernel runs make one per buffer they reserve, tile ops one each)."""

    die: int
    unit: str
    buffer: str
    capacity: int
    bytes: int
    start_ps: int
    end_ps: int
    op: int


@dataclass(frozen=True)
class Instant:
    """A point event: a warning (race, overlapping scatter segment) or a marker, at ``time_ps``;
    ``key`` names what it is about when instants of one name are counted by it (a host fallback's op)."""

    time_ps: int
    die: int
    name: str
    message: str
    category: str = "warning"
    key: str = ""


class Recorder:
    """Collects the events of one simulation (passive: it never changes what is simulated)."""

    def __init__(self) -> None:
        self.tracks: list[Track] = []
        self._track_ids: dict[tuple[int, str, str], int] = {}
        self._track_units: tuple[np.ndarray, list[tuple[int, str]]] | None = None  # track_units, for the tracks so far
        self.names: list[str] = []
        self._name_ids: dict[str, int] = {}
        # the ISA's cache of the name ids of instruction labels, by (label, instruction class): shared
        # by every program of the run, since a program is built per tile op
        self.label_ids: dict[tuple[str, type], int] = {}
        self.wait_names: set[int] = set()  # names of events that only wait (flags, barriers): not busy time
        self.poll_names: set[int] = set()  # names of poll passes (waits that check and check again)
        self.named_waits: set[int] = set()  # waits the critical path calls by their own name (a SyncAll, a core's poll of status words)
        self.ops: list[OpRecord] = []
        self.instants: list[Instant] = []
        self.rows = EventRows()  # the events' rows and the DMA columns
        self._unit_ids: dict[tuple[int, str], int] = {}  # (die, unit) -> its id
        self.run_unit = array("q")  # kernel runs: the unit id of their core,
        self.run_first = array("q")  # and the index of the core's first event in the run
        self._flag_names: dict[int, tuple[bool, int]] = {}  # name id of a set/wait_flag -> (raises, flag key)
        self._flag_pairs: tuple[int, np.ndarray, np.ndarray] | None = None  # (events paired, sets, waits)
        self._columns: tuple[int, dict[str, np.ndarray]] | None = None  # (events, the columns of all of them)
        self.flow_from = array("q")  # flows recorded by ops: event index of the source,
        self.flow_to = array("q")  # of the target,
        self.flow_name = array("q")  # and name id,
        self.flow_released = array("q")  # and when the source released the target (ps; -1: at the source's end)
        self.buffer_spans: list[BufferSpan] = []
        self.costs = CostSources()  # which config keys the recorded times come from (the hardware model says so)
        self.flag_name_id = self.name_id("flag")

    def track(self, die: int, unit: str, lane: str, order: tuple[int, ...] = ()) -> int:
        """The id of a lane, created on first use."""
        key = (die, unit, lane)
        track_id = self._track_ids.get(key)
        if track_id is None:
            track_id = len(self.tracks)
            self.tracks.append(Track(die, unit, lane, order))
            self._track_ids[key] = track_id
        return track_id

    def track_units(self) -> tuple[np.ndarray, list[tuple[int, str]]]:
        """Of each track the id of its unit (a core, an AICPU, the links ...: ``(die, unit)``), the
        units numbered in the order they first appear among the tracks; and the units in that order.
        Computed for the tracks so far, kept until more come (the summary, the critical path and the
        profiler's tables each ask)."""
        if self._track_units is None or len(self._track_units[0]) != len(self.tracks):
            ids, units = first_seen([(track.die, track.unit) for track in self.tracks])
            ids.flags.writeable = False  # shared by the callers
            self._track_units = ids, units
        return self._track_units

    def kernel_run(self, die: int, unit: str) -> None:
        """A kernel run starts on core ``unit`` of ``die``: the core's next events, up to the next
        run there, are its own (a core runs one program at a time)."""
        key = (die, unit)
        self.run_unit.append(self._unit_ids.setdefault(key, len(self._unit_ids)))
        self.run_first.append(self.rows.count)

    def flag_name(self, name_id: int, raises: bool, key: int) -> None:
        """Events named ``name_id`` raise (``set_flag``) or consume (``wait_flag``) flag ``key``."""
        self._flag_names[name_id] = (raises, key)

    def op(self, name: str, die: int, part_of: int = -1, **args: Any) -> int:
        """Register an op and return its id (events of its instructions carry it); ``part_of``:
        the id of the launch it is part of (:class:`OpRecord`)."""
        self.ops.append(OpRecord(name, die, args, part_of=part_of))
        return len(self.ops) - 1

    def forget_ops(self, first: int) -> None:
        """Drop the ops registered from id ``first`` on: work that was built but never ran (no event
        carries their ids), e.g. a PyPTO launch whose build failed."""
        del self.ops[first:]

    def name_id(self, name: str, *, waits: bool = False, polls: bool = False, named: bool = False) -> int:
        """The id of an event name, interned on first use; ``waits`` marks events that only wait
        for another pipe (their span is a stall, not busy time); ``polls`` marks poll passes (an
        AICPU reading signal slots), which wait too: a pass holds up nothing by what it found, so
        what the next event of its lane waited for is that event's own flow sources; ``named``
        waits are called by their name on the critical path ("SyncAll on die3 aiv9"), not by their pipe."""
        name_id = self._name_ids.get(name)
        if name_id is None:
            name_id = len(self.names)
            self.names.append(name)
            self._name_ids[name] = name_id
        if waits or polls:
            self.wait_names.add(name_id)
        if polls:
            self.poll_names.add(name_id)
        if named:
            self.named_waits.add(name_id)
        return name_id

    def record(self, track: int, name_id: int, start_ps: int, end_ps: int, nbytes: int, op: int, tile: int) -> int:
        """Append one executed instruction (times in ps, ``op``/``tile`` -1 when none); returns
        its event index (for :meth:`flow`). The hardware model appends to :attr:`rows` itself."""
        return self.rows.record(track, name_id, start_ps, end_ps, nbytes, op, tile)

    def record_columns(self, track: Any, name_id: Any, start_ps: Any, end_ps: Any, nbytes: Any, op: Any, tile: Any) -> None:
        """Append many events at once from equal-length integer arrays (as :meth:`record` each)."""
        track, name_id, start_ps, end_ps, nbytes, op, tile = (np.asarray(a, np.int64) for a in (track, name_id, start_ps, end_ps, nbytes, op, tile))
        table = np.stack([pack(track, op), pack(name_id, tile), start_ps, end_ps, nbytes], axis=1)
        self.rows.put_packed(table.astype("<i8").tobytes())

    def span_ps(self, index: int) -> tuple[int, int]:
        """When event ``index`` started and ended (ps)."""
        start_ps, end_ps = EVENT_ROW.unpack_from(self.rows.buffer, index * ROW_BYTES)[2:4]
        return int(start_ps), int(end_ps)

    def end_ps(self, index: int) -> int:
        """When event ``index`` ended (ps)."""
        end_ps: int = EVENT_ROW.unpack_from(self.rows.buffer, index * ROW_BYTES)[3]
        return end_ps

    def flow(self, from_event: object, to_event: object, name: str, released_at: int = -1) -> None:
        """Record that event ``to_event`` could not proceed before event ``from_event`` ended (an
        arrow in the trace, an edge of the critical path); both are event indices already recorded.
        ``released_at``: the time (ps) inside ``from_event`` at which it released ``to_event``, when
        that is not its end (a SyncAll's last arrival: the barrier releases the cores that waited
        then, its cost after it is theirs as much as its own); the trace draws the arrow from there."""
        count = self.rows.count
        if type(from_event) is int and type(to_event) is int and 0 <= from_event < count and 0 <= to_event < count:
            first, second = from_event, to_event
        else:  # numpy integers, bools, or not an index (typed object so that, compiled, that is the UsageError, not a TypeError)
            first, second = _event_index(name, "from", from_event, count), _event_index(name, "to", to_event, count)
        name_id = self._name_ids.get(name)
        self.flow_of_ids(first, second, self.name_id(name) if name_id is None else name_id, released_at)

    def flow_of_ids(self, from_event: int, to_event: int, name_id: int, released_at: int = -1) -> None:
        """:meth:`flow` named by its name id (:meth:`name_id`), for a caller whose event indices are
        ints that :meth:`record` returned (they are not checked)."""
        self.flow_from.append(from_event)
        self.flow_to.append(to_event)
        self.flow_name.append(name_id)
        self.flow_released.append(released_at)

    def buffer_span(self, span: BufferSpan) -> None:
        """Record the buffer bytes a program held on a core over its run."""
        self.buffer_spans.append(span)

    def instant(self, time_ps: int, die: int, name: str, message: str, category: str = "warning", key: str = "") -> None:
        """Record a point event (e.g. a race warning)."""
        self.instants.append(Instant(time_ps, die, name, message, category, key))

    def __len__(self) -> int:
        """Events recorded."""
        return self.rows.count

    @property
    def nbytes(self) -> int:
        """Bytes held by the event rows in use, the flow and transfer columns and the flag flows
        once paired."""
        rows = self.rows
        arrays = (self.run_unit, self.run_first, self.flow_from, self.flow_to, self.flow_name, self.flow_released, rows.transfer_event, rows.transfer_info,
                  rows.tail_event, rows.tail_ps)
        paired = sum(a.nbytes for a in self._flag_pairs[1:]) if self._flag_pairs is not None else 0
        return rows.count * ROW_BYTES + sum(len(a) * a.itemsize for a in arrays) + paired

    def table(self) -> np.ndarray:
        """The rows as a read-only (events x 5) int64 view: lane, label, start_ps, end_ps, bytes.
        For reading after a run: while it (or a view of it) is alive the buffer cannot grow, so
        recording another event would fail."""
        count = self.rows.count
        table = np.frombuffer(self.rows.buffer, dtype="<i8", count=count * 5).reshape(count, 5)
        table.flags.writeable = False
        return table

    def columns(self, start: int = 0, stop: int | None = None) -> dict[str, np.ndarray]:
        """The event columns of events ``start:stop`` (default all) as read-only numpy arrays (not
        views of the rows): track, name, start_ps, end_ps, bytes, op, tile. Those of all the events
        are made once for as many events: the summary, its critical path, the profiler's tables and
        the plots each read them (~45 ms each at 1.9 M events)."""
        whole = start == 0 and stop is None
        count = self.rows.count
        if whole and self._columns is not None and self._columns[0] == count:
            return dict(self._columns[1])
        rows = self.table()[start:stop]
        lane, label = rows[:, 0], rows[:, 1]
        columns = {
            "track": (lane >> 32).astype(np.int32),
            "name": (label >> 32).astype(np.int32),
            "start_ps": rows[:, 2].copy(),
            "end_ps": rows[:, 3].copy(),
            "bytes": rows[:, 4].copy(),
            "op": ((lane & 0xFFFFFFFF) - 1).astype(np.int32),
            "tile": ((label & 0xFFFFFFFF) - 1).astype(np.int32),
        }
        for column in columns.values():
            column.flags.writeable = False
        if whole:
            self._columns = (count, columns)
            return dict(columns)
        return columns

    def chunks(self, size: int = CHUNK_EVENTS) -> Iterator[tuple[int, dict[str, np.ndarray]]]:
        """The events in chunks of ``size``: (index of the chunk's first event, its columns), so a
        consumer never holds more than one chunk unpacked."""
        for first in range(0, self.rows.count, size):
            yield first, self.columns(first, first + size)

    def flag_flow_pairs(self, start: int = 0, stop: int | None = None) -> tuple[np.ndarray, np.ndarray]:
        """The flag flows ``start:stop`` (in the order of their waits): set_flag events, wait_flag events."""
        _, sets, waits = self._paired_flags()
        return sets[start:stop], waits[start:stop]

    @property
    def flag_flow_count(self) -> int:
        """Flag flows: the wait_flag events that consumed a flag."""
        return len(self._paired_flags()[2])

    def _paired_flags(self) -> tuple[int, np.ndarray, np.ndarray]:
        """Each recorded wait_flag with the set_flag that raised its flag: in a kernel run, the
        n-th wait of a flag consumed its n-th set (flags are first in, first out; a core's events
        of one pipe are in program order). Computed for the events so far, kept until more come."""
        count = self.rows.count
        if self._flag_pairs is not None and self._flag_pairs[0] == count:
            return self._flag_pairs
        nothing = np.zeros(0, dtype=np.int64)
        self._flag_pairs = (count, nothing, nothing)
        if not self._flag_names or not count:
            return self._flag_pairs
        table = self.table()
        flag_ids = np.array(sorted(self._flag_names), dtype=np.int64)
        names = table[:, 1] >> 32
        index = np.flatnonzero(np.isin(names, flag_ids))
        if not index.size:
            return self._flag_pairs
        position = np.searchsorted(flag_ids, names[index])
        raises = np.array([self._flag_names[i][0] for i in flag_ids.tolist()], dtype=bool)[position]
        _, key = np.unique(np.array([self._flag_names[i][1] for i in flag_ids.tolist()], dtype=np.int64), return_inverse=True)
        key = key.reshape(-1)[position]
        # the kernel run of each flag event: the last run on its core that started at or before it
        track_unit, units = self.track_units()
        ids = dict(self._unit_ids)  # cores that marked no run get ids of their own
        unit_of_track = np.array([ids.setdefault(unit, len(ids)) for unit in units], dtype=np.int64)[track_unit]
        run_starts = np.array(self.run_unit, dtype=np.int64) << 40 | np.array(self.run_first, dtype=np.int64)
        order = np.argsort(run_starts, kind="stable")
        unit = unit_of_track[table[index, 0] >> 32]
        slot = np.searchsorted(run_starts[order], unit << 40 | index, side="right") - 1
        in_run = (slot >= 0) & (run_starts[order][np.maximum(slot, 0)] >> 40 == unit)
        run = np.where(in_run, order[np.maximum(slot, 0)], len(order) + unit)  # outside any run: one group per core
        group = run * (int(key.max()) + 1) + key
        # rank of each set and each wait among the events of its group, in event order
        ranked = {}
        for kind in (True, False):
            members = np.flatnonzero(raises == kind)
            by_group = members[np.argsort(group[members], kind="stable")]
            groups = group[by_group]
            first = np.searchsorted(groups, groups)
            ranked[kind] = (by_group, groups * (len(index) + 1) + (np.arange(len(by_group)) - first))
        (set_members, set_keys), (wait_members, wait_keys) = ranked[True], ranked[False]
        found = np.searchsorted(set_keys, wait_keys)
        matched = found < len(set_keys)
        matched[matched] = set_keys[found[matched]] == wait_keys[matched]
        waits = index[wait_members[matched]]
        sets = index[set_members[found[matched]]]
        order = np.argsort(waits, kind="stable")
        self._flag_pairs = (count, sets[order], waits[order])
        return self._flag_pairs

    @property
    def flow_count(self) -> int:
        """Flows recorded: flag flows and flows of ops."""
        return self.flag_flow_count + len(self.flow_from)

    def flows(self) -> dict[str, np.ndarray]:
        """All flows as numpy arrays (copies): from, to (event indices), name (name id); the flag
        flows first, then the flows of ops in the order they were recorded."""
        flag_from, flag_to = self.flag_flow_pairs()
        return {
            "from": np.concatenate([flag_from, np.frombuffer(self.flow_from, dtype=np.int64)]),
            "to": np.concatenate([flag_to, np.frombuffer(self.flow_to, dtype=np.int64)]),
            "name": np.concatenate([np.full(len(flag_from), self.flag_name_id, dtype=np.int64), np.frombuffer(self.flow_name, dtype=np.int64)]),
        }

    def tails(self) -> dict[str, np.ndarray]:
        """The DMA tails (:meth:`EventRows.transfer_tail <npusim.trace.rows.EventRows.transfer_tail>`) as numpy arrays:
        event (index, in event order) and tail_ps."""
        return {"event": np.frombuffer(self.rows.tail_event, dtype=np.int64), "tail_ps": np.frombuffer(self.rows.tail_ps, dtype=np.int64)}

    def transfers(self, start: int = 0, stop: int | None = None) -> dict[str, np.ndarray]:
        """The DMA records ``start:stop`` (default all) as numpy arrays: event (index), fixed_ps
        (set-up, bursts, route latency), bottleneck (the index of a resource in the network's
        ``resources``, -1: the core's own engine rate, -2: a resource not registered with the
        network). Records are in event order (:meth:`EventRows.transfer <npusim.trace.rows.EventRows.transfer>`)."""
        info = np.frombuffer(self.rows.transfer_info, dtype=np.int64)[start:stop]
        return {
            "event": np.frombuffer(self.rows.transfer_event, dtype=np.int64)[start:stop],
            "fixed_ps": info >> 32,
            "bottleneck": (info & 0xFFFFFFFF) - 2,
        }


def _event_index(flow: str, end: str, index: object, count: int) -> int:
    """The ``end`` ("from" or "to") of flow ``flow`` as an event index: an int or a numpy integer
    below ``count`` (the events recorded), else a UsageError."""
    if isinstance(index, (int, np.integer)) and 0 <= index < count:
        return int(index)
    raise UsageError(f"flow {flow!r}: its {end} event {index!r} is not a recorded event index (0..{count - 1}); "
                     "record both events first and pass the indices Recorder.record returned")

