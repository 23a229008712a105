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

Cost: an access is a few numpy operations on the line stamps of one allocation (a slice for a
contiguous copy, a strided view for a copy whose rows start on lines, an index array otherwise),
whatever its size; a line's stamp is the access tick that last touched it. Stamps are kept per
allocation, only as far as the highest line touched, so untouched GM costs nothing. The module is
compiled with the engine (setup.py): the Python around the numpy operations runs as C.

Counters (:class:`L2Tally`) are in lines, as msprof counts L2 requests; reads and writes apart.
"""

from __future__ import annotations

import importlib
from array import array
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, cast

import numpy as np
from numpy.lib.stride_tricks import as_strided

from npusim.engine.loop import clock


def _whole_count_nonzero() -> Callable[[np.ndarray], Any]:
    """The C function np.count_nonzero calls for a whole array (numpy 2), without its Python-level
    dispatch (called per access); np.count_nonzero itself on numpy 1.x. Either returns a numpy
    integer (whatever the stubs say: the compiled module checks an int)."""
    try:
        multiarray = importlib.import_module("numpy._core.multiarray")
    except ImportError:  # pragma: no cover - numpy 1.x
        return np.count_nonzero
    return cast(Callable[[np.ndarray], Any], multiarray.count_nonzero)


_count_nonzero = _whole_count_nonzero()

if TYPE_CHECKING:
    from npusim.engine.flow import FlowNetwork, Resource
    from npusim.hw.memory import Allocation

_STAMP = np.int32
_STAMP_BYTES = np.dtype(_STAMP).itemsize
HIT_RATE_BIN_PS = 1_000_000
"""The step of the trace's L2 hit-rate counter: the accesses of each microsecond of the run."""
_FIRST_LINES = 64  # lines an allocation's arrays hold at first; doubled as its higher lines are touched


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


class _Lines:
    """The stamps of one allocation's lines (0: not resident; else the tick of the access that last
    touched it), their dirty bits, when each one's last fetch from HBM arrives and, for a warm
    start, whether each was touched yet in the run; from its first line up to the highest touched
    so far."""

    __slots__ = ("index", "first", "count", "stamps", "dirty", "filled", "fetched_until", "seen")

    def __init__(self, index: int, allocation: Allocation, line: int, warm: bool) -> None:
        self.index = index  # its place in its cache's line sets (an access's entry names it by that)
        self.first = allocation.address // line  # the line of the allocation's first byte
        self.count = (allocation.address + allocation.size_bytes - 1) // line - self.first + 1  # its lines in all
        size = min(self.count, _FIRST_LINES)
        self.stamps = np.zeros(size, dtype=_STAMP)
        self.dirty = np.zeros(size, dtype=bool)
        self.filled = np.zeros(size, dtype=np.int64)  # when its last fetch from HBM reaches the L2 (ps)
        self.fetched_until = 0  # the latest of them: an access after it finds no line still being fetched
        self.seen = np.zeros(size, dtype=bool) if warm else None

    def reach(self, end: int) -> None:
        """Hold the lines ``0 .. end - 1`` at least (doubling, up to all the allocation's)."""
        size = len(self.stamps)
        if end > size:
            grown = min(self.count, max(end, 2 * size))
            self.stamps = np.concatenate((self.stamps, np.zeros(grown - size, dtype=_STAMP)))
            self.dirty = np.concatenate((self.dirty, np.zeros(grown - size, dtype=bool)))
            self.filled = np.concatenate((self.filled, np.zeros(grown - size, dtype=np.int64)))
            if self.seen is not None:
                self.seen = np.concatenate((self.seen, np.zeros(grown - size, dtype=bool)))


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
        self._lines: dict[Allocation, _Lines] = {}
        self._line_sets: list[_Lines] = []  # the values of _lines, by their index
        # per access, oldest first: (tick, index of its lines, kind, where) (see _view); ints, an int
        # tuple or an index array, so that CPython's collector stops tracking the entries (it
        # untracks a tuple of untracked values) instead of walking them again each collection. Kept
        # only from the first eviction on (_evicting; see _entries_from_stamps): until then, what
        # eviction needs of them is in the stamps (an L2 that never fills keeps none)
        self._entries: deque[tuple] = deque()
        self._evicting = False
        self.tally = L2Tally()
        # for the trace's hit-rate counter, per HIT_RATE_BIN_PS of the run in which accesses reached
        # the L2 (a run of accesses in one bin at a time, so a bin may come back): its start (ps),
        # its lines that hit (float) and its lines; the bin being summed is apart until it changes
        self._log_ps = array("q")
        self._log_hit = array("d")
        self._log_lines = array("q")
        self._bin, self._bin_hit, self._bin_lines = -1, 0.0, 0

    def access(self, allocation: Allocation, offset: int, length: int, stride: int, count: int, write: bool, at_ps: int,
               tally: L2Tally | None, requested: int) -> tuple[float, int, int]:
        """Look up ``count`` runs of ``length`` bytes, ``stride`` apart, from byte ``offset`` of
        ``allocation`` (a write with ``write``), reaching the L2 at ``at_ps``, for an accessor whose
        counters are ``tally`` (besides the die's); ``requested``: the bytes the request moves.
        Returns its lines that hit (a float: a warm start's first accesses hit in part), its lines,
        and when the last of the lines that hit is in L2 (ps: a line an earlier miss is still
        fetching hits once it has arrived; 0 when none hit). Misses of a read start the fill of the
        rest of their lines on the HBM; evictions, the write-back of dirty lines."""
        lines = self._lines.get(allocation)
        if lines is None:
            lines = self._lines[allocation] = _Lines(len(self._line_sets), allocation, self.line, bool(self.initial_hit_rate))
            self._line_sets.append(lines)
        address = allocation.address + offset
        where: Any  # by kind (see _view): (first, end), (first, rows, width, step) or an index array
        if count == 1 or stride == length:  # one run of lines (most copies): a slice, without _view's call
            line, base = self.line, lines.first
            first = address // line - base
            end = (address + stride * (count - 1) + length - 1) // line - base + 1
            if end > len(lines.stamps):
                lines.reach(end)
            kind, where, view = 0, (first, end), lines.stamps[first:end]
        else:
            kind, where, view = self._view(lines, address, length, stride, count)
        total = view.size
        self.tick = tick = self.tick + 1
        resident = int(_count_nonzero(view))
        hit = float(resident)
        arrived = 0
        fetched = at_ps + self.fetch_ps
        pending = at_ps < lines.fetched_until  # a line of this allocation may still be on its way from HBM
        if kind == 2:  # an index array: view is a copy
            if not write:
                if resident and pending:
                    arrived = int(lines.filled[where[view != 0]].max())
                if resident < total:
                    lines.filled[where[view == 0]] = fetched
                    if fetched > lines.fetched_until:
                        lines.fetched_until = fetched
            if lines.seen is not None:
                hit += self.initial_hit_rate * (total - int(_count_nonzero(lines.seen[where])))
                lines.seen[where] = True
            lines.stamps[where] = tick
            if write:
                lines.dirty[where] = True
        else:
            if not write and (resident < total or pending):
                filled = lines.filled[where[0]:where[1]] if kind == 0 else self._lines_view(lines.filled, kind, where)
                if not resident:
                    filled.fill(fetched)
                elif resident == total:
                    arrived = int(filled.max())
                else:
                    missed = view == 0
                    if pending:
                        arrived = int(filled[~missed].max())
                    filled[missed] = fetched
                if resident < total and fetched > lines.fetched_until:
                    lines.fetched_until = fetched
            if lines.seen is not None:
                seen = self._lines_view(lines.seen, kind, where)
                hit += self.initial_hit_rate * (total - int(_count_nonzero(seen)))
                seen.fill(True)
            view.fill(tick)
            if write:
                (lines.dirty[where[0]:where[1]] if kind == 0 else self._lines_view(lines.dirty, kind, where)).fill(True)
        if self._evicting:
            self._entries.append((tick, lines.index, kind, where))
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
                self._log_ps.append(self._bin * HIT_RATE_BIN_PS)
                self._log_hit.append(self._bin_hit)
                self._log_lines.append(self._bin_lines)
            self._bin, self._bin_hit, self._bin_lines = at_bin, hit, lines
        else:
            self._bin_hit += hit
            self._bin_lines += lines

    def hit_log(self) -> tuple[array[int], array[float], array[int]]:
        """The hit-rate log: per bin of accesses, its start (ps, a bin may appear more than once),
        the lines that hit and the lines (the bin being summed included)."""
        times, hits, lines = array("q", self._log_ps), array("d", self._log_hit), array("q", self._log_lines)
        if self._bin_lines:
            times.append(self._bin * HIT_RATE_BIN_PS)
            hits.append(self._bin_hit)
            lines.append(self._bin_lines)
        return times, hits, lines

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

    def _view(self, lines: _Lines, address: int, length: int, stride: int, count: int) -> tuple[int, Any, np.ndarray]:
        """The stamps of the lines an access touches: (0, (first, end), a slice) for one run of
        lines; (1, (first, rows, width, step), a strided view) for rows of the same lines each
        starting ``step`` lines apart; (2, index array, a copy) otherwise."""
        line, base = self.line, lines.first
        if count == 1 or stride == length:
            first = address // line - base
            end = (address + stride * (count - 1) + length - 1) // line - base + 1
            lines.reach(end)
            return 0, (first, end), lines.stamps[first:end]
        first = address // line - base
        width = (address + length - 1) // line - base + 1 - first
        if stride % line == 0 and width * line <= stride:  # every row's lines lie alike: a grid
            step = stride // line
            lines.reach(first + step * (count - 1) + width)
            where = (first, count, width, step)
            return 1, where, as_strided(lines.stamps[first:], shape=(count, width), strides=(step * _STAMP_BYTES, _STAMP_BYTES))
        starts = address + stride * np.arange(count, dtype=np.int64)
        low, high = starts // line - base, (starts + length - 1) // line - base
        span = int((high - low).max()) + 1
        index = (low[:, None] + np.arange(span, dtype=np.int64)).ravel()
        if span > 1:
            index = index[index <= np.repeat(high, span)]
        index = np.unique(index)
        lines.reach(int(index[-1]) + 1)
        return 2, index, lines.stamps[index]

    @staticmethod
    def _lines_view(values: np.ndarray, kind: int, where) -> np.ndarray:
        """An entry's lines in one of an allocation's arrays of a value per line (dirty, filled,
        seen): a view, kinds 0 and 1 of :meth:`_view`."""
        if kind == 0:
            return values[where[0]:where[1]]
        first, rows, width, step = where
        size = values.itemsize
        return as_strided(values[first:], shape=(rows, width), strides=(step * size, size))

    def _entries_from_stamps(self) -> None:
        """The entries of the accesses whose lines are still resident, oldest first, from the
        stamps, as the first eviction needs them: a line's stamp is the tick of the access that
        last touched it, so the lines stamped with one tick are what eviction would drop of that
        access's entry (an entry whose lines were all touched again since drops nothing)."""
        found = []
        for lines in self._line_sets:
            held = np.flatnonzero(lines.stamps)
            if len(held):
                found.append((lines.stamps[held], np.full(len(held), lines.index), held))
        if not found:
            return
        ticks, sets, where = (np.concatenate(column) for column in zip(*found, strict=True))
        order = np.argsort(ticks, kind="stable")
        ticks, sets, where = ticks[order], sets[order], where[order]
        starts = np.flatnonzero(np.diff(ticks, prepend=-1))
        for begin, end in zip(starts.tolist(), [*starts[1:].tolist(), len(ticks)], strict=True):
            self._entries.append((int(ticks[begin]), int(sets[begin]), 2, where[begin:end]))

    def _evict(self, at_ps: int, tally: L2Tally | None) -> None:
        """Drop the oldest entries' lines until at most ``capacity`` are resident; write the dirty
        ones back to HBM (one flow)."""
        if not self._evicting:
            self._entries_from_stamps()
            self._evicting = True
        entries, line_sets, dirty_lines = self._entries, self._line_sets, 0
        while self.resident > self.capacity and entries:
            tick, index, kind, where = entries.popleft()
            lines = line_sets[index]
            if kind == 2:
                mine = where[lines.stamps[where] == tick]
                if not len(mine):
                    continue
                dirty_lines += int(_count_nonzero(lines.dirty[mine]))
                lines.stamps[mine] = 0
                lines.dirty[mine] = False
                self.resident -= len(mine)
                continue
            stamps = self._lines_view(lines.stamps, kind, where)
            mine = stamps == tick
            dropped = int(_count_nonzero(mine))
            if not dropped:
                continue
            dirty = self._lines_view(lines.dirty, kind, where)
            dirty_lines += int(_count_nonzero(dirty[mine]))
            stamps[mine] = 0
            dirty[mine] = False
            self.resident -= dropped
        if dirty_lines:
            self.tally.written_back += dirty_lines
            if tally is not None:
                tally.written_back += dirty_lines
            self.network.start(self.to_hbm, dirty_lines * self.line, at_ps - clock(self.network.env))
