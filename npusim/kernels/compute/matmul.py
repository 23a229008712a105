"""PyPTO's matmul on the cube core: the tiling of ``set_cube_tile_shapes`` and the program one AIC
core runs for one output tile.

Tiling (the framework's ConstructTileGraph, ``cube_operation_impl.cpp``): the output ``[M, N]`` is
cut into ``[mL0, nL0]`` tiles, n outer, m inner; each tile is one tile op on an AIC core, whose
program is the cube pipeline's output block (:mod:`npusim.kernels.cube.pipeline`) with base sizes
``mL0 x nL0 x kL0``, L1 chunks of ``kAL1`` / ``kBL1`` (``step_ka = kAL1 / kL0``), and L1 and L0 double
buffered where two of each fit (pypto's matmul performance guide: with the recommended tile shapes
"MTE2、MTE1搬运均可以开启double buffer"; L0C holds one tile).

Capacities (pypto-set_cube_tile_shapes.md 空间约束): ``align16(mL0) x align16(kL0) x a`` <= L0A,
``align16(nL0) x align16(kL0) x b`` <= L0B, ``align16(mL0) x align16(nL0) x c`` <= L0C (c = 4: fp32,
or int32 for int8) and ``align16(mL1) x align16(kL1) x a + align16(nL1) x align16(kL1) x b`` <= L1
(32 instead of 16 for int8).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from npusim.isa import CoreProgram
from npusim.isa.fractal import padded
from npusim.isa.target import CubeTarget
from npusim.kernels.cube.pipeline import FIRST, BlockViews, CoreBuffers, GemmShape, block, epilogue, prologue
from npusim.kernels.cube.tiling import CubeTiling


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


def pipeline_tiling(tiles: CubeTiles, itemsize: int, target: CubeTarget) -> CubeTiling:
    """The cube pipeline's tiling of a tile op: the L0 sizes as base sizes, kAL1 / kBL1 as L1 steps,
    two L1 chunks of each operand and two L0 halves where they fit (else one)."""
    single = CubeTiling(tiles.m0, tiles.n0, tiles.k0, tiles.k_a // tiles.k0, tiles.k_b // tiles.k0, 1, 1, 1)
    needs, limits = single.needs(itemsize), {"L1": target.l1_bytes, "L0A": target.l0a_bytes, "L0B": target.l0b_bytes}
    l1 = 2 if 2 * needs["L1"] <= limits["L1"] else 1
    l0 = 2 if 2 * needs["L0A"] <= limits["L0A"] and 2 * needs["L0B"] <= limits["L0B"] else 1
    return dataclasses.replace(single, l1_buffers=l1, l0_buffers=l0)


def matmul_tile(p: CoreProgram, tiling: CubeTiling, shape: GemmShape, views: BlockViews, tile: MatmulTile) -> None:
    """The program of one output tile: the cube pipeline's block on buffers of its own."""
    buffers = CoreBuffers(p, tiling, shape)
    prologue(p, buffers)
    block(p, buffers, views, tile.m, tile.n, tile.k, FIRST)
    epilogue(p, buffers)
