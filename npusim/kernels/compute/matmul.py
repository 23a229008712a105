"""PyPTO's matmul on the cube core: the tiling of ``set_cube_tile_shapes`` and the program one AIC
core runs for one output tile.

Tiling (the framework's ConstructTileGraph, ``cube_operation_impl.cpp``): the output ``[M, N]`` is
cut into ``[mL0, nL0]`` tiles, n outer, m inner; each tile is one tile op on an AIC core that walks k
in steps of ``kL0``. A new L1 chunk of A (``[mL0, kAL1]``) / B (``[kBL1, nL0]``) is loaded when k
reaches a multiple of ``kAL1`` / ``kBL1``.

Program of one tile (flags between the pipes, as an Ascend C cube kernel):

- MTE2 GM -> L1: the chunk's rows (ND, rows padded to 32 bytes), into one of two L1 halves per
  operand (ping-pong, when two chunks fit L1; the load of the next chunk overlaps the cube);
- MTE1 L1 -> L0A / L0B: the ``kL0`` slice of each operand in NZ fractals (A as ``[m, k]``, B as
  ``[n, k]``, transposing as ``a_trans`` / ``b_trans`` require), into one of two L0 halves (ping-pong);
- CUBE: ``mmad`` of the slice into L0C, accumulating after the first slice;
- FIXP L0C -> GM: the tile converted to the output dtype (NZ -> ND), once k is done.

Capacities (pypto-set_cube_tile_shapes.md 空间约束): ``align16(mL0) x align16(kL0) x a`` <= L0A,
``align16(nL0) x align16(kL0) x b`` <= L0B, ``align16(mL0) x align16(nL0) x c`` <= L0C (c = 4: fp32,
or int32 for int8) and ``align16(mL1) x align16(kL1) x a + align16(nL1) x align16(kL1) x b`` <= L1
(32 instead of 16 for int8).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from npusim.isa import CoreProgram, GmAddress, LocalTensor
from npusim.isa.fractal import FRACTAL_ROWS, inner_block, nz_count, padded
from npusim.kernels.shmem.tile_ops import ADDRESS_SCALAR_INSTRUCTIONS, UB_ALIGN_BYTES, GmView, move_box


@dataclass(frozen=True)
class CubeTiles:
    """``set_cube_tile_shapes`` as resolved: L0 and L1 sizes per axis (``k_a`` / ``k_b``: kAL1 / kBL1)."""

    m0: int
    m1: int
    k0: int
    k_a: int
    k_b: int
    n0: int
    n1: int


def capacity_needs(tiles: CubeTiles, in_itemsize: int) -> dict[str, int]:
    """Bytes of L0A, L0B, L0C and L1 that the tile shapes need, by the documented formula."""
    align = 32 if in_itemsize == 1 else 16
    a = lambda x: padded(x, align)  # noqa: E731 - the formula's CeilAlign
    acc = 4  # fp32, or int32 for int8
    return {
        "L0A": a(tiles.m0) * a(tiles.k0) * in_itemsize,
        "L0B": a(tiles.n0) * a(tiles.k0) * in_itemsize,
        "L0C": a(tiles.m0) * a(tiles.n0) * acc,
        "L1": a(tiles.m1) * a(max(tiles.k_a, tiles.k_b)) * in_itemsize + a(tiles.n1) * a(max(tiles.k_a, tiles.k_b)) * in_itemsize,
    }


@dataclass(frozen=True)
class MatmulTile:
    """One output tile: its offset and valid size in the output, and the problem's k."""

    m_offset: int
    n_offset: int
    m: int
    n: int
    k: int


def matmul_tiles(m: int, n: int, k: int, tiles: CubeTiles) -> list[MatmulTile]:
    """The output tiles in the framework's order (n outer, m inner)."""
    return [MatmulTile(mo, no, min(tiles.m0, m - mo), min(tiles.n0, n - no), k)
            for no in range(0, n, tiles.n0) for mo in range(0, m, tiles.m0)]


def _chunk(p: CoreProgram, dtype, outer: int, inner: int) -> LocalTensor:
    row = padded(inner * np.dtype(dtype).itemsize, UB_ALIGN_BYTES) // np.dtype(dtype).itemsize
    return p.alloc(outer * row, dtype, "L1")


def matmul_tile(p: CoreProgram, a: GmView, b: GmView, out: GmView, tile: MatmulTile, tiles: CubeTiles, in_dtype, out_dtype, *,
                a_trans: bool, b_trans: bool, name: str) -> None:
    """The program of one output tile (see the module docstring). ``a`` / ``b`` / ``out`` are the
    whole matrices in GM (``a`` is ``[K, M]`` with ``a_trans``, ``b`` is ``[N, K]`` with ``b_trans``)."""
    in_dtype, out_dtype = np.dtype(in_dtype), np.dtype(out_dtype)
    item = in_dtype.itemsize
    acc_dtype = np.int32 if np.issubdtype(in_dtype, np.integer) else np.float32
    m, n, k = tile.m, tile.n, tile.k
    block = inner_block(item)
    # L1 chunks: A as [m, kAL1] (or [kAL1, m]), B as [kBL1, n] (or [n, kBL1]); two of each when they fit
    a_shape = (tiles.k_a, m) if a_trans else (m, tiles.k_a)
    b_shape = (n, tiles.k_b) if b_trans else (tiles.k_b, n)
    one = sum(rows * padded(cols * item, UB_ALIGN_BYTES) for rows, cols in (a_shape, b_shape))
    halves = 2 if 2 * one <= p.core.buffers["L1"].capacity_bytes else 1
    l1_a = [_chunk(p, in_dtype, *a_shape) for _ in range(halves)]
    l1_b = [_chunk(p, in_dtype, *b_shape) for _ in range(halves)]
    a_row = padded(a_shape[1] * item, UB_ALIGN_BYTES) // item
    b_row = padded(b_shape[1] * item, UB_ALIGN_BYTES) // item
    k0 = tiles.k0
    l0_halves = 2 if 2 * nz_count(m, k0, block) * item <= p.core.buffers["L0A"].capacity_bytes and \
        2 * nz_count(n, k0, block) * item <= p.core.buffers["L0B"].capacity_bytes else 1
    l0a = [p.alloc(nz_count(m, k0, block), in_dtype, "L0A") for _ in range(l0_halves)]
    l0b = [p.alloc(nz_count(n, k0, block), in_dtype, "L0B") for _ in range(l0_halves)]
    l0c = p.alloc(nz_count(m, n, FRACTAL_ROWS), acc_dtype, "L0C")

    p.scalar(ADDRESS_SCALAR_INSTRUCTIONS, name=f"{name} address")
    p.set_flag("SCALAR", "MTE2")
    p.wait_flag("SCALAR", "MTE2")
    pending_l1: set[tuple[int, int]] = set()  # (operand, half) loaded chunks whose MTE1 -> MTE2 free flag is owed
    pending_l0: set[int] = set()
    a_chunk = b_chunk = -1
    steps = list(range(0, k, k0))
    for index, k_at in enumerate(steps):
        k_len = min(k0, k - k_at)
        loads = []
        for operand, size, current in ((0, tiles.k_a, a_chunk), (1, tiles.k_b, b_chunk)):
            chunk = k_at // size
            if chunk != current:
                half = chunk % halves
                if (operand, half) in pending_l1:  # the MTE1 reads of that half's last chunk must be done
                    p.wait_flag("MTE1", "MTE2", 2 * operand + half)
                    pending_l1.discard((operand, half))
                k_from, k_size = chunk * size, min(size, k - chunk * size)
                if operand == 0:
                    box, at = ((k_size, m), (k_from, tile.m_offset)) if a_trans else ((m, k_size), (tile.m_offset, k_from))
                    buffer, row, view, a_chunk = l1_a[half], a_row, a.shifted(at), chunk
                else:
                    box, at = ((n, k_size), (tile.n_offset, k_from)) if b_trans else ((k_size, n), (k_from, tile.n_offset))
                    buffer, row, view, b_chunk = l1_b[half], b_row, b.shifted(at), chunk
                move_box(p, buffer, view, box, (row * item, item), to_gm=False, name=f"{name} MTE2 GM->L1")
                p.set_flag("MTE2", "MTE1", 2 * operand + half)
                loads.append(2 * operand + half)
        for event in loads:
            p.wait_flag("MTE2", "MTE1", event)
        half0 = index % l0_halves
        if half0 in pending_l0:
            p.wait_flag("CUBE", "MTE1", half0)
            pending_l0.discard(half0)
        a_half, b_half = a_chunk % halves, b_chunk % halves
        a_in, b_in = k_at - a_chunk * tiles.k_a, k_at - b_chunk * tiles.k_b
        if a_trans:  # L1 holds [k, m]: rows a_in.., transposed into [m, k]
            p.load_nz(l0a[half0], l1_a[a_half][a_in * a_row:], k_len, m, a_row, transpose=True, name=f"{name} MTE1 L1->L0A")
        else:
            p.load_nz(l0a[half0], l1_a[a_half][a_in:], m, k_len, a_row, name=f"{name} MTE1 L1->L0A")
        if b_trans:  # L1 holds [n, k]
            p.load_nz(l0b[half0], l1_b[b_half][b_in:], n, k_len, b_row, name=f"{name} MTE1 L1->L0B")
        else:  # L1 holds [k, n]: transposed into [n, k]
            p.load_nz(l0b[half0], l1_b[b_half][b_in * b_row:], k_len, n, b_row, transpose=True, name=f"{name} MTE1 L1->L0B")
        for operand, size, chunk in ((0, tiles.k_a, a_chunk), (1, tiles.k_b, b_chunk)):
            last_use = index + 1 == len(steps) or steps[index + 1] // size != chunk
            if last_use:
                p.set_flag("MTE1", "MTE2", 2 * operand + chunk % halves)
                pending_l1.add((operand, chunk % halves))
        p.set_flag("MTE1", "CUBE", half0)
        p.wait_flag("MTE1", "CUBE", half0)
        p.mmad(l0c, l0a[half0], l0b[half0], m, n, k_len, accumulate=index > 0, name=f"{name} mmad")
        p.set_flag("CUBE", "MTE1", half0)
        pending_l0.add(half0)
    p.set_flag("CUBE", "FIXP")
    p.wait_flag("CUBE", "FIXP")
    for operand, half in sorted(pending_l1):  # every flag raised is consumed before the program ends
        p.wait_flag("MTE1", "MTE2", 2 * operand + half)
    for half0 in sorted(pending_l0):
        p.wait_flag("CUBE", "MTE1", half0)
    target = out.shifted((tile.m_offset, tile.n_offset))
    p.fixpipe(GmAddress(target.allocation, target.offset_bytes), l0c, m, n, out_dtype, out.strides[0], name=f"{name} FIXP L0C->GM")
    p.set_flag("FIXP", "SCALAR")
    p.wait_flag("FIXP", "SCALAR")
