"""Copies between two device tensor views of one shape on the vector cores of a die.

They are the device copies around an op: the clone of an out-of-place op, the contiguous copy the
aclnn layer makes of a non-contiguous input (``l0op::Contiguous``) and the copy of a result back
into a non-contiguous output (``l0op::ViewCopy``). Each core takes a range of the elements in
logical (row-major) order and streams it through UB in chunks: MTE2 reads the source view, MTE3
writes the destination view, two UB buffers letting the load of one chunk overlap the store of the
previous one.

A view is read or written as runs of contiguous elements: a run that fills the next dim with even
spacing becomes one strided copy (bursts separated by a gap), other runs separate copies
(:func:`gm_copies`). Nothing is copied on the host.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from npusim import isa
from npusim.errors import UsageError
from npusim.isa.target import VectorTarget

SHARE_ALIGN_BYTES = 32
"""Each core's share of the elements is a multiple of one 32-byte block (of the logical order)."""


@dataclass(frozen=True, slots=True)
class GmCopy:
    """One DMA of a view: ``burst_count`` bursts of ``burst_bytes`` from byte ``offset_bytes`` of
    the view's allocation, ``gap_bytes`` between bursts, holding logical elements from ``first``."""

    offset_bytes: int
    burst_count: int
    burst_bytes: int
    gap_bytes: int
    first: int


def _merged_dims(shape: tuple[int, ...], strides: tuple[int, ...]) -> list[tuple[int, int]]:
    """``(size, stride in bytes)`` of the view with size-1 dims dropped and every dim that continues
    the next one contiguously merged into it, outermost first."""
    merged: list[tuple[int, int]] = []
    for size, stride in zip(shape, strides):
        if size == 1:
            continue
        if merged and merged[-1][1] == stride * size:
            merged[-1] = (merged[-1][0] * size, stride)
        else:
            merged.append((size, stride))
    return merged


def gm_copies(view, start: int, stop: int) -> list[GmCopy]:
    """The DMAs that move logical elements ``[start, stop)`` of ``view`` (``shape``, ``strides`` in
    bytes, ``offset_bytes``, ``dtype``), in order."""
    itemsize = view.dtype.itemsize
    dims = _merged_dims(view.shape, view.strides)
    if dims and dims[-1][1] == itemsize:
        run, outer = dims[-1][0], dims[:-1]
    else:
        run, outer = 1, dims
    burst_dim = outer[-1] if outer else (1, 0)

    def offset_of(position: int) -> int:
        row, within = divmod(position, run)
        offset = view.offset_bytes + within * itemsize
        for size, stride in reversed(outer):
            row, index = divmod(row, size)
            offset += index * stride
        return offset

    copies = []
    position = start
    while position < stop:
        within = position % run
        if within or stop - position < run:
            count = min(run - within, stop - position)
            copies.append(GmCopy(offset_of(position), 1, count * itemsize, 0, position))
            position += count
            continue
        size, stride = burst_dim
        gap = stride - run * itemsize
        bursts = min(size - (position // run) % size, (stop - position) // run) if gap >= 0 else 1
        copies.append(GmCopy(offset_of(position), bursts, run * itemsize, gap if bursts > 1 else 0, position))
        position += bursts * run
    return copies


def build_view_copy(dst, src, *, name: str, op_args: dict | None = None) -> isa.Kernel:
    """The kernel copying ``src`` into ``dst`` (device tensor views of one shape and dtype) on every
    vector core of ``dst``'s die; ``src`` may live on another die (reached over the fabric)."""
    if tuple(dst.shape) != tuple(src.shape) or dst.dtype != src.dtype:
        raise UsageError(
            f"{name}: cannot copy a {list(src.shape)} {src.dtype} view into a {list(dst.shape)} {dst.dtype} one; "
            "shapes and dtypes must match"
        )
    kernel = isa.Kernel(name, die=dst.device, system=dst.system, op_args=op_args)
    itemsize = dst.dtype.itemsize
    total = math.prod(dst.shape)
    if total == 0:
        return kernel
    target = VectorTarget.of(kernel.system)
    buffer_elements = (target.ub_bytes // 2 // SHARE_ALIGN_BYTES * SHARE_ALIGN_BYTES) // itemsize
    align = max(SHARE_ALIGN_BYTES // itemsize, 1)
    share = -(-total // target.cores)
    share = -(-share // align) * align
    for core, first in enumerate(range(0, total, share)):
        program = kernel.vector_core(core)
        buffers = [program.alloc(buffer_elements, dst.dtype) for _ in range(2)]
        chunks = [(a, min(a + buffer_elements, first + share, total)) for a in range(first, min(first + share, total), buffer_elements)]
        for k, (a, b) in enumerate(chunks):
            event = k % 2
            local = buffers[event]
            with program.tile(k):
                if k >= 2:
                    program.wait_flag("MTE3", "MTE2", event)  # the store that used this buffer is done
                for c in gm_copies(src, a, b):
                    program.copy(local[c.first - a :], isa.GmAddress(src.allocation, c.offset_bytes), burst_count=c.burst_count,
                                 burst_bytes=c.burst_bytes, src_gap=c.gap_bytes, name="load")
                program.set_flag("MTE2", "MTE3", event)
                program.wait_flag("MTE2", "MTE3", event)
                for c in gm_copies(dst, a, b):
                    program.copy(isa.GmAddress(dst.allocation, c.offset_bytes), local[c.first - a :], burst_count=c.burst_count,
                                 burst_bytes=c.burst_bytes, dst_gap=c.gap_bytes, name="store")
                if k + 2 < len(chunks):
                    program.set_flag("MTE3", "MTE2", event)
    return kernel
