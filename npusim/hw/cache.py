"""A die's L2: a write-back cache of its HBM, shared by everything that reads or writes the die's
memory (its own cores, other dies' cores and SDMA engines through the fabric, RDMA).

What it models (docs/architecture.md, "The memory model", says what this approximates):

- **Lines.** The cache holds lines of ``die.l2.line`` bytes (512 B on A2/A3) of the die's GM; an
  access touches every line that holds one of its bytes (a strided copy, each burst's lines).
- **Reads.** The lines of a read that are resident hit; the others miss: the L2 fetches them whole
  from HBM. A line an earlier miss is still fetching hits (the HBM carries it once), from when the
  fetch reaches the L2 (``die.hbm.latency`` after the miss). A request's bytes are split into its hit and miss parts in proportion to its lines
  (:meth:`L2Cache.access`); the caller streams the two parts as two flows (hits across the L2, misses
  across the L2 and the HBM) and starts the rest of the missed lines (the bytes of them the request
  did not ask for) as a fill flow on the HBM.
- **Writes** allocate their lines dirty, without fetching them (a write hits or misses only for the
  counters; it crosses the L2, never the HBM).
- **Eviction.** At most ``die.l2.size`` bytes of lines are resident. When an access makes more,
  the least recently used lines go first: each access is one entry of a queue in access order, and
  eviction pops the oldest entries, dropping the lines whose last access was that entry (a line
  touched again since belongs to its later entry). Whole entries are dropped, so up to one
  access's lines more than needed may go. Dirty lines evicted are written back: a flow of their bytes
  on the HBM, started when the access that evicted them reaches the L2.
- **Warm start.** ``die.l2.initial_hit_rate`` is the hit rate of the first access to a line in the
  run (0: a cold L2, the default, as measurements flush it).

Cost: an allocation's lines are kept as runs of consecutive lines in the same state (an interval
map: the access that last touched them, dirty, when their last fetch arrives, touched yet), split
where a later access begins or ends inside one and merged again when neighbours come to agree (an
eviction dropping lines beside lines not resident). An access costs a binary search plus its ranges
and the runs they overlap (a strided copy: its rows, adjacent rows as one range), whatever its size;
memory follows the runs, not the bytes, so untouched GM and a large copy touched whole cost a run.
A run is one small object (:class:`_Run`: its lines, stamp, flags and fetch time), an allocation's
runs one list of them in line order: a split is one new object and one insert, a merge one delete.
The module is compiled with the engine (setup.py): there a run's ints are fields of a C struct
(no Python int per number) and the garbage collector never tracks a run.

Counters (:class:`L2Tally`) are in lines, as msprof counts L2 requests; reads and writes apart.
"""

from __future__ import annotations

import struct
from array import array
from typing import TYPE_CHECKING, Final, final

from mypy_extensions import mypyc_attr

from npusim.engine.loop import clock

if TYPE_CHECKING:
    from npusim.engine.flow import FlowNetwork, Resource
    from npusim.hw.memory import Allocation

HIT_RATE_BIN_PS: Final = 1_000_000
"""The step of the trace's L2 hit-rate counter: the accesses of each microsecond of the run."""
_BIN_RECORD: Final = struct.Struct("qdq")
"""A bin of the hit-rate log as :class:`L2Cache` keeps it: its start (ps), its lines that hit, its lines."""
DIRTY: Final = 1
"""A run's flag: its lines are dirty (written since fetched or allocated)."""
SEEN: Final = 2
"""A run's flag, kept for a warm start only: its lines were touched earlier in the run."""
HEAD: Final = 3
"""An access's entry (:meth:`L2Cache._entry`) is its tick, the index of its allocation's lines, the
number n of bounds of its ranges, then those n: its bounds start at this position."""


class L2Tally:
    """L2 lines looked up by one accessor (an op's cores of one kind, an SDMA, a die in all):
    reads that hit and missed, writes that hit and missed (floats: a warm start's first accesses hit
    in part), and lines written back to HBM."""

    __slots__ = ("read_hit", "read_miss", "write_hit", "write_miss", "written_back")

    def __init__(self) -> None:
        self.read_hit = 0.0
        self.read_miss = 0.0
        self.write_hit = 0.0
        self.write_miss = 0.0
        self.written_back = 0

    def as_list(self) -> list[float]:
        """``[read_hit, read_miss, write_hit, write_miss, written_back]``."""
        return [self.read_hit, self.read_miss, self.write_hit, self.write_miss, float(self.written_back)]


@final
@mypyc_attr(acyclic=True)  # compiled: an object the cyclic garbage collector never tracks (it holds ints only)
class _Run:
    """Lines ``start`` up to ``end`` of an allocation, in one state: ``stamp`` (0: not resident;
    else the tick of the access that last touched them), ``flags`` (:data:`DIRTY`, :data:`SEEN`)
    and ``filled``, when their last fetch from HBM reaches the L2 (ps). One object a run: a split
    is one object and one list insert, a merge one delete, and compiled its ints are fields of the
    object, not Python ints."""

    __slots__ = ("start", "end", "stamp", "flags", "filled")

    def __init__(self, start: int, end: int, stamp: int, flags: int, filled: int) -> None:
        self.start = start
        self.end = end
        self.stamp = stamp
        self.flags = flags
        self.filled = filled


class _Runs:
    """The state of one allocation's lines (counted from the line of its first byte), as runs of
    consecutive lines in the same state (:class:`_Run`), in line order in ``runs``: the first
    starts at line 0, each ends where the next starts, the last at ``count``. A fetch time no
    later than the clock when it was last written is kept as 0: every access to come reaches the
    L2 at the clock or later, so it finds such a line arrived either way (that lets runs of old
    fetches merge). Neighbouring runs differ in state."""

    __slots__ = ("index", "first", "count", "runs", "fetched_until", "hint")

    def __init__(self, index: int, allocation: Allocation, line: int) -> None:
        self.index = index  # its place in its cache's line sets (an access's entry names it by that)
        self.first = allocation.address // line  # the line of the allocation's first byte
        self.count = (allocation.address + allocation.size_bytes - 1) // line - self.first + 1  # its lines in all
        self.runs = [_Run(0, self.count, 0, 0, 0)]
        self.fetched_until = 0  # the latest fetch (ps): an access after it finds no line still being fetched
        self.hint = 0  # the run the last access ended in (copies often go on where the last one ended)

    def find(self, line: int, run: int) -> int:
        """The run that holds ``line``, searched from run ``run`` on (which starts at or before it)."""
        runs = self.runs
        high = len(runs)
        while high - run > 1:  # runs[run].start <= line < runs[high].start (high == len(runs): the allocation's end)
            middle = (run + high) // 2
            if runs[middle].start <= line:
                run = middle
            else:
                high = middle
        return run

    def locate(self, line: int) -> int:
        """The run that holds ``line``: the run the last access ended in or the next one, if so;
        else :meth:`find`'s."""
        runs, hint = self.runs, self.hint
        if hint < len(runs):
            held = runs[hint]
            if held.start <= line:
                if line < held.end:
                    return hint
                if line < runs[hint + 1].end:  # a run follows: line is below the last one's end, the count
                    return hint + 1
                return self.find(line, hint + 2)
        return self.find(line, 0)

    def touch(self, entry: list[int], tick: int, write: bool, flags_set: int, fetched: int, floor: int) -> tuple[int, int, int, int]:
        """Stamp the lines of the ranges of access ``entry`` (from :data:`HEAD` on: first line, end
        line, first, end, ...: ascending, with a line or more between two) with ``tick``, add
        ``flags_set`` to their flags and, for a read (not ``write``), make those not resident arrive
        at ``fetched`` (ps); keep fetch times no later than ``floor`` (the clock, ps) as 0. Returns
        their lines, how many of them were resident, how many were not :data:`SEEN`, and the latest
        fetch time among the resident ones (ps, 0 when none). The ranges are touched one by one
        (:meth:`touch_range`): the lines between two keep their state, so two ranges' runs never
        merge."""
        if len(entry) == HEAD + 2:
            return self.touch_range(entry[HEAD], entry[HEAD + 1], tick, write, flags_set, fetched, floor)
        total = resident = unseen = latest = 0
        for k in range(HEAD, len(entry), 2):
            lines, held, new, last = self.touch_range(entry[k], entry[k + 1], tick, write, flags_set, fetched, floor)
            total += lines
            resident += held
            unseen += new
            if last > latest:
                latest = last
        return total, resident, unseen, latest

    def touch_range(self, low: int, high: int, tick: int, write: bool, flags_set: int, fetched: int, floor: int) -> tuple[int, int, int, int]:
        """:meth:`touch` for the one range of lines ``low`` up to ``high``, in place: the runs it
        begins or ends inside split there, the runs inside it rewritten and merged where equal."""
        if low >= high:
            return 0, 0, 0, 0
        runs = self.runs
        index = self.locate(low)
        run = runs[index]
        if run.start < low:  # split the run the range begins inside
            before = run
            run = _Run(low, before.end, before.stamp, before.flags, before.filled)
            before.end = low
            index += 1
            runs.insert(index, run)
        total = resident = unseen = latest = 0
        first = kept = index  # the runs of the range as rewritten: first up to kept (excluded)
        last = run  # the last of them (once kept > first)
        while True:
            end = run.end
            if end > high:  # split the run the range ends inside
                runs.insert(index + 1, _Run(high, end, run.stamp, run.flags, run.filled))
                run.end = end = high
            lines = end - run.start
            total += lines
            fill = run.filled
            if run.stamp:
                resident += lines
                if fill > latest:
                    latest = fill
            elif not write:
                fill = fetched
            if fill <= floor:
                fill = 0
            flag = run.flags
            if not flag & SEEN:
                unseen += lines
            flag |= flags_set
            if kept > first and last.flags == flag and last.filled == fill:  # last is stamped tick: merge the run into it
                last.end = end
            else:
                run.stamp = tick
                run.flags = flag
                run.filled = fill
                if kept < index:
                    runs[kept] = run
                last = run
                kept += 1
            index += 1
            if end == high:
                break
            run = runs[index]
        if kept < index:
            del runs[kept:index]
        self.hint = kept - 1
        return total, resident, unseen, latest

    def drop(self, bounds: list[int], begin: int, end: int, tick: int, floor: int) -> tuple[int, int]:
        """Evict the lines of the ranges ``bounds[begin:end]`` (first line, end line, ...:
        ascending) still stamped ``tick``: no longer resident nor dirty, merged with their
        neighbours where equal; fetch times no later than ``floor`` (the clock, ps) become 0.
        Returns the lines dropped and how many of them were dirty."""
        runs = self.runs
        count = len(runs)
        mine: list[int] = []  # the runs stamped tick, ascending
        index = 0
        for k in range(begin, end, 2):
            high = bounds[k + 1]
            index = self.find(bounds[k], index)
            later = index
            while later < count:
                run = runs[later]
                if run.start >= high:
                    break
                if run.stamp == tick and not (mine and mine[-1] == later):
                    mine.append(later)
                later += 1
        if not mine:
            return 0, 0
        dropped = dirty = 0
        for index in mine:
            run = runs[index]
            lines = run.end - run.start
            dropped += lines
            if run.flags & DIRTY:
                dirty += lines
                run.flags &= ~DIRTY
            run.stamp = 0
            if run.filled <= floor:
                run.filled = 0
        if len(mine) == 1:  # merge it with its neighbours in place
            index = mine[0]
            for gone in (index + 1, index):
                if 0 < gone < len(runs):
                    before, run = runs[gone - 1], runs[gone]
                    if before.stamp == run.stamp and before.flags == run.flags and before.filled == run.filled:
                        before.end = run.end
                        del runs[gone]
            return dropped, dirty
        first = mine[0] - 1 if mine[0] else 0  # merge the runs from the one before the first to the one after the last
        end_run = mine[-1] + 2 if mine[-1] + 2 < count else count
        kept = first + 1  # the runs as merged: first up to kept (excluded)
        last = runs[first]
        for index in range(first + 1, end_run):
            run = runs[index]
            if last.stamp == run.stamp and last.flags == run.flags and last.filled == run.filled:
                last.end = run.end
            else:
                if kept < index:
                    runs[kept] = run
                last = run
                kept += 1
        if kept < end_run:
            del runs[kept:end_run]
        return dropped, dirty


class L2Cache:
    """The L2 of die ``die``: lines of ``line_bytes``, at most ``capacity_bytes`` of them resident,
    least recently used evicted first, dirty lines written back to ``hbm`` across ``network``, a
    miss's lines in L2 ``fetch_ps`` after it (see the module doc). ``tally`` counts every access of
    the die's memory."""

    def __init__(self, die: int, line_bytes: int, capacity_bytes: int, initial_hit_rate: float, network: FlowNetwork, hbm: Resource,
                 fetch_ps: int) -> None:
        self.die = die
        self.line = line_bytes
        self.fetch_ps = fetch_ps  # a fetch from HBM reaches the L2 this long after the miss (the HBM's latency)
        self.capacity = capacity_bytes // line_bytes  # lines
        self.initial_hit_rate = initial_hit_rate
        self.network = network
        self.to_hbm = network.flow_class((hbm,))  # fills and write-backs: the L2's own traffic to and from HBM, no engine caps it
        self.resident = 0  # lines resident now
        self.tick = 0  # accesses so far (a line's stamp is the tick of its last access, from 1)
        self._lines: dict[Allocation, _Runs] = {}
        self._line_sets: list[_Runs] = []  # the values of _lines, by their index
        # the queue of the accesses' entries (HEAD), oldest first from _head on, in one list (no
        # object per entry: an entry's numbers are the ints its access made, nothing for CPython's
        # collector to untrack). Kept only
        # from the first eviction on (_evicting; see _entries_from_stamps): until then, what
        # eviction needs of them is in the runs (an L2 that never fills keeps none)
        self._entries: list[int] = []
        self._head = 0
        self._evicting = False
        self.tally = L2Tally()
        # for the trace's hit-rate counter, per HIT_RATE_BIN_PS of the run in which accesses reached
        # the L2 (a run of accesses in one bin at a time, so a bin may come back): its start (ps),
        # its lines that hit and its lines, one record of _BIN_RECORD a bin, packed into one
        # bytearray (24 bytes a bin, no Python object); the bin being summed is apart until it changes
        self._log = bytearray()
        self._bin, self._bin_hit, self._bin_lines = -1, 0.0, 0

    def access(self, allocation: Allocation, offset: int, length: int, stride: int, count: int, write: bool, at_ps: int,
               tally: L2Tally | None, requested: int) -> tuple[float, int, int]:
        """Look up ``count`` runs of ``length`` bytes, ``stride`` apart, from byte ``offset`` of
        ``allocation`` (a write with ``write``), reaching the L2 at ``at_ps`` (the clock or later),
        for an accessor whose counters are ``tally`` (besides the die's); ``requested``: the bytes
        the request moves. Returns its lines that hit (a float: a warm start's first accesses hit
        in part), its lines, and when the last of the lines that hit is in L2 (ps: a line an earlier
        miss is still fetching hits once it has arrived; ``at_ps`` or earlier, 0 among them, when
        none is on its way). Misses of a read start the fill of the rest of their lines on the HBM;
        evictions, the write-back of dirty lines."""
        lines = self._lines.get(allocation)
        if lines is None:
            lines = self._lines[allocation] = _Runs(len(self._line_sets), allocation, self.line)
            self._line_sets.append(lines)
        self.tick = tick = self.tick + 1
        entry = self._entry(tick, lines, allocation.address + offset, length, stride, count)
        fetched = at_ps + self.fetch_ps
        pending = at_ps < lines.fetched_until  # a line of this allocation may still be on its way from HBM
        warm = self.initial_hit_rate
        total, resident, unseen, latest = lines.touch(entry, tick, write, (DIRTY if write else 0) | (SEEN if warm else 0), fetched,
                                                      clock(self.network.env))
        hit = float(resident)
        if warm:
            hit += warm * unseen
        arrived = latest if pending and not write else 0
        if not write and resident < total and fetched > lines.fetched_until:
            lines.fetched_until = fetched
        if self._evicting:
            self._entries.extend(entry)
        self.resident += total - resident
        miss = total - hit
        die_tally = self.tally
        if write:
            die_tally.write_hit += hit
            die_tally.write_miss += miss
            if tally is not None:
                tally.write_hit += hit
                tally.write_miss += miss
        else:
            die_tally.read_hit += hit
            die_tally.read_miss += miss
            if tally is not None:
                tally.read_hit += hit
                tally.read_miss += miss
            if miss > 0:  # the bytes of the missed lines the request does not move come from HBM too
                fill = int(miss * self.line - requested * miss / total)
                if fill > 0:
                    self.network.start(self.to_hbm, fill, at_ps - clock(self.network.env))
        if at_ps // HIT_RATE_BIN_PS == self._bin:  # _count, inline for the usual case: the same microsecond as the last access
            self._bin_hit += hit
            self._bin_lines += total
        else:
            self._count(at_ps, hit, total)
        if self.resident > self.capacity:
            self._evict(at_ps, tally)
        return hit, total, arrived

    def _count(self, at_ps: int, hit: float, lines: int) -> None:
        """Add an access that reached the L2 at ``at_ps`` to the hit-rate log (its bin's sums)."""
        at_bin = at_ps // HIT_RATE_BIN_PS
        if at_bin != self._bin:
            if self._bin_lines:
                self._log += _BIN_RECORD.pack(self._bin * HIT_RATE_BIN_PS, self._bin_hit, self._bin_lines)
            self._bin, self._bin_hit, self._bin_lines = at_bin, hit, lines
        else:
            self._bin_hit += hit
            self._bin_lines += lines

    def hit_log(self) -> tuple[array[int], array[float], array[int]]:
        """The hit-rate log: per bin of accesses, its start (ps, a bin may appear more than once),
        the lines that hit and the lines (the bin being summed included)."""
        log = bytes(self._log)
        if self._bin_lines:
            log += _BIN_RECORD.pack(self._bin * HIT_RATE_BIN_PS, self._bin_hit, self._bin_lines)
        words, floats = memoryview(log).cast("q"), memoryview(log).cast("d")  # the records' fields, one word each
        return array("q", words[0::3].tobytes()), array("d", floats[1::3].tobytes()), array("q", words[2::3].tobytes())

    def unknown(self, length: int, write: bool, at_ps: int, tally: L2Tally | None) -> tuple[float, int, int]:
        """An access of ``length`` bytes at an address the model does not know (computed from scalar
        registers, which hold values only with data on): counted as misses (a write: allocating
        nothing), so that timing never depends on data. Returns (0 hit lines, its lines, 0)."""
        total = -(-length // self.line)
        for counters in (self.tally, tally) if tally is not None else (self.tally,):
            if write:
                counters.write_miss += total
            else:
                counters.read_miss += total
        self._count(at_ps, 0.0, total)
        return 0.0, total, 0

    def _entry(self, tick: int, lines: _Runs, address: int, length: int, stride: int, count: int) -> list[int]:
        """The entry of access ``tick`` (:data:`HEAD`) to ``lines``: the lines it touches, counted
        from the allocation's first, as :meth:`_Runs.touch` takes them: one range for a run of lines
        (one row, or rows end to end); else each row's lines, rows that overlap or meet as one range."""
        line, base = self.line, lines.first
        if count == 1 or stride == length:
            return [tick, lines.index, 2, address // line - base, (address + stride * (count - 1) + length - 1) // line - base + 1]
        if stride < 0:  # the rows from the lowest up
            address, stride = address + stride * (count - 1), -stride
        entry = [tick, lines.index, 0]
        for _ in range(count):
            low, high = address // line - base, (address + length - 1) // line - base + 1
            if len(entry) > HEAD and low <= entry[-1]:
                if high > entry[-1]:
                    entry[-1] = high
            else:
                entry.append(low)
                entry.append(high)
            address += stride
        entry[2] = len(entry) - HEAD
        return entry

    def _entries_from_stamps(self) -> None:
        """The entries of the accesses whose lines are still resident, oldest first, from the runs,
        as the first eviction needs them: a run's stamp is the tick of the access that last touched
        its lines, so the runs stamped with one tick are what eviction would drop of that access's
        entry (an entry whose lines were all touched again since drops nothing)."""
        found: list[tuple[int, int, int, int]] = []  # (tick, index of the lines, first line, end line) of each resident run
        for lines in self._line_sets:
            for run in lines.runs:
                if run.stamp:
                    found.append((run.stamp, lines.index, run.start, run.end))
        found.sort()
        entries = self._entries
        begin = 0  # the first run of the tick being queued
        for position, (tick, index, _, _) in enumerate(found):
            if position + 1 == len(found) or found[position + 1][0] != tick:
                entries.extend((tick, index, 2 * (position + 1 - begin)))
                for _, _, first, end in found[begin:position + 1]:
                    entries.extend((first, end))
                begin = position + 1

    def _evict(self, at_ps: int, tally: L2Tally | None) -> None:
        """Drop the oldest entries' lines until at most ``capacity`` are resident; write the dirty
        ones back to HBM (one flow)."""
        if not self._evicting:
            self._entries_from_stamps()
            self._evicting = True
        entries, head, line_sets, dirty_lines = self._entries, self._head, self._line_sets, 0
        floor = clock(self.network.env)
        while self.resident > self.capacity and head < len(entries):
            bounds = head + 3 + entries[head + 2]
            dropped, dirty = line_sets[entries[head + 1]].drop(entries, head + 3, bounds, entries[head], floor)
            head = bounds
            dirty_lines += dirty
            self.resident -= dropped
        if 2 * head > len(entries):  # the popped entries are most of the list: forget them
            del entries[:head]
            head = 0
        self._head = head
        if dirty_lines:
            self.tally.written_back += dirty_lines
            if tally is not None:
                tally.written_back += dirty_lines
            self.network.start(self.to_hbm, dirty_lines * self.line, at_ps - clock(self.network.env))
