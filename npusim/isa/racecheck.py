"""Pipe races of a kernel launch, found from its programs before they run, in the spirit of the
vendor's msSanitizer racecheck; reported, with both instructions' times, once both have run.

Within a core, two instructions on different pipes that touch overlapping bytes (an on-chip
buffer, or GM at an address known when the program is built), at least one of them writing, race
unless one happens before the other. Happens-before is what orders pipes on the chip (and in
:mod:`npusim.hw.core`):

- a pipe's instructions touch their bytes in program order, each after the previous one ended.
  On a pipe whose copy engine keeps several requests in flight (``queue_depth``), a copy is issued
  before the previous one has completed, but not its bytes: the copies of a queue stream one after
  another and complete (and land their bytes) in issue order, a ``set_flag`` is raised only once
  the copies before it have completed, and any other instruction of the pipe (a vector op on a
  pipe with an engine, a ``pipe_barrier`` of the pipe) waits for them; only a ``wait_flag``, which
  touches no byte, runs while they are in flight. So every edge below holds for accesses as before
  (``tests/hw/test_queue.py``: race-free programs give the same bytes at any depth);
- the scalar unit issues every instruction: nothing starts before the scalar instructions that
  precede it in program order have ended (``s_dep``);
- ``set_flag(src, dst, id)`` runs on ``src`` after its earlier work, and the ``wait_flag`` it
  releases on ``dst`` (flags pair first in, first out per ``(src, dst, id)``, in program order)
  holds ``dst`` until then;
- ``pipe_barrier(ALL)`` waits for every earlier instruction of every pipe (a barrier on one pipe
  orders only that pipe, which runs in order anyway).

The analysis walks each program once in an order that respects these edges, keeping a vector clock
per pipe (how many instructions of each pipe are known to have ended), and checks every access
against the last write and the reads since it of the same bytes (the FastTrack scheme, over byte
ranges): a read whose last write on another pipe is not before it (read after write), a write over
a read (write after read) or a write (write after write) of another pipe not before it. Across the
cores of one launch nothing orders two cores, so GM bytes one core writes and another reads or
writes race (atomic adds do not race with each other). Not checked: accesses of control data
(signals, which are polled by design), GM addresses computed from scalar registers, and ordering
between launches (streams and events order those).
"""

from __future__ import annotations

import bisect
import heapq
import warnings
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from npusim.errors import RaceError, UsageError
from npusim.hw.core import SET_FLAG, WAIT_FLAG
from npusim.hw.core import WAITING as _WAITING
from npusim.hw.memory import Allocation
from npusim.hw.pipes import PIPE_NAMES, Pipe
from npusim.isa.instructions import ATOMIC, READ, WRITE, Instruction, PipeBarrierAll, on_recorded

RACE_MODES = ("warn", "error", "off")
"""What a session does with a pipe race: a warning (and an instant in the trace), a RaceError, or
no check at all."""
REPORTED_PER_LAUNCH = 3
"""Races reported per launch; the last report counts the others."""
FOUND_PER_LAUNCH = 1000
"""Races looked for at most per core, and across the cores of a launch (a kernel without any flag races everywhere)."""
_PIPES = len(Pipe)
Found = tuple[int, Instruction, int, int, int]
"""An earlier access a new one races with: its pipe, instruction, kind, first byte and end byte."""
GmAccess = tuple[Allocation, int, int, int, int, int, "Side"]
"""A GM access of a core (:func:`core_races` collects them for :func:`cross_core_races`): its memory, kind, start, length, stride, count
and side."""


class PipeRaceWarning(UserWarning):
    """A race between two pipes of a core, or two cores of a launch (``races='error'`` raises a RaceError)."""


def check_mode(races: str) -> str:
    if races not in RACE_MODES:
        raise UsageError(f"races={races!r}: give one of {', '.join(RACE_MODES)} (warn: report each race as a warning; error: "
                         "end the run at the first; off: no check)")
    return races


class Side(NamedTuple):
    """One of the two instructions of a race: the core's name, its pipe, and the instruction."""

    core: str
    pipe: int
    instruction: Instruction


@dataclass(frozen=True)
class Race:
    """Two accesses of ``memory`` bytes ``[lo, hi)`` that nothing orders; ``first`` came first in the
    order the analysis walked, ``kind`` says what each did (``read after write`` ...)."""

    kind: str
    first: Side
    second: Side
    memory: Any
    lo: int
    hi: int


_KINDS = {(WRITE, READ): "read after write", (READ, WRITE): "write after read", (WRITE, WRITE): "write after write"}


class _Shadow:
    """What one memory's bytes last saw: segments ``[starts[i], starts[i + 1])``, each a list ``[last
    write, last reads]``: the write ``(pipe, position in its pipe, instruction)`` or None, the reads
    since it ``{pipe: (position, instruction)}`` (the last of each pipe) or None."""

    __slots__ = ("starts", "cells")

    def __init__(self) -> None:
        self.starts = [0]
        self.cells: list[list[Any]] = [[None, None]]

    def _split(self, at: int) -> int:
        starts = self.starts
        index = bisect.bisect_right(starts, at) - 1
        if starts[index] != at:
            index += 1
            starts.insert(index, at)
            write, reads = self.cells[index - 1]
            self.cells.insert(index, [write, None if reads is None else reads.copy()])
        return index

    def access(self, lo: int, hi: int, kind: int, write: tuple[int, int, Instruction], clock: list[int]) -> list[Found] | None:
        """Check the access ``kind`` of ``[lo, hi)`` (``write``: ``(pipe, position, instruction)``;
        ``clock``: what its pipe knows) against what the bytes saw, then record it. Returns the earlier
        accesses it races with, ``(pipe, instruction, kind, lo, hi)`` each, or None."""
        starts = self.starts
        first = bisect.bisect_right(starts, lo) - 1
        if starts[first] == lo and first + 1 < len(starts) and starts[first + 1] == hi:
            last = first + 1  # exactly one segment: the usual case (a tile accessed whole)
        else:
            first, last = self._split(lo), self._split(hi)
        cells = self.cells
        pipe = write[0]
        found = None
        for index in range(first, last):
            cell = cells[index]
            earlier, reads = cell
            if earlier is not None and earlier[0] != pipe and clock[earlier[0]] <= earlier[1]:
                found = found or []
                found.append((earlier[0], earlier[2], WRITE, starts[index], starts[index + 1]))
            if kind == READ:
                if reads is None:
                    cell[1] = {pipe: write[1:]}
                else:
                    reads[pipe] = write[1:]
            elif reads is not None:
                for other, (position, instruction) in reads.items():
                    if other != pipe and clock[other] <= position:
                        found = found or []
                        found.append((other, instruction, READ, starts[index], starts[index + 1]))
        if kind != READ:
            if last - first == 1:
                cells[first] = [write, None]
            else:
                starts[first:last] = [lo]
                cells[first:last] = [[write, None]]
        return found


def core_races(core: str, instructions: Sequence[Any], gm_accesses: list[GmAccess] | None = None, limit: int = FOUND_PER_LAUNCH) -> list[Race]:
    """The races between the pipes of one core's program (``instructions`` in program order, placed:
    ``s_dep`` set). ``gm_accesses`` (if given) collects ``(allocation, kind, start, length, stride,
    count, Side)`` for the check across cores."""
    footprints: dict[int, tuple[Any, ...]] = {}
    touched: dict[Any, list[int]] = {}  # memory -> [the pipes that touch it (bits), written?]
    shape: list[tuple[Any, ...]] = []  # what the walk depends on, GM offsets relative to each allocation's first
    gm_first: dict[Allocation, tuple[int, int]] = {}  # allocation -> (its number, the first offset of it seen)
    for instruction in instructions:
        step = instruction.step
        sync = instruction.key if step in (SET_FLAG, WAIT_FLAG) else tuple(instruction.targets) if isinstance(instruction, PipeBarrierAll) else None
        entries = instruction.footprint()
        if not entries:
            shape.append((instruction.pipe, step, instruction.s_dep, sync))
            continue
        if instruction.control:  # signals in GM are polled by design: not checked
            entries = tuple(entry for entry in entries if not isinstance(entry[0], Allocation))
        else:  # nor communication windows, read after peers' flags
            entries = tuple(entry for entry in entries if not (isinstance(entry[0], Allocation) and entry[0].window))
        footprints[id(instruction)] = entries
        pipe = int(instruction.pipe)
        relative = []
        for entry in entries:
            memory, kind = entry[0], entry[1]
            if isinstance(memory, Allocation):
                if gm_accesses is not None:
                    gm_accesses.append((*entry, Side(core, pipe, instruction)))
                number, first = gm_first.setdefault(memory, (len(gm_first), entry[2]))
                relative.append((number, kind, entry[2] - first, *entry[3:]))
            else:
                relative.append(entry)
            seen = touched.get(memory)
            if seen is None:
                touched[memory] = [1 << pipe, kind != READ]
            else:
                seen[0] |= 1 << pipe
                seen[1] = seen[1] or kind != READ
        shape.append((instruction.pipe, step, instruction.s_dep, sync, tuple(relative)))
    shadows = {memory: _Shadow() for memory, (pipes, written) in touched.items() if written and pipes & (pipes - 1)}  # two pipes or more, a write
    if not shadows:
        return []
    signature = tuple(shape)
    if signature in _RACE_FREE:
        return []  # the same walk as a program already found race-free (SPMD cores run one program on other bytes)
    walk = _Walk(core, footprints, shadows, limit)
    walk_step, races = walk.stepper(), walk.races
    waiting: list[deque[Any]] = [deque() for _ in range(_PIPES)]  # per pipe: instructions that cannot be walked yet, in order
    blocked = 0  # pipes with instructions waiting
    for instruction in instructions:
        queue = waiting[instruction.pipe]
        if queue or not walk_step(instruction):
            if not queue:
                blocked += 1
            queue.append(instruction)
            continue
        # what this instruction may have unblocked: a wait (a flag raised), the scalar unit's issue, a barrier
        if blocked and (instruction.step == SET_FLAG or instruction.pipe == _SCALAR or _barrier_waits(waiting[_SCALAR])):
            moved = True
            while moved:
                moved = False
                for queue in waiting:
                    while queue and walk_step(queue[0]):
                        queue.popleft()
                        moved = True
                        if not queue:
                            blocked -= 1
        if len(races) >= limit:
            break
    if not races and len(signature) <= RACE_FREE_KEPT:
        if sum(map(len, _RACE_FREE)) + len(signature) > RACE_FREE_KEPT:
            _RACE_FREE.clear()
        _RACE_FREE[signature] = None
    return races  # instructions left waiting would deadlock: the simulation reports that


RACE_FREE_KEPT = 100_000
"""Instructions of the signatures of race-free programs remembered (a program with the same
signature, the same instructions on the same pipes, flags and buffers with its GM bytes shifted, has
no race either: SPMD cores run one program on other bytes); a few MB."""
_RACE_FREE: dict[tuple[Any, ...], None] = {}


def _barrier_waits(scalar_queue: deque[Instruction]) -> bool:
    return bool(scalar_queue) and isinstance(scalar_queue[0], PipeBarrierAll)


class _Walk:
    """The walk of one program in an order that respects happens-before, closest to program order:
    vector clocks per pipe, and each access checked against the shadow of its memory."""

    def __init__(self, core: str, footprints: dict[int, tuple[Any, ...]], shadows: dict[Any, _Shadow], limit: int) -> None:
        self.core, self.footprints, self.shadows, self.limit = core, footprints, shadows, limit
        self.clocks = [[0] * _PIPES for _ in range(_PIPES)]
        self.merged = [0] * _PIPES  # the s_dep each pipe's clock includes
        self.after_scalar: list[tuple[int, ...]] = []  # the clock after each scalar instruction
        self.raised: dict[int, list[tuple[int, ...]]] = {}  # flag -> the clocks of its set_flags, in order
        self.taken: dict[int, int] = {}  # flag -> wait_flags that took one
        self.races: list[Race] = []
        self.reported: set[tuple[int, int]] = set()

    def stepper(self) -> Callable[[Any], bool]:
        """``step(instruction)``: walk ``instruction`` if everything it waits for has been walked
        (the earlier ones of its pipe have); False if not yet. (A closure over the walk's state: this
        runs once per instruction of every launch.)"""
        clocks, merged, after_scalar, raised, taken = self.clocks, self.merged, self.after_scalar, self.raised, self.taken
        footprints, check = self.footprints, self._check

        def step(instruction: Any) -> bool:
            pipe = instruction.pipe
            clock = clocks[pipe]
            needed = instruction.s_dep
            if needed > merged[pipe] and pipe != _SCALAR:
                if needed > len(after_scalar):
                    return False  # the scalar unit has not issued it yet
                _merge(clock, after_scalar[needed - 1])
                merged[pipe] = needed
            kind = instruction.step
            if kind == WAIT_FLAG:
                key = instruction.key
                sets, count = raised.get(key), taken.get(key, 0)
                if sets is None or len(sets) <= count:
                    return False  # its set_flag is not walked yet
                _merge(clock, sets[count])
                taken[key] = count + 1
            elif kind == _WAITING and isinstance(instruction, PipeBarrierAll):
                if any(clocks[target][target] < count for target, count in instruction.targets):
                    return False
                for other in clocks:
                    _merge(clock, other)
            entries = footprints.get(id(instruction))
            if entries is not None:
                check(instruction, pipe, clock, entries)
            clock[pipe] += 1
            if kind == SET_FLAG:
                raised.setdefault(instruction.key, []).append(tuple(clock))
            elif pipe == _SCALAR:
                after_scalar.append(tuple(clock))
            return True

        return step

    def _check(self, instruction: Instruction, pipe: int, clock: list[int], entries: tuple[Any, ...]) -> None:
        write = (pipe, clock[pipe], instruction)
        shadows = self.shadows
        for memory, kind, start, length, stride, count in entries:
            shadow = shadows.get(memory)
            if shadow is None:
                continue  # one pipe only touches it, or nothing writes it
            if kind == ATOMIC:
                kind = WRITE  # one core's atomic adds are on one pipe, in order
            if count == 1:
                found = shadow.access(start, start + length, kind, write, clock)
                if found:
                    self._found(found, instruction, pipe, kind, memory)
                continue
            for run in range(count):
                lo = start + run * stride
                found = shadow.access(lo, lo + length, kind, write, clock)
                if found:
                    self._found(found, instruction, pipe, kind, memory)

    def _found(self, found: list[Found], instruction: Instruction, pipe: int, kind: int, memory: Any) -> None:
        spans: dict[tuple[int, int], list[Any]] = {}  # per earlier access (a Found, its end byte growing): the bytes of this run it races on
        for earlier_pipe, earlier, earlier_kind, first_byte, end_byte in found:
            pair = (id(earlier), id(instruction))
            span = spans.get(pair)
            if span is None:
                spans[pair] = [earlier_pipe, earlier, earlier_kind, first_byte, end_byte]
            else:
                span[4] = end_byte
        races, reported = self.races, self.reported
        for pair, (earlier_pipe, earlier, earlier_kind, first_byte, end_byte) in spans.items():
            if pair not in reported and len(races) < self.limit:
                reported.add(pair)
                races.append(Race(_KINDS[earlier_kind, kind], Side(self.core, earlier_pipe, earlier), Side(self.core, pipe, instruction),
                                  memory, first_byte, end_byte))


_SCALAR = int(Pipe.SCALAR)


def _merge(clock: list[int], other: Sequence[int]) -> None:
    clock[:] = map(max, clock, other)


def cross_core_races(gm_accesses: list[GmAccess], limit: int = FOUND_PER_LAUNCH) -> list[Race]:
    """GM bytes that one core of a launch writes and another reads or writes (``gm_accesses`` as
    :func:`core_races` collects them): nothing orders the cores of a launch."""
    by_memory: dict[Allocation, list[tuple[int, int, int, int, int, Side]]] = {}
    for memory, kind, start, length, stride, count, side in gm_accesses:
        by_memory.setdefault(memory, []).append((kind, start, length, stride, count, side))
    races: list[Race] = []
    reported: set[tuple[int, ...]] = set()
    for memory, accesses in by_memory.items():
        if len({side.core for *_, side in accesses}) < 2 or all(kind == READ for kind, *_ in accesses):
            continue
        runs = sorted((start + run * stride, start + run * stride + length, order, kind, side)
                      for order, (kind, start, length, stride, count, side) in enumerate(accesses) for run in range(count))
        writes: list[tuple[int, int, int, Side]] = []  # (end, order, kind, side) of the runs still open
        reads: list[tuple[int, int, int, Side]] = []
        for lo, hi, order, kind, side in runs:
            for open_runs in (writes, reads):
                while open_runs and open_runs[0][0] <= lo:
                    heapq.heappop(open_runs)
            others = writes if kind == READ else writes + reads
            for end, _, other_kind, other in others:
                if other.core == side.core or (kind == ATOMIC and other_kind == ATOMIC):
                    continue
                pair = tuple(sorted((id(other.instruction), id(side.instruction))))
                if pair not in reported and len(races) < limit:
                    reported.add(pair)
                    races.append(Race(f"{_NAMES[other_kind]} and {_NAMES[kind]} on two cores", other, side, memory, lo, min(hi, end)))
            heapq.heappush(reads if kind == READ else writes, (hi, order, kind, side))
    return races


_NAMES = {READ: "read", WRITE: "write", ATOMIC: "atomic add"}


class LaunchRaces:
    """The races of one launch, reported as their instructions run: once both instructions of a race
    have been recorded, the report (with their times) is a PipeRaceWarning and an instant in the
    trace, or a RaceError. ``positions`` gives an instruction's index in its core's program,
    ``source_of`` the line of the user's program it came from (None: unknown), which the report names
    for each side; a RaceError blames the second side's line (the access that races: ``blame``)."""

    def __init__(self, kernel_name: str, die: int, races: list[Race], positions: Callable[[Side], int], recorder: Any, mode: str,
                 source_of: Callable[[Side], object] | None = None) -> None:
        self.kernel_name, self.die, self.recorder, self.mode = kernel_name, die, recorder, mode
        self.positions = positions
        self.source_of = source_of or (lambda side: None)
        shown = races[:REPORTED_PER_LAUNCH]
        self.more = len(races) - len(shown)
        self.last = shown[-1] if shown else None
        for race in shown:
            events: dict[int, int] = {}
            for side in (race.first, race.second):
                on_recorded(side.instruction, self._watch(race, side, events))

    def _watch(self, race: Race, side: Side, events: dict[int, int]) -> Callable[[int], None]:
        def recorded(index: int) -> None:
            events[id(side)] = index
            if len(events) == 2:
                self._report(race, events[id(race.first)], events[id(race.second)])
        return recorded

    def _report(self, race: Race, first_event: int, second_event: int) -> None:
        message = self.describe(race, self.recorder.span_ps(first_event), self.recorder.span_ps(second_event))
        if race is self.last and self.more:
            message += f" ({self.more} more race{'s' if self.more > 1 else ''} in this launch not shown)"
        if self.mode == "error":
            error = RaceError(message + " (races='error' is set)")
            error.blame = self.source_of(race.second)
            raise error
        source = self.source_of(race.second)  # shown at the program's line when the frontend gave one (a Callsite)
        warnings.warn_explicit(message, PipeRaceWarning, getattr(source, "filename", f"kernel {self.kernel_name!r}"),
                               getattr(source, "lineno", 0))
        self.recorder.instant(max(self.recorder.span_ps(first_event)[1], self.recorder.span_ps(second_event)[1]), self.die, "pipe race", message)

    def describe(self, race: Race, first_ps: tuple[int, int], second_ps: tuple[int, int]) -> str:
        first, second = race.first, race.second
        where = (f"GM tensor {race.memory.label!r} (die {race.memory.die}) bytes {race.lo}..{race.hi}" if isinstance(race.memory, Allocation)
                 else f"{race.memory} bytes {race.lo}..{race.hi}")

        across = first.core != second.core

        def who(side: Side, span: tuple[int, int]) -> str:
            source = self.source_of(side)
            origin = f", from {source}" if source is not None else ""
            return (f"{side.core + ' ' if across else ''}{PIPE_NAMES[side.pipe]} `{side.instruction.label}` (instruction "
                    f"#{self.positions(side)}{origin}, {span[0] / 1e6:.3f}-{span[1] / 1e6:.3f} us)")

        if across:
            return (f"GM race in kernel {self.kernel_name!r} on die {self.die}: {race.kind}: {who(first, first_ps)} and "
                    f"{who(second, second_ps)} touch {where}, and nothing orders the cores of one launch; give each core "
                    "its own bytes, or move one side to a later launch")
        src, dst = PIPE_NAMES[first.pipe], PIPE_NAMES[second.pipe]
        return (f"pipe race in kernel {self.kernel_name!r} on die {self.die} {first.core}: {race.kind} on {where}: "
                f"{who(first, first_ps)}, then {who(second, second_ps)}, and no flag, barrier or scalar issue order puts "
                f"the first before the second; add set_flag({src}, {dst}) after the first and wait_flag({src}, {dst}) before the second")
