"""The instructions of an AI core: DMA copies, vector and cube compute, scalar work and pipe sync.

Each instruction knows its pipe, its cost and its functional effect on real data. ``start`` returns
the busy time in ps, or a SimPy event for instructions whose end depends on others (DMAs crossing the
bandwidth network, ``wait_flag``, ``pipe_barrier(ALL)``). ``effect`` is applied at completion and
only when data is on, so timing never depends on it.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Generator, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple, TypeVar, cast

import numpy as np
import numpy.typing as npt
import simpy
from numpy.lib.stride_tricks import as_strided

from npusim.engine.loop import Environment
from npusim.engine.progress import ProgressCounter
from npusim.errors import OpArgumentError, UsageError, WorkloadError
from npusim.hw.core import FIXED, SET_FLAG, TRANSFER, WAIT_FLAG, WAITING, AICore, KernelRun, RouteKey, flag_key
from npusim.hw.memory import Allocation
from npusim.hw.pipes import PIPE_NAMES, Pipe
from npusim.hw.queue import Request
from npusim.isa import vector as vector_semantics
from npusim.isa.fractal import FRACTAL_ROWS, inner_block, nz_count, nz_pack, nz_unpack, padded
from npusim.isa.scalar import ScalarExpr, resolve

if TYPE_CHECKING:
    from npusim.hw.cache import L2Tally
    from npusim.hw.timing import DieTiming
    from npusim.trace.costs import CostRule
    from npusim.trace.recorder import Recorder


class LocalTensor:
    """``count`` elements of ``dtype`` at ``offset`` bytes of an on-chip buffer (UB, L1, L0A/B/C)."""

    __slots__ = ("buffer", "offset", "count", "dtype")

    def __init__(self, buffer: str, offset: int, count: int, dtype: npt.DTypeLike) -> None:
        self.buffer = buffer
        self.offset = offset
        self.count = count
        self.dtype = np.dtype(dtype)

    @property
    def nbytes(self) -> int:
        return self.count * self.dtype.itemsize

    def __getitem__(self, index: slice) -> LocalTensor:
        """A contiguous element range ``[start:stop]`` of this tensor."""
        if not isinstance(index, slice) or index.step not in (None, 1):
            raise TypeError("a LocalTensor is sliced by a contiguous range, e.g. ub[128:256]")
        start, stop, _ = index.indices(self.count)
        return LocalTensor(self.buffer, self.offset + start * self.dtype.itemsize, max(stop - start, 0), self.dtype)

    def reinterpret(self, dtype: npt.DTypeLike) -> LocalTensor:
        """The same bytes seen as another dtype."""
        seen = np.dtype(dtype)
        return LocalTensor(self.buffer, self.offset, self.nbytes // seen.itemsize, seen)

    def values(self, core: AICore) -> np.ndarray:
        """A writable numpy view of the tensor in ``core``'s buffer."""
        return core.buffers[self.buffer].view(self.offset, self.count, self.dtype)

    def __repr__(self) -> str:
        return f"{self.buffer}[{self.offset}:{self.offset + self.nbytes}]<{self.dtype}>"


def values_together(core: AICore, tensors: Sequence[LocalTensor]) -> list[np.ndarray]:
    """Writable numpy views of ``tensors`` in ``core``'s buffers that are valid together.

    A local buffer grows as it is used, and growing moves its bytes: a view taken before another
    view of the same buffer grew it would read and write the old bytes. So each buffer is first
    grown to hold the furthest of its tensors, then the views are taken."""
    ends: dict[str, int] = {}
    for tensor in tensors:
        ends[tensor.buffer] = max(ends.get(tensor.buffer, 0), tensor.offset + tensor.nbytes)
    for name, end in ends.items():
        core.buffers[name].reach(end)
    return [tensor.values(core) for tensor in tensors]


class GmAddress:
    """A byte address in one die's GM: an allocation and an offset (int, or an expression over
    scalar registers resolved when the instruction is issued)."""

    __slots__ = ("allocation", "offset")

    def __init__(self, allocation: Allocation, offset: int | ScalarExpr = 0) -> None:
        self.allocation = allocation
        self.offset = offset

    def __add__(self, delta: int | ScalarExpr) -> GmAddress:
        return GmAddress(self.allocation, self.offset + delta)

    def __repr__(self) -> str:
        return f"GM(die{self.allocation.die} {self.allocation.label} +{self.offset})"


READ, WRITE, ATOMIC = 0, 1, 2
"""What an instruction does to the bytes of a footprint entry (:meth:`Instruction.footprint`);
atomic adds (``ATOMIC``) conflict with reads and writes, not with each other."""


Entry = tuple["str | Allocation", int, int, int, int, int]
"""A footprint entry (:meth:`Instruction.footprint`): memory, kind, start, length, stride, count."""
CopySide = LocalTensor | GmAddress
"""A side of a copy: a tensor in an on-chip buffer, or a GM address."""
StridedView = tuple[Sequence[int], Sequence[int]]
"""A strided view of a tensor: shape and strides, in elements."""


def _run(side: CopySide, kind: int, burst_count: int, burst_bytes: int, gap: int) -> Entry | None:
    """The footprint entry of a copy's side: ``burst_count`` runs of ``burst_bytes``, ``gap`` apart;
    None for a GM address computed from scalar registers (known only when issued) or no bytes."""
    if burst_count <= 0 or burst_bytes <= 0:
        return None
    if gap == 0:  # contiguous: one run
        burst_bytes, burst_count = burst_bytes * burst_count, 1
    if isinstance(side, LocalTensor):
        return side.buffer, kind, side.offset, burst_bytes, burst_bytes + gap, burst_count
    if not isinstance(side.offset, int):
        return None
    return side.allocation, kind, side.offset, burst_bytes, burst_bytes + gap, burst_count


def _span(tensor: LocalTensor, kind: int, nbytes: int | None = None) -> Entry | None:
    """The footprint entry of ``nbytes`` (default: all) of a local tensor from its start."""
    size = tensor.nbytes if nbytes is None else nbytes
    return (tensor.buffer, kind, tensor.offset, size, size, 1) if size > 0 else None


def _view_bytes(tensor: LocalTensor, shape: Sequence[int], strides: Sequence[int]) -> int:
    """Bytes from ``tensor``'s start to the end of its strided view (shape, strides in elements)."""
    return (1 + sum((n - 1) * s for n, s in zip(shape, strides))) * tensor.dtype.itemsize if all(shape) else 0


def _entries(*entries: Entry | None) -> tuple[Entry, ...]:
    return tuple(entry for entry in entries if entry is not None)


PathKey = tuple[object, ...]
"""A copy's path key, a :data:`~npusim.hw.core.RouteKey`, typed as a tuple of any length: compiled code keeps it the object it is
(a fixed-length tuple it would unbox and box anew), and the replays of copies share one key object per path."""
_PATH_KEYS: dict[PathKey, PathKey] = {}  # each path key made for a rebased copy, once: replays of copies to other dies share it


def _path_key(pipe: Pipe, dst: CopySide, src: CopySide, atomic: bool = False) -> PathKey:
    """Which path a copy takes, as the core's DMA path table knows it: (pipe, GM die, towards GM,
    its move ``(source, destination)`` places: ``("GM", "L1")`` ..., whether it is an atomic-add
    store: its bytes also cross the target L2's atomic unit)."""
    move = (_place_name(src), _place_name(dst))
    if isinstance(dst, GmAddress):
        return (pipe, dst.allocation.die, True, move, atomic)
    if isinstance(src, GmAddress):
        return (pipe, src.allocation.die, False, move, False)
    return (pipe, None, False, move, False)


def _tensor(side: CopySide) -> LocalTensor:
    """``side``, a side of a copy that its class puts in an on-chip buffer."""
    assert isinstance(side, LocalTensor), f"{side!r} is not in an on-chip buffer"
    return side


def _gm(side: CopySide) -> GmAddress:
    """``side``, a side of a copy that its class puts in GM."""
    assert isinstance(side, GmAddress), f"{side!r} is not in GM"
    return side


def _place_name(side: CopySide) -> str:
    """Where a copy's side is: ``GM`` or the buffer's name."""
    return "GM" if isinstance(side, GmAddress) else side.buffer


class Instruction:
    """Base of every instruction; ``npusim.hw.core`` documents the protocol the pipes use.
    ``control`` ones (signal writes) keep their effect when data is off, since waits depend on it.
    ``recorded`` (None, or a callable given the index of the instruction's event once the pipe has
    recorded it) lets an op draw flows from or to that event (:func:`on_recorded`)."""

    __slots__ = ("pipe", "name_id", "s_dep", "nbytes", "tile", "label_id", "label", "fixed_ps", "control", "recorded")
    step = WAITING
    has_effect = False
    """Whether it has an :meth:`effect` on real data (a class's own)."""

    def __init__(self, pipe: Pipe, label: str, nbytes: int = 0) -> None:
        self.pipe = pipe
        self.label = label
        self.nbytes = nbytes
        self.name_id = -1
        self.s_dep = 0
        self.tile = -1
        self.label_id = 0  # (name id, tile) packed for the recorder, set when appended to a program
        self.fixed_ps: int | None = None  # the busy time of a FIXED step
        self.control = False
        self.recorded: Callable[[int], None] | None = None

    def start(self, core: AICore, run: KernelRun) -> int | simpy.Event:
        """The busy time in ps of a WAITING step, or an event it waits on."""
        raise NotImplementedError

    def effect(self, core: AICore, run: KernelRun) -> None:
        """Its effect on ``core``'s buffers or GM (with data on, or where ``control``) as it completes,
        for a class that ``has_effect``."""
        raise NotImplementedError

    def cost_rule(self, timing: DieTiming) -> CostRule | None:
        """The config keys of this instruction's time (:mod:`npusim.trace.costs`), from the die's
        ``timing`` its cost came from; None for a copy, whose time the copy's transfer explains."""
        return None

    def twin(self) -> Instruction:
        """A new instruction equal to this one as its program built it (pipe, label, cost, operands,
        tile, ``s_dep``), with its own state: what an op or the race check attached (``recorded``) is
        not carried over. Classes that have no ``twin`` raise TypeError
        (programs holding them are not reused: :class:`~npusim.isa.program.ProgramTemplate`)."""
        raise TypeError(f"{type(self).__name__} has no twin")

    def _placed_like(self, new: Placed) -> Placed:
        """``new``, a twin just built from this instruction's operands, placed as this one is in its
        program (name, tile, ``s_dep``, bytes, cost, ``control``); its own ``recorded`` stays None."""
        new.name_id, new.s_dep, new.nbytes, new.tile, new.label_id = self.name_id, self.s_dep, self.nbytes, self.tile, self.label_id
        new.fixed_ps, new.control = self.fixed_ps, self.control
        return new

    def footprint(self) -> tuple[Entry, ...]:
        """The bytes this instruction reads and writes, for the race checker (:mod:`npusim.isa.racecheck`):
        entries ``(memory, kind, start, length, stride, count)``, ``count`` runs of ``length`` bytes
        ``stride`` apart from byte ``start`` of ``memory`` (an on-chip buffer's name, or a GM
        :class:`~npusim.hw.memory.Allocation`); kind :data:`READ`, :data:`WRITE` or :data:`ATOMIC`."""
        return ()

    def __repr__(self) -> str:
        return f"{self.pipe.name} {self.label}"


def shared_by_replays(event: int) -> None:
    """The ``recorded`` of an instruction the replays of a template share in a tile
    (:meth:`~npusim.isa.program.ProgramTemplate.skeleton`): its pipes never call it, and
    :func:`on_recorded` refuses to attach to it."""
    raise AssertionError("a pipe called the recorded hook of an instruction shared by replays")


def on_recorded(instruction: Instruction, callback: Callable[[int], None]) -> None:
    """Call ``callback(event_index)`` once ``instruction``'s event is recorded (after any callback
    already attached); with data on or off alike. Not for an instruction the replays of a template
    share (:meth:`~npusim.isa.program.CoreProgram.template`'s ``own`` names those that take one):
    UsageError."""
    earlier = instruction.recorded
    if earlier is shared_by_replays:
        raise UsageError(f"cannot attach to {instruction!r}: the replays of a template in its tile share it, so "
                         "its event is every replay's; name its position in the template's own= (CoreProgram.template)")
    if earlier is None:
        instruction.recorded = callback
    else:
        def both(event: int) -> None:
            earlier(event)
            callback(event)

        instruction.recorded = both


Placed = TypeVar("Placed", bound=Instruction)


class FixedCost(Instruction):
    """An instruction whose time is known when it is built (vector, cube, scalar work)."""

    __slots__ = ()
    step = FIXED

    def __init__(self, pipe: Pipe, label: str, cost_ps: int, nbytes: int = 0) -> None:
        super().__init__(pipe, label, nbytes)
        self.fixed_ps = cost_ps

    def cost_rule(self, timing: DieTiming) -> CostRule | None:
        """Scalar work costs ``die.scalar.instruction`` each; on another pipe a fixed cost is a
        ``pipe_barrier`` of that pipe (:meth:`~npusim.isa.program.CoreProgram.pipe_barrier`)."""
        return timing.scalar.rule("instruction" if self.pipe is Pipe.SCALAR else "barrier")

    def twin(self) -> Instruction:
        if type(self) is not FixedCost:  # a subclass with operands of its own defines its twin, or has none
            return super().twin()
        return self._placed_like(FixedCost(self.pipe, self.label, self._cost(), self.nbytes))

    def _cost(self) -> int:
        """Its busy time (ps)."""
        cost_ps = self.fixed_ps
        assert cost_ps is not None  # set as it is built
        return cost_ps


class ScalarRead(FixedCost):
    """The scalar unit reads element ``index`` of a UB tensor into a register (needs the data to
    be in UB: synchronise with ``wait_flag(MTE2, SCALAR)`` first). ``bound``: ``(limit, rule)``
    for an index value, which must lie in ``[0, limit)``; a value outside raises OpArgumentError
    with ``rule`` (the op's wording of it)."""

    __slots__ = ("source", "index", "reg_id", "bound")
    has_effect = True

    def __init__(self, source: LocalTensor, index: int, reg_id: int, cost_ps: int, bound: tuple[int, str] | None = None) -> None:
        super().__init__(Pipe.SCALAR, "read_scalar", cost_ps)
        self.source, self.index, self.reg_id, self.bound = source, index, reg_id, bound

    def cost_rule(self, timing: DieTiming) -> CostRule | None:
        return timing.scalar.rule("ub_read")

    def effect(self, core: AICore, run: KernelRun) -> None:
        value = self.source.values(core)[self.index].item()
        if self.bound is not None and not 0 <= value < self.bound[0]:
            raise OpArgumentError(self.bound[1].format(value=value))
        run.regs[self.reg_id] = value


    def footprint(self) -> tuple[Entry, ...]:
        return _entries(_span(self.source[self.index : self.index + 1], READ))


class ScalarWrite(FixedCost):
    """The scalar unit writes ``value`` into element ``index`` of a UB tensor (e.g. a signal value
    that an MTE3 store then sends; synchronise with ``set_flag(SCALAR, MTE3)`` first); ``value`` an
    array: one write per element, from ``index`` on (``CoreProgram.write_scalars``)."""

    __slots__ = ("target", "index", "value")
    has_effect = True

    def __init__(self, target: LocalTensor, index: int, value: int | float | np.ndarray, cost_ps: int, label: str = "write_scalar") -> None:
        super().__init__(Pipe.SCALAR, label, cost_ps)
        self.target, self.index, self.value = target, index, value

    def cost_rule(self, timing: DieTiming) -> CostRule | None:
        return timing.scalar.rule("ub_read")

    @property
    def count(self) -> int:
        return len(self.value) if isinstance(self.value, np.ndarray) else 1

    def effect(self, core: AICore, run: KernelRun) -> None:
        if isinstance(self.value, np.ndarray):
            self.target.values(core)[self.index : self.index + len(self.value)] = self.value
        else:
            self.target.values(core)[self.index] = self.value


    def twin(self) -> Instruction:
        return self._placed_like(ScalarWrite(self.target, self.index, self.value, self._cost(), self.label))

    def footprint(self) -> tuple[Entry, ...]:
        return _entries(_span(self.target[self.index : self.index + self.count], WRITE))


_FLAG_LABELS: dict[tuple[str, int, int, int], tuple[str, int]] = {}  # (verb, src, dst, event id) -> (label, flag key)


def _flag(verb: str, src: Pipe, dst: Pipe, event_id: int) -> tuple[str, int]:
    """The label and the key of a set_flag / wait_flag, made once per flag (programs are built per tile op)."""
    made = _FLAG_LABELS.get((verb, src, dst, event_id))
    if made is None:
        made = _FLAG_LABELS[(verb, src, dst, event_id)] = (f"{verb} {PIPE_NAMES[src]}->{PIPE_NAMES[dst]} #{event_id}",
                                                            flag_key(src, dst, event_id))
    return made


class SetFlag(Instruction):
    """Raise flag (src pipe -> dst pipe, event id) once the src pipe's earlier instructions are done."""

    __slots__ = ("flag", "key", "cost_ps")
    step = SET_FLAG

    def __init__(self, src: Pipe, dst: Pipe, event_id: int, cost_ps: int) -> None:
        label, self.key = _flag("set_flag", src, dst, event_id)
        super().__init__(src, label)
        self.flag = (src, dst, event_id)
        self.cost_ps = cost_ps

    def cost_rule(self, timing: DieTiming) -> CostRule | None:
        return timing.scalar.rule("flag")

    def twin(self) -> Instruction:
        src, dst, event_id = self.flag
        return self._placed_like(SetFlag(src, dst, event_id, self.cost_ps))


class WaitFlag(Instruction):
    """Block the dst pipe until flag (src pipe -> dst pipe, event id) is raised, then consume it."""

    __slots__ = ("flag", "key", "cost_ps")
    step = WAIT_FLAG

    def __init__(self, src: Pipe, dst: Pipe, event_id: int, cost_ps: int) -> None:
        label, self.key = _flag("wait_flag", src, dst, event_id)
        super().__init__(dst, label)
        self.flag = (src, dst, event_id)
        self.cost_ps = cost_ps

    def cost_rule(self, timing: DieTiming) -> CostRule | None:
        return timing.scalar.rule("flag")

    def twin(self) -> Instruction:
        src, dst, event_id = self.flag
        return self._placed_like(WaitFlag(src, dst, event_id, self.cost_ps))


class PipeBarrierAll(Instruction):
    """``pipe_barrier(ALL)`` on the scalar pipe: issue stops until every pipe has finished all the
    instructions that precede the barrier in program order."""

    __slots__ = ("targets", "cost_ps")

    def __init__(self, targets: list[tuple[Pipe, int]], cost_ps: int) -> None:
        super().__init__(Pipe.SCALAR, "pipe_barrier ALL")
        self.targets = targets
        self.cost_ps = cost_ps

    def twin(self) -> Instruction:
        """Its twin waits for the same counts of each pipe: right where it is replayed as a whole
        program; :meth:`~npusim.isa.program.CoreProgram.extend` gives the twin it appends its own."""
        return self._placed_like(PipeBarrierAll(self.targets, self.cost_ps))

    def cost_rule(self, timing: DieTiming) -> CostRule | None:
        return timing.scalar.rule("barrier")

    def start(self, core: AICore, run: KernelRun) -> int | simpy.Event:
        env = run.env
        if all(_progress(run, pipe).count >= n for pipe, n in self.targets) and self._drained_at(run) <= env.now:
            return self.cost_ps
        return env.process(self._drain(run))

    def _drained_at(self, run: KernelRun) -> int:
        """When the last of the awaited instructions ends (pipes may have run ahead of the clock)."""
        ends = run.ends
        assert ends is not None  # kept for a program with a pipe_barrier(ALL)
        return max((ends[int(pipe)][n - 1] for pipe, n in self.targets if n), default=0)

    def _drain(self, run: KernelRun) -> Generator[simpy.Event, object, None]:
        env = run.env
        for pipe, n in self.targets:
            progress = _progress(run, pipe)
            if progress.count < n:
                yield progress.reached(n)
        drained = self._drained_at(run)
        if drained > env.now:
            yield env.timeout(drained - env.now)


def _progress(run: KernelRun, pipe: Pipe) -> ProgressCounter:
    """``run``'s progress counter of ``pipe``, a pipe with instructions (its counter made as it started)."""
    progress = run.progress[pipe]
    assert progress is not None, f"{pipe.name} has no instructions to wait for"
    return progress


def _succeed_after(timeout: simpy.Event, event: simpy.Event) -> None:
    """Make ``event`` succeed as ``timeout`` fires (in its callbacks)."""
    def succeed(_: simpy.Event) -> None:
        event.succeed()

    timeout.callbacks.append(succeed)


class PollGm(Instruction):
    """The loop of a core that reads status words in GM until ``need`` of them hold ``expected``
    (flags that other dies write into its window; the kernels sum the flags and compare): an MTE2
    read of the words, a reduction and a scalar compare per iteration, ``poll_ps`` each, on the
    scalar pipe, so nothing after it in program order starts before it ends. It ends with the first
    iteration, counted from its start, that ends once enough words hold ``expected`` (at least one
    iteration). The words are ``count`` int32 values ``stride`` bytes apart from ``address``, in
    control memory (real bytes with data off too)."""

    __slots__ = ("address", "count", "stride", "expected", "need", "poll_ps", "waiting_for")

    def __init__(self, address: GmAddress, count: int, stride: int, expected: int, need: int, poll_ps: int, label: str,
                 waiting_for: str) -> None:
        super().__init__(Pipe.SCALAR, label)
        self.address, self.count, self.stride, self.expected, self.poll_ps = address, count, stride, expected, poll_ps
        self.need = need
        self.waiting_for = waiting_for

    def words(self) -> np.ndarray:
        """The polled words as they are now."""
        data = self.address.allocation.data
        offset = self.address.offset
        assert data is not None and isinstance(offset, int), "polled words live in control memory at a known offset"
        return as_strided(data[offset:], shape=(self.count, 4), strides=(self.stride, 1)).copy().view(np.int32)[:, 0]

    def met(self) -> bool:
        return int(np.count_nonzero(self.words() == self.expected)) >= self.need

    def start(self, core: AICore, run: KernelRun) -> int | simpy.Event:
        if self.met():
            return self.poll_ps
        env = run.env
        started, poll_ps = env.now, self.poll_ps
        allocation = self.address.allocation
        done = env.event()
        first = self.address.offset
        assert isinstance(first, int), "polled words live at a known offset"
        if allocation.watchers is None:
            allocation.watchers = []
        watchers = allocation.watchers

        def look(writer: Instruction | None) -> None:
            """Called by each write into the watched bytes: ``writer`` the store (None: an engine's
            write, e.g. an RDMA write's flags, which draws no arrow)."""
            if self.met():
                watchers.remove(watcher)
                iterations = max(1, -(-(env.now - started) // poll_ps))
                _succeed_after(env.timeout(started + iterations * poll_ps - env.now), done)
                if writer is not None:
                    self._arrow_from(writer, core.system.recorder)

        watcher = (first, first + (self.count - 1) * self.stride + 4, look)
        watchers.append(watcher)
        return done

    def _arrow_from(self, writer: Instruction, recorder: Recorder) -> None:
        """A ``signal->poll`` flow from the store that completed the words to this poll, once both
        are recorded (the store's event is recorded right after its effect, this poll's when it ends)."""
        ends: dict[str, int] = {}

        def seen(which: str, index: int) -> None:
            ends[which] = index
            if len(ends) == 2:
                recorder.flow(ends["writer"], ends["poll"], "signal->poll")

        on_recorded(writer, lambda index: seen("writer", index))
        on_recorded(self, lambda index: seen("poll", index))

    def footprint(self) -> tuple[Entry, ...]:
        return ()

    def __repr__(self) -> str:
        return (f"SCALAR {self.label}: {self.waiting_for}; {int(np.count_nonzero(self.words() == self.expected))} of the "
                f"{self.need} status words needed hold {self.expected}")


class CoreBarrier:
    """The SyncAll of the cores of one kernel launch: ``parties`` programs each end a phase with a
    :class:`SyncAll`; each waits until all have arrived, then ``cost_ps`` more. The last to arrive
    draws a ``sync all`` flow to every other (the critical path follows it to the slowest core)."""

    def __init__(self, cost_ps: int) -> None:
        self.cost_ps = cost_ps
        self.parties = 0
        self.arrived: list[SyncAll] = []
        self.release: simpy.Event | None = None  # the event every core waits on, made by the first to arrive

    def arrive(self, instruction: SyncAll, env: Environment) -> simpy.Event:
        if self.release is None:
            self.release = env.event()
        self.arrived.append(instruction)
        if len(self.arrived) == self.parties:
            release = self.release
            _succeed_after(env.timeout(self.cost_ps), release)
            self._arrows(instruction, int(env.now))
        return self.release

    def _arrows(self, last: SyncAll, released_at: int) -> None:
        """The ``sync all`` flows, released at ``released_at`` (ps): the last core's arrival."""
        events: dict[int, int] = {}
        recorder = last.recorder

        def seen(position: int, index: int) -> None:
            events[position] = index
            if len(events) == len(self.arrived):
                source = events[len(self.arrived) - 1]
                for position in range(len(self.arrived) - 1):
                    recorder.flow(source, events[position], "sync all", released_at)

        for position, instruction in enumerate(self.arrived):
            on_recorded(instruction, functools.partial(seen, position))


class SyncAll(Instruction):
    """``SyncAll()`` of Ascend C (the hard sync of a kernel's vector cores): on the scalar pipe,
    the core waits at it until every core of the launch has arrived at its own, then the barrier's
    cost (:class:`CoreBarrier`)."""

    __slots__ = ("barrier", "recorder")

    def __init__(self, barrier: CoreBarrier, recorder: Recorder) -> None:
        super().__init__(Pipe.SCALAR, "SyncAll")
        self.barrier, self.recorder = barrier, recorder

    def cost_rule(self, timing: DieTiming) -> CostRule | None:
        return timing.sync_all_rule()

    def start(self, core: AICore, run: KernelRun) -> int | simpy.Event:
        return self.barrier.arrive(self, run.env)


class DmaCopy(Instruction):
    """A copy by an MTE / FixPipe engine: ``burst_count`` bursts of ``burst_bytes``, the source
    advancing by ``burst_bytes + src_gap`` and the destination by ``burst_bytes + dst_gap`` between
    bursts. Either side may be GM (local or another die's, reached through the fabric).

    It is a request of its engine's queue (:class:`~npusim.hw.queue.EngineQueue`): its bytes may
    start flowing at issue + engine set-up + path latency (fabric hops, and the L2 on a hit or the L2
    and HBM on a miss: :mod:`npusim.hw.cache` looks its GM lines up), and do once the engine's
    earlier requests have streamed and it has issued its bursts (bursts x per-burst cost: the
    engine's own work for the request, one GM request per burst);
    they flow at the max-min fair rate of the path (each burst rounded up to the 32-byte granule),
    the part that hits in L2 then the part that misses."""

    __slots__ = ("src", "dst", "burst_count", "burst_bytes", "src_gap", "dst_gap", "granule", "moved_bytes", "dynamic", "_resolved", "path_key")
    has_effect = True
    rebasable = True
    """Whether a copy of this class has a copy for other GM bytes (:meth:`rebased`): all its other
    fields are the same wherever its GM sides are."""

    def __init__(self, pipe: Pipe, dst: CopySide, src: CopySide, burst_count: int, burst_bytes: int, src_gap: int, dst_gap: int, granule: int, label: str) -> None:
        super().__init__(pipe, label, burst_count * burst_bytes)
        self.src, self.dst = src, dst
        self.burst_count, self.burst_bytes = burst_count, burst_bytes
        self.src_gap, self.dst_gap, self.granule = src_gap, dst_gap, granule
        self.moved_bytes = burst_count * (-(-burst_bytes // granule) * granule)
        self.dynamic = isinstance(src.offset, ScalarExpr) or isinstance(dst.offset, ScalarExpr)  # a GM address from registers
        self._resolved: tuple[int, int] | None = None
        self.path_key: PathKey = _path_key(pipe, dst, src)

    step = TRANSFER

    def rebased(self, dst: CopySide, src: CopySide) -> DmaCopy:
        """The :meth:`twin` of this copy between ``dst`` and ``src`` (GM addresses of other bytes in
        place of its GM sides, the same buffers); only a copy of known addresses of a
        :attr:`rebasable` class has one."""
        if not self.rebasable or self.dynamic:
            raise TypeError(f"{type(self).__name__} {self.label!r} is not rebased")
        return self.moved(dst, src)

    def _moved(self, dst: CopySide, src: CopySide, path_key: PathKey) -> DmaCopy:
        """Its twin between ``dst`` and ``src`` on the path ``path_key`` (:meth:`moved`'s, given);
        each class with operands of its own builds its own."""
        return self._placed_on(DmaCopy(self.pipe, dst, src, self.burst_count, self.burst_bytes, self.src_gap, self.dst_gap, self.granule,
                                       self.label), path_key)

    def _placed_on(self, new: Copied, path_key: PathKey) -> Copied:
        """``new``, a twin just built by :meth:`_moved`, placed as this copy is (:meth:`_placed_like`), on ``path_key``."""
        new.path_key = path_key
        return self._placed_like(new)

    def moved(self, dst: CopySide, src: CopySide) -> DmaCopy:
        """:meth:`rebased`, for a copy known to have one (a template's: its twin was made)."""
        # _path_key of the new sides: they are GM where this copy's are, so only the GM die can differ
        key = self.path_key
        if key[1] is not None:
            gm_side = dst if key[2] else src
            assert isinstance(gm_side, GmAddress)  # GM where this copy's is
            key = self.path_key_on(gm_side.allocation.die)
        return self._moved(dst, src, key)

    def path_key_on(self, die: int) -> PathKey:
        """Its path key with its GM side on die ``die``: its own when that is where it is (one
        tuple for the copies of one path)."""
        key = self.path_key
        if die != key[1]:
            key = (key[0], die, key[2], key[3], key[4])
            key = _PATH_KEYS.setdefault(key, key)
        return key

    def twin(self) -> Instruction:
        return self.rebased(self.dst, self.src)

    def span(self, gap: int) -> int:
        """Bytes from a side's first byte to its last one's end, with ``gap`` bytes between bursts."""
        return self.burst_count * self.burst_bytes + (self.burst_count - 1) * gap

    def request(self, core: AICore, run: KernelRun, issue_ps: int, tally: L2Tally | None, complete: Callable[[Any, int, int, int, int], None],
                owner: object, tail: Callable[[Any, int], int] | None = None) -> Request:
        """This copy as a request of its engine's queue (:class:`~npusim.hw.queue.Request`), issued at
        ``issue_ps``: its flows (:meth:`~npusim.hw.core.AICore.dma_segments`, its GM side looked up
        in L2 with the op's counters ``tally``) and its bursts' cost; ``complete`` with ``owner``
        once it has completed (after ``tail``, if given). An address from scalar registers is
        resolved now."""
        if self.dynamic and (core.system.with_data or self.control):
            self._resolved = (self._offset(self.src, run), self._offset(self.dst, run))
        key, bursts = self.path_key, self.burst_count
        route = core.dma_routes.get(key) or core.dma_route(cast(RouteKey, key))
        side, gap = (self.dst, self.dst_gap) if key[2] else (self.src, self.src_gap)  # its GM side, if any (the destination towards GM)
        if not isinstance(side, GmAddress):  # no GM side (key[1] is None)
            segments = core.dma_segments(route, self.moved_bytes, issue_ps, None, 0, 0, 0, 0, None)
        elif self.dynamic or not isinstance(offset := side.offset, int):  # (an offset not an int is dynamic)
            # its bytes are known only with data on: not looked up, so timing does not depend on data
            segments = core.dma_segments(route, self.moved_bytes, issue_ps, None, 0, self.span(gap), 0, 1, tally)
        else:
            segments = core.dma_segments(route, self.moved_bytes, issue_ps, side.allocation, offset, self.burst_bytes,
                                         self.burst_bytes + gap, bursts, tally)
        return Request(segments, bursts * route.per_burst_ps, issue_ps, complete, owner, tail)

    def footprint(self) -> tuple[Entry, ...]:
        return _entries(_run(self.src, READ, self.burst_count, self.burst_bytes, self.src_gap),
                        _run(self.dst, ATOMIC if isinstance(self, AtomicAddCopy) else WRITE, self.burst_count, self.burst_bytes, self.dst_gap))

    def _offset(self, side: CopySide, run: KernelRun) -> int:
        """The byte offset of ``side`` in its memory, a GM address from scalar registers resolved from ``run``'s
        values of them (WorkloadError where the copy would leave its allocation)."""
        if not isinstance(side, GmAddress):
            return side.offset
        offset = int(resolve(side.offset, run.regs))  # an address: an int (a register's value may be numpy's)
        span = self.span(self.src_gap if side is self.src else self.dst_gap)
        if offset < 0 or offset + span > side.allocation.size_bytes:
            raise WorkloadError(
                f"{run.core!r}: {self.label} addresses bytes {offset}..{offset + span} of {side.allocation.label} "
                f"(die {side.allocation.die}, {side.allocation.size_bytes} bytes): out of bounds; on hardware this "
                "would read or corrupt other memory silently. Check the index the address is computed from"
            )
        return offset

    def _bytes_of(self, side: CopySide, core: AICore, offset: int, gap: int) -> np.ndarray:
        span = self.span(gap)
        buffer = side.allocation.data if isinstance(side, GmAddress) else core.buffers[side.buffer].reach(offset + span)
        assert buffer is not None  # bytes are read with data on, where GM holds them
        window = buffer[offset : offset + span]
        if self.burst_count == 1:
            return window
        return as_strided(window, shape=(self.burst_count, self.burst_bytes), strides=(self.burst_bytes + gap, 1), writeable=True)

    def _offsets(self) -> tuple[int, int]:
        """The byte offsets of its sides (``src``, ``dst``) in their memories: an address from
        scalar registers as it was resolved when the copy was issued."""
        if self._resolved is not None:
            return self._resolved
        src, dst = self.src.offset, self.dst.offset
        assert isinstance(src, int) and isinstance(dst, int), "a copy of a register address is resolved when issued"
        return src, dst

    def effect(self, core: AICore, run: KernelRun) -> None:
        src_offset, dst_offset = self._offsets()
        source = self._bytes_of(self.src, core, src_offset, self.src_gap).copy()
        dst = self.dst
        self._bytes_of(dst, core, dst_offset, self.dst_gap)[...] = source
        self._wake_watchers(dst_offset)

    def _wake_watchers(self, dst_offset: int) -> None:
        """Tell the watchers of the GM bytes this copy has just written (a poll of status words) that
        they changed."""
        dst = self.dst
        if dst.__class__ is GmAddress and dst.allocation.watchers:
            end = dst_offset + self.span(self.dst_gap)
            for first, last, look in list(dst.allocation.watchers):
                if first < end and dst_offset < last:
                    look(self)



Copied = TypeVar("Copied", bound=DmaCopy)


class AtomicAddCopy(DmaCopy):
    """An MTE3 store from UB to GM that adds its values (in the source's dtype) to those in GM
    instead of overwriting them, as a store after ``set_atomic_add`` does. After its bytes arrive,
    the target die's L2 applies the adds (:class:`~npusim.hw.memory.AtomicUnit`): ``die.l2.atomic_add``
    per store, atomic adds to the same 32-byte blocks one after the other. It ends with its copy's
    outcome (bottleneck, when the bytes started flowing), so it is recorded as a transfer too (the
    adds' time then counts with the copy's streaming part)."""

    __slots__ = ("dtype",)

    def __init__(self, dst: GmAddress, src: LocalTensor, burst_count: int, burst_bytes: int, src_gap: int, dst_gap: int, granule: int, label: str) -> None:
        super().__init__(Pipe.MTE3, dst, src, burst_count, burst_bytes, src_gap, dst_gap, granule, label)
        self.dtype = src.dtype
        self.path_key = _path_key(Pipe.MTE3, dst, src, atomic=True)

    def _moved(self, dst: CopySide, src: CopySide, path_key: PathKey) -> DmaCopy:
        return self._placed_on(AtomicAddCopy(_gm(dst), _tensor(src), self.burst_count, self.burst_bytes, self.src_gap, self.dst_gap, self.granule,
                                             self.label), path_key)

    def request(self, core: AICore, run: KernelRun, issue_ps: int, tally: L2Tally | None, complete: Callable[[Any, int, int, int, int], None],
                owner: object, tail: Callable[[Any, int], int] | None = None) -> Request:
        """As a copy's (:meth:`DmaCopy.request`), completed once the target's L2 has applied the adds."""
        dst = self.dst
        assert isinstance(dst, GmAddress)  # an atomic add stores to GM
        allocation = dst.allocation
        atomics = core.system.die(allocation.die).atomics
        assert atomics is not None  # an atomic add is built only for a die with atomics (CoreProgram, ProgramTemplate)
        request = super().request(core, run, issue_ps, tally, complete, owner)  # resolves a register address first
        offset = self._resolved[1] if self._resolved is not None else int(resolve(dst.offset, run.regs))
        span = self.span(self.dst_gap)
        request.tail = lambda _owner, arrived_ps: atomics.apply_at(allocation, offset, span, arrived_ps)
        return request

    def effect(self, core: AICore, run: KernelRun) -> None:
        src_offset, dst_offset = self._offsets()
        source = self._bytes_of(self.src, core, src_offset, self.src_gap).copy().view(self.dtype)
        target = self._bytes_of(self.dst, core, dst_offset, self.dst_gap).view(self.dtype)
        if self.dtype.kind in "iu":  # integers wrap and raise no floating-point error (signals, added with data off too)
            target += source
        else:
            with np.errstate(all="ignore"):
                target += source
        self._wake_watchers(dst_offset)



class VectorOp(FixedCost):
    """One vector instruction (at most ``max_repeats`` repeats) computing on UB tensors.

    ``repeat_layout`` is None for contiguous operands, else ``(repeats, lanes, strides)``: repeat
    ``r`` reads / writes ``lanes`` elements at ``r * strides[i]`` of operand ``i`` (dst first)."""

    __slots__ = ("kind", "dst", "srcs", "scalar", "rounding", "repeat_layout")
    has_effect = True

    def __init__(self, kind: str, dst: LocalTensor, srcs: list[LocalTensor], scalar: object, rounding: str, cost_ps: int, label: str,
                 repeat_layout: tuple[int, int, tuple[int, ...]] | None = None) -> None:
        super().__init__(Pipe.VECTOR, label, cost_ps, dst.nbytes)
        self.kind, self.dst, self.srcs, self.scalar, self.rounding = kind, dst, srcs, scalar, rounding
        self.repeat_layout = repeat_layout

    def cost_rule(self, timing: DieTiming) -> CostRule | None:
        assert timing.vector is not None  # a vector instruction is built only for a die with a vector unit
        return timing.vector.rule(self.kind)

    def twin(self) -> Instruction:
        if type(self) is not VectorOp:
            return super().twin()
        return self._placed_like(VectorOp(self.kind, self.dst, self.srcs, self.scalar, self.rounding, self._cost(), self.label, self.repeat_layout))

    def footprint(self) -> tuple[Entry, ...]:
        entries = [(src.buffer, READ, src.offset, size, size, 1) for src in self.srcs if (size := src.count * src.dtype.itemsize)]
        if self.nbytes:  # the destination's bytes
            entries.append((self.dst.buffer, WRITE, self.dst.offset, self.nbytes, self.nbytes, 1))
        return tuple(entries)

    def effect(self, core: AICore, run: KernelRun) -> None:
        scalar = resolve(self.scalar, run.regs) if isinstance(self.scalar, ScalarExpr) else self.scalar
        values = values_together(core, [self.dst, *self.srcs])
        if self.repeat_layout is not None:
            repeats, lanes, strides = self.repeat_layout
            values = [as_strided(v, shape=(repeats, lanes), strides=(s * v.itemsize, v.itemsize)) for v, s in zip(values, strides)]
        vector_semantics.compute(self.kind, values[0], values[1:], scalar, self.rounding)



class IndexedMove(FixedCost):
    """Elements of a UB tile moved along one axis to or from positions an index tile in UB gives (a
    gather or a scatter, :func:`npusim.isa.vector.indexed_move` gives its numerics): on VECTOR, a
    gather instruction (vgather); on SCALAR, the scalar unit's element-by-element loop. ``layout``
    is ``(shape, dst_strides, src_strides, index_strides, axis, limit)`` in elements; ``value`` the
    number a scatter writes when ``src`` is None; ``reduce`` ``none``, ``add`` or ``multiply``."""

    __slots__ = ("dst", "src", "index", "value", "layout", "scatter", "reduce")
    has_effect = True

    def __init__(self, pipe: Pipe, label: str, cost_ps: int, dst: LocalTensor, src: LocalTensor | None, index: LocalTensor, value: object,
                 layout: tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...], tuple[int, ...], int, int], scatter: bool, reduce: str) -> None:
        super().__init__(pipe, label, cost_ps, dst.nbytes)
        self.dst, self.src, self.index, self.value, self.layout, self.scatter, self.reduce = dst, src, index, value, layout, scatter, reduce

    def cost_rule(self, timing: DieTiming) -> CostRule | None:
        if self.pipe is Pipe.VECTOR:
            assert timing.vector is not None  # built only for a die with a vector unit
            return timing.vector.rule("gather")
        return timing.scalar.rule("ub_read")  # the loop's UB reads and writes, most of its time

    def twin(self) -> Instruction:
        return self._placed_like(IndexedMove(self.pipe, self.label, self._cost(), self.dst, self.src, self.index, self.value, self.layout,
                                             self.scatter, self.reduce))

    def footprint(self) -> tuple[Entry, ...]:
        read = [self.index] if self.src is None else [self.index, self.src]
        return _entries(*(_span(t, READ) for t in read), _span(self.dst, WRITE))

    def effect(self, core: AICore, run: KernelRun) -> None:
        tensors = [self.dst, self.index] if self.src is None else [self.dst, self.index, self.src]
        values = values_together(core, tensors)
        vector_semantics.indexed_move(values[0], values[2] if self.src is not None else None, values[1], self.value, self.layout,
                                      self.scatter, self.reduce, self.label)


class MatrixVectorOp(VectorOp):
    """A vector instruction group on strided views of UB (shapes and strides in elements): a row
    reduction (``reduce_sum`` ...) reduces the last axis of the source view into the destination
    view (the source's shape without its last axis); ``transpose`` writes the 2-D source transposed;
    ``copy`` writes the source view, broadcast by zero strides, into the destination view."""

    __slots__ = ("src_view", "dst_view")

    def __init__(self, kind: str, dst: LocalTensor, src: LocalTensor, src_view: StridedView, dst_view: StridedView, cost_ps: int, label: str) -> None:
        super().__init__(kind, dst, [src], None, "rint", cost_ps, label)
        self.src_view, self.dst_view = src_view, dst_view

    def footprint(self) -> tuple[Entry, ...]:
        (src, dst), (src_view, dst_view) = (self.srcs[0], self.dst), (self.src_view, self.dst_view)
        return _entries(_span(src, READ, _view_bytes(src, *src_view)), _span(dst, WRITE, _view_bytes(dst, *dst_view)))

    def effect(self, core: AICore, run: KernelRun) -> None:
        src_values, dst_values = self.srcs[0].values(core), self.dst.values(core)
        (src_shape, src_strides), (dst_shape, dst_strides) = self.src_view, self.dst_view
        src = as_strided(src_values, shape=src_shape, strides=tuple(s * src_values.itemsize for s in src_strides))
        out = as_strided(dst_values, shape=dst_shape, strides=tuple(s * dst_values.itemsize for s in dst_strides))
        vector_semantics.compute(self.kind, out, [src.copy()], None, "rint")



class FractalLoad(DmaCopy):
    """MTE1 L1 -> L0A / L0B: a ``rows x cols`` ND matrix in L1 (rows ``src_stride`` elements apart)
    into the NZ layout of L0 (:mod:`npusim.isa.fractal`), transposed first when ``transpose`` (so
    that k is innermost in L0). Moves the whole fractals: ``nz_count`` elements."""

    __slots__ = ("rows", "cols", "src_stride", "transpose")

    def __init__(self, dst: LocalTensor, src: LocalTensor, rows: int, cols: int, src_stride: int, transpose: bool, nbytes: int,
                 granule: int, label: str) -> None:
        super().__init__(Pipe.MTE1, dst, src, 1, nbytes, 0, 0, granule, label)
        self.rows, self.cols, self.src_stride, self.transpose = rows, cols, src_stride, transpose

    def _moved(self, dst: CopySide, src: CopySide, path_key: PathKey) -> DmaCopy:
        return self._placed_on(FractalLoad(_tensor(dst), _tensor(src), self.rows, self.cols, self.src_stride, self.transpose, self.burst_bytes,
                                           self.granule, self.label), path_key)

    def twin(self) -> Instruction:
        return self._moved(self.dst, self.src, self.path_key)  # buffers on both sides: nothing to rebase

    def footprint(self) -> tuple[Entry, ...]:
        itemsize = _tensor(self.src).dtype.itemsize
        return _entries(_run(self.src, READ, self.rows, self.cols * itemsize, (self.src_stride - self.cols) * itemsize),
                        _span(_tensor(self.dst), WRITE, self.burst_bytes))

    def effect(self, core: AICore, run: KernelRun) -> None:
        values = _tensor(self.src).values(core)
        matrix = as_strided(values, shape=(self.rows, self.cols), strides=(self.src_stride * values.itemsize, values.itemsize))
        if self.transpose:
            matrix = matrix.T
        packed = nz_pack(np.ascontiguousarray(matrix), inner_block(values.itemsize))
        _tensor(self.dst).values(core)[: packed.size] = packed



class Nd2NzLoad(DmaCopy):
    """MTE2 GM -> L1 of a ``rows x cols`` ND matrix (rows ``burst_bytes + src_gap`` bytes apart in
    GM) into the NZ layout of L1 (:mod:`npusim.isa.fractal`: ``padded(rows, 16)`` rows of fractals
    ``32 / itemsize`` columns wide), as the GM -> L1 copies of the cube kernels convert ND to NZ on
    the way (Ascend C ``DataCopy`` with ``Nd2NzParams``; pto-isa ``TLOAD`` into a NZ ``Mat`` tile).
    Timed as the copy of its ``rows`` bursts; it writes every fractal it touches (padding zeros)."""

    __slots__ = ("rows", "cols", "dtype")

    def __init__(self, dst: LocalTensor, src: GmAddress, rows: int, cols: int, src_row_bytes: int, granule: int, label: str) -> None:
        burst = cols * dst.dtype.itemsize
        super().__init__(Pipe.MTE2, dst, src, rows, burst, src_row_bytes - burst, 0, granule, label)
        self.rows, self.cols, self.dtype = rows, cols, dst.dtype

    def _moved(self, dst: CopySide, src: CopySide, path_key: PathKey) -> DmaCopy:
        return self._placed_on(Nd2NzLoad(_tensor(dst), _gm(src), self.rows, self.cols, self.burst_bytes + self.src_gap, self.granule, self.label),
                               path_key)

    def footprint(self) -> tuple[Entry, ...]:
        written = nz_count(self.rows, self.cols, inner_block(self.dtype.itemsize)) * self.dtype.itemsize
        return _entries(_run(self.src, READ, self.burst_count, self.burst_bytes, self.src_gap), _span(_tensor(self.dst), WRITE, written))

    def effect(self, core: AICore, run: KernelRun) -> None:
        src_offset, _ = self._offsets()
        rows = self._bytes_of(self.src, core, src_offset, self.src_gap).reshape(self.rows, self.burst_bytes)
        packed = nz_pack(np.ascontiguousarray(rows).view(self.dtype), inner_block(self.dtype.itemsize))
        _tensor(self.dst).values(core)[: packed.size] = packed



class NzExtract(DmaCopy):
    """MTE1 L1 -> L0A / L0B: the ``rows x cols`` sub-matrix at row ``row0`` and column ``col0`` of an
    NZ matrix in L1 (``src``: its first fractal; ``src_rows`` its padded row count; ``row0`` a
    multiple of 16, ``col0`` of the fractal width) into the NZ layout of L0, transposed first when
    ``transpose`` (L0 holds k innermost), as Ascend C's ``LoadData`` of 2-D fractals. Moves the
    whole fractals of the result."""

    __slots__ = ("rows", "cols", "src_rows", "row0", "col0", "transpose")

    def __init__(self, dst: LocalTensor, src: LocalTensor, src_rows: int, row0: int, col0: int, rows: int, cols: int, transpose: bool,
                 nbytes: int, granule: int, label: str) -> None:
        super().__init__(Pipe.MTE1, dst, src, 1, nbytes, 0, 0, granule, label)
        self.rows, self.cols, self.src_rows, self.row0, self.col0, self.transpose = rows, cols, src_rows, row0, col0, transpose

    def _moved(self, dst: CopySide, src: CopySide, path_key: PathKey) -> DmaCopy:
        return self._placed_on(NzExtract(_tensor(dst), _tensor(src), self.src_rows, self.row0, self.col0, self.rows, self.cols, self.transpose,
                                         self.burst_bytes, self.granule, self.label), path_key)

    def twin(self) -> Instruction:
        return self._moved(self.dst, self.src, self.path_key)  # buffers on both sides: nothing to rebase

    def _region(self) -> tuple[int, int, int]:
        """The bytes it reads of ``src``: (first byte from src's start, bytes per fractal column, fractal columns)."""
        item = _tensor(self.src).dtype.itemsize
        fc = inner_block(item)
        column = padded(self.rows, FRACTAL_ROWS) * fc * item
        first = ((self.col0 // fc) * self.src_rows + self.row0) * fc * item
        return first, column, padded(self.cols, fc) // fc

    def footprint(self) -> tuple[Entry, ...]:
        first, column, columns = self._region()
        src = _tensor(self.src)
        stride = self.src_rows * inner_block(src.dtype.itemsize) * src.dtype.itemsize
        read: Entry = (src.buffer, READ, src.offset + first, column, stride, columns) if column != stride else \
            (src.buffer, READ, src.offset + first, column * columns, column * columns, 1)
        return (read, *_entries(_span(_tensor(self.dst), WRITE, self.burst_bytes)))

    def effect(self, core: AICore, run: KernelRun) -> None:
        values = _tensor(self.src).values(core)
        fc = inner_block(values.itemsize)
        cols = padded(self.col0 + self.cols, fc)
        whole = nz_unpack(values, self.src_rows, cols, fc)
        matrix = whole[self.row0 : self.row0 + self.rows, self.col0 : self.col0 + self.cols]
        if self.transpose:
            matrix = matrix.T
        packed = nz_pack(np.ascontiguousarray(matrix), fc)
        _tensor(self.dst).values(core)[: packed.size] = packed



class Dequant(NamedTuple):
    """What FixPipe applies to a result on its way out (the quantised matmuls' epilogue), each a
    vector held in L1 or None: ``scale`` (one per column, or one for all: float32, bfloat16, or
    int64 as ``npu_trans_quant_param`` packs it), ``offset`` (float32, per column or one), ``token``
    (float32, one per row: per-token scales), ``bias`` (float, per column: added last). In float32,
    each step rounded to float32, in this order: ``acc * scale * token + offset + bias``; then
    converted to the output dtype (:func:`dequantize`). ``packed``: a float32 scale and offset are
    taken as ``npu_trans_quant_param`` packs them (:func:`pack_quant_param`), as op-plugin converts
    them before the kernel when the output is float16 or int8 without per-token scales."""

    scale: LocalTensor | None = None
    offset: LocalTensor | None = None
    token: LocalTensor | None = None
    bias: LocalTensor | None = None
    packed: bool = False

    def vectors(self) -> tuple[LocalTensor, ...]:
        return tuple(v for v in (self.scale, self.offset, self.token, self.bias) if v is not None)


def pack_quant_param(scale: np.ndarray, offset: np.ndarray | None) -> tuple[np.ndarray, np.ndarray | None]:
    """The float32 scale and offset ``npu_trans_quant_param`` (round_mode 0) keeps of ``scale`` and
    ``offset``: the scale truncated to its top 19 bits (FP19: ``bits & 0xFFFFE000``), the offset
    rounded to an integer and clamped to [-256, 255] (op-plugin torch_npu-npu_trans_quant_param.md)."""
    bits = scale.astype(np.float32).view(np.uint32) & np.uint32(0xFFFFE000)
    kept = None if offset is None else np.clip(np.rint(offset.astype(np.float32)), -256, 255).astype(np.float32)
    return bits.view(np.float32), kept


def unpack_quant_param(packed: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The float32 scale (bits 0-31) and the offset (9 signed bits at bits 37-45) of int64 values
    packed as ``npu_trans_quant_param`` documents it (op-plugin torch_npu-npu_trans_quant_param.md)."""
    bits = packed.astype(np.int64).view(np.uint64)
    scale = (bits & np.uint64(0xFFFFFFFF)).astype(np.uint32).view(np.float32)
    offset = ((bits >> np.uint64(37)) & np.uint64(0x1FF)).astype(np.int64)
    offset = np.where(offset >= 256, offset - 512, offset).astype(np.float32)
    return scale, offset


def dequantize(acc: np.ndarray, scale: np.ndarray | None, token: np.ndarray | None, offset: np.ndarray | None,
               bias: np.ndarray | None) -> np.ndarray:
    """``acc`` (rows x cols, int32 or float32) as float32 ``acc * scale[col] * token[row] + offset[col]
    + bias[col]`` (absent terms skipped), each operation rounded to float32 in that order."""
    value = acc.astype(np.float32)
    with np.errstate(all="ignore"):
        if scale is not None:
            value = value * scale.astype(np.float32)[None, :]
        if token is not None:
            value = value * token.astype(np.float32)[:, None]
        if offset is not None:
            value = value + offset.astype(np.float32)[None, :]
        if bias is not None:
            value = value + bias.astype(np.float32)[None, :]
    return value


class FixpipeStore(DmaCopy):
    """FIXP L0C -> GM: the ``rows x cols`` result held in NZ (16 x 16 fractals) in L0C, converted to
    the destination dtype (fp32 -> fp16 / bf16 with ``rounding``, int32 as is; with ``dequant``,
    dequantised first: :class:`Dequant`) and written as ND rows ``burst_bytes + dst_gap`` bytes apart
    (NZ2ND on the way out, as FixPipe's row-major mode)."""

    __slots__ = ("rows", "cols", "out_dtype", "rounding", "dequant")

    def __init__(self, dst: GmAddress, src: LocalTensor, rows: int, cols: int, out_dtype: npt.DTypeLike, dst_row_bytes: int, rounding: str,
                 granule: int, label: str, dequant: Dequant | None = None) -> None:
        out_dtype = np.dtype(out_dtype)
        burst = cols * out_dtype.itemsize
        super().__init__(Pipe.FIXP, dst, src, rows, burst, 0, dst_row_bytes - burst, granule, label)
        self.rows, self.cols, self.out_dtype, self.rounding, self.dequant = rows, cols, out_dtype, rounding, dequant

    def _moved(self, dst: CopySide, src: CopySide, path_key: PathKey) -> DmaCopy:
        return self._placed_on(FixpipeStore(_gm(dst), _tensor(src), self.rows, self.cols, self.out_dtype, self.burst_bytes + self.dst_gap,
                                            self.rounding, self.granule, self.label, self.dequant), path_key)

    def footprint(self) -> tuple[Entry, ...]:
        src = _tensor(self.src)
        fractals = nz_count(self.rows, self.cols, FRACTAL_ROWS) * src.dtype.itemsize
        vectors = () if self.dequant is None else tuple(_span(v, READ) for v in self.dequant.vectors())
        return _entries(_span(src, READ, fractals), *vectors, _run(self.dst, WRITE, self.burst_count, self.burst_bytes, self.dst_gap))

    def effect(self, core: AICore, run: KernelRun) -> None:
        _, dst_offset = self._offsets()
        result = nz_unpack(_tensor(self.src).values(core), self.rows, self.cols, FRACTAL_ROWS)
        if self.dequant is not None:
            dequant = self.dequant
            scale, offset, token, bias = (None if v is None else v.values(core).copy() for v in dequant[:4])
            if scale is not None and scale.dtype == np.int64:
                scale, packed_offset = unpack_quant_param(scale)
                offset = packed_offset if offset is None else offset
            elif scale is not None and dequant.packed:
                scale, offset = pack_quant_param(scale, offset)
            result = dequantize(result, scale, token, offset, bias)
        with np.errstate(all="ignore"):
            converted = vector_semantics.cast(result, self.out_dtype, self.rounding)
        self._bytes_of(self.dst, core, dst_offset, self.dst_gap)[...] = converted.view(np.uint8).reshape(self.burst_count, self.burst_bytes)



class Mmad(FixedCost):
    """Cube multiply-accumulate: L0C[m, n] (fp32, int32 for int8) (+)= L0A[m, k] x L0B[n, k]^T, every
    operand in NZ layout (:mod:`npusim.isa.fractal`); with ``bias`` (a row of ``n`` values in L1, as
    the bias table BT holds it) a first mmad starts from it instead of zero. The cube works in 16 x 16 x ``k_block`` blocks
    (``k_block`` = 32 bytes of k: 16 fp16 / bf16, 32 int8, 8 fp32); per block the ``k_block`` products
    of each output are summed and rounded to fp32 once, then added to the L0C value (fp32, round to
    nearest even), block after block in k order (:func:`fractal_matmul`). Integers accumulate exactly
    in int32 (wrapping)."""

    __slots__ = ("dst", "a", "b", "m", "n", "k", "accumulate", "bias")
    has_effect = True

    def __init__(self, dst: LocalTensor, a: LocalTensor, b: LocalTensor, m: int, n: int, k: int, accumulate: bool, cost_ps: int,
                 bias: LocalTensor | None = None) -> None:
        super().__init__(Pipe.CUBE, "mmad", cost_ps, dst.nbytes)
        self.dst, self.a, self.b, self.m, self.n, self.k, self.accumulate, self.bias = dst, a, b, m, n, k, accumulate, bias

    def twin(self) -> Instruction:
        return self._placed_like(Mmad(self.dst, self.a, self.b, self.m, self.n, self.k, self.accumulate, self._cost(), self.bias))

    def cost_rule(self, timing: DieTiming) -> CostRule | None:
        assert timing.cube is not None  # a multiply is built only for a die with a cube
        return timing.cube.rule()

    def footprint(self) -> tuple[Entry, ...]:
        block = inner_block(self.a.dtype.itemsize)
        return _entries(_span(self.a, READ, nz_count(self.m, self.k, block) * self.a.dtype.itemsize),
                        _span(self.b, READ, nz_count(self.n, self.k, block) * self.b.dtype.itemsize),
                        None if self.bias is None else _span(self.bias, READ, self.n * self.bias.dtype.itemsize),
                        _span(self.dst, WRITE, nz_count(self.m, self.n, FRACTAL_ROWS) * self.dst.dtype.itemsize))  # accumulating: read too

    def effect(self, core: AICore, run: KernelRun) -> None:
        block = inner_block(self.a.dtype.itemsize)
        a = nz_unpack(self.a.values(core), self.m, self.k, block)
        b = nz_unpack(self.b.values(core), self.n, self.k, block)
        out_flat = self.dst.values(core)
        before = nz_unpack(out_flat, self.m, self.n, FRACTAL_ROWS) if self.accumulate else None
        if before is None and self.bias is not None:  # the accumulator starts from the bias (its BT buffer row, in the accumulator's dtype)
            before = np.broadcast_to(self.bias.values(core)[: self.n].astype(out_flat.dtype), (self.m, self.n))
        result = fractal_matmul(a, b.T, block, before, out_flat.dtype)
        packed = nz_pack(result, FRACTAL_ROWS)
        out_flat[: packed.size] = packed



def fractal_matmul(a: np.ndarray, b: np.ndarray, k_block: int, accumulator: np.ndarray | None, out_dtype: npt.DTypeLike) -> np.ndarray:
    """``accumulator (+)= a @ b`` in the cube's order: for each k block of ``k_block`` (in order), the
    block's products summed exactly (float64; products of 16-bit floats are exact) and rounded to fp32,
    then added to the fp32 accumulator; integer inputs accumulate in int64 and wrap to int32."""
    out_dtype = np.dtype(out_dtype)
    m, k = a.shape
    if np.issubdtype(out_dtype, np.integer):
        acc = np.zeros((m, b.shape[1]), np.int64) if accumulator is None else accumulator.astype(np.int64)
        acc += a.astype(np.int64) @ b.astype(np.int64)
        return acc.astype(out_dtype)
    total = np.zeros((m, b.shape[1]), np.float32) if accumulator is None else accumulator.astype(np.float32)
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    with np.errstate(all="ignore"):
        for first in range(0, k, k_block):
            partial = (a64[:, first:first + k_block] @ b64[first:first + k_block, :]).astype(np.float32)
            total = total + partial
    return total.astype(out_dtype)
