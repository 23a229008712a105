"""The programs of PyPTO's shmem tile ops in npusim's ISA: what one AIV core runs for one tile.

Each function appends one tile op's instructions to a :class:`~npusim.isa.CoreProgram`, as the
framework's device code (``tileop_shmem.h``) issues them (``docs/shmem.md``, "Device behaviour"):

- :func:`load_tile`: SCALAR -> MTE2 sync, one strided MTE2 copy of the tile's valid region from
  (remote) GM into UB, MTE2 -> SCALAR sync;
- :func:`store_tile`: SCALAR -> MTE3 sync, one strided MTE3 store (an atomic add for ADD) of a UB
  tile's valid region, MTE3 -> SCALAR sync (shmem_store, and assigning a loaded tile to a tensor);
- :func:`copy_tile`: GM -> UB -> GM through two UB buffers (ping-pong), chunk by chunk
  (shmem_put, shmem_get), casting to FP32 on VECTOR when an FP16/BF16 source adds into FP32;
- :func:`signal_tile`: the scalar unit writes the value into a UB word, one 4-byte MTE3 store
  (atomic add for ADD) per target slot;
- :func:`clear_tile`: a UB buffer of zeros (VECTOR), then MTE3 stores over a contiguous range.

A box of a tensor moves as strided bursts: :func:`copy_plan` merges the innermost dims that are
contiguous on both sides into one burst; the next dim gives the bursts; each index of the outer
dims is one copy. In UB a tile is kept row by row with each row padded to 32 bytes, as on hardware.
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
from numpy.typing import DTypeLike

from npusim.hw.memory import Allocation
from npusim.isa import CoreProgram, GmAddress, LocalTensor
from npusim.isa.instructions import Instruction

UB_ALIGN_BYTES = 32
"""UB rows and buffers are aligned to 32-byte blocks."""
ADDRESS_SCALAR_INSTRUCTIONS = 4
"""Scalar instructions that compute a tile op's (remote) address: the peer's window base plus the
offset of the tile (assumed: a table read, a multiply and two adds)."""
SIGNAL_BYTES = 4
"""A signal store writes word 0 (one int32) of its 32-byte slot."""
CLEAR_SIGNAL_STORE_BYTES = 512
"""shmem_clear_signal stores zeros in whole 512-byte blocks (``signal_clear_bytes``)."""


def align_up(size: int, alignment: int = UB_ALIGN_BYTES) -> int:
    """``size`` rounded up to a multiple of ``alignment``."""
    return -(-size // alignment) * alignment


class GmView(NamedTuple):
    """Where a box of a tensor lies in GM: the allocation, the byte offset of the box's first
    element in it, and the tensor's strides in bytes (a named tuple: tile ops make many)."""

    allocation: Allocation
    offset_bytes: int
    strides: tuple[int, ...]

    def shifted(self, element_offset: Sequence[int]) -> GmView:
        """The view of the box that starts ``element_offset`` further in."""
        offset = self.offset_bytes
        for o, s in zip(element_offset, self.strides):
            offset += o * s
        return GmView(self.allocation, offset, self.strides)

    def intervals(self, shape: Sequence[int], itemsize: int) -> list[tuple[int, int]]:
        """The byte ranges ``[start, end)`` of the allocation that a box of ``shape`` covers."""
        offset = self.offset_bytes
        return [(offset + start, offset + end) for start, end in _box_ranges(tuple(shape), itemsize, self.strides)]


@functools.lru_cache(maxsize=4096)
def _box_ranges(shape: tuple[int, ...], itemsize: int, strides: tuple[int, ...]) -> tuple[tuple[int, int], ...]:
    """The byte ranges ``[start, end)`` a box of ``shape`` covers from its first element (tile ops
    of one shape ask for them over and over, at other offsets)."""
    ranges = []
    for burst in copy_plan(shape, itemsize, strides, strides):
        for i in range(burst.count):
            first = burst.a_offset + i * (burst.nbytes + burst.a_gap)
            ranges.append((first, first + burst.nbytes))
    return tuple(ranges)


@dataclass(frozen=True)
class UbTile:
    """A tile held in UB: the buffer, its dtype and its layout (strides in bytes, rows padded to 32 B)."""

    buffer: LocalTensor
    dtype: np.dtype
    strides: tuple[int, ...]


@dataclass(frozen=True)
class Burst:
    """One strided DMA: ``count`` bursts of ``nbytes``, starting ``a_offset`` / ``b_offset`` bytes
    after the box's first element on each side, with ``a_gap`` / ``b_gap`` bytes between bursts."""

    a_offset: int
    b_offset: int
    count: int
    nbytes: int
    a_gap: int
    b_gap: int


def copy_plan(shape: Sequence[int], itemsize: int, a_strides: Sequence[int], b_strides: Sequence[int]) -> list[Burst]:
    """The strided copies that move a box of ``shape`` between two layouts (strides in bytes)."""
    if any(s <= 0 for s in shape):
        return []
    if shape[-1] > 1 and (a_strides[-1] != itemsize or b_strides[-1] != itemsize):
        raise ValueError(f"the innermost dim must be contiguous on both sides (strides {list(a_strides)}, {list(b_strides)})")
    run = shape[-1] * itemsize
    first_merged = len(shape) - 1
    while first_merged > 0 and a_strides[first_merged - 1] == run and b_strides[first_merged - 1] == run:
        first_merged -= 1
        run *= shape[first_merged]
    if first_merged == 0:
        return [Burst(0, 0, 1, run, 0, 0)]
    burst_dim = first_merged - 1
    count = shape[burst_dim]
    a_gap, b_gap = a_strides[burst_dim] - run, b_strides[burst_dim] - run
    plan = []
    for outer in itertools.product(*(range(n) for n in shape[:burst_dim])):
        a = sum(i * s for i, s in zip(outer, a_strides))
        b = sum(i * s for i, s in zip(outer, b_strides))
        plan.append(Burst(a, b, count, run, a_gap, b_gap))
    return plan


def ub_strides(tile_shape: Sequence[int], itemsize: int) -> tuple[int, ...]:
    """Strides (bytes) of a tile in UB: elements contiguous, each row padded to 32 bytes."""
    strides = [itemsize] * len(tile_shape)
    if len(tile_shape) > 1:
        strides[-2] = align_up(tile_shape[-1] * itemsize)
        for dim in range(len(tile_shape) - 3, -1, -1):
            strides[dim] = strides[dim + 1] * tile_shape[dim + 1]
    return tuple(strides)


def ub_tile_bytes(tile_shape: Sequence[int], itemsize: int) -> int:
    """UB bytes a tile of ``tile_shape`` takes."""
    strides = ub_strides(tile_shape, itemsize)
    return strides[0] * tile_shape[0] if len(tile_shape) > 1 else align_up(tile_shape[0] * itemsize)


def staging_chunk(tile_rows: int, tile_cols: int, local_itemsize: int, converts: bool, staging_bytes: int) -> tuple[int, int]:
    """Rows and columns one put/get chunk moves through one UB buffer (the framework's
    GetCopyBufferShape): the whole tile if it fits ``staging_bytes`` (rows padded to 32 B), else as
    many full rows as fit, rounded up; else a piece of one row. A dtype-changing copy whose rows
    are not 32-byte aligned goes one row piece at a time."""
    copy_num = staging_bytes // local_itemsize
    aligned_cols = align_up(tile_cols * local_itemsize) // local_itemsize
    if converts and (tile_cols * local_itemsize) % UB_ALIGN_BYTES:
        return 1, min(copy_num, tile_cols)
    if copy_num >= tile_rows * aligned_cols:
        return tile_rows, tile_cols
    if copy_num >= tile_cols:
        return -(-copy_num // aligned_cols), tile_cols
    return 1, copy_num


def _scalar_setup(p: CoreProgram, name: str) -> None:
    p.scalar(ADDRESS_SCALAR_INSTRUCTIONS, name=f"{name} address")


def _sync(p: CoreProgram, src: str, dst: str, event: int = 0) -> None:
    p.set_flag(src, dst, event)
    p.wait_flag(src, dst, event)


def _move(p: CoreProgram, gm: GmAddress, local: LocalTensor, plan: list[Burst], to_gm: bool, name: str,
          atomic: str | None = None) -> list[Instruction]:
    """Append the copies of ``plan`` between ``gm`` (side a of the plan) and ``local`` (side b):
    into GM when ``to_gm``, else into the local tensor."""
    issued = []
    for burst in plan:
        gm_at, local_at = gm + burst.a_offset, local[burst.b_offset // local.dtype.itemsize:]
        if to_gm:
            issued.append(p.copy(gm_at, local_at, burst_count=burst.count, burst_bytes=burst.nbytes, src_gap=burst.b_gap,
                                 dst_gap=burst.a_gap, name=name, atomic=atomic))
        else:
            issued.append(p.copy(local_at, gm_at, burst_count=burst.count, burst_bytes=burst.nbytes, src_gap=burst.a_gap,
                                 dst_gap=burst.b_gap, name=name, atomic=atomic))
    return issued


def _address(view: GmView) -> GmAddress:
    return GmAddress(view.allocation, view.offset_bytes)


def move_box(p: CoreProgram, local: LocalTensor, gm: GmView, shape: Sequence[int], local_strides: Sequence[int], *, to_gm: bool,
             name: str) -> list[Instruction]:
    """Copy a box of ``shape`` between ``gm`` and a local tensor laid out with ``local_strides``
    (bytes): MTE2 into the local buffer, or (``to_gm``) out of it on its store engine."""
    plan = copy_plan(shape, local.dtype.itemsize, gm.strides, local_strides)
    return _move(p, _address(gm), local, plan, to_gm, name)


def load_tile(p: CoreProgram, src: GmView, tile_shape: Sequence[int], valid_shape: Sequence[int], dtype: DTypeLike, *,
              name: str = "shmem_load") -> UbTile:
    """shmem_load of one tile: the valid region of the box at ``src`` into a new UB tile."""
    dtype = np.dtype(dtype)
    strides = ub_strides(tile_shape, dtype.itemsize)
    buffer = p.alloc(ub_tile_bytes(tile_shape, dtype.itemsize) // dtype.itemsize, dtype)
    _scalar_setup(p, name)
    _sync(p, "SCALAR", "MTE2")
    _move(p, _address(src), buffer, copy_plan(valid_shape, dtype.itemsize, src.strides, strides), False, f"{name} MTE2")
    _sync(p, "MTE2", "SCALAR")
    return UbTile(buffer, dtype, strides)


def store_tile(p: CoreProgram, tile: UbTile, dst: GmView, valid_shape: Sequence[int], *, atomic: str | None = None,
               name: str = "shmem_store") -> list[Instruction]:
    """shmem_store (or an assignment) of one UB tile: its valid region to the box at ``dst``."""
    _scalar_setup(p, name)
    _sync(p, "SCALAR", "MTE3")
    plan = copy_plan(valid_shape, tile.dtype.itemsize, dst.strides, tile.strides)
    stores = _move(p, _address(dst), tile.buffer, plan, True, f"{name} MTE3", atomic=atomic)
    _sync(p, "MTE3", "SCALAR")
    return stores


def copy_tile(p: CoreProgram, src: GmView, dst: GmView, tile_shape: Sequence[int], valid_shape: Sequence[int],
              src_dtype: DTypeLike, dst_dtype: DTypeLike, *, local_dtype: DTypeLike, staging_bytes: int, atomic: str | None = None, name: str) -> list[Instruction]:
    """shmem_put / shmem_get of one tile: GM -> UB -> GM in chunks through two UB buffers, the load
    of one chunk overlapping the store of the previous one. Chunks follow :func:`staging_chunk`
    (``local_dtype``: the dtype of the non-shmem side); 3-D and 4-D tiles move one 2-D slice (the
    last two dims) after the other. An FP16/BF16 source into FP32 is cast on VECTOR before an
    atomic-add store. Returns the stores (MTE3), in order."""
    src_dtype, dst_dtype = np.dtype(src_dtype), np.dtype(dst_dtype)
    converts = src_dtype != dst_dtype
    rows, cols = staging_chunk(tile_shape[-2], tile_shape[-1], np.dtype(local_dtype).itemsize, converts, staging_bytes)
    in_buffers = [p.alloc(rows * align_up(cols * src_dtype.itemsize) // src_dtype.itemsize, src_dtype) for _ in range(2)]
    out_buffers = [p.alloc(rows * align_up(cols * dst_dtype.itemsize) // dst_dtype.itemsize, dst_dtype) for _ in range(2)] if converts else in_buffers
    in_strides = (align_up(cols * src_dtype.itemsize), src_dtype.itemsize)
    out_strides = (align_up(cols * dst_dtype.itemsize), dst_dtype.itemsize)
    _scalar_setup(p, name)
    _sync(p, "MTE3", "SCALAR")
    chunks, stores = [], []
    valid_rows, valid_cols = valid_shape[-2], valid_shape[-1]
    for outer in itertools.product(*(range(n) for n in valid_shape[:-2])):
        for r in range(0, valid_rows, rows):
            for c in range(0, valid_cols, cols):
                chunks.append(((*outer, r, c), (min(rows, valid_rows - r), min(cols, valid_cols - c))))
    for k, (offset, shape) in enumerate(chunks):
        half = k % 2
        if k >= 2:
            p.wait_flag("MTE3", "MTE2", half)
        src_at, dst_at = src.shifted(offset), dst.shifted(offset)
        _move(p, _address(src_at), in_buffers[half], copy_plan(shape, src_dtype.itemsize, src.strides[-2:], in_strides), False, f"{name} MTE2")
        if converts:
            _sync(p, "MTE2", "VECTOR", half)
            p.cast(out_buffers[half], in_buffers[half], name=f"{name} cast")
            _sync(p, "VECTOR", "MTE3", half)
        else:
            _sync(p, "MTE2", "MTE3", half)
        plan = copy_plan(shape, dst_dtype.itemsize, dst.strides[-2:], out_strides)
        stores += _move(p, _address(dst_at), out_buffers[half], plan, True, f"{name} MTE3", atomic=atomic)
        p.set_flag("MTE3", "MTE2", half)
    _sync(p, "MTE3", "SCALAR")
    return stores


def signal_tile(p: CoreProgram, slots: Sequence[GmAddress], value: int, *, atomic: str | None, name: str = "shmem_signal") -> list[Instruction]:
    """shmem_signal of one tile: write ``value`` into word 0 of each slot (one store per target PE,
    an atomic add for ``atomic='add'``); returns the stores (they land when their effect applies)."""
    word = p.alloc(UB_ALIGN_BYTES // 4, np.int32)
    _scalar_setup(p, name)
    p.write_scalar(word, value, control=True)
    _sync(p, "SCALAR", "MTE3")
    stores = [p.copy(slot, word[0:1], SIGNAL_BYTES, name=f"{name} MTE3", atomic=atomic, control=True) for slot in slots]
    _sync(p, "MTE3", "SCALAR")
    return stores


def clear_tile(p: CoreProgram, allocation: Allocation, start_bytes: int, nbytes: int, buffer_bytes: int, *,
               control: bool = False, name: str) -> list[Instruction]:
    """Zero ``nbytes`` of ``allocation`` from ``start_bytes``: a UB buffer of ``buffer_bytes`` filled
    with zeros once (VECTOR), then MTE3 stores of the whole buffer and a last partial one.
    ``control``: the range holds signals (zeroed even when data is off)."""
    buffer = p.alloc(buffer_bytes // 4, np.int32)
    _scalar_setup(p, name)
    p.dup(buffer, 0, name=f"{name} zeros", control=control)
    _sync(p, "VECTOR", "MTE3")
    stores = []
    for offset in range(0, nbytes, buffer_bytes):
        size = min(buffer_bytes, nbytes - offset)
        stores.append(p.copy(GmAddress(allocation, start_bytes + offset), buffer, size, name=f"{name} MTE3", control=control))
    _sync(p, "MTE3", "SCALAR")
    return stores

