"""Chrome Trace Event format (opens in Perfetto and chrome://tracing), written as a stream.

Dies are processes; each core pipe (``aiv3 MTE2``), link or AICPU lane is a thread of its die;
every executed instruction is a complete ("X") event with its bytes, op, tile and, for a DMA, the
resource that limited it; dependencies are flow arrows (``flag``: set_flag -> wait_flag; ``data``:
a load -> the instruction that consumes it; any flow an op recorded); the rate through each HBM,
L2 and link is a counter track in GB/s and each core's buffer occupancy one in KiB; warnings are
instant events. ``docs/trace-format.md`` documents every field and track.

Times are in microseconds on a whole-nanosecond grid: each start and end is the simulator's integer
picoseconds rounded to the nearest ns, then placed on its lane (:func:`place_on_lanes`: no earlier than the
end of the slice before it, at least 1 ns long), so no two slices of a lane overlap or share a ns
in a viewer that rounds to ns (Perfetto) or adds in floating point (speedscope); a slice that was
waiting when the last flow into it released it (a ``wait_flag`` when its flag became visible, a
SyncAll when the last core arrived, a poll when its signal landed) holds a ``release`` slice from
then to its end, where the arrow ends, and a SyncAll's last arrival is an ``arrive`` slice, where its
arrows start (an arrow ends in a slice that starts no earlier than its source ends, as Perfetto
requires). Only the display moves: the recorded times (summary, analysis) stay exact. The same run
gives the same bytes. The writer never unpacks more than one chunk of events at a time: its extra memory is
the chunk and a few numbers per slice moved on its lane and per flow of an op, not the run's
events (``benchmarks/trace_writer.py`` measures it).
"""

from __future__ import annotations

import collections
import io
import itertools
import json
import os
import tempfile
from json.encoder import encode_basestring_ascii as _json_string  # what json.dumps writes for a str, without its per-call set-up
from pathlib import Path
from typing import IO, Any

import numpy as np

from npusim.files import Forked, TwoEnds, atomic_path, temporary_name
from npusim.trace.record import ResourceRecord, RunRecord
from npusim.trace.recorder import CHUNK_EVENTS, WAIT_LANE_SUFFIX
from npusim.trace.selection import TraceSelection
from npusim.trace.text import Lines, Texts, fixed3

TRACE_FORMAT_VERSION = 4  # 3: times on a whole-ns grid, release slices in waits; 4: slices placed on their lanes (at least 1 ns), arrive slices, release slices of any flow
LOAD_LANES = ("MTE2", "MTE1")  # pipes whose DMAs bring data into a core's buffers: sources of data flows
LOADS_PER_SET = 32  # data flows start from at most this many loads before one set_flag (the latest)
WRITER_CHUNK_EVENTS = 4096  # events formatted per batch: bounds the writer's extra memory (a few MiB; 2048 cost the README's run 1% more instructions, callgrind)
COUNTER_CHUNK_POINTS = 4096  # counter points formatted per batch: bounds the extra memory as WRITER_CHUNK_EVENTS does (as fast as larger batches, measured)
COUNTERS_IN_MEMORY = 32 << 20  # bytes of counters a trace on two cores holds in memory until its head is written (more: in a file beside it)
COPY_BLOCK = 1 << 20  # bytes per copy when those counters are appended to the trace
_LOAD, _SET, _WAIT, _CONSUMER = 1, 2, 4, 8  # roles of an event in the search for data flows (a load, a set_flag on a load pipe, a wait that consumed a flag, an instruction on a pipe that waits for flags)
TWO_CORES_MIN_EVENTS = 10_000  # fewer events are written faster by one process (the 2-PE a3 all-gather, 1,375 events: 19-30 ms alone, 35-51 ms on two, measured)


def ns_of(ps: Any) -> Any:
    """Integer picoseconds to the nearest whole nanosecond (halves up; elementwise on arrays): the
    grid every time of the trace is written on."""
    return (ps + 500) // 1000


def _ts(ns: int) -> str:
    """Whole nanoseconds as an exact decimal number of microseconds (``12.345``, ``12``)."""
    whole, frac = divmod(int(ns), 1000)
    return f"{whole}.{frac:03d}" if frac else str(whole)


def _with_ts(lines: Lines, ns: np.ndarray, where: np.ndarray | None = None) -> Lines:
    """``lines`` with ``_ts`` of each value of ``ns`` (on each row of ``where``)."""
    whole, frac = np.divmod(ns, 1000)
    return lines.integer(whole, where).fraction(frac, 3, where, zero=False)


def _dur(ns: int, short_ps: int = 1) -> str:
    """A duration of whole nanoseconds as microseconds, ``short_ps`` short (``0.002999`` for 3 ns;
    ``0`` for 0): Perfetto rounds each ``dur`` to whole ns on its own, so it reads 3 ns, and a viewer
    that adds ``ts + dur`` in floating point (speedscope) never sees a slice end after the next one
    starts (nor a nested slice, 2 ps short, after its parent)."""
    if not ns:
        return "0"
    whole, frac = divmod(int(ns) * 1000 - short_ps, 1_000_000)
    return f"{whole}.{frac:06d}"


def _with_dur(lines: Lines, ns: np.ndarray, short_ps: int = 1, where: np.ndarray | None = None) -> Lines:
    """``lines`` with ``_dur`` of each value of ``ns`` (on each row of ``where``)."""
    zero = ns == 0
    whole, frac = np.divmod(ns * 1000 - short_ps, 1_000_000)
    return lines.integer(np.where(zero, 0, whole), where).fraction(frac, 6, ~zero if where is None else ~zero & where)


def rounded_spans(start_ps: Any, end_ps: Any) -> tuple[Any, Any]:
    """Events' spans on the ns grid before they are placed on their lanes (:func:`place_on_lanes`): each
    start and end rounded to the nearest ns (:func:`ns_of`), a span of positive length at least
    1 ns long (ns; elementwise on arrays)."""
    start = ns_of(start_ps)
    return start, np.maximum(ns_of(end_ps), start + (end_ps > start_ps))


def place_on_lanes(track: np.ndarray, start_ns: np.ndarray, end_ns: np.ndarray, positive: np.ndarray, last_end: np.ndarray) -> np.ndarray:
    """Place slices, in the order of the events, on their lanes (``track``): each starts at the
    later of its rounded start and the shown end of the one before it on its lane, and one of
    positive length (``positive``) lasts at least 1 ns, so no two slices of a lane touch in the
    same ns however short they are (three events can fall in one ns). ``start_ns``, ``end_ns``
    (:func:`rounded_spans`) are changed in place; ``last_end`` (per track: the shown end of its
    last slice before these, 0 for none) is updated. Returns the positions of the slices moved, in
    order. Sequential only where a slice is moved: the others are placed as they are."""
    order = np.argsort(track, kind="stable")
    lane, start, end, long = track[order], start_ns[order], end_ns[order], positive[order].astype(np.int64)
    first = np.ones(len(lane), dtype=bool)  # the lane's first slice of these
    first[1:] = lane[1:] != lane[:-1]
    before = np.empty_like(end)
    before[1:] = end[:-1]
    before[first] = last_end[lane[first]]
    moved: list[int] = []
    resume = 0  # the first position not yet looked at by a chain of moves
    for k in np.flatnonzero(start < before).tolist():
        if k < resume:
            continue
        while k < len(lane):  # a moved slice may push the next ones of its lane
            limit = int(last_end[lane[k]]) if first[k] else int(end[k - 1])
            if start[k] >= limit:
                break
            start[k], end[k] = limit, max(int(end[k]), limit + int(long[k]))
            moved.append(k)
            k += 1
        resume = k
    last = np.ones(len(lane), dtype=bool)
    last[:-1] = first[1:]
    last_end[lane[last]] = end[last]
    at = order[moved]
    start_ns[at], end_ns[at] = start[moved], end[moved]
    return np.sort(at)


def _middle(start_ns: Any, end_ns: Any) -> Any:
    """A time inside ``[start_ns, end_ns)`` (its middle, on the ns grid; the start for a slice of
    zero or one ns): where a flow end binds to that slice (elementwise on arrays)."""
    return start_ns + (end_ns - start_ns) // 2


def own_middles(start_ns: np.ndarray, end_ns: np.ndarray, release_ns: np.ndarray, arrive_ns: np.ndarray) -> np.ndarray:
    """Where a flow end binds to a slice itself, not to a child of it: the middle of its part
    before its ``release`` slice (``release_ns``, -1 for none) and after an ``arrive`` slice at its
    start or before one later (``arrive_ns``, 1 ns long, -1 for none); ns, elementwise."""
    high = np.where(release_ns >= 0, release_ns, end_ns)
    high = np.where(arrive_ns > start_ns, np.minimum(high, arrive_ns), high)
    low = np.where(arrive_ns == start_ns, start_ns + 1, start_ns)
    middle: np.ndarray = low + np.maximum(high - low, 0) // 2
    return middle


def _found(index: np.ndarray, values: np.ndarray, events: np.ndarray) -> np.ndarray:
    """For each of ``events``: its value in the sparse table (``index`` ascending, ``values``), -1 if absent."""
    if not len(index):
        return np.full(len(events), -1, dtype=np.int64)
    at = np.minimum(np.searchsorted(index, events), len(index) - 1)
    found: np.ndarray = np.where(index[at] == events, values[at], -1)
    return found


def jsonable(value: Any) -> Any:
    """``value`` with tuples as lists, numpy scalars as Python numbers and anything else unknown as
    its text, so op arguments always serialise."""
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    if isinstance(value, np.generic):
        return value.item()
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return str(value)


def write_chrome_trace(record: RunRecord, path: str | os.PathLike[str], *, metadata: dict[str, Any] | None = None, chunk_events: int = WRITER_CHUNK_EVENTS,
                       selection: TraceSelection | None = None) -> Path:
    """Write the run's trace to ``path`` atomically (a unique temporary file, then a rename; the
    temporary is removed if writing fails; missing folders are created); ``metadata`` is merged into ``otherData`` (see docs/trace-format.md for what the
    writer adds itself); ``selection`` keeps only part of the run (``npusim.trace.selection``; its
    level must not be ``none``)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_path(path) as temporary, open(temporary, "wb") as out:
        _Writer(record, out, chunk_events, selection or TraceSelection()).write(metadata or {})
    return path


def pays_on_two_cores(record: RunRecord) -> bool:
    """Whether the run's trace is large enough for :class:`TraceOnTwoCores` to save time (forking
    and the pages the copy un-shares cost a few ms)."""
    return len(record.recorder) >= TWO_CORES_MIN_EVENTS


class TraceOnTwoCores:
    """A trace being written as :func:`write_chrome_trace` writes it, by two processes: from the
    moment this is made, a forked copy of this process (``npusim.files.Forked``) writes the head
    (the lanes, events and flows: most of the work) into the file's temporary, makes the tail's
    text, then writes pieces of the counters from the first on; :meth:`finish` writes pieces of
    the counters from the last back (in memory, or beyond ``COUNTERS_IN_MEMORY`` bytes into an
    unlinked file beside it) until the two meet (``npusim.files.TwoEnds``), waits for the copy,
    then appends its pieces in order and the tail. The same bytes as one process writes; the
    temporary is removed if either process fails (:meth:`abandon`), and the file appears at
    ``path`` whole or not at all. Only where ``npusim.files.can_fork``."""

    def __init__(self, record: RunRecord, path: str | os.PathLike[str], *, metadata: dict[str, Any] | None = None, chunk_events: int = WRITER_CHUNK_EVENTS,
                 selection: TraceSelection | None = None) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.temporary = temporary_name(self.path)
        self.metadata = metadata or {}
        self.writer = _Writer(record, io.BytesIO(), chunk_events, selection or TraceSelection())  # the counters' points made here, before the fork, for both
        self.counters = TwoEnds(self.writer.counter_pieces(), self.temporary.parent)
        self.head: Forked[tuple[bool, bytes, bytes]] | None = None
        try:
            self.head = Forked(self._write_head, f"writing {self.path.name}")
        except BaseException:
            self.counters.close()
            raise

    def _write_head(self) -> tuple[bool, bytes, bytes]:
        """The child's work: the head and the first pieces of the counters, into the temporary;
        whether it wrote no line, and the tail's texts."""
        writer = self.writer
        with open(self.temporary, "wb") as out:
            writer.out = out
            writer.head()
            tail = writer.tail_texts(self.metadata)
            for piece in iter(self.counters.front, None):
                writer.counter_piece(piece)
        return (writer.first, *tail)

    def finish(self) -> Path:
        """Write the last pieces of the counters, wait for the copy, put the file together at ``path``."""
        assert self.head is not None, "finished or abandoned already"
        try:
            with tempfile.SpooledTemporaryFile(max_size=COUNTERS_IN_MEMORY, dir=str(self.temporary.parent)) as counters:
                writer = self.writer
                writer.out = counters
                taken = []  # (offset, length) in the spool of each piece written here, the last piece first
                for piece in iter(self.counters.back, None):
                    offset = counters.tell()
                    writer.first = True  # each piece without a ",\n" before it: added as the pieces are put in order
                    writer.counter_piece(piece)
                    taken.append((offset, counters.tell() - offset))
                head_empty, instants, closing = self.head.outcome()  # the copy ends (and is reaped below) while the file is put together
                with open(self.temporary, "ab") as out:
                    writer.out, writer.first = out, head_empty
                    for offset, length in reversed(taken):
                        if length:
                            out.write(b"" if writer.first else b",\n")
                            counters.seek(offset)
                            _copy(counters, out, length)
                            writer.first = False
                    writer.emit_text(instants)
                    out.write(closing)
            os.replace(self.temporary, self.path)
            self.head.join()
            self.head = None
        except BaseException:
            self.abandon()
            raise
        self.counters.close()
        return self.path

    def abandon(self) -> None:
        """Stop the head's process if it still runs; remove the temporary."""
        if self.head is not None:
            self.head.stop()
            self.head = None
        self.counters.close()
        self.temporary.unlink(missing_ok=True)


def _copy(source: IO[bytes], target: IO[bytes], length: int) -> None:
    """Copy the next ``length`` bytes of ``source`` to ``target``, ``COPY_BLOCK`` at a time."""
    while length > 0:
        block = source.read(min(COPY_BLOCK, length))
        if not block:
            raise OSError(f"{length} bytes missing from the counters written")
        target.write(block)
        length -= len(block)


class _Writer:
    """One pass over the recorder, writing lines as it goes."""

    def __init__(self, record: RunRecord, out: IO[bytes], chunk_events: int, selection: TraceSelection) -> None:
        self.record = record
        self.selection = selection
        self.kept_dies = selection.die_mask(record.spec.shape.dies)  # indexed by die (-1: lanes of no die)
        self.written = 0  # events written
        self.recorder = record.recorder
        self.out = out
        self.chunk_events = chunk_events
        self.first = True
        self.flow_id = 0
        self.released = 0  # release slices written
        self.arrived = 0  # arrive slices written
        self._late_spans: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None  # made on first use (_late)
        self._arrive_spans: tuple[np.ndarray, np.ndarray] | None = None  # (_arrivals)
        self._op_release_spans: tuple[np.ndarray, np.ndarray] | None = None  # (_op_releases)
        self._text_tables: _Texts | None = None  # made on first use
        self._rates: list[tuple[ResourceRecord, np.ndarray, np.ndarray]] | None = None  # the rate counters' pieces (_rate_pieces)

    def _late(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The events shown later or longer than their rounded span (:func:`place_on_lanes`): their indices
        (ascending) and shown starts and ends (ns). Made once, in one pass over the events (few
        are: those after slices of under 1 ns on their lanes)."""
        if self._late_spans is None:
            table = self.recorder.table()
            last_end = np.zeros(len(self.recorder.tracks), dtype=np.int64)
            found = [(np.zeros(0, dtype=np.int64),) * 3]
            for first in range(0, len(table), self.chunk_events):
                rows = table[first : first + self.chunk_events]
                start, end = rounded_spans(rows[:, 2], rows[:, 3])
                moved = place_on_lanes(rows[:, 0] >> 32, start, end, rows[:, 3] > rows[:, 2], last_end)
                found.append((moved + first, start[moved], end[moved]))
            index, start, end = (np.concatenate(column) for column in zip(*found))
            self._late_spans = index, start, end
        return self._late_spans

    def _shown(self, events: np.ndarray, start_ps: np.ndarray, end_ps: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Where events ``events`` (indices, ascending or not; spanning ``start_ps`` to ``end_ps``)
        are shown: their slices' starts and ends (ns)."""
        start, end = rounded_spans(start_ps, end_ps)
        index, late_start, late_end = self._late()
        if len(index):
            late = _found(index, np.arange(len(index)), events)
            moved = late >= 0
            start, end = np.where(moved, late_start[late], start), np.where(moved, late_end[late], end)
        return start, end

    def _shown_of(self, events: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`_shown` of events given by index only."""
        rows = self.recorder.table()[events]
        return self._shown(events, rows[:, 2], rows[:, 3])

    def _op_flows(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """The flows ops recorded: source and target events, name ids, release times (ps, -1: the source's end)."""
        recorder = self.recorder
        source, target = np.frombuffer(recorder.flow_from, dtype=np.int64), np.frombuffer(recorder.flow_to, dtype=np.int64)
        return source, target, np.frombuffer(recorder.flow_name, dtype=np.int64), np.frombuffer(recorder.flow_released, dtype=np.int64)

    def _arrivals(self) -> tuple[np.ndarray, np.ndarray]:
        """The ``arrive`` slices: the events (ascending) that released the targets of their flows
        before their end (``Recorder.flow``'s ``released_at``), and where each one's ``arrive`` slice
        starts (ns; 1 ns long): that time, shown no earlier than the event, if the slice ends before
        the event does. Made once."""
        if self._arrive_spans is None:
            source, _, _, released = self._op_flows()
            events, first = np.unique(source[released >= 0], return_index=True)
            start, end = self._shown_of(events)
            at = np.maximum(ns_of(released[released >= 0][first]), start)
            inside = at + 1 < end
            self._arrive_spans = events[inside], at[inside]
        return self._arrive_spans

    def _released(self, source: np.ndarray, released: np.ndarray, end: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """For flows from events ``source`` (shown ending at ``end`` ns) released at ``released``
        (ps, -1: at their end): the start of the ``arrive`` slice each is released in (ns, -1 for
        none) and when, as shown, its source released its target (that slice's end, or the source's)."""
        arrive = np.where(released >= 0, _found(*self._arrivals(), source), -1)
        return arrive, np.where(arrive >= 0, arrive + 1, end)

    def _sources(self, source: np.ndarray, released: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """For flows from events ``source`` released at ``released`` (ps, -1: at their end): where
        each arrow starts (ns: in the ``arrive`` slice it is released in, else in the source
        itself) and when, as shown, its source released its target."""
        start, end = self._shown_of(source)
        arrive, done = self._released(source, released, end)
        release, own_arrive = self._children(source, start, end)
        return np.where(arrive >= 0, arrive, own_middles(start, end, release, own_arrive)), done

    def _op_releases(self) -> tuple[np.ndarray, np.ndarray]:
        """The ``release`` slices that flows of ops give their targets: the events (ascending) that
        started before a source released them and ended after, and when the last such source did
        (ns). Made once."""
        if self._op_release_spans is None:
            source, target, _, released = self._op_flows()
            done = self._released(source, released, self._shown_of(source)[1])[1]
            target_start, target_end = self._shown_of(target)
            inside = (target_start < done) & (done < target_end)
            events, inverse = np.unique(target[inside], return_inverse=True)
            last = np.full(len(events), -1, dtype=np.int64)
            np.maximum.at(last, inverse.reshape(-1), done[inside])
            self._op_release_spans = events, last
        return self._op_release_spans

    def _children(self, events: np.ndarray, start: np.ndarray, end: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """For each of ``events`` (indices, shown from ``start`` to ``end`` ns): where its ``release``
        slice starts and where its ``arrive`` slice starts (ns, -1 for none). A slice that was waiting
        when the last flow into it was released (a ``wait_flag`` when its flag became visible, a
        SyncAll when the last core arrived, a poll when the signal it saw landed) holds a ``release``
        slice from then to its end; one that released the targets of its flows before its end
        (:meth:`_arrivals`), an ``arrive`` slice."""
        release = _found(*self._op_releases(), events)
        sets, waits = self.recorder.flag_flow_pairs()  # the recorder's own arrays, in the order of the waits
        if len(waits) and len(events):
            position = np.minimum(np.searchsorted(waits, events), len(waits) - 1)
            set_end = self._shown_of(sets[position])[1]  # when the flag became visible, as shown
            flagged = (waits[position] == events) & (start < set_end) & (set_end < end)
            release = np.maximum(release, np.where(flagged, set_end, -1))
        return release, _found(*self._arrivals(), events)

    def emit(self, line: str) -> None:
        self.emit_text(line.encode())

    def emit_lines(self, lines: list[str]) -> None:
        """Write ``lines`` as events of the array (one write for the whole batch)."""
        if lines:
            self.emit_text(",\n".join(lines).encode())

    def emit_text(self, text: bytes | memoryview) -> None:
        """Write ``text`` (events of the array, ``,\\n`` between two; ASCII) as the next events."""
        if not len(text):
            return
        if not self.first:
            self.out.write(b",\n")
        self.out.write(text)
        self.first = False

    def _texts(self) -> _Texts:
        if self._text_tables is None:
            self._text_tables = _Texts(self.record)
        return self._text_tables

    def write(self, metadata: dict[str, Any]) -> None:
        self.head()
        self.counters()
        self.tail(metadata)

    def head(self) -> None:
        """The trace's first part: the opening, then the lanes, events and flows (or the ops level's slices)."""
        self.out.write(b'{"traceEvents":[\n')
        if self.selection.level == "ops":
            self._op_slices()
        else:
            self._lanes()
            self._events()
            self._recorded_flows()

    def counters(self) -> None:
        """The second part: the rate and buffer counters (none at the ops level), piece by piece."""
        for piece in range(self.counter_pieces()):
            self.counter_piece(piece)

    def tail(self, metadata: dict[str, Any]) -> None:
        """The last part: the instant events, then the closing with ``otherData`` (which counts
        what the head wrote: ``written``, ``flow_id``, ``released``)."""
        instants, closing = self.tail_texts(metadata)
        self.emit_text(instants)
        self.out.write(closing)

    def tail_texts(self, metadata: dict[str, Any]) -> tuple[bytes, bytes]:
        """The tail's text, made once the head is written: its instant events (``,\\n`` between
        two) and the closing."""
        selection = self.selection
        instants = []
        for instant in self.recorder.instants:
            if not (selection.keeps_die(instant.die) and selection.keeps_time(instant.time_ps, instant.time_ps)):
                continue
            instants.append(f'{{"name":{json.dumps(instant.name)},"cat":{json.dumps(instant.category)},"ph":"i","s":"p","ts":{_ts(ns_of(instant.time_ps))},'
                            f'"pid":{instant.die},"tid":0,"args":{{"message":{json.dumps(instant.message)}}}}}')
        closing = b'\n],"displayTimeUnit":"ns","otherData":' + json.dumps(self._other_data(metadata), sort_keys=True).encode() + b"}\n"
        return ",\n".join(instants).encode(), closing

    # -- processes and threads -----------------------------------------------------------------

    def _lanes(self) -> None:
        """A process per die, a thread per lane that has events (named as in MindStudio Insight)."""
        recorder, record = self.recorder, self.record
        dies = sorted({track.die for track in recorder.tracks} | {r.die for r in record.resources if r.rate_log}
                      | {span.die for span in recorder.buffer_spans})
        for die in dies:
            if not self.kept_dies[die]:
                continue
            label = f"die {die}" + (f" (npu {record.package_of(die)})" if die >= 0 else "")
            self.emit(f'{{"ph":"M","name":"process_name","pid":{die},"tid":0,"args":{{"name":{json.dumps(label)}}}}}')
            self.emit(f'{{"ph":"M","name":"process_sort_index","pid":{die},"tid":0,"args":{{"sort_index":{die}}}}}')
        tracks = recorder.tracks
        used = np.zeros(len(tracks), dtype=bool)
        kept_tracks = self._kept_tracks()
        table = recorder.table()
        for first in range(0, len(table), CHUNK_EVENTS):  # only the lane column (and the times for a window): larger chunks
            rows = table[first : first + CHUNK_EVENTS]
            of_rows = rows[:, 0] >> 32
            used[of_rows[kept_tracks[of_rows] & self.selection.keeps_time(rows[:, 2], rows[:, 3])]] = True
        ranked = sorted(np.flatnonzero(used).tolist(), key=lambda t: (tracks[t].die, tracks[t].order, tracks[t].label))
        for rank, track_id in enumerate(ranked):
            track = tracks[track_id]
            tid = track_id + 1
            self.emit(f'{{"ph":"M","name":"thread_name","pid":{track.die},"tid":{tid},"args":{{"name":{json.dumps(track.label)}}}}}')
            self.emit(f'{{"ph":"M","name":"thread_sort_index","pid":{track.die},"tid":{tid},"args":{{"sort_index":{rank}}}}}')

    # -- complete events and the data flows derived from them ----------------------------------

    def _events(self) -> None:
        """Every event, chunk by chunk; data flows are found on the way (docs/trace-format.md):
        a load (a DMA on MTE2 or MTE1) flows to the first instruction that is neither a flag nor a
        barrier on the pipe whose ``wait_flag`` consumed the flag of the next ``set_flag`` that
        follows the load on its pipe (from the last ``LOADS_PER_SET`` loads before that set)."""
        recorder = self.recorder
        tracks = recorder.tracks
        table = recorder.table()
        set_names = {i for i, name in enumerate(recorder.names) if name.startswith("set_flag")}
        sync_names = set(recorder.wait_names) | set_names
        flag_cursor = 0  # flag flows are in the order of their waits: the next one not yet seen
        transfer_events = recorder.transfers()["event"]
        # a load is its event's index
        loads_since_set: dict[int, collections.deque[int]] = {}  # load track -> loads since its last set_flag
        loads_of_set: dict[int, collections.deque[int]] = {}  # set_flag event -> the loads before it
        awaiting: dict[int, list[int]] = {}  # track -> loads waiting for their consumer on it
        kept_tracks = self._kept_tracks()
        everything = self.selection.everything
        # the events the search for data flows looks at (it passes over the others), by their role
        # in it (_LOAD ...): those on a load pipe, the waits of flags, the instructions on pipes that wait for flags
        on_load_pipe = np.isin(np.arange(len(tracks)), [i for i, track in enumerate(tracks) if track.lane in LOAD_LANES])
        sync = np.isin(np.arange(len(recorder.names)), sorted(sync_names))
        a_set = np.isin(np.arange(len(recorder.names)), sorted(set_names))
        # the lane of a pipe's instructions for each lane (its own but for a pipe's wait lane: the pipe's)
        lane_ids = {(track.die, track.unit, track.lane): i for i, track in enumerate(tracks)}
        pipe_lane = np.array([lane_ids.get((track.die, track.unit, track.lane.removesuffix(WAIT_LANE_SUFFIX)), i)
                              for i, track in enumerate(tracks)] or [0], dtype=np.int64)
        waiting_pipe = np.zeros(len(tracks), dtype=bool)
        waiting_pipe[pipe_lane[table[recorder.flag_flow_pairs()[1], 0] >> 32]] = True

        for first, c in recorder.chunks(self.chunk_events):
            last = first + len(c["start_ps"])
            setters, waits = recorder.flag_flow_pairs(flag_cursor, flag_cursor + last - first)  # at most one per event
            count = int(np.searchsorted(waits, last))
            setter_of = np.full(last - first, -1, dtype=np.int64)  # the set_flag of each wait that consumed a flag
            setter_of[waits[:count] - first] = setters[:count]
            flag_cursor += count
            lo, hi = np.searchsorted(transfer_events, [first, last])
            kept = self._kept(c, kept_tracks)
            start_ns, end_ns = self._shown(np.arange(first, last), c["start_ps"], c["end_ps"])
            release, arrive = self._children(np.arange(first, last), start_ns, end_ns)
            lines, children = self._event_lines(c, kept, start_ns, end_ns, release, arrive, recorder.transfers(int(lo), int(hi)), first)
            track_of, on_load, busy = c["track"], on_load_pipe[c["track"]], ~sync[c["name"]]
            role = ((on_load & busy) * _LOAD | (on_load & a_set[c["name"]]) * _SET | (setter_of >= 0) * _WAIT
                    | (busy & waiting_pipe[track_of]) * _CONSUMER)
            looked_at = np.flatnonzero(role)
            consumers: list[int] = []  # the events data flows end in, one per load they consume
            consumed: list[int] = []  # those loads
            for index, role_of, track, setter in zip((looked_at + first).tolist(), role[looked_at].tolist(), track_of[looked_at].tolist(),
                                                     setter_of[looked_at].tolist()):
                if role_of & _LOAD:
                    loads = loads_since_set.get(track)
                    if loads is None:
                        loads = loads_since_set[track] = collections.deque(maxlen=LOADS_PER_SET)
                    loads.append(index)
                elif role_of & _SET:
                    loads = loads_since_set.pop(track, None)
                    if loads:
                        loads_of_set[index] = loads
                if role_of & _WAIT:
                    loads = loads_of_set.pop(setter, None)
                    if loads:
                        awaiting.setdefault(int(pipe_lane[track]), []).extend(loads)
                elif role_of & _CONSUMER and track in awaiting:
                    ready = awaiting.pop(track)
                    consumers.extend([index] * len(ready))
                    consumed.extend(ready)
            inserted = list(children)  # after each event's line, its arrive and release slices, then the data flows that end in it
            if consumers:
                ends, loads_from = np.array(consumers, dtype=np.int64) - first, np.array(consumed, dtype=np.int64)
                if not everything:  # both ends kept
                    both = kept[ends] & self._kept_rows(table, loads_from, kept_tracks)
                    ends, loads_from = ends[both], loads_from[both]
                if len(ends):
                    rows = table[loads_from]
                    load_start, load_end = self._shown(loads_from, rows[:, 2], rows[:, 3])
                    from_ns = own_middles(load_start, load_end, *self._children(loads_from, load_start, load_end))
                    to_ns = own_middles(start_ns[ends], end_ns[ends], release[ends], arrive[ends])
                    flows = self._data_flow_lines(rows[:, 0] >> 32, from_ns, track_of[ends], to_ns)
                    inserted.append((flows, np.cumsum(kept)[ends] - 1))
            self.emit_text(lines.joined(",\n", inserted))

    def _data_flow_lines(self, from_track: np.ndarray, from_ns: np.ndarray, to_track: np.ndarray, to_ns: np.ndarray) -> Lines:
        """The lines of data flows (each from a track and a time in ns to a track and a time), a row per flow."""
        ids = self.flow_id + 1 + np.arange(len(from_track))
        self.flow_id += len(from_track)
        lines = Lines(len(from_track))
        self._flow_lines(lines, ids, np.full(len(from_track), self._texts().data_flow), from_track, from_ns, to_track, to_ns)
        return lines

    def _event_lines(self, c: dict[str, np.ndarray], kept: np.ndarray, start_ns: np.ndarray, end_ns: np.ndarray, releases: np.ndarray,
                     arrivals: np.ndarray, transfers: dict[str, np.ndarray], first: int) -> tuple[Lines, list[tuple[Lines, np.ndarray]]]:
        """The lines of a chunk's kept events (shown from ``start_ns`` to ``end_ns``), a row per
        event: a complete event with its bytes, op, tile and, for a DMA, what limited it; and its
        children (:meth:`_children`): the arrive slices, then the release slices, each a row per
        event that has one, with the row of its event."""
        texts = self._texts()
        limit = np.full(len(kept), -3, dtype=np.int64)  # -3: not a DMA
        events = transfers["event"]
        last = np.append(events[1:] != events[:-1], True)[: len(events)]  # of an event's records, the last one counts
        limit[events[last] - first] = transfers["bottleneck"][last]
        rows = slice(None) if kept.all() else np.flatnonzero(kept)  # all of them, without copies, when everything is kept
        track, name, start, end = c["track"][rows], c["name"][rows], start_ns[rows], end_ns[rows]
        nbytes, op, tile, limit, released, arrived = c["bytes"][rows], c["op"][rows], c["tile"][rows], limit[rows], releases[rows], arrivals[rows]
        self.written += len(track)
        has_bytes, has_op, has_tile, has_limit, has_release = nbytes != 0, op >= 0, tile >= 0, limit != -3, released >= 0
        has_args = has_bytes | has_op | has_tile | has_limit
        self.released += int(has_release.sum())
        lines = _with_ts(Lines(len(track)).choice(texts.heads, name), start).text(',"dur":')
        lines = _with_dur(lines, end - start).choice(texts.places, track)
        lines.text(',"args":{', has_args).text('"bytes":', has_bytes).integer(nbytes, has_bytes)
        lines.choice(texts.ops, op + np.where(has_bytes, 0, len(self.recorder.ops)), has_op)  # the op after a comma if it follows the bytes
        lines.text(",", has_tile & (has_bytes | has_op)).text('"tile":', has_tile).integer(tile, has_tile)
        lines.choice(texts.limits, texts.limit_row(limit, has_limit), has_limit).text("}", has_args).text("}")
        arrived_rows = np.flatnonzero(arrived >= 0)
        self.arrived += len(arrived_rows)
        released_rows = np.flatnonzero(has_release)  # waiting when the last flow into it was released
        children = []
        for child_name, rows_of, child_start, child_end in (("arrive", arrived_rows, arrived[arrived_rows], arrived[arrived_rows] + 1),
                                                      ("release", released_rows, released[released_rows], end[released_rows])):
            child = _with_ts(Lines(len(rows_of)).text(f'{{"name":"{child_name}","ph":"X","ts":'), child_start).text(',"dur":')
            _with_dur(child, child_end - child_start, 2).choice(texts.places, track[rows_of]).text("}")
            children.append((child, rows_of))
        return lines, children

    def _kept_tracks(self) -> np.ndarray:
        """A boolean per track: its die is kept."""
        return self.kept_dies[np.array([track.die for track in self.recorder.tracks], dtype=np.int64)] if self.recorder.tracks else np.zeros(0, bool)

    def _kept(self, columns: dict[str, np.ndarray], kept_tracks: np.ndarray) -> np.ndarray:
        """A boolean per event of ``columns``: on a kept die and inside the window."""
        kept: np.ndarray = kept_tracks[columns["track"]] & self.selection.keeps_time(columns["start_ps"], columns["end_ps"])
        return kept

    # -- flows ---------------------------------------------------------------------------------

    def _recorded_flows(self) -> None:
        """The flows the run recorded (flags, then those of ops), chunk by chunk."""
        recorder = self.recorder
        table = recorder.table()
        lane = table[:, 0]
        flag_name = recorder.flag_name_id
        op_from, op_to, op_name, op_released = self._op_flows()
        chunk = self.chunk_events
        batches = itertools.chain(
            ((*recorder.flag_flow_pairs(first, first + chunk), None, None) for first in range(0, recorder.flag_flow_count, chunk)),
            ((op_from[first : first + chunk], op_to[first : first + chunk], op_name[first : first + chunk], op_released[first : first + chunk])
             for first in range(0, len(op_from), chunk)))
        keep_all = self.selection.everything
        kept_tracks = self._kept_tracks()
        for src, dst, name_ids, released in batches:
            if released is None:  # flag flows: released at the set_flag's end
                released = np.full(len(src), -1, dtype=np.int64)
            if not keep_all:  # both ends kept
                kept = self._kept_rows(table, src, kept_tracks) & self._kept_rows(table, dst, kept_tracks)
                src, dst, released, name_ids = src[kept], dst[kept], released[kept], name_ids[kept] if name_ids is not None else None
            from_ts, done = self._sources(src, released)
            dst_start, dst_end = self._shown_of(dst)
            dst_release, dst_arrive = self._children(dst, dst_start, dst_end)
            # an arrow ends in its target's release slice if its source released it there, else in the target itself
            to_ts = np.where((dst_release >= 0) & (done >= dst_release), _middle(dst_release, dst_end), own_middles(dst_start, dst_end, dst_release, dst_arrive))
            lines = Lines(len(src))
            ids = self.flow_id + 1 + np.arange(len(src))
            self.flow_id += len(src)
            names = np.full(len(src), flag_name) if name_ids is None else name_ids
            self._flow_lines(lines, ids, names, lane[src] >> 32, from_ts, lane[dst] >> 32, to_ts)
            self.emit_text(lines.joined(",\n"))

    def _flow_lines(self, lines: Lines, ids: np.ndarray, names: np.ndarray, from_track: np.ndarray, from_ns: np.ndarray, to_track: np.ndarray,
                    to_ns: np.ndarray) -> None:
        """Two lines for each row: arrow ``ids`` named ``names`` (rows of ``flow_names``), its start
        bound to the source slice, a time inside it (its middle) on ``from_track``, its end
        (``bp: e``) to the target slice, a time inside it on ``to_track``. A v1 flow is identified
        by its id and name."""
        texts = self._texts()
        lines.text('{"ph":"s","id":').integer(ids).text(',"name":"').choice(texts.flow_names, names).text('","ts":')
        _with_ts(lines, from_ns).choice(texts.places, from_track).text('},\n{"ph":"f","bp":"e","id":').integer(ids)
        lines.text(',"name":"').choice(texts.flow_names, names).text('","ts":')
        _with_ts(lines, to_ns).choice(texts.places, to_track).text("}")

    # -- counters ------------------------------------------------------------------------------

    def counter_pieces(self) -> int:
        """How many pieces the counters are written in (:meth:`counter_piece`)."""
        if self.selection.level == "ops":
            return 0
        return len(self._rate_pieces()) + bool(self.recorder.buffer_spans) + len(self._l2_dies())

    def counter_piece(self, piece: int) -> None:
        """Write piece ``piece`` of the counters: each piece depends on nothing written before
        it, so pieces can be written by two processes and put together in order. The rate
        counters' points, a resource's ``COUNTER_CHUNK_POINTS`` at a time, then the buffer counters
        whole, then each die's L2 hit rate."""
        rates = self._rate_pieces()
        if piece < len(rates):
            self._rate_counters(*rates[piece])
            return
        piece -= len(rates)
        if self.recorder.buffer_spans:
            if not piece:
                self._buffer_counters()
                return
            piece -= 1
        self._l2_counter(self._l2_dies()[piece])

    def _l2_dies(self) -> list[int]:
        """The dies whose L2 was accessed and whose counters are kept, in order."""
        return [die for die, (times, _, _) in sorted(self.record.l2.log.items()) if len(times) and self.kept_dies[die]]

    def _l2_counter(self, die: int) -> None:
        """Die ``die``'s L2 hit rate in percent: per step of its log (a microsecond of the run in
        which accesses reached it, ``hw.cache.HIT_RATE_BIN_PS``), the share of their lines that hit,
        at the step's start; written where it changes, as every counter is."""
        logged_ps, logged_hits, logged_lines = self.record.l2.log[die]
        times, hits, lines = np.frombuffer(logged_ps, dtype=np.int64), np.frombuffer(logged_hits, dtype=np.float64), np.frombuffer(logged_lines, dtype=np.int64)
        order = np.argsort(times, kind="stable")
        starts, first = np.unique(times[order], return_index=True)
        rate = 100 * np.add.reduceat(hits[order], first) / np.add.reduceat(lines[order], first)
        points, values = self._points_in_window(starts, rate)
        changed = _changes(np.zeros(len(points), dtype=np.int64), ns_of(points), values)  # a point only where what it shows changes
        points, values = points[changed], values[changed]
        head = f'{{"name":{json.dumps(f"die{die} L2 hit rate %")},"ph":"C","ts":'
        place = f',"pid":{die},"args":{{"%":'
        for first_point in range(0, len(points), COUNTER_CHUNK_POINTS):
            rows = slice(first_point, first_point + COUNTER_CHUNK_POINTS)
            self.emit_text(_counter_lines(head, ns_of(points[rows]), place, values[rows]))

    def _rate_pieces(self) -> list[tuple[ResourceRecord, np.ndarray, np.ndarray]]:
        """The rate counters' pieces, in order: a resource, its points' times (ps) and rates
        (bytes/ps). Made once."""
        if self._rates is None:
            self._rates = []
            for resource in self.record.resources:
                if not resource.rate_log or not self.kept_dies[resource.die]:
                    continue
                times, rates = self._points_in_window(np.frombuffer(resource.rate_log.times, dtype=np.int64),
                                                      np.frombuffer(resource.rate_log.rates, dtype=np.float64))
                changed = _changes(np.zeros(len(times), dtype=np.int64), ns_of(times), rates * 1e3)
                times, rates = times[changed], rates[changed]
                self._rates.extend((resource, times[first : first + COUNTER_CHUNK_POINTS], rates[first : first + COUNTER_CHUNK_POINTS])
                                   for first in range(0, len(times), COUNTER_CHUNK_POINTS))
        return self._rates

    def _rate_counters(self, resource: ResourceRecord, times: np.ndarray, rates: np.ndarray) -> None:
        """A resource's rate in GB/s at ``times`` (ps; ``rates`` in bytes/ps): a point at each change
        of its rate log as written (:func:`_changes`). (A batch of several resources' points costs more: their names' widths
        differ, so its lines hold more NULs to squeeze out, callgrind.)"""
        head = f'{{"name":{json.dumps(f"{resource.name} GB/s")},"ph":"C","ts":'
        place = f',"pid":{resource.die},"args":{{"GB/s":'
        self.emit_text(_counter_lines(head, ns_of(times), place, rates * 1e3))

    def _buffer_counters(self) -> None:
        """Each core's buffer occupancy in KiB: the bytes a program reserved, from the start to the
        end of its run on the core; 0 in between. A counter per (die, core, buffer), in that order,
        each named with the core's index zero-padded (:func:`_counter_unit`); its points in the
        order of (time, 0 for an end and 1 for a start, bytes), of which only those that change
        what the counter shows are written (:func:`_changes`: a run that ends when the next starts
        writes the new value only)."""
        spans = self.recorder.buffer_spans
        if not spans:
            return
        cores = self.record.spec.die.cores
        names = sorted({(span.die, _counter_unit(span.unit, cores), span.buffer) for span in spans})
        counter_of = {(die, unit, buffer): i for i, (die, unit, buffer) in enumerate(names)}
        of_span = np.array([counter_of[span.die, _counter_unit(span.unit, cores), span.buffer] for span in spans], dtype=np.int64)
        columns = np.array([(span.start_ps, span.end_ps, span.bytes) for span in spans], dtype=np.int64).reshape(-1, 3)
        counter = np.concatenate([of_span, of_span])  # two points a span: (start, 1, bytes), (end, 0, 0)
        time = np.concatenate([columns[:, 0], columns[:, 1]])
        starts = np.repeat(np.array([1, 0]), len(spans))
        nbytes = np.concatenate([columns[:, 2], np.zeros(len(spans), dtype=np.int64)])
        order = np.lexsort((nbytes, starts, time, counter))
        counter, time, kib = counter[order], time[order], nbytes[order] / 1024
        kept = self.kept_dies[np.array([die for die, _, _ in names], dtype=np.int64)][counter]
        counter, time, kib = counter[kept], time[kept], kib[kept]
        if self.selection.window_ps is not None:
            bounds = np.searchsorted(counter, np.arange(len(names) + 1))
            windowed = [(i, *self._points_in_window(time[a:b], kib[a:b])) for i, (a, b) in enumerate(zip(bounds[:-1].tolist(), bounds[1:].tolist()))
                        if b > a]
            counter = np.concatenate([np.full(len(points), i, dtype=np.int64) for i, points, _ in windowed] or [counter[:0]])
            time = np.concatenate([points for _, points, _ in windowed] or [time[:0]])
            kib = np.concatenate([values for _, _, values in windowed] or [kib[:0]])
        changed = _changes(counter, ns_of(time), kib)
        counter, time, kib = counter[changed], time[changed], kib[changed]
        heads = Texts([f'{{"name":{json.dumps(f"{unit} {buffer} KiB")},"ph":"C","ts":' for _, unit, buffer in names])
        places = Texts([f',"pid":{die},"args":{{"KiB":' for die, _, _ in names])
        for first in range(0, len(time), COUNTER_CHUNK_POINTS):
            rows = slice(first, first + COUNTER_CHUNK_POINTS)
            self.emit_text(_counter_lines((heads, counter[rows]), ns_of(time[rows]), (places, counter[rows]), kib[rows]))

    def _points_in_window(self, times: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The points of a counter (times in ps, in order; values) inside the window, the one in
        force at its start moved to the start (all of them, as they are, without a window)."""
        window = self.selection.window_ps
        if window is None:
            return times, values
        low, high = window
        first = int(np.searchsorted(times, low, side="right"))
        stop = int(np.searchsorted(times, high, side="right"))
        if first and (stop == first or times[first] > low):  # the point in force at the start, moved to it
            return np.insert(times[first:stop], 0, low), np.insert(values[first:stop], 0, values[first - 1])
        return times[first:stop], values[first:stop]

    # -- selections --------------------------------------------------------------------------

    def _kept_rows(self, table: np.ndarray, events: np.ndarray, kept_tracks: np.ndarray) -> np.ndarray:
        """A boolean per event index of ``events``: kept by the selection."""
        rows = table[events]
        kept: np.ndarray = kept_tracks[rows[:, 0] >> 32] & self.selection.keeps_time(rows[:, 2], rows[:, 3])
        return kept

    def _op_slices(self) -> None:
        """The ``ops`` level: one slice per op and core (lane ``<core> ops`` of its die; ops in
        flight together on a core on lanes ``<core> ops 2``, ``3`` ...), from its first kept
        instruction's start to its last one's end, with its instructions and bytes."""
        recorder = self.recorder
        tracks = recorder.tracks
        units: dict[tuple[int, str], int] = {}  # (die, unit) -> its lane
        unit_of_track = np.array([units.setdefault((t.die, t.unit), len(units)) for t in tracks], dtype=np.int64)
        kept_tracks = self._kept_tracks()
        spans: dict[tuple[int, int], list[int]] = {}  # (op, unit) -> [start, end, instructions, bytes]
        for _, c in recorder.chunks(self.chunk_events):
            kept = self._kept(c, kept_tracks) & (c["op"] >= 0)
            if not kept.any():
                continue
            op, unit = c["op"][kept].astype(np.int64), unit_of_track[c["track"][kept]]
            keys, inverse = np.unique(op * len(units) + unit, return_inverse=True)
            starts = np.full(len(keys), np.iinfo(np.int64).max)
            np.minimum.at(starts, inverse, c["start_ps"][kept])
            ends = np.zeros(len(keys), dtype=np.int64)
            np.maximum.at(ends, inverse, c["end_ps"][kept])
            counts = np.bincount(inverse, minlength=len(keys))
            nbytes = np.bincount(inverse, weights=c["bytes"][kept], minlength=len(keys))
            for key, start, end, count, moved in zip(keys.tolist(), starts.tolist(), ends.tolist(), counts.tolist(), nbytes.tolist()):
                span = spans.get(divmod(key, len(units)))
                if span is None:
                    spans[divmod(key, len(units))] = [start, end, count, int(moved)]
                else:
                    span[0], span[1], span[2], span[3] = min(span[0], start), max(span[1], end), span[2] + count, span[3] + int(moved)
        names = {i: key for key, i in units.items()}  # unit -> (die, unit name)
        order: dict[int, tuple[int, ...]] = {}  # unit -> the first order of its lanes: the order of the full trace (AICPUs first, cores by index)
        for track, unit in zip(tracks, unit_of_track.tolist()):
            order[unit] = min(order.get(unit, track.order), track.order)
        # ops in flight together on a core (tile ops of a scheduler) go to further lanes of the core:
        # each slice to the first one free when it starts, so no two slices of a lane overlap
        free_at: dict[int, list[int]] = {}  # unit -> when each of its lanes is free (ns)
        placed = []
        for (op_id, unit), (start, end, count, moved) in sorted(spans.items(), key=lambda item: (item[1][0], item[0])):
            start_ns, end_ns = (int(ns) for ns in rounded_spans(start, end))
            lanes_of_unit = free_at.setdefault(unit, [])
            lane = next((k for k, free in enumerate(lanes_of_unit) if free <= start_ns), len(lanes_of_unit))
            if lane == len(lanes_of_unit):
                lanes_of_unit.append(0)
            lanes_of_unit[lane] = end_ns
            placed.append((op_id, unit, lane, start_ns, end_ns, count, moved))
        units_used = sorted(free_at, key=lambda unit: (names[unit][0], order[unit], names[unit][1]))
        tid_of = {}  # (unit, lane) -> tid
        for die in sorted({names[u][0] for u in units_used}):
            label = f"die {die}" + (f" (npu {self.record.package_of(die)})" if die >= 0 else "")
            self.emit(f'{{"ph":"M","name":"process_name","pid":{die},"tid":0,"args":{{"name":{json.dumps(label)}}}}}')
        for unit in units_used:
            die, name = names[unit]
            for lane in range(len(free_at[unit])):
                tid = tid_of[unit, lane] = unit + 1 + lane * len(units)
                label = f"{name} ops" + (f" {lane + 1}" if lane else "")
                self.emit(f'{{"ph":"M","name":"thread_name","pid":{die},"tid":{tid},"args":{{"name":{json.dumps(label)}}}}}')
                self.emit(f'{{"ph":"M","name":"thread_sort_index","pid":{die},"tid":{tid},"args":{{"sort_index":{len(tid_of) - 1}}}}}')
        ops = recorder.ops
        lines = []
        for op_id, unit, lane, start_ns, end_ns, count, moved in placed:
            lines.append(f'{{"name":{json.dumps(ops[op_id].name)},"ph":"X","ts":{_ts(start_ns)},"dur":{_dur(end_ns - start_ns)},"pid":{names[unit][0]},'
                         f'"tid":{tid_of[unit, lane]},"args":{{"op":{json.dumps(f"{ops[op_id].name}#{op_id}")},"instructions":{count},"bytes":{moved}}}}}')
        self.written = len(lines)
        self.emit_lines(lines)

    # -- metadata ------------------------------------------------------------------------------

    def _other_data(self, metadata: dict[str, Any]) -> dict[str, Any]:
        recorder = self.recorder
        data = {
            "trace_format": TRACE_FORMAT_VERSION,
            "time_unit": "us",
            "events": len(recorder),
            "flows": self.flow_id,
            "release_slices": self.released,
            "arrive_slices": self.arrived,
            "ops": [{"id": i, "name": op.name, "die": op.die, "args": jsonable(op.args), **({"part_of": op.part_of} if op.part_of >= 0 else {})}
                    for i, op in enumerate(recorder.ops)],
            "config_spec": self.record.spec.model_dump(mode="json"),
        }
        if not self.selection.everything:
            data["trace_selection"] = {**self.selection.describe(), "events_written": self.written}
        data.update(jsonable(metadata))
        return data


def _counter_unit(unit: str, cores: Any) -> str:
    """A core's name in a counter's name, its index zero-padded to the width of the die's largest
    index of its kind (``aiv07`` of 48 vector cores): Perfetto lists a process's counter tracks by
    their names as text, which then puts them in core order (aiv00, aiv01, ... aiv10), not aiv1,
    aiv10, aiv11 ... aiv2. ``cores``: the die's kinds of core (``spec.die.cores``)."""
    kind = unit.rstrip("0123456789")
    if kind not in cores or kind == unit:
        return unit
    return f"{kind}{int(unit[len(kind):]):0{len(str(cores[kind].count - 1))}d}"


def _written(values: np.ndarray) -> np.ndarray:
    """Each value as a counter point writes it (three decimals), as a key that is equal exactly
    when the written texts are: its signed thousandths, or the text where numpy cannot tell."""
    parts = fixed3(values)
    if parts is None:
        return np.array([f"{value:.3f}" for value in values.tolist()])
    negative, whole, decimals = parts
    written: np.ndarray = (whole * 1000 + decimals) * 2 + negative
    return written


def _changes(series: np.ndarray, ns: np.ndarray, values: np.ndarray) -> np.ndarray:
    """Of counter points in order of (``series``, time), a boolean per point: written, because it
    changes what the counter shows. At one written time (``ns``) of a series only its last point
    counts (a viewer shows the last value at an instant); of those, a point whose written value
    (:func:`_written`) is the one before it in the series changes nothing."""
    if not len(ns):
        return np.zeros(0, dtype=bool)
    last_at_instant = np.ones(len(ns), dtype=bool)
    last_at_instant[:-1] = (series[1:] != series[:-1]) | (ns[1:] != ns[:-1])
    at = np.flatnonzero(last_at_instant)
    written, of = _written(values[at]), series[at]
    new_value = np.ones(len(at), dtype=bool)
    new_value[1:] = (of[1:] != of[:-1]) | (written[1:] != written[:-1])
    changed = np.zeros(len(ns), dtype=bool)
    changed[at[new_value]] = True
    return changed


def _counter_lines(head: str | tuple[Texts, np.ndarray], ns: np.ndarray, place: str | tuple[Texts, np.ndarray], values: np.ndarray) -> memoryview:
    """Counter points (``head``, a time, ``place``, a value with three decimals, closed), ``,\\n``
    between two; ``head`` and ``place`` are one text, or texts and the row of each point's;
    numpy writes the values where it is exact (fixed3), Python any other."""
    lines = _with_ts(_text_part(Lines(len(ns)), head), ns)
    _text_part(lines, place)
    parts = fixed3(values)
    if parts is None:
        lines.choice(Texts([f"{value:.3f}" for value in values.tolist()]), np.arange(len(values)))
    else:
        negative, whole, decimals = parts
        lines.text("-", negative).integer(whole).fraction(decimals, 3)
    return lines.text("}}").joined(",\n")


def _text_part(lines: Lines, text: str | tuple[Texts, np.ndarray]) -> Lines:
    """``lines`` with ``text``: the same on every row, or (texts, the row of each line's)."""
    return lines.text(text) if isinstance(text, str) else lines.choice(*text)


class _Texts:
    """The texts of a run that lines pick from (``npusim.trace.text``), made once per trace: an
    event's head by name id, its ``pid``/``tid`` by track, its op (after a comma, then without),
    what limited a DMA, a flow's name by name id (then the data flows' name)."""

    def __init__(self, record: RunRecord) -> None:
        recorder = record.recorder
        self.heads = Texts([f'{{"name":{json.dumps(name)},"ph":"X","ts":' for name in recorder.names])
        self.places = Texts([f',"pid":{track.die},"tid":{track_id + 1}' for track_id, track in enumerate(recorder.tracks)])
        ops = [f',"op":{_json_string(f"{op.name}#{i}")}' for i, op in enumerate(recorder.ops)]
        self.ops = Texts(ops + [op[1:] for op in ops])
        limits = {-1: ',"bottleneck":"engine rate"', -2: ',"bottleneck":"unregistered resource"'}
        limits.update({r.index: f',"bottleneck":{json.dumps(r.name)}' for r in record.resources})
        self.limit_codes = np.array(sorted(limits), dtype=np.int64)
        self.limits = Texts([limits[code] for code in self.limit_codes.tolist()])
        self.flow_names = Texts([json.dumps(name)[1:-1] for name in recorder.names] + ["data"])
        self.data_flow = len(recorder.names)  # the row of flow_names that names the data flows the writer finds

    def limit_row(self, limit: np.ndarray, where: np.ndarray) -> np.ndarray:
        """The row of ``limits`` of each bottleneck code of ``limit`` (on each row of ``where``)."""
        row = np.minimum(np.searchsorted(self.limit_codes, limit), len(self.limit_codes) - 1)
        unknown = where & (self.limit_codes[row] != limit)
        if unknown.any():
            raise KeyError(int(limit[unknown][0]))
        return row
