"""The device tasks of a launch, one per tile op, as the AICPU schedulers run them
(:mod:`npusim.hw.device_task` is the protocol they implement): :class:`CoreTask` runs a small
program on one AI core, :class:`WaitTask` is a signal slot an AICPU polls, :class:`ControlRead` a
device value the control AICPU reads; :class:`OpNode` is one PyPTO op of a PE and its tile ops."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol

import numpy as np
import simpy

from npusim import isa
from npusim.callsite import Callsite
from npusim.engine.loop import clock
from npusim.errors import UsageError
from npusim.hw.memory import Allocation
from npusim.isa.instructions import Instruction, on_recorded
from npusim.isa.program import Replay
from npusim.kernels.shmem.races import Access, Named
from npusim.kernels.shmem.tile_ops import GmView
from npusim.runtime.shmem import RemoteWrite, ShmemArea
from npusim.runtime.templates import ProgramPiece, TileTemplate, hand_over
from npusim.runtime.templates import watched as watched_instructions

if TYPE_CHECKING:
    from npusim.runtime.program import PeProgram

class DeviceValues(Protocol):
    """A tensor in a die's GM whose values a control read takes (the frontend's ``DeviceTensor``):
    its allocation, and its values as the device holds them now."""

    allocation: Allocation

    def host_view(self) -> np.ndarray: ...


READS_AFTER_WAIT = ("shmem_load", "shmem_get")
"""Tile ops whose wait preds get a ``wait->load`` flow: they read the data the wait guards."""


def joined(clock: int, other: int) -> int:
    """The union of two happens-before clocks: one of the two ints itself when it holds the
    other's bits, so the tile ops ordered after the same ones share one int instead of each
    keeping a copy (the hierarchical all-gather on 384 dies: 24,628 clock ints for its 39,552
    tile ops, where each had its own)."""
    union = clock | other
    return clock if union == clock else other if union == other else union


class Task:
    """One tile op: its op and tile index (``trace_op``: the op id its trace events carry), the
    tile ops it waits for, its happens-before bits and the shmem data it writes (:class:`RemoteWrite`). A tile op built after a device-valued scalar
    was read (:class:`ControlRead`) also waits for that read: the control flow that issues it ran
    past the read. ``linked`` once handed to its scheduler (:meth:`ShmemLaunch._link`); ``done`` once
    the scheduler has handled its completion (``completed``: that event). Its happens-before
    ``clock`` (an int, one bit per tile op of the launch: those ordered before it, and its own) is
    fixed as it starts. Its own ``bit`` (the position of that bit, -1 until given) is given as it
    starts, and only to a tile op that reads or writes shmem data (the race detector compares those
    alone): the clocks of a chain of other tile ops (a loop of compute ops) stay empty instead of
    growing by a bit per tile op. A tile op keeps one int of the launch's width, not two.

    Memory: :data:`~npusim.runtime.program.BYTES_PER_TILE_OP` once simulated; its dependencies are the writers its
    reads and writes meet, not every earlier writer of the tensor
    (:class:`~npusim.runtime.writes.Writes`), so a build is linear in its tile ops."""

    on_core = True
    on_control = False  # a control task (ControlRead) says True; the scheduler asks each ready task, and a missing attribute is slow to ask

    def __init__(self, op: OpNode, tile: int) -> None:
        self.op = op
        self.tile = tile
        self.trace_op = op.record
        self.deps: dict[int, Task] = {}
        self.pending = 0
        self.successors: list[Task] = []
        self.bit = -1
        self.clock = 0
        self.writes: list[RemoteWrite] = []
        self.linked = False
        self.done = False
        self.completed = -1
        program = op.program
        program.new_tasks.append(self)
        if program.control is not None:
            self.deps[id(program.control)] = program.control

    def depend_on(self, tasks: Sequence[Task]) -> None:
        for task in tasks:
            if task is not self:
                self.deps.setdefault(id(task), task)

    def inherit(self) -> int:
        """The happens-before clock of the predecessors (all done when this task starts): every bit of theirs."""
        clock = 0
        for task in self.deps.values():
            clock = joined(clock, task.clock)
        return clock

    @property
    def who(self) -> str:
        return f"PE {self.op.pe} {self.op.name}#{self.op.record} tile {self.tile}"

    def __repr__(self) -> str:
        return self.who


class AccessSpec(NamedTuple):
    """What a core task reads or writes of shmem data: ``shape`` elements from ``view`` on PE ``pe``;
    ``by`` is the op that makes the access when it runs in another op's tile op (a store of a loaded tile)."""

    kind: str
    area: ShmemArea
    pe: int
    view: GmView
    shape: tuple[int, ...]
    by: OpNode | None = None


class CoreTask(Task):
    """A tile op that runs a small program on one AI core of the kind the product runs its ``unit``
    ("vector" or "cube") tile ops on (``core_kind``: "aiv" or "aic" on a split die). ``build`` appends its
    instructions: a :class:`ProgramPiece` (its program is then reused by the tile ops of the same
    pieces' keys, see :meth:`start`), or a plain ``build(p)``; ``consumers`` (pieces: stores and
    assignments of a loaded tile) are appended after it in the same program; each of ``accesses``
    lists shmem reads and writes. ``first_event`` / ``last_event``: the events of its program's first
    instruction and of the one that ended last (-1 until recorded)."""

    def __init__(self, op: OpNode, tile: int, build: ProgramPiece | Callable[[isa.CoreProgram], None] | None, unit: str = "vector") -> None:
        super().__init__(op, tile)
        self.build = build  # None until the op that makes the task sets it (before the task is linked)
        self.core_kind = op.program.launch.core_kinds[unit]
        self.consumers: list[ProgramPiece] = []
        self.accesses: list[Callable[[], list[AccessSpec]]] = []
        self._records: list[Access] = []
        self.first_event = -1
        self.last_event = -1

    def start(self, core: int) -> simpy.Event:
        """Record its shmem accesses, build its program (or replay the template of the same pieces'
        keys on this tile op's GM addresses, keeping one from the first program so built) and launch
        it on core ``core`` through that core's stream."""
        launch = self.op.program.launch
        env = launch.system.env
        self.clock = self.inherit()
        for accesses in self.accesses:
            for spec in accesses():
                area, view = spec.area, spec.view
                intervals = view.intervals(spec.shape, area.itemsize)
                if not intervals:
                    continue
                if self.bit < 0:
                    self.bit = launch.new_bit()
                    self.clock |= 1 << self.bit
                by = self.op if spec.by is None else spec.by
                who: Named = self if spec.by is None else f"PE {self.op.pe} {spec.by.name}#{spec.by.record} tile {self.tile} (in {self.op.name}#{self.op.record}'s tile op)"
                access = Access(spec.kind, who, (view.allocation.die, view.allocation.address), area.label(spec.pe), intervals, self.bit,
                                self.clock, clock(env), source=by.source)
                launch.races.record(access)
                self._records.append(access)
        build = self.build
        if not isinstance(build, ProgramPiece):
            assert build is not None, self.who  # set before the task was linked
            kernel, p = self._program(core)
            with p.tile(self.tile):
                build(p)
            return self._launch(kernel, p, core)
        pieces = [build, *self.consumers]
        gms: list[tuple[Any, ...]] = []
        bases: list[tuple[Allocation, int]] = []
        strides: list[tuple[int, ...]] = []  # the builders read the strides of the views they are given: those are part of the shape
        for piece in pieces:
            gm = piece.gm()
            gms.append(gm)
            for address in gm:
                if address.__class__ is GmView:
                    bases.append((address.allocation, address.offset_bytes))
                    strides.append(address.strides)
                else:  # a GmAddress
                    bases.append((address.allocation, address.offset))
        key = (self.core_kind, tuple([piece.key for piece in pieces]), tuple(strides))
        known = launch.templates.get(key)
        if known is not None and known.program.unchecked(launch.system):  # a replay launched alone: no kernel, no race check
            kept = known.program
            replay = kept.replay(launch.system.die(self.op.program.die).core(self.core_kind, core), self.tile, bases, kept.own is not None,
                                 self.op.name)
            if replay is not None:
                instructions = replay.instructions
                hand_over(pieces, [[instructions[i] for i in marks] for marks in known.marks], gms)
                return self._launch_replay(replay, core, [instructions[i] for i in known.watched])
        kernel, p = self._program(core)
        starts: list[int] = []
        with p.tile(self.tile):
            if known is not None and p.replay(known.program, bases):
                instructions = p.instructions
                marked: list[Sequence[Instruction]] = [[instructions[i] for i in marks] for marks in known.marks]
                watched: list[Instruction] | None = [instructions[i] for i in known.watched]
                starts = list(known.starts)
                p.sources = [(start, piece.source) for start, piece in zip(starts, self.consumers) if piece.source is not None]
            else:
                watched = None
                loaded, handed = build.build(p, None, *gms[0])
                marked = [handed]
                for piece, gm in zip(self.consumers, gms[1:]):
                    starts.append(len(p.instructions))
                    p.note_source(piece.source)
                    marked.append(piece.build(p, loaded, *gm)[1])
        hand_over(pieces, marked, gms)
        if watched is None:
            watched = watched_instructions(p.instructions)
        process = self._launch(kernel, p, core, watched)
        if known is None:  # after the launch: its race verdict goes with the template
            position = {id(instruction): i for i, instruction in enumerate(p.instructions)}
            marks = tuple(tuple(position[id(i)] for i in handed) for handed in marked)
            watched_at = tuple(position[id(i)] for i in watched)
            template = p.template(bases, own=set(watched_at).union(*marks))
            if template is not None:
                launch.templates[key] = TileTemplate(template, marks, watched_at, tuple(starts))
        return process

    def _program(self, core: int) -> tuple[isa.Kernel, isa.CoreProgram]:
        """A kernel of this tile op and its program on core ``core``, to build."""
        kernel = isa.Kernel(self.op.name, die=self.op.program.die, system=self.op.program.launch.system, op=self.op.record,
                            source=self.op.source)
        return kernel, kernel.core(self.core_kind, core)

    def _watch(self, watched: list[Instruction]) -> None:
        """Note the events of the program's first instruction and of each pipe's last one (``watched``)."""
        first, *last_of_pipe = watched
        on_recorded(first, self._first_recorded)
        pipe_end_recorded = self._pipe_end_recorded
        for instruction in last_of_pipe:
            on_recorded(instruction, pipe_end_recorded)

    def _launch(self, kernel: isa.Kernel, p: isa.CoreProgram, core: int, watched: list[Instruction] | None = None) -> simpy.Process:
        """Watch the program's first instruction and each pipe's last one (``watched``, if known),
        and launch it ``inline`` (:meth:`~npusim.isa.program.Kernel.launch`): an AICPU scheduler
        thread dispatches it as its timer (a NORMAL event) is processed, scheduling nothing URGENT
        there but the stream task's start, so the stream task's first step, and then its run's,
        would be the next events processed; a stream task that waits for the one before it on its
        core's stream resumes as that one's last callback, the earlier ones (``_ended``, the
        scheduler's ``core_finished``) scheduling nothing URGENT (the order of events: :mod:`npusim.engine.loop`, rules 2 and 5)."""
        self._watch(watched_instructions(p.instructions) if watched is None else watched)
        launch = self.op.program.launch
        process: simpy.Process = kernel.launch(stream=launch.core_stream(self.op.program.die, core, self.core_kind), inline=True)  # see _launch's doc
        process.callbacks.append(self._ended)
        # The kernel and its program refer to each other: without that cycle both are freed once
        # the tile op is built and launched (the core runs the placed program), not left to the
        # cycle collector, nor kept while the tile op waits for its core
        kernel.programs.clear()
        return process

    def _launch_replay(self, replay: Replay, core: int, watched: list[Instruction]) -> simpy.Process:
        """:meth:`_launch` for a replay that is not race-checked (:meth:`~npusim.isa.program.Replay.launch`:
        the same run, queued as the kernel of that one program would queue it)."""
        self._watch(watched)
        process = replay.launch(self.op.program.launch.core_stream(self.op.program.die, core, self.core_kind), self.op.record)
        process.callbacks.append(self._ended)
        return process

    def _first_recorded(self, event: int) -> None:
        self.first_event = event
        if self.op.name in READS_AFTER_WAIT:
            recorder = self.op.program.launch.system.recorder
            for dep in self.deps.values():
                if isinstance(dep, WaitTask) and dep.poll_event >= 0:
                    recorder.flow(dep.poll_event, event, "wait->load")

    def _pipe_end_recorded(self, event: int) -> None:
        recorder = self.op.program.launch.system.recorder
        if self.last_event < 0 or recorder.end_ps(event) >= recorder.end_ps(self.last_event):
            self.last_event = event

    def signal_landed(self, key: tuple[int, int], target: int, area: ShmemArea, offset: Sequence[int], shape: Sequence[int],
                      event: int) -> None:
        """A signal store of this tile op (event ``event``) landed in slot ``key`` on PE ``target``;
        the signal covers the box ``shape`` at ``offset`` of ``area``. Draws ``put->signal`` flows
        from the writes of its preds that it announces."""
        launch = self.op.program.launch
        launch.publish(self, key, event)
        target_pe = area.pe_of(target)
        for dep in self.deps.values():
            for write in dep.writes:
                if write.event >= 0 and write.target == target_pe and (write.area is not area or write.overlaps(offset, shape)):
                    launch.system.recorder.flow(write.event, event, "put->signal")

    def _ended(self, _event: simpy.Event) -> None:
        now = clock(self.op.program.launch.system.env)
        for access in self._records:
            self.op.program.launch.races.ended(access, now)


class WaitTask(Task):
    """A shmem_wait_until tile op: polled by an AICPU until word 0 of its slot equals ``cmp_value``;
    with ``clear`` the AICPU then writes 0 there."""

    on_core = False

    def __init__(self, op: OpNode, tile: int, area: ShmemArea, src_pe: int, tile_offset: tuple[int, ...],
                 slot_offset: int, cmp_value: int, clear: bool) -> None:
        super().__init__(op, tile)
        self.area = area
        self.src_pe = src_pe
        self.tile_offset = tile_offset
        self.slot_offset = slot_offset
        self.cmp_value = cmp_value
        self.clear = clear
        self._word: memoryview  # word 0 of the slot, found by locate()
        self._key: tuple[int, int]  # the slot's (die, absolute address), found by locate()
        self.signal_events: list[int] = []  # the signal stores it saw (since the slot's last clear)
        self.poll_event = -1  # the poll pass that saw it match

    def locate(self) -> None:
        """Find the slot in the PE's signal window (once the windows exist)."""
        address = self.area.signal_address(self.area.rank_of(self.op.program), self.slot_offset)
        # word 0 as a 4-byte int: a memoryview reads it as a Python int several times faster than numpy (polls read it often)
        data, offset = address.allocation.data, address.offset
        assert data is not None and isinstance(offset, int)  # signal windows are control memory (real with data off too), at known offsets
        self._word = data[offset:offset + 4].data.cast("i")
        self._key = (address.allocation.die, address.allocation.address + offset)
        self.op.program.launch.slot_waits.setdefault(self._key, []).append(self)

    def value(self) -> int:
        """The slot's word 0 now."""
        return self._word[0]

    def matches(self) -> bool:
        return self._word[0] == self.cmp_value  # value(), inlined: polls read slots very often

    def satisfied(self) -> None:
        launch = self.op.program.launch
        history = launch.slots.get(self._key)
        self.clock = joined(self.inherit(), history.clock) if history is not None else self.inherit()
        self.signal_events = list(history.signals) if history is not None else []
        waits = launch.slot_waits[self._key]
        waits.remove(self)
        if not waits:
            del launch.slot_waits[self._key]
        if self.clear:
            self._word[0] = 0
            launch.slots.pop(self._key, None)
            launch.slot_changed(self._key)

    def polled(self, event: int) -> None:
        self.poll_event = event
        recorder = self.op.program.launch.system.recorder
        for signal in self.signal_events:
            recorder.flow(signal, event, "signal->wait")

    def report(self) -> str:
        return (f"PE {self.op.pe} (die {self.op.program.die}) {self.op.name}#{self.op.record} tile {self.tile} waits for "
                f"the signal slot of owner PE {self.src_pe}, tile at {list(self.tile_offset)}, of {self.area.label(self.op.pe)}: "
                f"expects {self.cmp_value}, the slot holds {self.value()}")


class ControlRead(Task):
    """A device-valued scalar (``tensor[i, j]`` in a kernel, the framework's GetTensorData): the
    control-flow AICPU reads one int32 of GM once the tile ops that wrote it are done. Its value
    exists once it has run (``done_event``); the kernel function, which needs it to go on (an
    ``if``, a loop bound, a PE number or an offset), waits for it (:meth:`value`)."""

    on_core = False
    on_control = True

    def __init__(self, op: OpNode, device: DeviceValues, index: Sequence[int], what: str, writers: Sequence[Task]) -> None:
        super().__init__(op, 0)
        self.device = device  # the DeviceTensor holding the element
        self.index = tuple(index)
        self.what = what  # how the kernel wrote it, for messages
        self.done_event: simpy.Event = op.program.launch.system.env.event()
        self._value: int | None = None
        self.depend_on(writers)
        launch = op.program.launch
        if not launch.awaiting_host_data and launch.prior_work_done() and all(writer.done for writer in writers):
            self._take_value()  # final already: nothing left to run writes it (the read still takes its time on the device)
        op.program.control = self

    def _take_value(self) -> None:
        if self._value is None and self.device.allocation.data is not None:
            self._value = int(self.device.host_view()[self.index])

    def executed(self, event: int) -> None:
        """The control AICPU has read the element (its trace event ``event``)."""
        self.clock = self.inherit()
        self._take_value()
        self.done_event.succeed()

    def value(self) -> int:
        """The element's value, once read on the device, or once final before (the kernel function
        waits for it only when tile ops still to run may write it)."""
        program = self.op.program
        if self._value is None:  # one branch, not an early return: the wait sets _value, which mypy(c) would take to be None still after it
            if not program.launch.system.with_data:
                raise UsageError(
                    f"{self.what} (GetTensorData) on PE {program.pe}: the kernel uses a value read from device memory, but "
                    "this run simulates timing only (--no-data) and keeps no values to read; run it with data "
                    "(npusim run without --no-data, or npusim.session(..., data=True))"
                )
            if not self.done_event.triggered:
                program.wait_for(self)
        value = self._value
        assert value is not None
        return value

    def report(self) -> str:
        return (f"PE {self.op.pe} (die {self.op.program.die}) reads {self.what} (GetTensorData), which cannot be read "
                "until the tile ops that write it have run")


class OpNode:
    """One PyPTO op on one PE: its trace record id, its tile ops, and the line of the user's program
    that called it (``source``, a Callsite or None: race reports name it)."""

    # not a dataclass: compiled, a dataclass looks its fields' types up as the module is imported,
    # and PeProgram's module imports this one
    def __init__(self, program: PeProgram, name: str, record: int, source: Callsite | None = None) -> None:
        self.program = program
        self.name = name
        self.record = record
        self.tasks: list[Task] = []
        self.source = source

    @property
    def pe(self) -> int:
        return self.program.pe
