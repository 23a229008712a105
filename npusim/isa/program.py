"""The public builder for kernels: per-core programs of instructions, launched on a die's stream.

A :class:`Kernel` is one launch on one die; ``kernel.core(kind, i)`` gives the :class:`CoreProgram`
of core ``i`` of a kind of the die (``die.cores``), to which instructions are appended in program
order, as an Ascend C kernel issues them. ``kernel.vector_core(i)`` / ``kernel.cube_core(i)`` name
the kinds the product runs vector and cube kernels on, and ``kernel.aiv(i)`` / ``kernel.aic(i)``
the kinds of a split (910B / 910C) die. Which copies a core can make, on which engine, and how its
buffers are aligned come from its kind::

    kernel = isa.Kernel("scale", die=0)
    for i in range(8):
        p = kernel.aiv(i)
        x = p.alloc(4096, np.float16)
        p.copy(x, isa.gm(src, i * 4096))          # MTE2
        p.set_flag("MTE2", "VECTOR", 0); p.wait_flag("MTE2", "VECTOR", 0)
        p.muls(x, x, 2.0)                          # VECTOR
        p.set_flag("VECTOR", "MTE3", 0); p.wait_flag("VECTOR", "MTE3", 0)
        p.copy(isa.gm(dst, i * 4096), x)           # MTE3
    kernel.launch()
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable, Collection, Generator, Iterator, Sequence
from contextvars import ContextVar
from functools import partial
from typing import Any, cast

import numpy as np
import numpy.typing as npt
import simpy

from npusim import formats
from npusim.config.products import PRODUCTS
from npusim.engine.loop import Environment, rearm_at, succeed_at
from npusim.errors import ConfigError, ResourceError, UsageError
from npusim.hw.core import AICore, PipeStep
from npusim.hw.memory import Allocation
from npusim.hw.pipes import Pipe
from npusim.hw.stream import Stream
from npusim.hw.system import System
from npusim.hw.timing import CoreKindTiming
from npusim.isa import vector as vector_semantics
from npusim.isa.fractal import FRACTAL_ROWS, inner_block, nz_count
from npusim.isa.instructions import (
    AtomicAddCopy,
    CopySide,
    CoreBarrier,
    Dequant,
    DmaCopy,
    FixedCost,
    FixpipeStore,
    FractalLoad,
    GmAddress,
    IndexedMove,
    Instruction,
    LocalTensor,
    MatrixVectorOp,
    Mmad,
    Nd2NzLoad,
    NzExtract,
    PipeBarrierAll,
    PollGm,
    ScalarRead,
    ScalarWrite,
    SetFlag,
    SyncAll,
    VectorOp,
    WaitFlag,
    shared_by_replays,
)
from npusim.isa.racecheck import GmAccess, LaunchRaces, Race, Side, core_races, cross_core_races
from npusim.isa.scalar import ScalarExpr, ScalarReg
from npusim.trace.rows import pack
from npusim.units import format_bytes

_WAITING_CLASSES = (WaitFlag, PipeBarrierAll, PollGm, SyncAll)  # their events are stalls, not busy time
_NAMED_WAITS = (PollGm, SyncAll)  # the critical path calls them by name
_FLAG_CLASSES = (SetFlag, WaitFlag)  # their events are paired into flag flows after the run
INDEX_ADDRESS_INSTRUCTIONS = 4
"""Scalar instructions per element of an index loop (the framework's TgatherElement / Tscatter loops,
tileop/vector/gather.h, scatter.h): the index times the axis stride, plus the loop's part of the
offset, the loop counter's step and test. Assumed [L]: the compiled loop is not published."""
_SCALAR = Pipe.SCALAR  # a module constant: an enum member's look-up is slow, and by_pipe runs per tile op
_PIPE_CACHE: dict[str | Pipe, Pipe] = {}  # pipe names as written -> Pipe (parsing is hot when building)


Shaped = tuple[tuple[int, ...], tuple[int, ...]]
"""A view of a buffer tensor: its shape and strides, in elements."""
View = tuple[Sequence[int], Sequence[int]]
"""A view as given: shape and strides, in elements."""


_SYSTEM: ContextVar[System | None] = ContextVar("npusim_isa_system", default=None)


@contextlib.contextmanager
def building_for(system: System) -> Iterator[System]:
    """Within the block, a :class:`Kernel` made without a ``system`` is built for ``system`` (a
    simulation session enters this for its duration)."""
    token = _SYSTEM.set(system)
    try:
        yield system
    finally:
        _SYSTEM.reset(token)


def default_system() -> System:
    """The system kernels are built for when none is given (:func:`building_for`)."""
    system = _SYSTEM.get()
    if system is None:
        raise UsageError("no npusim session is active: wrap the code in `with npusim.session('a3'):` or run the file with `npusim run`")
    return system


def gm(tensor: Any, element_offset: int | ScalarExpr = 0) -> GmAddress:
    """The GM address of element ``element_offset`` (flat, in elements) of a device tensor (``tensor``: an
    ``allocation``, its ``offset_bytes`` in it and its ``dtype``)."""
    return GmAddress(tensor.allocation, tensor.offset_bytes + element_offset * tensor.dtype.itemsize)


class CoreProgram:
    """The instructions of one core for one kernel, in program order, plus its buffer allocations."""

    def __init__(self, kernel: Kernel, core: AICore) -> None:
        self.kernel = kernel
        self.core = core
        self.instructions: list[Instruction] = []
        self._allocated = dict.fromkeys(core.buffers, 0)
        self._tile = -1
        self._regs = 0
        self._timing = core.timing
        self._recorder = core.system.recorder
        kind = core.kind_timing
        self._pipes = kind.pipes
        self._buffers = kind.buffers
        self._copy_pipes = kind.moves
        self._name_ids = self._recorder.label_ids  # (event name, instruction class) used -> the name's recorder id
        self.race_free: bool | None = None  # the race check's verdict once launched alone (or replayed from a template)
        self.shares = False  # replayed with instructions shared with other replays (ProgramTemplate): launched alone
        self._replayed: dict[Pipe, list[Instruction]] | None = None  # a replay's instructions per pipe (by_pipe)
        self._replayed_steps: dict[Pipe, list[PipeStep]] | None = None  # and their PipeStep records (pipe_steps)
        self.sources: list[tuple[int, object]] = []  # (first instruction position, the program line its instructions come from)

    def note_source(self, source: object) -> None:
        """The instructions appended from now on come from ``source`` (a line of the user's program,
        shown by race reports), until the next note; before any note they come from the kernel's."""
        if source is not None:
            self.sources.append((len(self.instructions), source))

    def source_of(self, position: int) -> object:
        """The program line instruction ``position`` came from (see :meth:`note_source`), or None."""
        found = self.kernel.source
        for first, source in self.sources:
            if first > position:
                break
            found = source
        return found

    # -- buffers -------------------------------------------------------------------------------

    def alloc(self, count: int, dtype: npt.DTypeLike, buffer: str = "UB") -> LocalTensor:
        """Reserve ``count`` elements of ``dtype`` in ``buffer``; ResourceError past its capacity."""
        buffer = buffer.upper()
        if buffer not in self._allocated:
            raise UsageError(f"{self.core!r} has no buffer {buffer!r}; it has {', '.join(self._allocated)}")
        item = np.dtype(dtype)
        alignment = self._buffers[buffer].alignment_bytes
        offset = -(-self._allocated[buffer] // alignment) * alignment
        size = count * item.itemsize
        capacity = self.core.buffers[buffer].capacity_bytes
        if offset + size > capacity:
            raise ResourceError(
                f"kernel {self.kernel.name!r} on die {self.core.die.index} {self.core.name}: allocating "
                f"{format_bytes(size)} in {buffer} at offset {offset} needs {format_bytes(offset + size)}, but "
                f"{buffer} holds {format_bytes(capacity)}; use smaller tiles"
            )
        self._allocated[buffer] = offset + size
        return LocalTensor(buffer, offset, count, item)

    @property
    def allocated_bytes(self) -> dict[str, int]:
        """Bytes reserved so far in each buffer."""
        return dict(self._allocated)

    @contextlib.contextmanager
    def reused_buffers(self) -> Iterator[None]:
        """What is allocated inside is free again after it: for a program that runs pieces one after
        the other, each draining its pipes before the next (its last instruction waits for them), so
        the next piece may take the same buffer space (the race check still sees every access)."""
        marks = dict(self._allocated)
        try:
            yield
        finally:
            self._allocated = marks

    # -- attribution ---------------------------------------------------------------------------

    def tile(self, index: int) -> _TileScope:
        """Instructions appended inside (``with p.tile(index):``) belong to tile ``index`` of the kernel's op."""
        return _TileScope(self, index)

    def _append(self, instruction: Instruction, name: str | None = None) -> Instruction:
        label, kind = name or instruction.label, instruction.__class__
        name_id = self._name_ids.get((label, kind))
        if name_id is None:  # first use of this name by such an instruction: intern it, note what it waits for
            name_id = self._name_ids[(label, kind)] = self._recorder.name_id(label, waits=kind in _WAITING_CLASSES, named=kind in _NAMED_WAITS)
            if kind in _FLAG_CLASSES:
                self._recorder.flag_name(name_id, kind is SetFlag, cast("SetFlag | WaitFlag", instruction).key)
            rule = instruction.cost_rule(self._timing)
            if rule is not None:  # the config keys of its time (the first of its name stands: npusim.trace.costs)
                self._recorder.costs.rule("", name_id, rule)
        instruction.name_id = name_id
        instruction.tile = self._tile
        instruction.label_id = pack(name_id, self._tile)
        self.instructions.append(instruction)
        return instruction

    # -- DMA -----------------------------------------------------------------------------------

    def copy(self, dst: LocalTensor | GmAddress, src: LocalTensor | GmAddress, nbytes: int | None = None, *, burst_count: int = 1, burst_bytes: int | None = None,
             src_gap: int = 0, dst_gap: int = 0, name: str | None = None, atomic: str | None = None,
             control: bool = False) -> Instruction:
        """Copy between GM and a buffer, or between two buffers, on the engine the hardware uses
        (MTE2 GM->UB/L1/L0, MTE3 UB->GM, MTE1 L1->L0, FIXP L0C->GM/L1). ``burst_count`` bursts of
        ``burst_bytes`` (default: all ``nbytes`` in one burst); gaps are bytes skipped between bursts.

        ``atomic="add"`` (UB -> GM only) adds the values, in the source tensor's dtype, to those in GM
        (an atomic-add store, see :class:`~npusim.isa.instructions.AtomicAddCopy`). ``control=True``
        marks a copy of control data (signals) whose effect applies even when data is off."""
        if atomic not in (None, "add"):
            raise UsageError(f"copy: atomic={atomic!r} is not supported; use None (overwrite) or 'add'")
        src_kind, dst_kind = _place(src), _place(dst)
        pipe = self._copy_pipes.get((src_kind, dst_kind))
        if pipe is None:
            raise UsageError(
                f"kernel {self.kernel.name!r} {self.core.name}: no engine of an {self.core.kind.upper()} core copies "
                f"{src_kind} -> {dst_kind}; its engines copy " + ", ".join(f"{a}->{b}" for a, b in self._copy_pipes)
                + f" (die.cores.{self.core.kind}.engines)"
            )
        if burst_bytes is None:
            if nbytes is None:
                local = dst if isinstance(dst, LocalTensor) else src
                assert isinstance(local, LocalTensor)  # a copy has a buffer side (no engine copies GM -> GM)
                nbytes = local.nbytes
            if nbytes % burst_count:
                raise UsageError(f"copy of {nbytes} bytes does not split into {burst_count} equal bursts; give burst_bytes")
            burst_bytes = nbytes // burst_count
        for side, gap in ((src, src_gap), (dst, dst_gap)):
            self._check_span(side, burst_count, burst_bytes, gap)
        granule = self.core.dma_timing[pipe].granule_bytes
        label = name or f"copy {src_kind}->{dst_kind}"
        instruction: DmaCopy
        if atomic == "add":
            instruction = AtomicAddCopy(*self._check_atomic_add(dst, src, burst_bytes), burst_count, burst_bytes, src_gap, dst_gap, granule, label)
        else:
            instruction = DmaCopy(pipe, dst, src, burst_count, burst_bytes, src_gap, dst_gap, granule, label)
        instruction.control = control
        return self._append(instruction, label)

    def _check_atomic_add(self, dst: LocalTensor | GmAddress, src: LocalTensor | GmAddress, burst_bytes: int) -> tuple[GmAddress, LocalTensor]:
        """``dst`` and ``src`` of an atomic-add copy once checked (UsageError, ConfigError: why it cannot be one)."""
        if not (isinstance(src, LocalTensor) and src.buffer == "UB" and isinstance(dst, GmAddress)):
            raise UsageError(f"kernel {self.kernel.name!r} {self.core.name}: an atomic-add copy stores UB -> GM; got {src!r} -> {dst!r}")
        if burst_bytes % src.dtype.itemsize:
            raise UsageError(f"atomic-add copy: bursts of {burst_bytes} bytes are not whole {src.dtype} elements")
        if self.core.system.die(dst.allocation.die).atomics is None:
            raise ConfigError(
                f"kernel {self.kernel.name!r}: an atomic-add store needs die.l2.atomic_add (the L2's read-modify-write "
                f"time) in the config {self.core.system.spec.name!r}; add it under die.l2"
            )
        return dst, src

    def _check_span(self, side: LocalTensor | GmAddress, burst_count: int, burst_bytes: int, gap: int) -> None:
        span = burst_count * burst_bytes + (burst_count - 1) * gap
        if isinstance(side, LocalTensor):
            limit, start, what = self.core.buffers[side.buffer].capacity_bytes, side.offset, side.buffer
        elif isinstance(side.offset, int):
            limit, start, what = side.allocation.size_bytes, side.offset, f"GM tensor {side.allocation.label}"
        else:
            return  # checked when the address is known, at issue time
        if start < 0 or start + span > limit:
            raise UsageError(
                f"kernel {self.kernel.name!r} {self.core.name}: copy touches bytes {start}..{start + span} of "
                f"{what}, which has {limit} bytes"
            )

    # -- vector --------------------------------------------------------------------------------

    def vector(self, kind: str, dst: LocalTensor, *srcs: LocalTensor, scalar: object = None, count: int | None = None,
               rounding: str = "rint", name: str | None = None,
               repeat_strides: Sequence[int] | None = None, control: bool = False) -> list[Instruction]:
        """Vector instruction ``kind`` over ``count`` elements (default: all of ``dst``), split into
        instructions of at most ``max_repeats`` repeats; returns the instructions appended.

        ``count=0`` issues one instruction with a repeat count of 0: it costs its issue and latency
        and computes nothing. ``repeat_strides`` gives, per operand (``dst`` first, then ``srcs``),
        how many elements it advances from one repeat to the next; by default each advances by one
        repeat (contiguous operands). A stride of 0 reuses the same elements every repeat (a
        broadcast), a row length walks down a column. With strides, ``count`` is whole repeats.
        ``control``: the result is control data (e.g. zeros for signal slots), computed even when data is off."""
        if kind not in vector_semantics.KINDS:
            raise UsageError(f"unknown vector instruction {kind!r}; known: {', '.join(vector_semantics.KINDS)}")
        if rounding not in vector_semantics.ROUNDING_NAMES:
            raise UsageError(f"unknown rounding {rounding!r}; known: {', '.join(vector_semantics.ROUNDING_NAMES)}")
        self._require(Pipe.VECTOR, f"vector {kind}")
        count = dst.count if count is None else count
        operands = (dst,) + srcs
        timing = self._timing.vector
        assert timing is not None  # _require: the core has a vector pipe
        per_repeat = vector_semantics.elements_per_repeat(timing.repeat_bytes, dst.dtype, *(s.dtype for s in srcs))
        strides = self._repeat_strides(kind, operands, repeat_strides, count, per_repeat)
        for tensor, stride in zip(operands, strides):
            span = count if repeat_strides is None else max(count // per_repeat - 1, 0) * stride + min(count, per_repeat)
            if tensor.buffer != "UB" or tensor.count < span:
                raise UsageError(f"vector {kind}: operand {tensor!r} must be a UB tensor of at least {span} elements")
        label = name or kind

        def emit(instruction: VectorOp) -> Instruction:
            instruction.control = control
            return self._append(instruction, label)

        if count == 0:
            return [emit(VectorOp(kind, dst[0:0], [s[0:0] for s in srcs], scalar, rounding, timing.cost_ps(kind, 0), label))]
        whole = dst.count == count and all(s.count == count for s in srcs)
        if repeat_strides is None and whole and count <= per_repeat * timing.max_repeats:  # one instruction, no slicing
            return [emit(VectorOp(kind, dst, list(srcs), scalar, rounding, timing.cost_ps(kind, -(-count // per_repeat)), label))]
        appended: list[Instruction] = []
        if repeat_strides is None:
            per_instruction = per_repeat * timing.max_repeats
            for first in range(0, count, per_instruction):
                n = min(per_instruction, count - first)
                chunk_dst = dst[first : first + n]
                chunk_srcs = [s[first : first + n] for s in srcs]
                appended.append(emit(VectorOp(kind, chunk_dst, chunk_srcs, scalar, rounding, timing.cost_ps(kind, -(-n // per_repeat)), label)))
            return appended
        total = count // per_repeat
        for first in range(0, total, timing.max_repeats):
            repeats = min(timing.max_repeats, total - first)
            views = [t[first * s : first * s + (repeats - 1) * s + per_repeat] for t, s in zip(operands, strides)]
            appended.append(emit(VectorOp(kind, views[0], views[1:], scalar, rounding, timing.cost_ps(kind, repeats), label,
                                          repeat_layout=(repeats, per_repeat, strides))))
        return appended

    def _repeat_strides(self, kind: str, operands: tuple[LocalTensor, ...], repeat_strides: Sequence[int] | None, count: int, per_repeat: int) -> tuple[int, ...]:
        if repeat_strides is None:
            return (per_repeat,) * len(operands)
        strides = tuple(repeat_strides)
        if len(strides) != len(operands) or not all(isinstance(s, int) and s >= 0 for s in strides):
            raise UsageError(
                f"vector {kind}: repeat_strides = {repeat_strides!r}: give one stride >= 0 (in elements) per operand, "
                f"dst first: {len(operands)} values"
            )
        if count % per_repeat:
            raise UsageError(
                f"vector {kind}: count = {count} with repeat_strides: strided operands take whole repeats of "
                f"{per_repeat} elements; issue the rest as a separate instruction"
            )
        return strides

    def add(self, dst: LocalTensor, a: LocalTensor, b: LocalTensor, **kw: Any) -> list[Instruction]: return self.vector("add", dst, a, b, **kw)
    def sub(self, dst: LocalTensor, a: LocalTensor, b: LocalTensor, **kw: Any) -> list[Instruction]: return self.vector("sub", dst, a, b, **kw)
    def mul(self, dst: LocalTensor, a: LocalTensor, b: LocalTensor, **kw: Any) -> list[Instruction]: return self.vector("mul", dst, a, b, **kw)
    def div(self, dst: LocalTensor, a: LocalTensor, b: LocalTensor, **kw: Any) -> list[Instruction]: return self.vector("div", dst, a, b, **kw)
    def max(self, dst: LocalTensor, a: LocalTensor, b: LocalTensor, **kw: Any) -> list[Instruction]: return self.vector("max", dst, a, b, **kw)
    def min(self, dst: LocalTensor, a: LocalTensor, b: LocalTensor, **kw: Any) -> list[Instruction]: return self.vector("min", dst, a, b, **kw)
    def adds(self, dst: LocalTensor, a: LocalTensor, scalar: object, **kw: Any) -> list[Instruction]: return self.vector("adds", dst, a, scalar=scalar, **kw)
    def muls(self, dst: LocalTensor, a: LocalTensor, scalar: object, **kw: Any) -> list[Instruction]: return self.vector("muls", dst, a, scalar=scalar, **kw)
    def exp(self, dst: LocalTensor, a: LocalTensor, **kw: Any) -> list[Instruction]: return self.vector("exp", dst, a, **kw)
    def abs(self, dst: LocalTensor, a: LocalTensor, **kw: Any) -> list[Instruction]: return self.vector("abs", dst, a, **kw)
    def dup(self, dst: LocalTensor, scalar: object, **kw: Any) -> list[Instruction]: return self.vector("dup", dst, scalar=scalar, **kw)

    def sqrt(self, dst: LocalTensor, a: LocalTensor, **kw: Any) -> list[Instruction]: return self.vector("sqrt", dst, a, **kw)
    def rsqrt(self, dst: LocalTensor, a: LocalTensor, **kw: Any) -> list[Instruction]: return self.vector("rsqrt", dst, a, **kw)
    def neg(self, dst: LocalTensor, a: LocalTensor, **kw: Any) -> list[Instruction]: return self.vector("neg", dst, a, **kw)

    def vector_time(self, steps: Sequence[tuple[str, int, np.dtype | type]], name: str) -> Instruction:
        """One event on the vector pipe for a sequence of vector instructions whose results only
        steer the program (a kernel's index arithmetic, which the op computes where it writes the
        program): ``steps`` of ``(kind, elements, dtype)``, each timed as :meth:`vector` times it
        (split at ``max_repeats``), no effect on UB."""
        self._require(Pipe.VECTOR, name)
        timing = self._timing.vector
        assert timing is not None  # _require: the core has a vector pipe
        cost = 0
        for kind, count, dtype in steps:
            per_repeat = vector_semantics.elements_per_repeat(timing.repeat_bytes, np.dtype(dtype))
            repeats = max(1, -(-count // per_repeat))
            while repeats > 0:
                chunk = min(repeats, timing.max_repeats)
                cost += timing.cost_ps(kind, chunk)
                repeats -= chunk
        return self._append(FixedCost(Pipe.VECTOR, name, cost), name)

    def cast(self, dst: LocalTensor, src: LocalTensor, rounding: str = "rint", *, saturate: bool = True, **kw: Any) -> list[Instruction]:
        """Convert ``src`` to ``dst``'s dtype, rounding with ``rounding`` (to integers, and to a
        narrower float format bit-exactly); integer results saturate, or wrap for an integer source
        with ``saturate=False``; to hifloat8 with ``round`` or ``hybrid`` only, ``hybrid`` nowhere else
        (Ascend C's CAST_HYBRID)."""
        to_hifloat8 = dst.dtype == formats.HIFLOAT8
        if (rounding in vector_semantics.HIFLOAT8_ROUNDING) != to_hifloat8 and (to_hifloat8 or rounding == "hybrid"):
            allowed = "round or hybrid" if to_hifloat8 else "any but hybrid"
            raise UsageError(f"cast {formats.name_of(src.dtype)} -> {formats.name_of(dst.dtype)} with rounding {rounding!r}: "
                             f"a conversion to this format rounds with {allowed}")
        return self.vector("cast", dst, src, rounding=rounding, scalar=None if saturate else "wrap", **kw)

    def _matrix_cost(self, kind: str, level_elements: list[int], itemsize: int) -> int:
        """The time of one vector instruction per entry of ``level_elements`` (elements it covers),
        each split at ``max_repeats``."""
        timing = self._timing.vector
        assert timing is not None  # the callers' instructions run on the vector pipe
        total = 0
        for elements in level_elements:
            repeats = -(-elements * itemsize // timing.repeat_bytes)
            while True:
                chunk = min(repeats, timing.max_repeats)
                total += timing.cost_ps(kind, chunk)
                repeats -= chunk
                if repeats <= 0:
                    break
        return total

    def reduce(self, kind: str, dst: LocalTensor, src: LocalTensor, src_view: View, dst_strides: Sequence[int], *,
               name: str | None = None) -> Instruction:
        """Reduce the last axis of ``src_view`` = (shape, strides in elements) of ``src`` into ``dst``
        (strides ``dst_strides``; kind ``reduce_sum``, ``reduce_max``, ``reduce_min``, ``reduce_prod``) by
        pairwise halving (:func:`~npusim.isa.vector.halving_reduce`), or to the index of the row's largest
        (smallest) value (``reduce_argmax``, ``reduce_argmin``). Timed as the instructions of the halving: one vector
        instruction per level while a row is longer than one repeat (all rows' pairs at once), then one
        in-repeat reduction (vcadd / vcmax) of one repeat per row."""
        if kind not in vector_semantics.REDUCE and kind not in vector_semantics.ARG_REDUCE:
            raise UsageError(f"reduce: kind {kind!r} is not one of {', '.join([*vector_semantics.REDUCE, *vector_semantics.ARG_REDUCE])}")
        shape, strides = tuple(src_view[0]), tuple(src_view[1])
        dst_view = (shape[:-1], tuple(dst_strides))
        self._check_view(kind, src, shape, strides)
        self._check_view(kind, dst, *dst_view)
        rows, n = math.prod(shape[:-1]), shape[-1]
        timing = self._timing.vector
        assert timing is not None  # a reduction runs on the vector pipe
        lanes = timing.repeat_bytes // src.dtype.itemsize
        levels: list[int] = []
        while n > lanes:
            h = (n + 1) // 2
            levels.append(rows * (n - h))
            n = h
        levels.append(rows * lanes)  # the in-repeat reduction: one repeat per row
        cost = self._matrix_cost(kind, levels, src.dtype.itemsize)
        return self._append(MatrixVectorOp(kind, dst, src, (shape, strides), dst_view, cost, name or kind))

    def transpose(self, dst: LocalTensor, src: LocalTensor, rows: int, cols: int, src_stride: int | None = None,
                  dst_stride: int | None = None, *, name: str | None = None) -> Instruction:
        """``dst[c, r] = src[r, c]`` for a ``rows x cols`` tile (rows ``src_stride`` apart; the result's
        rows ``dst_stride`` apart), timed as one pass over the tile's repeats (vnchwconv / vtranspose)."""
        src_view = ((rows, cols), (cols if src_stride is None else src_stride, 1))
        dst_view = ((cols, rows), (rows if dst_stride is None else dst_stride, 1))
        return self._matrix("transpose", dst, src, src_view, dst_view, name)

    def broadcast(self, dst: LocalTensor, src: LocalTensor, shape: Sequence[int], src_strides: Sequence[int], dst_strides: Sequence[int], *,
                  name: str | None = None) -> Instruction:
        """Copy the view (``shape``, ``src_strides``) of ``src`` into ``dst`` (``dst_strides``); a
        zero source stride repeats the source along that axis (vbrcb / vcopy), timed as one pass over
        the destination's repeats."""
        return self._matrix("copy", dst, src, (tuple(shape), tuple(src_strides)), (tuple(shape), tuple(dst_strides)), name)

    def scan(self, dst: LocalTensor, src: LocalTensor, src_view: View, dst_strides: Sequence[int], *, name: str | None = None) -> Instruction:
        """Running sum along the last axis of ``src_view`` (shape, strides) into ``dst`` (same shape,
        ``dst_strides``), in ``dst``'s dtype, element after element; timed as one vector add per step
        along the axis over all rows at once."""
        shape = tuple(src_view[0])
        self._check_view("cumsum", src, shape, tuple(src_view[1]))
        self._check_view("cumsum", dst, shape, tuple(dst_strides))
        rows = math.prod(shape[:-1])
        cost = self._matrix_cost("add", [rows] * shape[-1], dst.dtype.itemsize)
        return self._append(MatrixVectorOp("cumsum", dst, src, (shape, tuple(src_view[1])), (shape, tuple(dst_strides)), cost, name or "cumsum"))

    def one_hot(self, dst: LocalTensor, src: LocalTensor, shape: Sequence[int], src_strides: Sequence[int], dst_strides: Sequence[int], *,
                name: str | None = None) -> Instruction:
        """``dst[..., c] = (src[...] == c)`` for the view ``shape`` (the last axis the classes), timed
        as one pass over the destination's repeats (a compare-and-select per class block)."""
        src_view = (tuple(shape[:-1]), tuple(src_strides))
        return self._matrix("one_hot", dst, src, src_view, (tuple(shape), tuple(dst_strides)), name)

    def indexed_move(self, dst: LocalTensor, src: LocalTensor | None, index: LocalTensor, shape: Sequence[int], strides: Sequence[Sequence[int]],
                     axis: int, limit: int, *, scatter: bool = False, value: object = None, reduce: str = "none", pipe: str = "VECTOR",
                     name: str | None = None) -> Instruction:
        """Move the elements of the view ``shape`` along ``axis`` by an index tile (``strides``: of
        ``dst``, ``src``, ``index``, in elements; ``limit``: the indexed tile's size along ``axis``,
        which every index value must be under). A gather (``scatter`` False): ``dst[p] =
        src[p with p[axis] = index[p]]``; a scatter: ``dst[p with p[axis] = index[p]] (reduce)=
        src[p]`` (or ``value`` where ``src`` is None), in the order of ``p``
        (:class:`~npusim.isa.instructions.IndexedMove`). On ``VECTOR`` one gather instruction
        (vgather), timed as a vector instruction of kind ``gather`` over the view's elements; on
        ``SCALAR`` the scalar unit's loop, each element :data:`INDEX_ADDRESS_INSTRUCTIONS` scalar
        instructions and its UB accesses (the index read, the source read, the destination's read
        when it reduces, the write), each costing ``ub_read``."""
        if reduce not in ("none", "add", "multiply") or pipe not in ("VECTOR", "SCALAR") or (src is None) == (value is None):
            raise UsageError(f"indexed_move: reduce={reduce!r} (none, add, multiply), pipe={pipe!r} (VECTOR, SCALAR) and one of src / value")
        dims = tuple(shape)
        dst_strides, src_strides, index_strides = (tuple(s) for s in strides)
        indexed = dims[:axis] + (limit,) + dims[axis + 1:]
        self._check_view("indexed_move", dst, indexed if scatter else dims, dst_strides)
        if src is not None:
            self._check_view("indexed_move", src, dims if scatter else indexed, src_strides)
        self._check_view("indexed_move", index, dims, index_strides)
        count = math.prod(dims)
        if pipe == "VECTOR":
            self._require(Pipe.VECTOR, "vector gather")
            cost = self._matrix_cost("gather", [count], dst.dtype.itemsize)
        else:
            accesses = 2 + (src is not None) + (reduce != "none")
            cost = count * (INDEX_ADDRESS_INSTRUCTIONS * self._timing.scalar.instruction_ps + accesses * self._timing.scalar.ub_read_ps)
        layout = (dims, dst_strides, src_strides, index_strides, axis, limit)
        label = name or ("scatter" if scatter else "gather")
        return self._append(IndexedMove(self._pipe(pipe), label, cost, dst, src, index, value, layout, scatter, reduce), label)

    def index_offsets(self, elements: int, *, name: str = "index offsets") -> Instruction:
        """The scalar unit's loop that turns ``elements`` index values in UB into the element offsets
        a vector gather reads (each: a UB read of the index, :data:`INDEX_ADDRESS_INSTRUCTIONS`
        instructions, a UB write of the offset); its offsets are the index's (no effect: the gather
        instruction reads the index itself)."""
        scalar = self._timing.scalar
        cost = elements * (INDEX_ADDRESS_INSTRUCTIONS * scalar.instruction_ps + 2 * scalar.ub_read_ps)
        return self._append(FixedCost(Pipe.SCALAR, name, cost), name)

    def _matrix(self, kind: str, dst: LocalTensor, src: LocalTensor, src_view: Shaped, dst_view: Shaped, name: str | None) -> Instruction:
        self._check_view(kind, src, *src_view)
        self._check_view(kind, dst, *dst_view)
        cost = self._matrix_cost(kind, [math.prod(dst_view[0])], dst.dtype.itemsize)
        return self._append(MatrixVectorOp(kind, dst, src, src_view, dst_view, cost, name or kind))

    def _check_view(self, what: str, tensor: LocalTensor, shape: Sequence[int], strides: Sequence[int]) -> None:
        span = 1 + sum((n - 1) * s for n, s in zip(shape, strides)) if all(shape) else 0
        if tensor.buffer != "UB" or tensor.count < span or len(shape) != len(strides) or min(strides, default=0) < 0:
            raise UsageError(f"vector {what}: operand {tensor!r} must be a UB tensor holding the view of shape {list(shape)} "
                             f"with strides {list(strides)} ({span} elements)")

    # -- cube ----------------------------------------------------------------------------------

    def mmad(self, dst: LocalTensor, a: LocalTensor, b: LocalTensor, m: int, n: int, k: int, accumulate: bool = False,
             *, bias: LocalTensor | None = None, name: str | None = None) -> Instruction:
        """L0C[m, n] (+)= L0A[m, k] x L0B[n, k]^T on the cube unit, operands in NZ layout
        (:mod:`npusim.isa.fractal`; :class:`~npusim.isa.instructions.Mmad` gives the numerics); its
        time is the blocks of the cube (``m x n x k`` rounded up to whole blocks, the block's k
        depending on the input dtype) one after the other. ``bias``: ``n`` values in L1 a first
        (not accumulating) mmad starts from, as from the bias table."""
        self._require(Pipe.CUBE, "mmad")
        if (a.buffer, b.buffer, dst.buffer) != ("L0A", "L0B", "L0C"):
            raise UsageError("mmad reads L0A and L0B and writes L0C")
        if a.dtype != b.dtype:
            raise UsageError(f"mmad: L0A holds {a.dtype} and L0B {b.dtype}; both inputs need the same dtype")
        if bias is not None and (bias.buffer != "L1" or bias.count < n):
            raise UsageError(f"mmad: bias {bias!r} must be an L1 tensor of at least n = {n} values")
        block = inner_block(a.dtype.itemsize)
        for what, tensor, rows, cols, fc in (("L0A", a, m, k, block), ("L0B", b, n, k, block), ("L0C", dst, m, n, FRACTAL_ROWS)):
            need = nz_count(rows, cols, fc)
            if tensor.count < need:
                raise UsageError(f"mmad {m}x{n}x{k}: {what} tensor {tensor!r} has {tensor.count} elements, the NZ fractals need {need}")
        cube = self._timing.cube
        assert cube is not None  # _require: the core has a cube pipe
        cost = cube.cost_ps(m, n, k, a.dtype.itemsize)
        return self._append(Mmad(dst, a, b, m, n, k, accumulate, cost, bias), name)

    def load_nz(self, dst: LocalTensor, src: LocalTensor, rows: int, cols: int, src_stride: int | None = None, *,
                transpose: bool = False, name: str | None = None) -> Instruction:
        """MTE1 L1 -> L0A / L0B: the ``rows x cols`` ND matrix at ``src`` (rows ``src_stride`` elements
        apart) into ``dst`` in NZ layout, transposed first with ``transpose`` (L0 holds k innermost)."""
        src_stride = cols if src_stride is None else src_stride
        if src.buffer != "L1" or dst.buffer not in ("L0A", "L0B") or src.dtype != dst.dtype:
            raise UsageError(f"load_nz moves an L1 matrix into L0A / L0B of the same dtype; got {src!r} -> {dst!r}")
        out_rows, out_cols = (cols, rows) if transpose else (rows, cols)
        count = nz_count(out_rows, out_cols, inner_block(dst.dtype.itemsize))
        span = (rows - 1) * src_stride + cols
        if dst.count < count or src.count < span:
            raise UsageError(f"load_nz of {rows}x{cols}: {dst!r} must hold {count} elements (NZ) and {src!r} {span}")
        pipe = self._copy_pipes.get(("L1", dst.buffer))
        if pipe is None:
            raise UsageError(f"kernel {self.kernel.name!r} {self.core.name}: no engine moves L1 -> {dst.buffer}")
        granule = self.core.dma_timing[pipe].granule_bytes
        label = name or f"load_nz L1->{dst.buffer}"
        return self._append(FractalLoad(dst, src, rows, cols, src_stride, transpose, count * dst.dtype.itemsize, granule, label), label)

    def load_nd2nz(self, dst: LocalTensor, src: GmAddress, rows: int, cols: int, src_row_bytes: int, *, name: str | None = None) -> Instruction:
        """MTE2 GM -> L1: the ``rows x cols`` ND matrix at ``src`` (rows ``src_row_bytes`` apart) into
        ``dst`` in NZ layout (:class:`~npusim.isa.instructions.Nd2NzLoad`)."""
        item = dst.dtype.itemsize
        count = nz_count(rows, cols, inner_block(item))
        if dst.buffer != "L1" or not isinstance(src, GmAddress) or dst.count < count or src_row_bytes < cols * item:
            raise UsageError(f"load_nd2nz of {rows}x{cols}: moves GM rows (at least {cols * item} bytes apart, given {src_row_bytes}) into "
                             f"an L1 tensor of at least {count} elements (NZ); got {src!r} -> {dst!r}")
        pipe = self._copy_pipes.get(("GM", "L1"))
        if pipe is None:
            raise UsageError(f"kernel {self.kernel.name!r} {self.core.name}: no engine moves GM -> L1")
        self._check_span(src, rows, cols * item, src_row_bytes - cols * item)
        label = name or "load_nd2nz GM->L1"
        return self._append(Nd2NzLoad(dst, src, rows, cols, src_row_bytes, self.core.dma_timing[pipe].granule_bytes, label), label)

    def extract_nz(self, dst: LocalTensor, src: LocalTensor, src_rows: int, row0: int, col0: int, rows: int, cols: int, *,
                   transpose: bool = False, name: str | None = None) -> Instruction:
        """MTE1 L1 -> L0A / L0B: rows ``row0..`` and columns ``col0..`` (``rows x cols``) of the NZ
        matrix at ``src`` in L1 (``src_rows`` rows, padded to 16) into ``dst`` in NZ layout, transposed
        first with ``transpose`` (:class:`~npusim.isa.instructions.NzExtract`)."""
        item = dst.dtype.itemsize
        fc = inner_block(item)
        out_rows, out_cols = (cols, rows) if transpose else (rows, cols)
        count = nz_count(out_rows, out_cols, fc)
        need = nz_count(src_rows, col0 + cols, fc)
        if (src.buffer != "L1" or dst.buffer not in ("L0A", "L0B") or src.dtype != dst.dtype or src_rows % FRACTAL_ROWS or row0 % FRACTAL_ROWS
                or col0 % fc or row0 + rows > src_rows or dst.count < count or src.count < need):
            raise UsageError(f"extract_nz of {rows}x{cols} at ({row0}, {col0}) from an NZ matrix of {src_rows} rows (a multiple of 16; the "
                             f"corner on whole fractals) needs an L1 source of {need} elements and an L0A / L0B destination of {count}, "
                             f"of one dtype; got {src!r} -> {dst!r}")
        pipe = self._copy_pipes.get(("L1", dst.buffer))
        if pipe is None:
            raise UsageError(f"kernel {self.kernel.name!r} {self.core.name}: no engine moves L1 -> {dst.buffer}")
        label = name or f"extract_nz L1->{dst.buffer}"
        return self._append(NzExtract(dst, src, src_rows, row0, col0, rows, cols, transpose, count * item,
                                      self.core.dma_timing[pipe].granule_bytes, label), label)

    def fixpipe(self, dst: GmAddress, src: LocalTensor, rows: int, cols: int, out_dtype: npt.DTypeLike, dst_row_bytes: int | None = None, *,
                rounding: str = "rint", dequant: Dequant | None = None, name: str | None = None) -> Instruction:
        """FIXP L0C -> GM: the ``rows x cols`` result in L0C (NZ), converted to ``out_dtype`` (fp32
        results rounded with ``rounding``; with ``dequant``, its vectors in L1 applied first:
        :class:`~npusim.isa.instructions.Dequant`), as ND rows ``dst_row_bytes`` apart in GM."""
        if dequant is not None:
            for field, vector in zip(dequant._fields[:4], dequant[:4]):
                length = 1 if vector is not None and vector.count == 1 else rows if field == "token" else cols
                if vector is not None and (vector.buffer != "L1" or vector.count < length):
                    raise UsageError(f"fixpipe: dequant {field} {vector!r} must be an L1 tensor of at least {length} values")
        out = np.dtype(out_dtype)
        dst_row_bytes = cols * out.itemsize if dst_row_bytes is None else dst_row_bytes
        if src.buffer != "L0C" or not isinstance(dst, GmAddress):
            raise UsageError(f"fixpipe moves L0C to GM; got {src!r} -> {dst!r}")
        if src.count < nz_count(rows, cols, FRACTAL_ROWS):
            raise UsageError(f"fixpipe of {rows}x{cols}: {src!r} holds fewer than the {nz_count(rows, cols, FRACTAL_ROWS)} elements of its fractals")
        if rounding not in vector_semantics.ROUNDING_NAMES:
            raise UsageError(f"unknown rounding {rounding!r}; known: {', '.join(vector_semantics.ROUNDING_NAMES)}")
        self._check_span(dst, rows, cols * out.itemsize, dst_row_bytes - cols * out.itemsize)
        granule = self.core.dma_timing[Pipe.FIXP].granule_bytes
        label = name or "fixpipe L0C->GM"
        return self._append(FixpipeStore(dst, src, rows, cols, out, dst_row_bytes, rounding, granule, label, dequant), label)

    # -- scalar and synchronisation ------------------------------------------------------------

    def scalar(self, instructions: int = 1, name: str = "scalar") -> Instruction:
        """``instructions`` scalar instructions (address arithmetic, loop control)."""
        cost = instructions * self._timing.scalar.instruction_ps
        return self._append(FixedCost(Pipe.SCALAR, name, cost), name)

    def read_scalar(self, src: LocalTensor, index: int = 0, *, name: str | None = None, bound: tuple[int, str] | None = None) -> ScalarReg:
        """Read element ``index`` of a UB tensor into a new scalar register (returned); ``name``
        labels the event in the trace (default ``read_scalar``). ``bound``: ``(limit, rule)``, an
        index value that must lie in ``[0, limit)``: with data, a value outside raises
        OpArgumentError with ``rule`` formatted with ``value``."""
        register = ScalarReg(self._regs)
        self._regs += 1
        self._append(ScalarRead(src, index, register.reg_id, self._timing.scalar.ub_read_ps, bound), name)
        return register

    def write_scalar(self, dst: LocalTensor, value: int | float, index: int = 0, *, control: bool = False) -> Instruction:
        """Write ``value`` into element ``index`` of a UB tensor from the scalar unit (``control``:
        a signal value, written even when data is off)."""
        instruction = ScalarWrite(dst, index, value, self._timing.scalar.ub_read_ps)
        instruction.control = control
        return self._append(instruction)

    def write_scalars(self, dst: LocalTensor, values: npt.ArrayLike, index: int = 0, *, control: bool = False, name: str = "write_scalars") -> Instruction:
        """Write ``values`` (a sequence) into consecutive elements of a UB tensor from ``index`` on:
        one event for the scalar unit's writes one after the other (each costing what
        :meth:`write_scalar` does)."""
        written = np.asarray(values, dtype=dst.dtype)
        if index < 0 or index + len(written) > dst.count:
            raise UsageError(f"write_scalars: {len(written)} values from element {index} do not fit {dst!r}")
        instruction = ScalarWrite(dst, index, written, len(written) * self._timing.scalar.ub_read_ps, name)
        instruction.control = control
        return self._append(instruction, name)

    def poll(self, address: GmAddress, count: int, expected: int, *, stride: int = 32, need: int | None = None,
             name: str = "poll status", waiting_for: str = "status words") -> Instruction:
        """Spin until ``need`` (default: all) of the ``count`` int32 words ``stride`` bytes apart from
        ``address`` (control memory: status flags other dies write) hold ``expected``
        (:class:`~npusim.isa.instructions.PollGm`).
        One iteration costs what this core pays for it: an MTE2 read of the words (engine set-up,
        memory latency, their bursts), a vector sum of them and a scalar read of the result."""
        allocation = address.allocation
        if allocation.data is None:
            raise UsageError(f"poll: {allocation.label} holds no bytes with data off; allocate status words as control memory")
        if not isinstance(address.offset, int) or address.offset < 0 or address.offset + (count - 1) * stride + 4 > allocation.size_bytes:
            raise UsageError(f"poll: {count} words {stride} bytes apart from byte {address.offset} do not fit in {allocation.label}")
        need = count if need is None else need
        return self._append(PollGm(address, count, stride, expected, need, self.poll_ps(count * 32), name, waiting_for), name)

    def poll_ps(self, nbytes: int) -> int:
        """One iteration of a poll of ``nbytes`` of local GM: an MTE2 read of them, a vector sum of
        the words read and a scalar read of the sum (what :meth:`poll` charges per look)."""
        engine = self.core.dma_timing[Pipe.MTE2]
        die = self.core.die
        granules = -(-nbytes // engine.granule_bytes)
        read_ps = engine.setup_ps + die.memory_latency_ps + round(granules * engine.granule_bytes / engine.rate_bytes_per_ps(("GM", "UB"), False))
        vector = self._timing.vector
        assert vector is not None, "poll: the core has no vector unit to sum the words it reads"
        sum_ps = vector.cost_ps("add", max(1, -(-nbytes // vector.repeat_bytes)))
        return read_ps + sum_ps + self._timing.scalar.ub_read_ps

    def sync_all(self, barrier: CoreBarrier) -> Instruction:
        """Wait until every core of the launch reaches its SyncAll of ``barrier`` (:meth:`Kernel.barrier`)."""
        barrier.parties += 1
        return self._append(SyncAll(barrier, self._recorder), "SyncAll")

    def set_flag(self, src: str | Pipe, dst: str | Pipe, event_id: int = 0) -> Instruction:
        """Raise flag ``event_id`` from pipe ``src`` to pipe ``dst`` (after src's earlier work)."""
        src, dst = self._pipe(src), self._pipe(dst)
        return self._append(SetFlag(src, dst, event_id, self._timing.scalar.flag_ps))

    def wait_flag(self, src: str | Pipe, dst: str | Pipe, event_id: int = 0) -> Instruction:
        """Make pipe ``dst`` wait for flag ``event_id`` from pipe ``src``."""
        src, dst = self._pipe(src), self._pipe(dst)
        return self._append(WaitFlag(src, dst, event_id, self._timing.scalar.flag_ps))

    def pipe_barrier(self, pipe: str | Pipe = "ALL") -> Instruction:
        """``ALL``: stop issuing until every pipe is drained; a single pipe: order that pipe's work
        (pipes already run in order here, so it costs only its own time)."""
        cost = self._timing.scalar.barrier_ps
        if str(pipe).upper() in ("ALL", "PIPE_ALL"):
            counts: dict[Pipe, int] = {}
            for instruction in self.instructions:
                counts[instruction.pipe] = counts.get(instruction.pipe, 0) + 1
            return self._append(PipeBarrierAll(sorted(counts.items()), cost))
        target = self._pipe(pipe)
        return self._append(FixedCost(target, f"pipe_barrier {target.name}", cost))

    def _require(self, pipe: Pipe, what: str) -> None:
        if pipe not in self._pipes:
            raise UsageError(
                f"kernel {self.kernel.name!r} {self.core.name}: {what} runs on the {pipe.name} pipe, which an "
                f"{self.core.kind.upper()} core does not have (its pipes: {', '.join(p.name for p in self._pipes)})"
            )

    def _pipe(self, pipe: str | Pipe) -> Pipe:
        parsed = _PIPE_CACHE.get(pipe)
        if parsed is None:
            try:
                parsed = _PIPE_CACHE[pipe] = Pipe.parse(pipe)
            except ValueError as error:
                raise UsageError(str(error)) from None
        if parsed not in self._pipes:
            raise UsageError(f"{self.core.name} has no {parsed.name} pipe; its pipes are {', '.join(p.name for p in self._pipes)}")
        return parsed

    # -- reuse ---------------------------------------------------------------------------------

    def template(self, bases: Sequence[tuple[Allocation, int]], own: Collection[int] | None = None, start: int = 0) -> ProgramTemplate | None:
        """This program as a :class:`ProgramTemplate` whose GM addresses are offsets from ``bases``
        (``(allocation, byte offset)`` each, the GM addresses its builder was given); None if it
        cannot be one: two bases in one allocation, a GM address in no base's allocation or computed
        from registers, or an instruction without a twin (:meth:`Instruction.twin`).

        ``own``: the positions of the instructions each replay needs its own of, those something is
        attached to once built (:func:`~npusim.isa.instructions.on_recorded` hooks); the other
        instructions without GM addresses are then shared by the replays of one tile, made once per
        tile (exact: the pipes only read instructions). Only for programs launched alone, as race
        reports attach to what they name (a replay that is race-checked gets its own of each).
        None: every replay gets its own of each instruction.

        ``start``: a template of the instructions from that position on (a piece that
        :meth:`extend` appends to other programs; ``own`` counted from there)."""
        slot_of: dict[int, int] = {}
        for slot, (allocation, _) in enumerate(bases):
            if slot_of.setdefault(id(allocation), slot) != slot:
                return None
        sides: list[tuple[int, int, int, int, int, int] | None] = []
        instructions = self.instructions[start:] if start else self.instructions
        for instruction in instructions:
            try:
                instruction.twin()  # raises TypeError for an instruction that has none (a copy: other classes, dynamic)
            except TypeError:
                return None
            if not isinstance(instruction, DmaCopy):
                sides.append(None)
                continue
            entry: list[int] = []
            for side, gap in ((instruction.dst, instruction.dst_gap), (instruction.src, instruction.src_gap)):
                if isinstance(side, GmAddress):
                    slot = slot_of.get(id(side.allocation), -1)
                    if slot < 0:
                        return None
                    offset = side.offset
                    assert isinstance(offset, int)  # a copy with an offset from registers has no twin (returned above)
                    entry += (slot, offset - bases[slot][1], instruction.span(gap))
                else:
                    entry += (-1, 0, 0)
            sides.append(tuple(entry))  # type: ignore[arg-type]  # dst then src: (slot, offset, span) each
        return ProgramTemplate(list(instructions), sides, dict(self._allocated), self._regs, self.core.kind_timing, self.race_free,
                               None if own is None else frozenset(own))

    def replay(self, template: ProgramTemplate, bases: Sequence[tuple[Allocation, int]]) -> bool:
        """Append the twins of ``template``'s instructions to this empty program, each GM address at
        its offset from ``bases`` (as :meth:`template` took them), in the current tile, with the
        template's buffer reservations and race verdict. False, appending nothing, where building
        could differ or fail: a program not empty, another kind of core, two bases in one allocation,
        a copy past the end of its allocation, an atomic add on a die without atomics (build it then:
        that says what is wrong)."""
        if self.instructions or self._regs or template.kind_timing is not self.core.kind_timing or any(self._allocated.values()):
            return False
        share = template.own is not None and template.unchecked(self.core.system)  # not race-checked
        replayed = template.replay(self.core, self._tile, bases, share, self.kernel.name)
        if replayed is None:
            return False
        self.instructions = replayed.instructions
        self._replayed = replayed.by_pipe
        self._replayed_steps = replayed.steps
        self._allocated.update(template.allocated)
        self._regs = template.regs
        self.race_free = template.race_free
        self.shares = share
        return True

    def extend(self, template: ProgramTemplate, bases: Sequence[tuple[Allocation, int]]) -> bool:
        """Append the twins of ``template``'s instructions (a piece: :meth:`template` with
        ``start``) to this program, in the current tile, each GM address at its offset from
        ``bases``, as :meth:`replay` makes a whole program; a ``pipe_barrier(ALL)`` of the piece waits
        for every instruction before it in this program. The piece was built on a program with the
        same buffer reservations as this one and reserves nothing itself (a kernel that runs one
        piece per output block on buffers it allocated first). False, appending nothing, where
        building could differ or fail (another kind of core, other reservations, two bases in one
        allocation, a copy past the end of its allocation, an atomic add on a die without atomics)."""
        if (template.kind_timing is not self.core.kind_timing or template.allocated != self._allocated or template.regs
                or len({id(allocation) for allocation, _ in bases}) != len(bases)):
            return False
        tile, die = self._tile, self.core.system.die
        made: list[Instruction] = []
        for instruction, side in zip(template.instructions, template.sides):
            if side is None:
                new = instruction.twin()
            else:
                dst_slot, dst_delta, dst_span, src_slot, src_delta, src_span = side
                dst = _rebased_side(bases[dst_slot], dst_delta, dst_span) if dst_slot >= 0 else instruction.dst  # type: ignore[attr-defined]
                src = _rebased_side(bases[src_slot], src_delta, src_span) if src_slot >= 0 else instruction.src  # type: ignore[attr-defined]
                if dst is None or src is None:
                    return False
                if instruction.__class__ is AtomicAddCopy and die(dst.allocation.die).atomics is None:
                    return False
                new = instruction.moved(dst, src)  # type: ignore[attr-defined]  # a template's copy: it has one
            new.tile, new.label_id = tile, pack(new.name_id, tile)
            made.append(new)
        if template.needs_end_times:
            counts: dict[Pipe, int] = {}
            for instruction in self.instructions:
                counts[instruction.pipe] = counts.get(instruction.pipe, 0) + 1
            for new in made:
                if new.__class__ is PipeBarrierAll:
                    new.targets = sorted(counts.items())
                counts[new.pipe] = counts.get(new.pipe, 0) + 1
        self.instructions.extend(made)
        return True

    # -- finishing -----------------------------------------------------------------------------

    def by_pipe(self) -> dict[Pipe, list[Instruction]]:
        """Split the program per pipe, giving each instruction the number of scalar instructions
        that precede it (it cannot be issued before they finish)."""
        replayed = self._replayed
        if replayed is not None and sum(map(len, replayed.values())) == len(self.instructions):  # a replay, as it was made
            return replayed
        pipes: dict[Pipe, list[Instruction]] = {pipe: [] for pipe in self._pipes}
        scalars = 0
        for instruction in self.instructions:
            pipe = instruction.pipe
            instruction.s_dep = scalars
            pipes[pipe].append(instruction)
            if pipe is _SCALAR:
                scalars += 1
        return pipes

    def pipe_steps(self, by_pipe: dict[Pipe, list[Instruction]]) -> dict[Pipe, list[PipeStep]]:
        """The :class:`~npusim.hw.core.PipeStep` records of the instructions of ``by_pipe`` (what
        :meth:`by_pipe` gave), per pipe; a replay's are those its template's replays in the tile share."""
        if by_pipe is self._replayed and self._replayed_steps is not None:
            return self._replayed_steps
        return {pipe: list(map(PipeStep, instructions)) for pipe, instructions in by_pipe.items()}


def _rebased_side(base: tuple[Allocation, int], delta: int, span: int) -> GmAddress | None:
    """A replayed copy's GM side: ``delta`` bytes past its base (allocation, offset), or None where
    its ``span`` bytes would not lie inside that allocation."""
    allocation, offset = base
    offset += delta
    if offset < 0 or offset + span > allocation.size_bytes:
        return None
    return GmAddress(allocation, offset)


class ProgramTemplate:
    """A core program built once, to be made again for other GM bytes (:meth:`CoreProgram.replay`):
    a tile op's program is fixed by what built it (shapes, dtypes, strides, names) except its GM
    addresses, each the GM address a builder was given (a *base*) plus a constant. It holds the
    instructions, per instruction its GM sides as ``(base, offset from it, bytes spanned)`` (``dst``
    then ``src``; base -1: a buffer side, kept), the bytes reserved per buffer, the scalar registers used, the
    kind of core it was built for, and the race check's verdict on it (``race_free``, None if not
    checked).

    Why the verdict holds for every replay: a replay has the same instructions in the same order
    (pipes, kinds, flags, barriers, ``s_dep``) and the same buffer bytes; only its GM sides differ,
    base i's bytes moved from allocation A_i to A'_i by one offset d_i. The A_i are distinct (else
    no template is made) and so are the A'_i (else no replay is made), so two GM entries share a
    memory in the replay exactly when they do in the template, and their offsets from one another
    within it are the same. :func:`~npusim.isa.racecheck.core_races` sees GM only through which
    entries share a memory and those relative offsets (a race needs two entries of one memory to
    overlap); control data is left out in both alike. It therefore walks the same order, keeps the
    same shadows and finds the same races: none when ``race_free``. (Races across cores need more
    than one program, whose launch is checked as before.)"""

    __slots__ = ("instructions", "sides", "allocated", "regs", "kind_timing", "race_free", "own", "_skeletons", "atomic_dies",
                 "needs_end_times")

    def __init__(self, instructions: list[Instruction], sides: list[tuple[int, int, int, int, int, int] | None], allocated: dict[str, int],
                 regs: int, kind_timing: CoreKindTiming, race_free: bool | None, own: frozenset[int] | None = None) -> None:
        self.instructions, self.sides, self.allocated, self.regs = instructions, sides, allocated, regs
        self.kind_timing, self.race_free, self.own = kind_timing, race_free, own
        self._skeletons: dict[tuple[int, bool], _Skeleton] = {}
        self.atomic_dies: set[int] = set()  # the dies its replays found atomic adds on (die.l2.atomic_add)
        self.needs_end_times = PipeBarrierAll in map(type, instructions)  # as _Placed finds for each replay: it has a pipe_barrier(ALL)

    def unchecked(self, system: System) -> bool:
        """Whether a replay of it launched alone is not race-checked on ``system``: it was found
        race-free (which holds for every replay, see the class doc), or races are not checked."""
        return bool(self.race_free or system.race_check == "off")

    def replay(self, core: AICore, tile: int, bases: Sequence[tuple[Allocation, int]], share: bool, name: str) -> Replay | None:
        """Its program made again for ``core`` (of the kind it was built for) in ``tile``, each GM
        address at its offset from ``bases``, placed as :class:`Kernel` places a program of kernel
        ``name`` (:meth:`CoreProgram.replay` says when it is None); with ``share``, the instructions
        outside ``own`` without GM addresses are those of every replay in the tile (:meth:`skeleton`)."""
        if len({id(allocation) for allocation, _ in bases}) != len(bases):
            return None
        die = core.system.die
        skeleton = self.skeleton(tile, share)
        made = skeleton.made.copy()
        pipes = {pipe: shared.copy() for pipe, shared in skeleton.pipes.items()}  # by_pipe, as it goes (s_dep as in the template)
        atomic_dies = self.atomic_dies
        for hole in skeleton.twins:
            new = hole.model.twin()
            made[hole.position] = new
            pipes[hole.pipe][hole.at] = new
        for copy in skeleton.copies:
            instruction = copy.model
            dst: CopySide = instruction.dst
            src: CopySide = instruction.src
            if copy.src_slot >= 0:
                if (rebased := _rebased_side(bases[copy.src_slot], copy.src_delta, copy.src_span)) is None:
                    return None
                src = rebased
            if copy.dst_slot >= 0:
                if (rebased := _rebased_side(bases[copy.dst_slot], copy.dst_delta, copy.dst_span)) is None:
                    return None
                dst = rebased
                allocation = rebased.allocation
                if instruction.__class__ is AtomicAddCopy and allocation.die not in atomic_dies:
                    if die(allocation.die).atomics is None:
                        return None
                    atomic_dies.add(allocation.die)
            key = instruction.path_key  # as moved() makes it (each other die's kept in the hole's path_keys)
            if key[1] is not None:
                gm_side = dst if key[2] else src
                assert isinstance(gm_side, GmAddress)  # GM where the model's is
                gm_die = gm_side.allocation.die
                if gm_die != key[1]:
                    path_keys = copy.path_keys
                    key = path_keys.get(gm_die) or path_keys.setdefault(gm_die, instruction.path_key_on(gm_die))
            new = instruction._moved(dst, src, key)  # a template's copy: it has a twin (template)
            made[copy.position] = new
            pipes[copy.pipe][copy.at] = new
        steps = skeleton.steps
        if steps is None:  # the first replay in the tile: the next ones' instructions have the same fixed fields
            steps = skeleton.steps = {pipe: [PipeStep(instruction, shared is None) for instruction, shared in zip(instructions, skeleton.pipes[pipe])]
                                      for pipe, instructions in pipes.items()}
        return Replay(core, cast(list[Instruction], made), cast(dict[Pipe, list[Instruction]], pipes), steps, name, self.needs_end_times,
                      self.allocated)

    def skeleton(self, tile: int, share: bool) -> _Skeleton:
        """What the replays in ``tile`` start from (made once per tile): with ``share``, the twins
        they share of the instructions outside ``own`` without GM addresses; the rest are holes."""
        skeleton = self._skeletons.get((tile, share))
        if skeleton is not None:
            return skeleton
        own = self.own if share and self.own is not None else None
        made: list[Instruction | None] = []
        pipes: dict[Pipe, list[Instruction | None]] = {pipe: [] for pipe in self.kind_timing.pipes}
        twins: list[_Hole] = []
        copies: list[_CopyHole] = []
        for position, (instruction, side) in enumerate(zip(self.instructions, self.sides)):
            of_pipe = pipes[instruction.pipe]
            if own is not None and side is None and position not in own:
                twin = instruction.twin()
                twin.tile, twin.label_id = tile, pack(twin.name_id, tile)
                twin.recorded = shared_by_replays  # nothing may be attached to it (on_recorded)
                made.append(twin)
                of_pipe.append(twin)
            else:
                model = instruction.twin()  # the hole's instructions are its twins (in the tile)
                model.tile, model.label_id = tile, pack(instruction.name_id, tile)
                if side is None:
                    twins.append(_Hole(position, instruction.pipe, len(of_pipe), model))
                else:
                    copies.append(_CopyHole(position, instruction.pipe, len(of_pipe), cast(DmaCopy, model), side))
                made.append(None)
                of_pipe.append(None)
        skeleton = self._skeletons[(tile, share)] = _Skeleton(made, pipes, twins, copies)
        return skeleton


class _Hole:
    """A hole of a template's skeleton (:class:`_Skeleton`), which each replay fills with a twin of
    ``model`` (the twin in the tile of the template's instruction, never run itself): the
    instruction's ``position`` in the program, its ``pipe`` and its index in that pipe's list (``at``)."""

    __slots__ = ("position", "pipe", "at", "model")

    def __init__(self, position: int, pipe: Pipe, at: int, model: Instruction) -> None:
        self.position, self.pipe, self.at, self.model = position, pipe, at, model


class _CopyHole:
    """A copy's hole, which each replay fills with ``model`` (as :class:`_Hole`) rebased on its
    bases: ``side``, its GM sides as :meth:`CoreProgram.template` took them (``dst`` then ``src``:
    the base's slot, -1 for a buffer side, kept; the offset from the base; the bytes spanned), and
    ``path_keys``, the path keys of its replays whose GM side is on another die, by die, made as
    they are met (typed as tuples of any length: compiled, they stay the objects they are, whose
    identity the routes' look-up relies on; a tuple of fixed length would be unboxed and boxed anew)."""

    __slots__ = ("position", "pipe", "at", "model", "dst_slot", "dst_delta", "dst_span", "src_slot", "src_delta", "src_span", "path_keys")

    def __init__(self, position: int, pipe: Pipe, at: int, model: DmaCopy, side: tuple[int, int, int, int, int, int]) -> None:
        self.position, self.pipe, self.at, self.model = position, pipe, at, model
        self.dst_slot, self.dst_delta, self.dst_span, self.src_slot, self.src_delta, self.src_span = side
        self.path_keys: dict[int, tuple[object, ...]] = {}


class _Skeleton:
    """The start of a template's replays in one tile: the program (``made``) and its split per
    pipe (``pipes``) with the shared instructions in place and None in each hole; the holes:
    ``twins`` (:class:`_Hole`), filled with a twin, and ``copies`` (:class:`_CopyHole`), with a
    copy rebased on the replay's bases. ``steps``: the
    :class:`~npusim.hw.core.PipeStep` records per pipe of every replay in the tile (the same for all:
    twins and rebased copies have their template's fixed fields; only the holes are watched), from
    the first replay."""

    __slots__ = ("made", "pipes", "twins", "copies", "steps")

    def __init__(self, made: list[Instruction | None], pipes: dict[Pipe, list[Instruction | None]], twins: list[_Hole],
                 copies: list[_CopyHole]) -> None:
        self.made, self.pipes, self.twins, self.copies = made, pipes, twins, copies
        self.steps: dict[Pipe, list[PipeStep]] | None = None




class _TileScope:
    """The ``with`` block of :meth:`CoreProgram.tile` (a class, not a generator: a program is built
    per tile op, and entering a generator's context costs several times more)."""

    __slots__ = ("program", "index", "previous")

    def __init__(self, program: CoreProgram, index: int) -> None:
        self.program = program
        self.index = index
        self.previous = -1

    def __enter__(self) -> None:
        self.previous, self.program._tile = self.program._tile, self.index

    def __exit__(self, *_exc: object) -> None:
        self.program._tile = self.previous


class _Placed:
    """What the core executes: the per-pipe split of a program, with its PipeStep records, the
    name of its kernel, whether it has a pipe_barrier(ALL), the bytes it reserves per buffer (held
    for the whole run)."""

    __slots__ = ("by_pipe", "steps", "name", "needs_end_times", "buffer_bytes")

    def __init__(self, by_pipe: dict[Pipe, list[Instruction]], steps: dict[Pipe, list[PipeStep]], name: str, needs_end_times: bool,
                 buffer_bytes: dict[str, int]) -> None:
        self.by_pipe, self.steps, self.name, self.needs_end_times, self.buffer_bytes = by_pipe, steps, name, needs_end_times, buffer_bytes

    @classmethod
    def of(cls, program: CoreProgram) -> _Placed:
        """``program`` placed (its by_pipe split done)."""
        by_pipe = program.by_pipe()
        return cls(by_pipe, program.pipe_steps(by_pipe), program.kernel.name, PipeBarrierAll in map(type, by_pipe[_SCALAR]),
                   program.allocated_bytes)


class Replay(_Placed):
    """A template's program made again for one core (:meth:`ProgramTemplate.replay`), placed:
    ``instructions`` in program order (positions as in the template). A replay that is not
    race-checked (:meth:`ProgramTemplate.unchecked`) is launched alone with :meth:`launch`, as a
    :class:`Kernel` of this one program would launch it, without the kernel and its program."""

    __slots__ = ("core", "instructions")

    def __init__(self, core: AICore, instructions: list[Instruction], by_pipe: dict[Pipe, list[Instruction]], steps: dict[Pipe, list[PipeStep]],
                 name: str, needs_end_times: bool, buffer_bytes: dict[str, int]) -> None:
        super().__init__(by_pipe, steps, name, needs_end_times, buffer_bytes)
        self.core, self.instructions = core, instructions

    def launch(self, stream: Stream, op: int) -> simpy.Process:
        """Queue its run on ``stream`` as ``Kernel(name, op=op).launch(stream, inline=True)`` queues
        a kernel of this one program (see there); returns the stream task's process."""
        return stream.submit(_run_inline, self.core, self, op)


class KernelAtStart:
    """A launch whose programs depend on device values its kernel reads when it starts (a grouped
    matmul's group sizes, written by work queued before it): ``build()`` makes the :class:`Kernel`
    when the stream reaches the launch, from the values in GM then, and it runs at once. Until
    then it has no programs; ``when_built`` callbacks get the kernel once made (the host launch's
    arrow to its first instruction); ``op_inputs`` / ``op_outputs`` go to it, and ``source`` (the line of the user's program
    that issued it, set by the frontend) where the built kernel has none."""

    def __init__(self, name: str, die: int, build: Callable[[], Kernel], *, system: System | None = None) -> None:
        self.system = system or default_system()
        self.name, self.die, self.build = name, die, build
        self.op_inputs: list[tuple[tuple[int, ...], str]] = []
        self.op_outputs: list[tuple[tuple[int, ...], str]] = []
        self.built: list[Callable[[Kernel], object]] = []
        self.launched: simpy.Process | None = None
        self.source: object = None

    def when_built(self, callback: Callable[[Kernel], object]) -> None:
        self.built.append(callback)

    def launch(self, stream: Stream | None = None) -> simpy.Process:
        """Queue the launch on ``stream`` (the die's default stream unless given); returns its process."""
        if self.launched is not None:
            raise UsageError(f"kernel {self.name!r} was already launched; build a new one to run it again")
        stream = stream or self.system.stream(self.die)
        self.launched = stream.submit(self._run, stream)
        return self.launched

    def _run(self, stream: Stream) -> Generator[simpy.Event, object, None]:
        kernel = self.build()
        kernel.op_inputs, kernel.op_outputs = self.op_inputs, self.op_outputs
        if kernel.source is None:
            kernel.source = self.source
        for callback in self.built:
            callback(kernel)
        own = Stream(self.system.env, self.die, stream.name)  # nothing queued on it: the kernel starts now
        yield kernel.launch(own)


def _run_one(core: AICore, program: _Placed, op: int) -> Generator[simpy.Event, object, None]:
    """The stream task of a kernel of one program (a tile op's): it runs on its core; the
    condition of that one run is leaner (_one_after)."""
    yield _one_after(core.execute(program, op))


def _run_inline(core: AICore, program: _Placed, op: int) -> Generator[simpy.Event, object, None]:
    """The stream task of a kernel of one program whose run would start as the next event
    processed (:meth:`Kernel.launch` ``inline``): the run goes on in the stream task's own process,
    and ends as :func:`_run_one`'s: the two events that would end the run's process and then pass
    that on to the stream task (:func:`_one_after`) are kept, at the same moments, so every event
    keeps its place (rule 5 of the order of events, :mod:`npusim.engine.loop`); a failure fails
    the stream task as that would, with a copy of it."""
    failure = None
    try:
        yield from core.run(program, op)
    except GeneratorExit:  # dropped unfinished
        raise
    except BaseException as raised:
        failure = raised
    env = core.env
    ended = simpy.Event(env)
    succeed_at(env, ended, 0)  # where the run's process would end,
    yield ended
    rearm_at(env, ended, 0)  # and where _one_after's event would then be triggered
    yield ended
    if failure is not None:
        copy = type(failure)(*failure.args)
        copy.__cause__ = failure
        raise copy


def _run_all(env: Environment, placed: list[tuple[AICore, _Placed]], op: int) -> Generator[simpy.Event, object, None]:
    """The stream task of a kernel: each placed program runs on its core; it ends when all have."""
    yield env.all_of([core.execute(program, op) for core, program in placed])


def _one_after(event: simpy.Event) -> simpy.Event:
    """An event triggered when ``event`` is processed, with its failure if it failed: what
    ``env.all_of([event])`` does at the same moments (its value, which nobody reads, aside)."""
    after = simpy.Event(event.env)
    event.callbacks.append(partial(_follow, after))
    return after


def _follow(after: simpy.Event, event: simpy.Event) -> None:
    """Trigger ``after`` as ``event`` ended (:func:`_one_after`)."""
    if event.ok:
        succeed_at(cast(Environment, event.env), after, 0)  # after.succeed(), without its checks
    else:
        event.defused = True
        after.fail(cast(Exception, event.value))


def _place(side: object) -> str:
    if isinstance(side, LocalTensor):
        return side.buffer
    if isinstance(side, GmAddress):
        return "GM"
    raise UsageError(f"a copy operand must be a LocalTensor (from alloc) or a GM address (isa.gm(tensor, offset)); got {side!r}")


class Kernel:
    """One kernel launch on one die: a program per core that takes part. Its events carry a new op
    id, or ``op`` (an id from ``recorder.op``) when several launches make up one op (tile ops).
    ``op_inputs`` and ``op_outputs`` (``(shape, dtype name)`` of each tensor, set by the launch
    path of ops) go to the new op's record. ``source`` (set by the frontend that issues it) is the
    line of the user's program it comes from; race reports name it."""

    def __init__(self, name: str, die: int = 0, *, system: System | None = None, op_args: dict[str, Any] | None = None,
                 op: int | None = None, source: object = None) -> None:
        self.system = system or default_system()
        self.name = name
        self.source = source  # the line of the user's program that issued it (a frontend Callsite; race reports name it)
        self.die = self.system.die(die)
        self.programs: dict[tuple[str, int], CoreProgram] = {}
        self.op_args = op_args or {}
        self.op = op
        self.op_inputs: list[tuple[tuple[int, ...], str]] = []
        self.op_outputs: list[tuple[tuple[int, ...], str]] = []
        self.launched: simpy.Event | None = None  # the launch's process (launch) or the event of its end (start)
        self.race_checked = True
        """False for a launch whose programs are code already checked for races over other data (a rank
        of an SPMD op, whose kernels are every rank's program): the launch path skips the check."""

    def core(self, kind: str, index: int) -> CoreProgram:
        """The program of core ``index`` of ``kind`` (a name under ``die.cores``), created on first use."""
        key = (kind, index)
        program = self.programs.get(key)
        if program is None:
            program = self.programs[key] = CoreProgram(self, self.die.core(kind, index))
        return program

    def barrier(self) -> CoreBarrier:
        """A SyncAll of the cores of this launch (``CoreProgram.sync_all``), costing ``die.sync_all``."""
        cost = self.system.timing.sync_all_ps
        if cost is None:
            raise ConfigError(f"kernel {self.name!r}: a SyncAll needs die.sync_all (its cost) in config {self.system.spec.name!r}; add it")
        return CoreBarrier(cost)

    def vector_core(self, index: int) -> CoreProgram:
        """The program of the ``index``-th core of the kind the product runs vector kernels on."""
        return self.core(PRODUCTS.get(self.system.spec.product).vector_cores, index)

    def cube_core(self, index: int) -> CoreProgram:
        """The program of the ``index``-th core of the kind the product runs cube kernels on."""
        return self.core(PRODUCTS.get(self.system.spec.product).cube_cores, index)

    def aiv(self, index: int) -> CoreProgram:
        """The program of vector core (AIV) ``index`` of a split die."""
        return self.core("aiv", index)

    def aic(self, index: int) -> CoreProgram:
        """The program of cube core (AIC) ``index`` of a split die."""
        return self.core("aic", index)

    def ordered_programs(self) -> list[CoreProgram]:
        """The programs in launch order: by core kind (the die's order of kinds), then core index."""
        if len(self.programs) == 1:
            return list(self.programs.values())
        kinds = self.die.timing.kinds
        return [program for _, program in sorted(self.programs.items(), key=lambda kv: (kinds[kv[0][0]].order, kv[0][1]))]

    def launch(self, stream: Stream | None = None, *, inline: bool = False) -> simpy.Process:
        """Queue the kernel on the die's stream (default stream unless given); returns its process.
        Every core starts when the previous task of the stream has finished.

        ``inline``: a kernel of one program runs in its stream task's own process, not in one of
        its own, with the same order of everything where that process's initialisation would be the
        next event processed (as :func:`~npusim.engine.loop.run_process`): the stream task takes its
        first step (or resumes after the stream's previous task) while a NORMAL event is processed,
        and that processing schedules nothing URGENT but the run's start (the order of events:
        :mod:`npusim.engine.loop`). The tile ops an AICPU
        scheduler dispatches (``CoreTask._launch``) are launched so."""
        stream = stream or self.system.stream(self.die.index)
        placed, op = self._place()
        if len(placed) == 1:
            self.launched = stream.submit(_run_inline if inline else _run_one, *placed[0], op)
        else:
            self.launched = stream.submit(_run_all, self.system.env, placed, op)
        return self.launched

    def start(self) -> simpy.Event:
        """Run the kernel now, from a task of a stream that is already running (a step of an op
        written on the device, :class:`~npusim.kernels.op.DeviceOp`); returns the event of its end:
        every core runs its program once free, as a launch would."""
        placed, op = self._place()
        env = self.system.env
        self.launched = env.all_of([core.execute(program, op) for core, program in placed])
        return self.launched

    def _place(self) -> tuple[list[tuple[AICore, _Placed]], int]:
        """The programs placed on their cores (race-checked), and the op id their events carry."""
        if self.launched is not None:
            raise UsageError(f"kernel {self.name!r} was already launched; build a new Kernel to run it again")
        op = self.op
        if op is None:
            recorder = self.system.recorder
            op = recorder.op(self.name, self.die.index, **self.op_args)
            recorder.ops[op].inputs, recorder.ops[op].outputs = list(self.op_inputs), list(self.op_outputs)
        programs = self.ordered_programs()
        if len(programs) > 1 and any(program.shares for program in programs):
            raise UsageError(f"kernel {self.name!r}: a program replayed with shared instructions (ProgramTemplate own=...) is launched alone")
        placed = [(program.core, _Placed.of(program)) for program in programs]
        if self.race_checked and self.system.race_check != "off" and not (len(programs) == 1 and programs[0].race_free):
            self._check_races(programs)  # after placing: s_dep is set; a replay of a race-free template is race-free (ProgramTemplate)
        return placed, op

    def _check_races(self, programs: list[CoreProgram]) -> None:
        """Find the races of this launch (:mod:`npusim.isa.racecheck`) and have them reported as
        their instructions run."""
        gm_accesses: list[GmAccess] | None = [] if len(programs) > 1 else None
        races: list[Race] = []
        for program in programs:
            races += core_races(program.core.name, program.instructions, gm_accesses)
        if gm_accesses:
            races += cross_core_races(gm_accesses)
        if len(programs) == 1:
            programs[0].race_free = not races
        if races:
            by_core = {program.core.name: program for program in programs}

            def position(side: Side) -> int:
                return by_core[side.core].instructions.index(side.instruction)

            LaunchRaces(self.name, self.die.index, races, position, self.system.recorder, self.system.race_check,
                        source_of=lambda side: by_core[side.core].source_of(position(side)))
