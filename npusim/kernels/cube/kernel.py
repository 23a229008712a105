"""A cube kernel of output blocks spread over a die's AIC cores (one launch, blockDim = the cores
used), each core running its blocks one after the other on buffers it reserves once
(:mod:`npusim.kernels.cube.pipeline`).

A big GEMM is thousands of blocks of a few hundred instructions each, all alike but for their GM
addresses: the program of a block is built once per (block size, phase, strides) as an
:class:`~npusim.isa.program.ProgramTemplate` piece and appended to the other blocks' programs with
their addresses (:meth:`~npusim.isa.program.CoreProgram.extend`); a block whose piece cannot be
reused (two of its operands in one allocation) is built anew.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from npusim import isa
from npusim.kernels.cube.pipeline import FIRST, BlockViews, CoreBuffers, GemmShape, block, epilogue, prologue
from npusim.kernels.cube.tiling import CubeSchedule, CubeTiling, assign
from npusim.kernels.shmem.tile_ops import GmView


@dataclass(frozen=True)
class Block:
    """One output block of a kernel: its index (the trace's tile), its size ``m x n`` over ``k``, and
    where its operands lie."""

    index: int
    m: int
    n: int
    k: int
    views: BlockViews


def build_gemm(kernel: isa.Kernel, shape: GemmShape, tiling: CubeTiling, schedule: CubeSchedule, per_core: Sequence[Sequence[Block]]) -> None:
    """Append to ``kernel`` the program of each cube core that has blocks (``per_core[i]``: core i's, in order)."""
    templates: dict[tuple, isa.ProgramTemplate | None] = {}
    for core, blocks in enumerate(per_core):
        if not blocks:
            continue
        p = kernel.cube_core(core)
        buffers = CoreBuffers(p, tiling, shape)
        prologue(p, buffers)
        phase = FIRST
        for item in blocks:
            views = item.views
            key = (item.m, item.n, item.k, phase, views.strides())
            bases = views.bases()
            with p.tile(item.index):
                template = templates.get(key)
                if template is None or not p.extend(template, bases):
                    start = len(p.instructions)
                    block(p, buffers, views, item.m, item.n, item.k, phase, barrier=schedule.tile_barrier)
                    if key not in templates:
                        templates[key] = p.template(bases, start=start)
            phase = phase.after(item.k, tiling)
        epilogue(p, buffers)


@dataclass(frozen=True)
class Gemm:
    """One matrix product of a kernel, ``C[m, n] = A[m, k] @ B[k, n]``:
    where A, B and C start in GM (``a`` as ``[m, k]`` rows, or ``[k, m]`` rows with ``a_trans``;
    ``b`` as ``[k, n]``, or ``[n, k]`` with ``b_trans``; ``c`` as ``[m, n]``), and each epilogue
    vector at its first value (per column ones at column 0, ``token`` at row 0)."""

    a: GmView
    b: GmView
    c: GmView
    m: int
    n: int
    k: int
    vectors: tuple[GmView, ...] = ()


def gemm_blocks(shape: GemmShape, tiling: CubeTiling, schedule: CubeSchedule, gemms: Sequence[Gemm]) -> list[list[Block]]:
    """The output blocks of ``gemms`` (each cut into ``base_m x base_n`` blocks in the schedule's
    order, the products one after the other, numbered in that order) spread over the cores."""
    blocks: list[Block] = []
    names = [name for name, _ in shape.vectors]
    for gemm in gemms:
        rows, cols = -(-gemm.m // tiling.base_m), -(-gemm.n // tiling.base_n)
        grid = CubeSchedule(1, schedule.order).blocks_of_cores(rows, cols)[0]
        for r, c in grid:
            m0, n0 = r * tiling.base_m, c * tiling.base_n
            a = gemm.a.shifted((0, m0) if shape.a_trans else (m0, 0))
            b = gemm.b.shifted((n0, 0) if shape.b_trans else (0, n0))
            vectors = tuple(view if name in shape.scalars else view.shifted((m0 if name == "token" else n0,))
                            for name, view in zip(names, gemm.vectors))
            blocks.append(Block(len(blocks), min(tiling.base_m, gemm.m - m0), min(tiling.base_n, gemm.n - n0), gemm.k,
                                BlockViews(a, b, gemm.c.shifted((m0, n0)), vectors)))
    return assign(blocks, schedule.cores, schedule.assignment)


def gemm_kernel(name: str, die: int, shape: GemmShape, tiling: CubeTiling, schedule: CubeSchedule, gemms: Sequence[Gemm], *,
                system=None, op_args: dict | None = None) -> isa.Kernel:
    """One launch of the products ``gemms`` on die ``die`` (kernel ``name``, the profiler's op type)."""
    kernel = isa.Kernel(name, die, system=system, op_args=op_args)
    build_gemm(kernel, shape, tiling, schedule, gemm_blocks(shape, tiling, schedule, gemms))
    return kernel
