"""Chrome Trace Event format (opens in Perfetto and chrome://tracing), written as a stream.

Dies are processes; each core pipe (``aiv3 MTE2``), link or AICPU lane is a thread of its die;
every executed instruction is a complete ("X") event with its bytes, op, tile and, for a DMA, the
resource that limited it; dependencies are flow arrows (``flag``: set_flag -> wait_flag; ``data``:
a load -> the instruction that consumes it; any flow an op recorded); the rate through each HBM,
L2 and link is a counter track in GB/s and each core's buffer occupancy one in KiB; warnings are
instant events. ``docs/trace-format.md`` documents every field and track.

Times are in microseconds on a whole-nanosecond grid: each start and end is the simulator's integer
picoseconds rounded to the nearest ns, so no two slices of a lane overlap in a viewer that rounds
to ns (Perfetto) or adds in floating point (speedscope); a ``wait_flag`` that was waiting when its
flag became visible holds a ``release`` slice from then to its end, where the flag arrow ends (an
arrow ends in a slice that starts no earlier than its source, as Perfetto requires). The same run
gives the same bytes. The writer never unpacks more than one chunk of events at a time: its extra memory is
bounded by the chunk, not by the run (``benchmarks/trace_writer.py`` measures it).
"""

from __future__ import annotations

import bisect
import collections
import itertools
import json
import operator
import os
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import IO, Any, TypeVar, cast

import numpy as np

from npusim.files import atomic_path
from npusim.trace.record import RunRecord
from npusim.trace.selection import TraceSelection

TRACE_FORMAT_VERSION = 3  # 3: times on a whole-ns grid, release slices in waits
LOAD_LANES = ("MTE2", "MTE1")  # pipes whose DMAs bring data into a core's buffers: sources of data flows
LOADS_PER_SET = 32  # data flows start from at most this many loads before one set_flag (the latest)
WRITER_CHUNK_EVENTS = 1024  # events formatted per batch: bounds the writer's extra memory (and was fastest measured)
_point_time = operator.itemgetter(0)
_Point = TypeVar("_Point", bound=tuple[Any, ...])  # a counter's point: (time_ps, values ...)


def ns_of(ps: Any) -> Any:
    """Integer picoseconds to the nearest whole nanosecond (halves up; elementwise on arrays): the
    grid every time of the trace is written on."""
    return (ps + 500) // 1000


def _ts(ns: int) -> str:
    """Whole nanoseconds as an exact decimal number of microseconds (``12.345``, ``12``)."""
    whole, frac = divmod(int(ns), 1000)
    return f"{whole}.{frac:03d}" if frac else str(whole)


def _ts_texts(ns: np.ndarray) -> list[str]:
    """``_ts`` of every value of an array (the same text, made in one pass)."""
    whole, frac = np.divmod(ns, 1000)
    return [f"{w}.{f:03d}" if f else str(w) for w, f in zip(whole.tolist(), frac.tolist())]


def _dur(ns: int, short_ps: int = 1) -> str:
    """A duration of whole nanoseconds as microseconds, ``short_ps`` short (``0.002999`` for 3 ns;
    ``0`` for 0): Perfetto rounds each ``dur`` to whole ns on its own, so it reads 3 ns, and a viewer
    that adds ``ts + dur`` in floating point (speedscope) never sees a slice end after the next one
    starts (nor a nested slice, 2 ps short, after its parent)."""
    if not ns:
        return "0"
    whole, frac = divmod(int(ns) * 1000 - short_ps, 1_000_000)
    return f"{whole}.{frac:06d}"


def _dur_texts(ns: np.ndarray) -> list[str]:
    """``_dur`` of every value of an array (the same text, made in one pass)."""
    whole, frac = np.divmod(ns * 1000 - 1, 1_000_000)
    return [f"{w}.{f:06d}" if n else "0" for n, w, f in zip(ns.tolist(), whole.tolist(), frac.tolist())]


def _middle(start_ns: Any, end_ns: Any) -> Any:
    """A time inside ``[start_ns, end_ns)`` (its middle, on the ns grid; the start for a slice of
    zero or one ns): where a flow end binds to that slice (elementwise on arrays)."""
    return start_ns + (end_ns - start_ns) // 2


def release_starts(wait_start_ns: Any, wait_end_ns: Any, set_end_ns: Any) -> Any:
    """Where the ``release`` slice of a ``wait_flag`` starts (ns): when the flag it consumed became
    visible (its ``set_flag``'s end), if the wait was already waiting then and ended later; else
    the wait's own start (no release slice). Elementwise on arrays."""
    return np.where((wait_start_ns < set_end_ns) & (set_end_ns < wait_end_ns), set_end_ns, wait_start_ns)


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
    with atomic_path(path) as temporary, open(temporary, "w", encoding="utf-8") as out:
        _Writer(record, out, chunk_events, selection or TraceSelection()).write(metadata or {})
    return path


class _Writer:
    """One pass over the recorder, writing lines as it goes."""

    def __init__(self, record: RunRecord, out: IO[str], chunk_events: int, selection: TraceSelection) -> None:
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

    def _release_starts(self, events: np.ndarray) -> np.ndarray:
        """For each of ``events`` (indices): where its ``release`` slice starts (ns), -1 for none
        (only a ``wait_flag`` that was waiting when the flag it consumed became visible has one)."""
        sets, waits = self.recorder.flag_flow_pairs()  # the recorder's own arrays, in the order of the waits
        if not len(waits) or not len(events):
            return np.full(len(events), -1, dtype=np.int64)
        position = np.minimum(np.searchsorted(waits, events), len(waits) - 1)
        table = self.recorder.table()
        wait_start = ns_of(table[events, 2])
        at = release_starts(wait_start, ns_of(table[events, 3]), ns_of(table[sets[position], 3]))
        released: np.ndarray = np.where((waits[position] == events) & (at > wait_start), at, -1)
        return released

    def emit(self, line: str) -> None:
        self.emit_lines([line])

    def emit_lines(self, lines: list[str]) -> None:
        """Write ``lines`` as events of the array (one write for the whole batch)."""
        if not lines:
            return
        if not self.first:
            self.out.write(",\n")
        self.out.write(",\n".join(lines))
        self.first = False

    def write(self, metadata: dict[str, Any]) -> None:
        self.out.write('{"traceEvents":[\n')
        selection = self.selection
        if selection.level == "ops":
            self._op_slices()
        else:
            self._lanes()
            self._events()
            self._recorded_flows()
            self._rate_counters()
            self._buffer_counters()
        for instant in self.recorder.instants:
            if not (selection.keeps_die(instant.die) and selection.keeps_time(instant.time_ps, instant.time_ps)):
                continue
            self.emit(f'{{"name":{json.dumps(instant.name)},"cat":{json.dumps(instant.category)},"ph":"i","s":"p","ts":{_ts(ns_of(instant.time_ps))},'
                      f'"pid":{instant.die},"tid":0,"args":{{"message":{json.dumps(instant.message)}}}}}')
        self.out.write('\n],"displayTimeUnit":"ns","otherData":')
        self.out.write(json.dumps(self._other_data(metadata), sort_keys=True))
        self.out.write("}\n")

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
        for _, columns in recorder.chunks(self.chunk_events):
            used[columns["track"][self._kept(columns, kept_tracks)]] = True
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
        heads = [f'{{"name":{json.dumps(name)},"ph":"X","ts":' for name in recorder.names]
        places = [f',"pid":{track.die},"tid":{track_id + 1}' for track_id, track in enumerate(tracks)]
        ops = [f',"op":{json.dumps(f"{op.name}#{i}")}' for i, op in enumerate(recorder.ops)]
        limits = {-1: ',"bottleneck":"engine rate"', -2: ',"bottleneck":"unregistered resource"'}
        limits.update({r.index: f',"bottleneck":{json.dumps(r.name)}' for r in self.record.resources})

        set_names = {i for i, name in enumerate(recorder.names) if name.startswith("set_flag")}
        sync_names = set(recorder.wait_names) | set_names
        load_tracks = {i for i, track in enumerate(tracks) if track.lane in LOAD_LANES}
        flag_cursor = 0  # flag flows are in the order of their waits: the next one not yet seen
        transfer_events = np.frombuffer(recorder.transfer_event, dtype=np.int64)
        # a load is (its track, a time inside its slice as ts text, whether it is written)
        loads_since_set: dict[int, collections.deque[tuple[int, str, bool]]] = {}  # load track -> loads since its last set_flag
        loads_of_set: dict[int, collections.deque[tuple[int, str, bool]]] = {}  # set_flag event -> the loads before it
        awaiting: dict[int, list[tuple[int, str, bool]]] = {}  # track -> loads waiting for their consumer on it
        kept_tracks = self._kept_tracks()
        everything = self.selection.everything

        for first, c in recorder.chunks(self.chunk_events):
            last = first + len(c["start_ps"])
            setters, waits = recorder.flag_flow_pairs(flag_cursor, flag_cursor + last - first)  # at most one per event
            count = int(np.searchsorted(waits, last))
            setter_of = dict(zip(waits[:count].tolist(), setters[:count].tolist()))
            flag_cursor += count
            lo, hi = np.searchsorted(transfer_events, [first, last])
            transfers = recorder.transfers(int(lo), int(hi))
            limit_of = dict(zip(transfers["event"].tolist(), transfers["bottleneck"].tolist()))
            releases = self._release_starts(np.arange(first, last))
            released_events = np.flatnonzero(releases >= 0)
            release_of = dict(zip((released_events + first).tolist(), releases[released_events].tolist()))
            kept = self._kept(c, kept_tracks).tolist()
            self.written += sum(kept)
            start_ns, end_ns = ns_of(c["start_ps"]), ns_of(c["end_ps"])
            rows = zip(c["track"].tolist(), c["name"].tolist(), _ts_texts(start_ns), _dur_texts(end_ns - start_ns),
                       c["bytes"].tolist(), c["op"].tolist(), c["tile"].tolist(), _middle(start_ns, end_ns).tolist(), end_ns.tolist(), kept)
            lines: list[str] = []
            add = lines.append
            for index, (track, name, ts, dur, nbytes, op, tile, inside, end, keep) in enumerate(rows, first):
                if keep:
                    args = f'"bytes":{nbytes}' if nbytes else ""
                    if op >= 0:
                        args += ops[op] if args else ops[op][1:]
                    if tile >= 0:
                        args += f',"tile":{tile}' if args else f'"tile":{tile}'
                    if index in limit_of:
                        args += limits[limit_of[index]]
                    add(f'{heads[name]}{ts},"dur":{dur}{places[track]},"args":{{{args}}}}}' if args else f'{heads[name]}{ts},"dur":{dur}{places[track]}}}')
                    released = release_of.get(index)
                    if released is not None:  # the wait was waiting when its flag became visible
                        self.released += 1
                        add(f'{{"name":"release","ph":"X","ts":{_ts(released)},"dur":{_dur(end - released, short_ps=2)}{places[track]}}}')

                if track in load_tracks:
                    if name in set_names:
                        loads = loads_since_set.pop(track, None)
                        if loads:
                            loads_of_set[index] = loads
                    elif name not in sync_names:
                        loads = loads_since_set.get(track)
                        if loads is None:
                            loads = loads_since_set[track] = collections.deque(maxlen=LOADS_PER_SET)
                        loads.append((track, _ts(inside), keep))
                setter = setter_of.get(index)
                if setter is not None:
                    loads = loads_of_set.pop(setter, None)
                    if loads:
                        awaiting.setdefault(track, []).extend(loads)
                elif name not in sync_names and track in awaiting:
                    for load_track, load_ts, load_kept in awaiting.pop(track):
                        if everything or (keep and load_kept):
                            self._flow(add, "data", load_track, load_ts, track, _ts(inside))
            self.emit_lines(lines)

    def _kept_tracks(self) -> np.ndarray:
        """A boolean per track: its die is kept."""
        return self.kept_dies[np.array([track.die for track in self.recorder.tracks], dtype=np.int64)] if self.recorder.tracks else np.zeros(0, bool)

    def _kept(self, columns: dict[str, np.ndarray], kept_tracks: np.ndarray) -> np.ndarray:
        """A boolean per event of ``columns``: on a kept die and inside the window."""
        kept: np.ndarray = kept_tracks[columns["track"]] & self.selection.keeps_time(columns["start_ps"], columns["end_ps"])
        return kept

    # -- flows ---------------------------------------------------------------------------------

    def _flow(self, add: Callable[[str], None], name: str, from_track: int, from_ts: str, to_track: int, to_ts: str) -> None:
        """One arrow (two lines given to ``add``): its start bound to the source slice, its end
        (``bp: e``) to the target slice; ``*_ts`` are times inside those slices (their middle).
        A v1 flow is identified by its id and name."""
        tracks = self.recorder.tracks
        self.flow_id += 1
        add(f'{{"ph":"s","id":{self.flow_id},"name":"{name}","ts":{from_ts},"pid":{tracks[from_track].die},"tid":{from_track + 1}}}')
        add(f'{{"ph":"f","bp":"e","id":{self.flow_id},"name":"{name}","ts":{to_ts},"pid":{tracks[to_track].die},"tid":{to_track + 1}}}')

    def _recorded_flows(self) -> None:
        """The flows the run recorded (flags, then those of ops), chunk by chunk."""
        recorder = self.recorder
        table = recorder.table()
        lane, start, end = table[:, 0], table[:, 2], table[:, 3]
        names = [json.dumps(name)[1:-1] for name in recorder.names]
        flag_name = recorder.flag_name_id
        op_from, op_to, op_name = (np.frombuffer(column, dtype=np.int64) for column in (recorder.flow_from, recorder.flow_to, recorder.flow_name))
        chunk = self.chunk_events
        batches = itertools.chain(
            ((*recorder.flag_flow_pairs(first, first + chunk), None) for first in range(0, recorder.flag_flow_count, chunk)),
            ((op_from[first : first + chunk], op_to[first : first + chunk], op_name[first : first + chunk]) for first in range(0, len(op_from), chunk)))
        keep_all = self.selection.everything
        kept_tracks = self._kept_tracks()
        for src, dst, name_ids in batches:
            if not keep_all:  # both ends kept
                kept = self._kept_rows(table, src, kept_tracks) & self._kept_rows(table, dst, kept_tracks)
                src, dst, name_ids = src[kept], dst[kept], name_ids[kept] if name_ids is not None else None
            src_start, dst_start, dst_end = ns_of(start[src]), ns_of(start[dst]), ns_of(end[dst])
            src_releases = self._release_starts(src)  # a flow end in a wait binds before its release slice
            from_ts = _middle(src_start, np.where(src_releases >= 0, src_releases, ns_of(end[src])))
            if name_ids is None:  # a flag flow ends where the wait was released
                dst_start = release_starts(dst_start, dst_end, ns_of(end[src]))
            else:
                dst_releases = self._release_starts(dst)
                dst_end = np.where(dst_releases >= 0, dst_releases, dst_end)
            rows = zip((lane[src] >> 32).tolist(), _ts_texts(from_ts), (lane[dst] >> 32).tolist(), _ts_texts(_middle(dst_start, dst_end)),
                       [flag_name] * len(src) if name_ids is None else name_ids.tolist())
            lines: list[str] = []
            for from_track, from_ts, to_track, to_ts, name in rows:
                self._flow(lines.append, names[name], from_track, from_ts, to_track, to_ts)
            self.emit_lines(lines)

    # -- counters ------------------------------------------------------------------------------

    def _rate_counters(self) -> None:
        for resource in self.record.resources:
            if not resource.rate_log or not self.kept_dies[resource.die]:
                continue
            counter = json.dumps(f"{resource.name} GB/s")
            for time_ps, rate in self._in_window(resource.rate_log):
                self.emit(f'{{"name":{counter},"ph":"C","ts":{_ts(ns_of(time_ps))},"pid":{resource.die},"args":{{"GB/s":{rate * 1e3:.3f}}}}}')

    def _buffer_counters(self) -> None:
        """Each core's buffer occupancy in KiB: the bytes a program reserved, from the start to the
        end of its run on the core; 0 in between (a run that ends when the next starts is written
        first, so the new value wins at that instant)."""
        points: dict[tuple[int, str, str], list[tuple[int, int, int]]] = {}
        for span in self.recorder.buffer_spans:
            series = points.setdefault((span.die, span.unit, span.buffer), [])
            series.append((span.start_ps, 1, span.bytes))
            series.append((span.end_ps, 0, 0))
        for (die, unit, buffer), series in sorted(points.items()):
            if not self.kept_dies[die]:
                continue
            counter = json.dumps(f"{unit} {buffer} KiB")
            for time_ps, _, nbytes in self._in_window(sorted(series)):
                self.emit(f'{{"name":{counter},"ph":"C","ts":{_ts(ns_of(time_ps))},"pid":{die},"args":{{"KiB":{nbytes / 1024:.3f}}}}}')

    def _in_window(self, series: Iterable[_Point]) -> Iterable[_Point]:
        """The points (time_ps first, in time order) of a counter inside the window, the one in
        force at its start moved to the start (all of them, as they are, without a window)."""
        window = self.selection.window_ps
        if window is None:
            return series
        low, high = window
        points = list(series)
        first = bisect.bisect_right(points, low, key=_point_time)
        inside = [point for point in points[first:] if point[0] <= high]
        if first and (not inside or inside[0][0] > low):
            inside.insert(0, cast(_Point, (low, *points[first - 1][1:])))
        return inside

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
        # ops in flight together on a core (tile ops of a scheduler) go to further lanes of the core:
        # each slice to the first one free when it starts, so no two slices of a lane overlap
        free_at: dict[int, list[int]] = {}  # unit -> when each of its lanes is free (ns)
        placed = []
        for (op_id, unit), (start, end, count, moved) in sorted(spans.items(), key=lambda item: (item[1][0], item[0])):
            start_ns, end_ns = ns_of(start), ns_of(end)
            lanes_of_unit = free_at.setdefault(unit, [])
            lane = next((k for k, free in enumerate(lanes_of_unit) if free <= start_ns), len(lanes_of_unit))
            if lane == len(lanes_of_unit):
                lanes_of_unit.append(0)
            lanes_of_unit[lane] = end_ns
            placed.append((op_id, unit, lane, start_ns, end_ns, count, moved))
        units_used = sorted(free_at, key=names.__getitem__)
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
            "ops": [{"id": i, "name": op.name, "die": op.die, "args": jsonable(op.args)} for i, op in enumerate(recorder.ops)],
            "config_spec": self.record.spec.model_dump(mode="json"),
        }
        if not self.selection.everything:
            data["trace_selection"] = {**self.selection.describe(), "events_written": self.written}
        data.update(jsonable(metadata))
        return data
