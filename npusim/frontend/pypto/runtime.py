"""One ``npusim.launch`` of a PyPTO kernel: the PEs' programs, their symmetric memory, and the
device tasks that run them.

Building: the kernel function runs once per PE (:class:`PeProgram` is the PE whose ops are being
built); each op becomes an :class:`OpNode` with one task per tile (:class:`CoreTask` for an AIV
core, :class:`WaitTask` for an AICPU poll), each depending on the tile ops its preds name.

Finishing (:meth:`ShmemLaunch.finish`): every create_shmem_tensor / create_shmem_signal is one
:class:`ShmemArea`, the same on every PE; each group gets, on each PE's die, a data window and a
signal window (real GM allocations, as large as the areas the program created need; signals are
control memory, kept even when data is off). Tasks get their successors and their happens-before
bits, and each PE gets an :class:`~npusim.hw.aicpu.AicpuScheduler` on its die's stream.

Running: a core task builds its tile op's ISA program when it is dispatched and runs it on the
chosen core through that core's stream; a wait task reads its slot in the PE's signal window, and
the launch tells the PE's scheduler which waits to read again as their slots change (a signal store
landing, a clear: :meth:`ShmemLaunch.slot_changed`). Races are checked as tile ops start; a deadlock
report lists every wait still polling.

Flows (arrows in the trace, edges of the critical path) across PEs, besides the scheduler's own:
``put->signal`` from the last store of a shmem_put (or shmem_store) tile op to each signal store
of a shmem_signal tile op that had it as pred and writes to the PE it wrote to (when the signal is
on the same shmem tensor, only if the signal's tile overlaps the box the put wrote);
``signal->wait`` from each signal store that landed in a slot since it was last cleared to the
poll pass that saw the slot match; ``wait->load`` from that poll pass to the first event of each
shmem_load or shmem_get tile op that had the wait as pred.
"""

from __future__ import annotations

import contextlib
import functools
import math
import threading
import warnings
from collections.abc import Callable, Hashable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

import simpy

from npusim import isa
from npusim.config.products import PRODUCTS
from npusim.errors import OpArgumentError, OutOfMemoryError, RaceError, UsageError, WorkloadError
from npusim.frontend.callsite import Callsite, callsite
from npusim.frontend.memory import BYTES_PER_TILE_OP
from npusim.frontend.pypto.symbolic import SymbolicScalar
from npusim.frontend.session import current_session
from npusim.hw.aicpu import AicpuScheduler
from npusim.hw.memory import Allocation
from npusim.hw.stream import Stream
from npusim.hw.system import System
from npusim.isa.instructions import on_recorded
from npusim.isa.program import ProgramTemplate, Replay
from npusim.kernels.compute.matmul import CubeTiles
from npusim.kernels.shmem.checks import check_group_name, check_n_pes
from npusim.kernels.shmem.dtypes import DataType
from npusim.kernels.shmem.layout import SIGNAL_ONLY_SHAPE, ShmemAllocation, ShmemGroupRegistry
from npusim.kernels.shmem.races import Access, RaceDetector, ShmemRaceWarning
from npusim.kernels.shmem.tile_ops import GmView

MEMORY_LOOK_OPS = 256
"""Ops a kernel function builds between two looks at the run's memory (a look reads /proc: ~7 us, an op takes ~1 ms to build)."""
READS_AFTER_WAIT = ("shmem_load", "shmem_get")
"""Tile ops whose wait preds get a ``wait->load`` flow: they read the data the wait guards."""

_LOCAL = threading.local()  # per thread: the PEs whose kernel functions run (each PE's kernel runs in a builder thread)


def _building() -> list[PeProgram]:
    stack = getattr(_LOCAL, "programs", None)
    if stack is None:
        stack = _LOCAL.programs = []
    return stack


def building_program() -> PeProgram | None:
    """The PE whose kernel function is running in this thread, if any."""
    stack = _building()
    return stack[-1] if stack else None


def building_pe() -> int | None:
    """The PE whose kernel function is running, if any."""
    program = building_program()
    return program.pe if program is not None else None


def current_program(op: str) -> PeProgram:
    """The PE whose kernel function is running (UsageError outside ``npusim.launch``)."""
    program = building_program()
    if program is None:
        raise UsageError(
            f"pypto.{op} is called outside a kernel: PyPTO ops run inside the kernel function that "
            "npusim.launch(kernel, n_pes, args=...) calls once per PE"
        )
    return program


@dataclass(eq=False)
class ShmemArea:
    """One create_shmem_tensor / create_shmem_signal of the program: a symmetric tensor with an
    int32 signal area, at the same offsets of the group's windows on every PE."""

    launch: ShmemLaunch
    index: int
    allocation: ShmemAllocation
    creator: int = 0  # the PE that created it first
    _views: dict[int, GmView] = field(default_factory=dict, init=False, repr=False)  # rank -> data_view(rank), once its window exists
    _labels: dict[int, str] = field(default_factory=dict, init=False, repr=False)  # rank -> label(rank)
    _signal_bases: dict[int, tuple[Allocation, int]] = field(default_factory=dict, init=False, repr=False)  # rank -> (signal window, area offset)

    def __post_init__(self) -> None:
        self.itemsize = self.dtype.itemsize if self.dtype is not None else 0  # bytes per element (0: signal-only)

    @property
    def dtype(self) -> DataType | None:
        return self.allocation.dtype

    @property
    def tensor_shape(self) -> tuple[int, ...]:
        return self.allocation.data_shape or SIGNAL_ONLY_SHAPE

    @property
    def group(self):
        return self.launch.registry.group(self.allocation.group_name)

    @property
    def members(self) -> tuple[int, ...]:
        """The launch's PEs of the tensor's group, by rank in the group."""
        return self.launch.group_members(self.allocation.group_name)

    def pe_of(self, rank: int) -> int:
        """The launch's PE of rank ``rank`` in the tensor's group."""
        return self.members[rank]

    def rank_of(self, program: PeProgram) -> int:
        """The rank of ``program``'s PE in the tensor's group."""
        return program.ranks[self.allocation.group_name]

    def label(self, rank: int) -> str:
        label = self._labels.get(rank)
        if label is None:
            members = self.members
            where = f"PE {rank}" if members[rank] == rank else f"rank {rank} (PE {members[rank]})"
            label = self._labels[rank] = f"shmem tensor #{self.index} (group {self.allocation.group_name!r}) on {where}"
        return label

    def data_view(self, rank: int) -> GmView:
        """The whole data tensor on rank ``rank`` of its group: its window, offset and (contiguous)
        strides. Kept once made (tile ops ask for it as they start): a window is allocated once,
        and the area's offset in it no longer moves by then (tile ops start after the launch is
        finished, or, in a launch that runs while it builds, in frozen groups, where data areas
        keep the offset they were placed at)."""
        view = self._views.get(rank)
        if view is None:
            itemsize = self.itemsize
            shape = self.tensor_shape
            strides = tuple(itemsize * math.prod(shape[i + 1:]) for i in range(len(shape)))
            window = self.launch.data_windows[(self.allocation.group_name, self.members[rank])]
            view = self._views[rank] = GmView(window, self.group.data_offset_bytes(self.allocation), strides)
        return view

    def signal_address(self, rank: int, slot_offset_bytes: int) -> isa.GmAddress:
        """Byte ``slot_offset_bytes`` of this tensor's signal area on rank ``rank`` of its group. The
        area's window and offset are kept once found: asked for by the tile ops of signal, wait and
        clear ops, which mark the area used when built, and a used area's signal offset no longer
        moves (a launch that runs while it builds refuses to regrow it; otherwise tile ops start
        once every op is built)."""
        base = self._signal_bases.get(rank)
        if base is None:
            base = self._signal_bases[rank] = (self.launch.signal_windows[(self.allocation.group_name, self.members[rank])],
                                               self.group.signal_offset_bytes(self.allocation))
        window, offset = base[0], base[1] + slot_offset_bytes
        if offset + 4 > window.size_bytes:
            raise WorkloadError(
                f"{self.label(rank)}: a signal slot at byte {offset} lies past the signal areas the program's "
                "shmem_signal ops numbered; a shmem_wait_until must use the view and tile shape of its shmem_signal"
            )
        return isa.GmAddress(window, offset)


@dataclass(eq=False)
class RemoteWrite:
    """A tile op's store of a box of shmem data: ``shape`` elements at ``offset`` (in the tensor's
    elements) of ``area`` on rank ``pe`` of its group; ``event`` is the index of its last store's event (-1 until
    recorded)."""

    area: ShmemArea
    pe: int
    offset: tuple[int, ...]
    shape: tuple[int, ...]
    event: int = -1

    def overlaps(self, offset: Sequence[int], shape: Sequence[int]) -> bool:
        """True if the box ``shape`` at ``offset`` shares an element with this write's box."""
        for a, n, b, m in zip(self.offset, self.shape, offset, shape):  # noqa: SIM110 (1.7x faster than all(...); asked per signal store and write)
            if not (a < b + m and b < a + n):
                return False
        return True

    def landed(self, event: int) -> None:
        self.event = event


@dataclass
class SlotHistory:
    """What landed in one signal slot since it was last cleared: the happens-before bits of the
    tile ops that signalled it (``clock``) and the events of their stores (``signals``)."""

    clock: int = 0
    signals: list[int] = field(default_factory=list)


class Task:
    """One tile op: its op and tile index (``trace_op``: the op id its trace events carry), the
    tile ops it waits for, its happens-before bits and the shmem data it writes (:class:`RemoteWrite`). A tile op built after a device-valued scalar
    was read (:class:`ControlRead`) also waits for that read: the control flow that issues it ran
    past the read. ``linked`` once handed to its scheduler (:meth:`ShmemLaunch._link`); ``done`` once
    the scheduler has handled its completion (``completed``: that event). Its own happens-before
    ``bit`` is given as it starts, and only to a tile op that reads or writes shmem data (the race
    detector compares those alone): the ``ancestors`` of a chain of other tile ops (a loop of compute
    ops) stay empty instead of growing by a bit per tile op.

    Memory: :data:`~npusim.frontend.memory.BYTES_PER_TILE_OP` once simulated; its dependencies are the writers its
    reads and writes meet, not every earlier writer of the tensor
    (:class:`~npusim.frontend.pypto.tensors.Writes`), so a build is linear in its tile ops."""

    on_core = True
    on_control = False  # a control task (ControlRead) says True; the scheduler asks each ready task, and a missing attribute is slow to ask

    def __init__(self, op: OpNode, tile: int) -> None:
        self.op = op
        self.tile = tile
        self.trace_op = op.record
        self.deps: dict[int, Task] = {}
        self.pending = 0
        self.successors: list[Task] = []
        self.bit = 0
        self.ancestors = 0
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
        """The happens-before ancestors from the predecessors (all done when this task starts)."""
        ancestors = 0
        for task in self.deps.values():
            ancestors |= task.ancestors | task.bit
        return ancestors

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


class ProgramPiece:
    """One builder's share of a tile op's program, made so that the program can be reused for other
    tile ops (:class:`TileTemplate`). ``key`` (hashable) fixes, with the strides of the GmViews of
    ``gm()``, every instruction ``build`` appends except their GM addresses, each one of the GM
    addresses ``gm()`` gives (GmViews or GmAddresses, computed when the tile op starts) plus a
    constant: the key holds the shapes, dtypes, names and constants the builder reads, ``gm()``
    everything that moves. ``build(p, loaded, *gm)`` appends the instructions and returns ``(its
    result, the instructions to hand hook)``; the pieces after the first (a load) get its result as
    ``loaded`` (the UB tile they store), the first gets None. ``hook(instructions, gm)``, if any,
    watches those instructions' events (it runs for a reused program too). ``source``: the program
    line of the op a consumer piece comes from, when not the tile op's own op (race reports name it)."""

    __slots__ = ("key", "gm", "build", "hook", "source")

    def __init__(self, key: Hashable, gm: Callable[[], tuple], build: Callable, hook: Callable | None = None,
                 source: Callsite | None = None) -> None:
        self.key, self.gm, self.build, self.hook, self.source = key, gm, build, hook, source


@dataclass(frozen=True)
class TileTemplate:
    """A tile op's program kept for reuse: the ISA template (:class:`~npusim.isa.program.ProgramTemplate`,
    GM addresses as offsets from its pieces' ``gm()`` concatenated); per piece, the positions of
    the instructions its ``build`` handed its hook; the positions of the instructions the task
    watches (:func:`_watched`)."""

    program: ProgramTemplate
    marks: tuple[tuple[int, ...], ...]
    watched: tuple[int, ...]
    starts: tuple[int, ...]  # per consumer piece, the position of its first instruction (its program line starts there)


def _watched(instructions: Sequence) -> list:
    """The instructions whose events a core task notes: the first, then the last of each pipe."""
    last_of_pipe = {}
    for instruction in instructions:
        last_of_pipe[instruction.pipe] = instruction
    return [instructions[0], *last_of_pipe.values()]


def _hand_over(pieces: Sequence[ProgramPiece], handed: Sequence[list], gms: Sequence) -> None:
    """Give each piece with a hook the instructions it handed over in this program and its GM addresses."""
    for piece, instructions, gm in zip(pieces, handed, gms):
        if piece.hook is not None:
            piece.hook(instructions, gm)


class CoreTask(Task):
    """A tile op that runs a small program on one AI core of the kind the product runs its ``unit``
    ("vector" or "cube") tile ops on (``core_kind``: "aiv" or "aic" on a split die). ``build`` appends its
    instructions: a :class:`ProgramPiece` (its program is then reused by the tile ops of the same
    pieces' keys, see :meth:`start`), or a plain ``build(p)``; ``consumers`` (pieces: stores and
    assignments of a loaded tile) are appended after it in the same program; each of ``accesses``
    lists shmem reads and writes. ``first_event`` / ``last_event``: the events of its program's first
    instruction and of the one that ended last (-1 until recorded)."""

    def __init__(self, op: OpNode, tile: int, build: ProgramPiece | Callable | None, unit: str = "vector") -> None:
        super().__init__(op, tile)
        self.build = build
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
        self.ancestors = self.inherit()
        for accesses in self.accesses:
            for spec in accesses():
                area, view = spec.area, spec.view
                intervals = view.intervals(spec.shape, area.itemsize)
                if not intervals:
                    continue
                if not self.bit:
                    self.bit = launch.new_bit()
                by = self.op if spec.by is None else spec.by
                who = self.who if spec.by is None else f"PE {self.op.pe} {spec.by.name}#{spec.by.record} tile {self.tile} (in {self.op.name}#{self.op.record}'s tile op)"
                if by.source is not None:
                    who += f" at {by.source}"
                access = Access(spec.kind, who, (view.allocation.die, view.allocation.address), area.label(spec.pe), intervals, self.bit,
                                self.ancestors, env.now, source=by.source)
                launch.races.record(access)
                self._records.append(access)
        build = self.build
        if not isinstance(build, ProgramPiece):
            kernel, p = self._program(core)
            with p.tile(self.tile):
                build(p)
            return self._launch(kernel, p, core)
        pieces = [build, *self.consumers]
        gms = []
        bases, strides = [], []  # the builders read the strides of the views they are given: those are part of the shape
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
                _hand_over(pieces, [[instructions[i] for i in marks] for marks in known.marks], gms)
                return self._launch_replay(replay, core, [instructions[i] for i in known.watched])
        kernel, p = self._program(core)
        starts = []
        with p.tile(self.tile):
            if known is not None and p.replay(known.program, bases):
                instructions = p.instructions
                marked = [[instructions[i] for i in marks] for marks in known.marks]
                watched = [instructions[i] for i in known.watched]
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
        _hand_over(pieces, marked, gms)
        if watched is None:
            watched = _watched(p.instructions)
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

    def _watch(self, watched: list) -> None:
        """Note the events of the program's first instruction and of each pipe's last one (``watched``)."""
        first, *last_of_pipe = watched
        on_recorded(first, self._first_recorded)
        pipe_end_recorded = self._pipe_end_recorded
        for instruction in last_of_pipe:
            on_recorded(instruction, pipe_end_recorded)

    def _launch(self, kernel: isa.Kernel, p: isa.CoreProgram, core: int, watched: list | None = None) -> simpy.Process:
        """Watch the program's first instruction and each pipe's last one (``watched``, if known),
        and launch it ``inline`` (:meth:`~npusim.isa.program.Kernel.launch`): an AICPU scheduler
        thread dispatches it as its timer (a NORMAL event) is processed, scheduling nothing URGENT
        there but the stream task's start, so the stream task's first step, and then its run's,
        would be the next events processed; a stream task that waits for the one before it on its
        core's stream resumes as that one's last callback, the earlier ones (``_ended``, the
        scheduler's ``core_finished``) scheduling nothing URGENT."""
        self._watch(_watched(p.instructions) if watched is None else watched)
        launch = self.op.program.launch
        process = kernel.launch(stream=launch.core_stream(self.op.program.die, core, self.core_kind), inline=True)  # see _launch's doc
        process.callbacks.append(self._ended)
        # The kernel and its program refer to each other: without that cycle both are freed once
        # the tile op is built and launched (the core runs the placed program), not left to the
        # cycle collector, nor kept while the tile op waits for its core
        kernel.programs.clear()
        return process

    def _launch_replay(self, replay: Replay, core: int, watched: list) -> simpy.Process:
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
                if write.event >= 0 and write.area.pe_of(write.pe) == target_pe and (write.area is not area or write.overlaps(offset, shape)):
                    launch.system.recorder.flow(write.event, event, "put->signal")

    def _ended(self, _event) -> None:
        now = self.op.program.launch.system.env.now
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
        self._word = address.allocation.data[address.offset:address.offset + 4].data.cast("i")
        self._key = (address.allocation.die, address.allocation.address + address.offset)
        self.op.program.launch.slot_waits.setdefault(self._key, []).append(self)

    def value(self) -> int:
        """The slot's word 0 now."""
        return self._word[0]

    def matches(self) -> bool:
        return self._word[0] == self.cmp_value  # value(), inlined: polls read slots very often

    def satisfied(self) -> None:
        launch = self.op.program.launch
        history = launch.slots.get(self._key)
        self.ancestors = self.inherit() | (history.clock if history is not None else 0)
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

    def __init__(self, op: OpNode, device, index: Sequence[int], what: str, writers: Sequence[Task]) -> None:
        super().__init__(op, 0)
        self.device = device  # the DeviceTensor holding the element
        self.index = tuple(index)
        self.what = what  # how the kernel wrote it, for messages
        self.done_event: simpy.Event = op.program.launch.system.env.event()
        self._value: int | None = None
        self.depend_on(writers)
        if op.program.launch.prior_work_done() and all(writer.done for writer in writers):
            self._take_value()  # final already: nothing left to run writes it (the read still takes its time on the device)
        op.program.control = self

    def _take_value(self) -> None:
        if self._value is None and self.device.allocation.data is not None:
            self._value = int(self.device.host_view()[self.index])

    def executed(self, event: int) -> None:
        """The control AICPU has read the element (its trace event ``event``)."""
        self.ancestors = self.inherit()
        self._take_value()
        self.done_event.succeed()

    def value(self) -> int:
        """The element's value, once read on the device, or once final before (the kernel function
        waits for it only when tile ops still to run may write it)."""
        program = self.op.program
        if self._value is not None:
            return self._value
        if not program.launch.system.with_data:
            raise UsageError(
                f"{self.what} (GetTensorData) on PE {program.pe}: the kernel uses a value read from device memory, but "
                "this run simulates timing only (--no-data) and keeps no values to read; run it with data "
                "(npusim run without --no-data, or npusim.session(..., data=True))"
            )
        if not self.done_event.triggered:
            program.wait_for(self)
        assert self._value is not None
        return self._value

    def report(self) -> str:
        return (f"PE {self.op.pe} (die {self.op.program.die}) reads {self.what} (GetTensorData), which cannot be read "
                "until the tile ops that write it have run")


@dataclass(eq=False)
class OpNode:
    """One PyPTO op on one PE: its trace record id, its tile ops, and the line of the user's program
    that called it (``source``, a Callsite or None: race reports name it)."""

    program: PeProgram
    name: str
    record: int
    tasks: list[Task] = field(default_factory=list)
    source: Callsite | None = None

    @property
    def pe(self) -> int:
        return self.program.pe


@dataclass
class RunningLoop:
    """A ``pypto.loop`` running in a kernel function: its ``name`` (as given, may be empty), where it
    is written (``file:line``), the iteration it is at (``index``) and its range."""

    name: str
    written_at: str
    start: int
    stop: int
    step: int
    index: int | None = None

    def __str__(self) -> str:
        named = f" {self.name!r}" if self.name else ""
        count = len(range(self.start, self.stop, self.step))
        at = f" at iteration {len(range(self.start, self.index, self.step)) + 1:,} of {count:,}" if self.index is not None else ""
        return f"pypto.loop{named} ({self.written_at}){at}"


@dataclass(eq=False)
class PeProgram:
    """What one PE's kernel function built: its ops, in call order, and its build state:
    ``creates`` counts its shmem tensors per group, ``control`` is its last device-valued read
    (the tile ops built after it wait for it), ``new_tasks`` the tile ops not yet handed to the
    scheduler, ``builder`` the thread its kernel function runs in."""

    launch: ShmemLaunch
    pe: int
    die: int
    ops: list[OpNode] = field(default_factory=list)
    tile_shape: tuple[int, ...] | None = None
    creates: dict[str, int] = field(default_factory=dict)
    cube_tiles: CubeTiles | None = None  # set_cube_tile_shapes
    control: ControlRead | None = None
    new_tasks: list[Task] = field(default_factory=list)
    builder: object | None = None  # a building.Builder while its kernel function runs
    loops: list[RunningLoop] = field(default_factory=list)  # the pypto.loops its kernel function is in, innermost last
    left: RunningLoop | None = None  # the innermost loop left before its end since the last op or iteration (a break, or an error)
    _ops_since_memory_look: int = 0

    @functools.cached_property
    def ranks(self) -> GroupRanks:
        """This PE's rank in each communication group (one mapping, kept: it looks the groups up when asked)."""
        return GroupRanks(self.launch, self.pe)

    def value_of(self, value):
        """An op argument as its value on this PE: a SymbolicScalar evaluated with this PE's ranks
        (and its device-valued reads, waiting for them), anything else as it is."""
        return value.concrete(self.ranks) if isinstance(value, SymbolicScalar) else value

    def wait_for(self, read: ControlRead) -> None:
        """The kernel function needs ``read``'s value: it waits while the launch runs (the builder thread blocks)."""
        if self.builder is None:
            raise UsageError(f"{read.what}: a device-valued scalar can only be read inside the kernel function of its PE (npusim.launch, "
                             "a jit kernel); a function recorded with pypto.function on host data has no data until it runs")
        self.builder.block(read)

    def where(self, loop: RunningLoop | None = None) -> str:
        """Where this PE's kernel function is being built (in ``loop``, else its innermost running
        loop), for messages: ``while PE 0's kernel was built, in pypto.loop 'ROWS' (kernel.py:12) at
        iteration 7 of 64``."""
        loop = loop or (self.loops[-1] if self.loops else self.left)
        return f" while PE {self.pe}'s kernel was built" + (f", in {loop}" if loop is not None else "")

    def look(self) -> None:
        """The session's limits, looked at as the kernel function builds: the wall clock at each op
        and loop iteration, the memory every :data:`MEMORY_LOOK_OPS` ops."""
        session = self.launch.session
        session.check_wall_clock(self.where())
        self._ops_since_memory_look += 1
        if session.memory is not None and self._ops_since_memory_look >= MEMORY_LOOK_OPS:
            self._ops_since_memory_look = 0
            session.memory.watch_build(self.where())

    def out_of_memory(self, loop: RunningLoop | None) -> OutOfMemoryError:
        """The error of a build that ran out of memory in ``loop``: where, and how many tile ops it had built."""
        built = sum(len(op.tasks) for op in self.ops)
        return OutOfMemoryError(f"the machine ran out of memory{self.where(loop)}, with {built:,} tile ops built (each takes about "
                                f"{BYTES_PER_TILE_OP >> 10} kB once simulated, docs/pypto.md); give the loop fewer iterations, or run it on a "
                                "machine with more memory")

    @functools.cached_property
    def launch_record(self) -> int:
        """The trace record of this PE's kernel launch, which its ops are part of (made with the first op)."""
        return self.launch.system.recorder.op(self.launch.name, self.die, pe=self.pe)

    def op(self, name: str, **args) -> OpNode:
        """A new op of this PE, with its trace record (part of the PE's launch record)."""
        self.left = None
        self.look()
        record = self.launch.system.recorder.op(name, self.die, part_of=self.launch_record, pe=self.pe, **args)
        node = OpNode(self, name, record, source=callsite())
        self.ops.append(node)
        return node

    @property
    def tasks(self) -> list[Task]:
        seen: dict[int, Task] = {}
        for op in self.ops:
            for task in op.tasks:
                seen.setdefault(id(task), task)
        return list(seen.values())


class GroupRanks(Mapping[str, int]):
    """A PE's rank in each communication group: its index among the PEs of a group the launch
    declares (``groups=``), the PE itself in any other group (one of every PE of the launch)."""

    def __init__(self, launch: ShmemLaunch, pe: int) -> None:
        self.launch = launch
        self.pe = pe

    def __getitem__(self, group: str) -> int:
        members = self.launch.groups.get(group)
        if members is None:
            return self.pe
        if self.pe not in members:
            raise WorkloadError(
                f"PE {self.pe} uses communication group {group!r}, but it is not one of its PEs {list(members)}; "
                "a PE can only use the groups it is in (npusim.launch(..., groups={name: [pe, ...]}))"
            )
        return members.index(self.pe)

    def __iter__(self) -> Iterator[str]:
        return iter(self.launch.groups)

    def __len__(self) -> int:
        return len(self.launch.groups)


class ShmemLaunch:
    """One launch of a PyPTO kernel on ``n_pes`` PEs (PE i on die ``dies[i]``); ``groups`` names
    communication groups of some of its PEs (each a list of PEs, by rank); every other group a
    kernel uses spans all PEs."""

    def __init__(self, system: System, name: str, dies: Sequence[int], races: str,
                 groups: Mapping[str, Sequence[int]] | None = None) -> None:
        spec = system.spec.shmem
        self.system = system
        self.spec = spec
        self.name = name
        self.dies = list(dies)
        self.races_mode = races
        self.groups = {name: tuple(members) for name, members in (groups or {}).items()}
        self._every_pe = tuple(range(len(self.dies)))  # the members of a group that ``groups`` does not name
        self.registry = ShmemGroupRegistry(data_window_bytes=spec.data_window.bytes, signal_window_bytes=spec.signal_window.bytes)
        self.areas: list[ShmemArea] = []
        self.group_areas: dict[str, list[ShmemArea]] = {}  # per group, its areas in creation order
        product = PRODUCTS.get(system.spec.product)
        self.core_kinds = {"vector": product.vector_cores, "cube": product.cube_cores}  # the core kind of each unit's tile ops
        from npusim.frontend.pypto.ops import HOST_TILE_SHAPES  # the scope default the host set (ops imports this module)

        host_tiles = HOST_TILE_SHAPES.get(current_session())
        self.programs = [PeProgram(self, pe, die, tile_shape=host_tiles) for pe, die in enumerate(self.dies)]
        self.data_windows: dict[tuple[str, int], Allocation] = {}
        self.signal_windows: dict[tuple[str, int], Allocation] = {}
        self.slots: dict[tuple[int, int], SlotHistory] = {}  # (die, absolute address) of a slot -> what landed there
        self.slot_waits: dict[tuple[int, int], list[WaitTask]] = {}  # (die, absolute address) of a slot -> its waits not yet satisfied
        self.races = RaceDetector(self._race)
        self.templates: dict[tuple, TileTemplate] = {}  # the programs of tile ops kept for reuse, by their pieces' keys
        self.schedulers: list[AicpuScheduler] = []
        self._core_streams: dict[tuple, Stream] = {}
        self.done: simpy.Event | None = None
        self.running = False  # submitted while its kernel functions still build (they read device values)
        self._next_bit = 0
        self.session = current_session()
        self.prior_work = self.session.unfinished_work()  # issued before it: may still write its tensors
        self.first_op = len(system.recorder.ops)  # the trace id of its first op

    @property
    def n_pes(self) -> int:
        return len(self.dies)

    def prior_work_done(self) -> bool:
        """True once the work issued before this launch has been simulated to its end."""
        self.prior_work = [event for event in self.prior_work if not event.processed]
        return not self.prior_work

    def group_members(self, group_name: str) -> tuple[int, ...]:
        """The PEs of a group, by rank: those ``groups`` gives it, else every PE."""
        members = self.groups.get(group_name)
        return members if members is not None else self._every_pe

    # -- building ----------------------------------------------------------------------------------

    @contextlib.contextmanager
    def building(self, pe: int) -> Iterator[PeProgram]:
        """PyPTO ops called inside (in this thread) belong to PE ``pe``."""
        stack = _building()
        stack.append(self.programs[pe])
        try:
            yield self.programs[pe]
        finally:
            stack.pop()

    def create(self, program: PeProgram, op: str, group_name: str, n_pes: int, dtype: DataType | None,
               shape: Sequence[int] | None) -> ShmemArea:
        """The next shmem tensor of a PE in a group: created by the first PE of the group that gets
        there, matched by the others (every PE of a group must create the group's tensors in the same order)."""
        check_group_name(op, group_name)
        check_n_pes(op, n_pes)
        used = program.creates
        if group_name not in used and len(used) >= self.spec.max_groups:
            raise OpArgumentError(
                f"{op}: group_name={group_name!r} would be communication group number {len(used) + 1}, "
                f"but a program may use at most {self.spec.max_groups} (it has {sorted(used)})"
            )
        members = self.group_members(group_name)
        if n_pes != len(members):
            if group_name in self.groups:
                raise WorkloadError(f"{op}: n_pes={n_pes}, but group {group_name!r} has the {len(members)} PEs {list(members)}")
            raise WorkloadError(
                f"{op}: n_pes={n_pes}, but npusim.launch started {self.n_pes} PEs; a communication group spans "
                "every PE of the launch unless npusim.launch(..., groups={name: [pe, ...]}) gives its PEs"
            )
        program.ranks[group_name]  # refuses a PE outside the group
        index = used.get(group_name, 0)
        used[group_name] = index + 1
        areas = self.group_areas.setdefault(group_name, [])
        if index < len(areas):
            area = areas[index]
            mine = (group_name, n_pes, dtype, tuple(shape) if shape is not None else None)
            first = (area.allocation.group_name, area.allocation.n_pes, area.dtype, area.allocation.data_shape)
            if mine != first:
                raise WorkloadError(
                    f"{op}: PE {program.pe} creates shmem tensor #{area.index} as {_created(*mine)}, but PE {area.creator} created it "
                    f"as {_created(*first)}; every PE must create the same shmem tensors in the same order"
                )
            return area
        if dtype is None:
            allocation = self.registry.create_signal(group_name, n_pes, op=op)
        else:
            allocation = self.registry.create_tensor(group_name, n_pes, dtype, shape, op=op)
        area = ShmemArea(self, len(self.areas), allocation, program.pe)
        self.areas.append(area)
        areas.append(area)
        if self.running:
            self._open_windows(area.allocation.group_name)
        return area

    def core_stream(self, die: int, core: int, kind: str) -> Stream:
        """The in-order queue of tile ops of core ``core`` of ``kind`` on die ``die``."""
        key = (die, core, kind)
        stream = self._core_streams.get(key)
        if stream is None:
            stream = self._core_streams[key] = Stream(self.system.env, die, f"{kind}{core}")
        return stream

    # -- finishing and running ---------------------------------------------------------------------

    def finish(self) -> None:
        """Check the PEs built the same shmem tensors, allocate the windows, link the tile ops."""
        self._check_creates()
        self._allocate_windows()
        for program in self.programs:
            tasks = program.tasks
            program.new_tasks = []
            self._link(program, tasks)

    def _check_creates(self) -> None:
        for group_name, areas in self.group_areas.items():
            for pe in self.group_members(group_name):
                count = self.programs[pe].creates.get(group_name, 0)
                if count != len(areas):
                    most = next(p for p in self.group_members(group_name) if self.programs[p].creates.get(group_name, 0) == len(areas))
                    raise WorkloadError(
                        f"npusim.launch: PE {pe} created {count} shmem tensors, but PE {most} created {len(areas)}"
                        f"{'' if group_name not in self.groups else f' in group {group_name!r}'}; every PE must create "
                        "the same shmem tensors"
                    )

    def new_bit(self) -> int:
        """A happens-before bit no tile op of the launch has yet (see :class:`Task`)."""
        bit = 1 << self._next_bit
        self._next_bit += 1
        return bit

    def _link(self, program: PeProgram, tasks: list[Task]) -> None:
        """Give ``tasks`` (new tile ops of ``program``) their successors' links and pending counts
        (predecessors already done do not count)."""
        for task in tasks:
            task.linked = True
            if isinstance(task, WaitTask):
                task.locate()
            pending = 0
            for predecessor in task.deps.values():
                if not predecessor.done:
                    predecessor.successors.append(task)
                    pending += 1
            task.pending = pending
        _check_acyclic(program, tasks)

    def _allocate_windows(self) -> None:
        for group in self.registry.groups:
            data_end = max((group.data_offset_bytes(a) + a.data_bytes for a in group.allocations if a.data_shape is not None), default=0)
            signal_end = max(group.signal_offset_bytes(a) + a.signal_bytes for a in group.allocations)
            self._allocate_group_windows(group.name, data_end, signal_end)

    def _allocate_group_windows(self, group_name: str, data_bytes: int, signal_bytes: int) -> None:
        for pe in self.group_members(group_name):
            memory = self.system.die(self.dies[pe]).memory
            if data_bytes:
                self.data_windows[(group_name, pe)] = memory.allocate(data_bytes, f"shmem data window {group_name!r} PE {pe}")
            self.signal_windows[(group_name, pe)] = memory.allocate(signal_bytes, f"shmem signal window {group_name!r} PE {pe}", control=True)

    def _open_windows(self, group_name: str) -> None:
        """A running launch: the group's windows at their full size (later areas go in them), once."""
        group = self.registry.group(group_name)
        group.freeze()
        if (group_name, self.group_members(group_name)[0]) not in self.signal_windows:
            self._allocate_group_windows(group_name, group.data_window_bytes, group.signal_window_bytes)

    def submit(self) -> simpy.Event:
        """Queue each PE's device task on its die's stream; the event fires when all have ended. A
        run with a memory limit refuses first a launch whose tile ops would take it past the limit
        (:meth:`npusim.frontend.memory.MemoryBudget.expect`)."""
        memory = current_session().memory
        if memory is not None:
            tiles = sum(len(program.tasks) for program in self.programs)
            memory.expect(tiles * BYTES_PER_TILE_OP, f"the launch of {self.name} on {self.n_pes} PE{'s' if self.n_pes > 1 else ''} "
                                                     f"({tiles:,} tile ops)")
        threads, choice = self.spec.schedulers, self.spec.core_choice
        processes = []
        for program in self.programs:
            die = self.system.die(program.die)
            scheduler = AicpuScheduler(die, program.tasks, threads=threads, core_choice=choice, name=f"{self.name} PE {program.pe}")
            self.schedulers.append(scheduler)
            processes.append(self.system.stream(program.die).submit(scheduler.run))
        current_session().deadlock_reporters.append(self._deadlock_lines)
        self.done = self.system.env.all_of(processes)
        return self.done

    # -- running while building (kernels that read device values) -----------------------------------

    def start_running(self) -> simpy.Event:
        """Submit the tile ops built so far while the kernel functions are still building: the
        groups' windows open at full size, each PE's scheduler stays open for more
        (:meth:`add_new_tasks`) until :meth:`close`. Returns the launch's done event."""
        self._allocate_windows_running()
        self.running = True
        for program in self.programs:
            tasks = program.tasks
            program.new_tasks = []
            self._link(program, tasks)
        done = self.submit()
        for scheduler in self.schedulers:
            scheduler.hold()
        return done

    def _allocate_windows_running(self) -> None:
        for group in self.registry.groups:
            self._open_windows(group.name)

    def add_new_tasks(self, program: PeProgram) -> None:
        """Hand the tile ops ``program`` built since the last call to its running scheduler."""
        tasks, program.new_tasks = program.new_tasks, []
        if not tasks:
            return
        self._link(program, tasks)
        self.schedulers[program.pe].add(tasks)

    def abandon(self) -> None:
        """The build failed before anything of it ran: drop what it made (the tile ops, their
        programs and templates, the trace's records of its ops), so that its memory is freed even
        while its error, and the frames that refer to this launch, are kept."""
        for program in self.programs:
            program.ops.clear()
            program.new_tasks.clear()
            program.control = None
        self.templates.clear()
        self.system.recorder.forget_ops(self.first_op)

    def close(self) -> None:
        """Every kernel function has returned: check the shmem tensors and let the schedulers end."""
        self._check_creates()
        for scheduler in self.schedulers:
            scheduler.release()

    def publish(self, task: Task, key: tuple[int, int], event: int) -> None:
        """A signal store of ``task`` (event ``event``) landed in the slot ``key``: a wait that sees
        it is ordered after ``task``."""
        history = self.slots.get(key)
        if history is None:
            history = self.slots[key] = SlotHistory()
        history.clock |= task.ancestors | task.bit
        history.signals.append(event)
        self.slot_changed(key)

    def forget_slots(self, die: int, start: int, end: int) -> None:
        """Slots ``[start, end)`` (absolute addresses on ``die``) were cleared."""
        for key in [k for k in self.slots if k[0] == die and start <= k[1] < end]:
            del self.slots[key]
        for key in [k for k in self.slot_waits if k[0] == die and start <= k[1] < end]:
            self.slot_changed(key)

    def slot_changed(self, key: tuple[int, int]) -> None:
        """The word of slot ``key`` has just changed: its waits may match now (each PE's scheduler
        reads only the waits it is told of, see :meth:`~npusim.hw.aicpu.AicpuScheduler.may_match`)."""
        waits = self.slot_waits.get(key)
        if waits:
            schedulers = self.schedulers
            for task in waits:
                schedulers[task.op.program.pe].may_match(task)

    def _race(self, message: str, reader: Access, writer: Access, racing: Access) -> None:
        if self.races_mode == "off":
            return
        if self.races_mode == "error":
            error = RaceError(message)
            error.blame = racing.source  # the access that races (started last), not the synchronisation that ran it
            raise error
        source = racing.source
        if isinstance(source, Callsite):
            warnings.warn_explicit(message, ShmemRaceWarning, source.filename, source.lineno)
        else:
            warnings.warn_explicit(message, ShmemRaceWarning, f"npusim launch {self.name!r}", 0)
        self.system.recorder.instant(self.system.env.now, reader.memory[0], "data race", message)

    def _deadlock_lines(self) -> list[str]:
        lines = []
        for program, scheduler in zip(self.programs, self.schedulers):
            waiting = scheduler.waiting
            lines.extend(f"  {task.report()}" for task in waiting)
            blocked = scheduler.remaining - len(waiting)
            if scheduler.remaining and blocked:
                lines.append(f"  PE {program.pe} (die {program.die}): {blocked} more tile ops of {self.name!r} have not finished")
        return lines


def _created(group_name: str, n_pes: int, dtype: DataType | None, shape) -> str:
    what = "a signal tensor" if dtype is None else f"{dtype.name} {list(shape)}"
    return f"{what} of group {group_name!r} with n_pes={n_pes}"


def _check_acyclic(program: PeProgram, tasks: list[Task]) -> None:
    """A cycle would never run: it comes from a tile op that consumes a loaded tile (and so runs
    with the load) and also waits, through its preds, for something after the load."""
    pending = {id(t): 0 for t in tasks}  # predecessors among ``tasks`` (those built earlier have no cycle with them)
    for task in tasks:
        pending[id(task)] = sum(1 for dep in task.deps.values() if id(dep) in pending)
    ready = [t for t in tasks if pending[id(t)] == 0]
    done = 0
    while ready:
        task = ready.pop()
        done += 1
        for successor in task.successors:
            if id(successor) in pending:
                pending[id(successor)] -= 1
                if pending[id(successor)] == 0:
                    ready.append(successor)
    if done < len(tasks):
        stuck = sorted({t.op.name + f"#{t.op.record}" for t in tasks if pending[id(t)] > 0})
        raise WorkloadError(
            f"PE {program.pe}: the preds form a cycle among {', '.join(stuck)}: a tile op that stores or assigns a "
            "loaded tile runs with its shmem_load, so its preds must not wait for ops that come after the load"
        )


# -- the framework's pypto.runtime names (its host-data launch style: host_data.py, which builds on this module) --

from npusim.frontend.pypto import host_data as _host_data  # noqa: E402 (it builds on this module's launch)

RunMode = _host_data.RunMode
_device_init = _host_data.device_init
_device_fini = _host_data.device_fini
_device_synchronize = _host_data.device_synchronize
_device_run_once_data_from_host = _host_data.run_once_data_from_host
