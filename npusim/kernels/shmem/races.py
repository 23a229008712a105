"""Data races between shmem tile ops: a read (shmem_load, shmem_get) and a write (shmem_put,
shmem_store, shmem_clear_data) of overlapping bytes of one PE's shmem data, neither ordered
before the other.

Happens-before: tile op a is ordered before tile op b when a chain of dependencies leads from a
to b. The links are the pred tokens (b's tile op waited for a's) and signal -> wait: a wait whose
slot matches is ordered after every signal store that landed in the slot since it was last
cleared. A barrier is a signal to all PEs and a wait, so it orders too; program order alone does
not (PyPTO ops run when their preds allow, in any order).

Each tile op of a launch is one bit of a Python int; its clock is the OR of its predecessors'
clocks (a wait adds its slot's) and its own bit, fixed when it starts. Two accesses race when
neither's bit is in the other's clock. A race is reported once both tile ops have ended, naming both
sides (with the program line of each, when the frontend gives it); the caller decides whether that
is a warning or an error, and is told which side started last (the access that races).
"""

from __future__ import annotations

import bisect
import operator
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from npusim.callsite import Callsite

READ, WRITE = "read", "write"


class ShmemRaceWarning(UserWarning):
    """A data race between shmem tile ops (``npusim.launch(..., races='error')`` raises instead)."""


class Named(Protocol):
    """What names a tile op when formatted (``str()``): a string, or the tile op's task itself."""

    def __str__(self) -> str: ...


@dataclass(eq=False)
class Access:
    """One tile op's read or write of byte ranges ``[start, end)`` of one memory (``memory`` is a
    key, ``memory_label`` names it in reports). ``who`` names the tile op (PE, op, tile) when
    formatted: its task, formatted only in the report of a race (a run records an access per tile op
    and shmem view it reads or writes, and races rarely); ``source`` is the line of the user's
    program its op came from (None: not known); times in ps."""

    kind: str
    who: Named
    memory: tuple[int, int]
    memory_label: str
    intervals: list[tuple[int, int]]
    bit: int  # the position of its tile op's bit
    clock: int  # its tile op's happens-before clock: the bits of the tile ops ordered before it, and its own
    start_ps: int
    end_ps: int | None = None
    source: Callsite | None = None
    pending: list[Access] = field(default_factory=list)  # conflicting accesses to report once both ended
    pending_in: list[Access] = field(default_factory=list)  # the later accesses that hold this one in their pending
    bounds: tuple[int, int] = field(init=False, repr=False)  # the first and the end byte of the intervals ((0, 0): none)

    def __post_init__(self) -> None:
        intervals = self.intervals
        self.bounds = (min(intervals)[0], max(map(_end_byte, intervals))) if intervals else (0, 0)  # the least start is the least pair's

    def overlap(self, other: Access) -> tuple[int, int] | None:
        """The first overlapping byte range of the two accesses, if any."""
        (lo, hi), (other_lo, other_hi) = self.bounds, other.bounds
        if hi <= other_lo or other_hi <= lo:
            return None
        for a, b in self.intervals:
            for c, d in other.intervals:
                if a < d and c < b:
                    return max(a, c), min(b, d)
        return None

    def named(self) -> str:
        """Who made the access (:attr:`who`) and at which line of the user's program."""
        return f"{self.who} at {self.source}" if self.source is not None else str(self.who)

    def times(self) -> str:
        end = f"{self.end_ps / 1e6:.3f}" if self.end_ps is not None else "?"
        return f"{self.start_ps / 1e6:.3f}-{end} us"


def describe(reader: Access, writer: Access, overlap: tuple[int, int]) -> str:
    """The report of a race, naming both sides."""
    return (
        f"data race on {reader.memory_label}, bytes {overlap[0]}..{overlap[1]}: {reader.named()} reads them "
        f"({reader.times()}) while {writer.named()} writes them ({writer.times()}), and neither is ordered before "
        "the other; order them with shmem_signal -> shmem_wait_until -> pred (or a shmem_barrier_all)"
    )


class RaceDetector:
    """Checks each new access against the accesses of the other kind to the same memory (kept per
    memory and kind, in the order they started)."""

    def __init__(self, emit: Callable[[str, Access, Access, Access], None]) -> None:
        self.emit = emit
        self._accesses: dict[tuple[tuple[int, int], str], _Started] = {}  # (memory, kind) -> its accesses so far
        self._started = 0  # accesses recorded: the order they started in
        self.reports: list[str] = []

    def record(self, access: Access) -> None:
        """A tile op starts ``access``: find the earlier accesses it races with."""
        lo, hi = access.bounds
        bit, clock = access.bit, access.clock
        others = self._accesses.get((access.memory, WRITE if access.kind == READ else READ))
        for _, _, other_bit, other_clock, other in (others.meeting(lo, hi) if others is not None else ()):
            if other_bit == bit or clock >> other_bit & 1 or other_clock >> bit & 1:
                continue  # the same tile op, or one happens before the other (its bit in the other's clock)
            if other.overlap(access) is not None:
                access.pending.append(other)
                other.pending_in.append(access)
        mine = self._accesses.get((access.memory, access.kind))
        if mine is None:
            mine = self._accesses[(access.memory, access.kind)] = _Started()
        mine.add(self._started, lo, hi, bit, clock, access)
        self._started += 1

    def ended(self, access: Access, time_ps: int) -> None:
        """The tile op of ``access`` has ended: report its races whose other side has ended too."""
        access.end_ps = time_ps
        for other in access.pending_in:  # the later accesses racing with it, in the order they started
            if access in other.pending and other.end_ps is not None:
                other.pending.remove(access)
                self._report(other, access)
        still = []
        for other in access.pending:
            if other.end_ps is not None:
                self._report(access, other)
            else:
                still.append(other)
        access.pending = still

    def _report(self, a: Access, b: Access) -> None:
        """``a`` started after ``b``: it is the access that races (``emit``'s last argument)."""
        reader, writer = (a, b) if a.kind == READ else (b, a)
        overlap = reader.overlap(writer)
        assert overlap is not None  # paired by record() only where they overlap
        message = describe(reader, writer, overlap)
        self.reports.append(message)
        self.emit(message, reader, writer, a)


class _Started:
    """The accesses of one kind to one memory so far, sorted by their first byte (``firsts``), each
    ``(order started, end byte, bit, clock, access)``: an access finds those whose bounds meet its
    own without scanning the others (tile ops of one memory mostly touch boxes apart)."""

    __slots__ = ("firsts", "entries", "widest")

    def __init__(self) -> None:
        self.firsts: list[int] = []
        self.entries: list[tuple[int, int, int, int, Access]] = []
        self.widest = 0  # the largest end - first byte of an entry

    def add(self, order: int, lo: int, hi: int, bit: int, clock: int, access: Access) -> None:
        at = bisect.bisect_right(self.firsts, lo)
        self.firsts.insert(at, lo)
        self.entries.insert(at, (order, hi, bit, clock, access))
        self.widest = max(self.widest, hi - lo)

    def meeting(self, lo: int, hi: int) -> list[tuple[int, int, int, int, Access]]:
        """The entries whose bounds share a byte with ``[lo, hi)``, in the order they started: a
        first byte below ``hi`` and an end above ``lo`` (so a first byte above ``lo - widest``)."""
        first, last = bisect.bisect_right(self.firsts, lo - self.widest), bisect.bisect_left(self.firsts, hi)
        meeting = [entry for entry in self.entries[first:last] if entry[1] > lo]
        meeting.sort(key=_start_order)
        return meeting


_start_order = operator.itemgetter(0)  # an entry's order of start
_end_byte = operator.itemgetter(1)  # a byte range's end
