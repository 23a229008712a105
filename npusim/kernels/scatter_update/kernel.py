"""The scatter_update kernel on the vector cores: the split of the blocks over cores and the
per-core programs.

Each (batch, head) pair writes one contiguous block of ``U * T`` elements (:mod:`.checks`). The
blocks are split over the die's vector cores (``ceil(bs / cores)`` each, as the other scatter
kernels split bs rows); each core loads all indices into UB once and reads each index it needs into
a scalar register, then streams its blocks through one UB buffer: MTE2 loads as many consecutive
blocks of updates as fit (a block larger than the buffer in pieces), MTE3 writes each block at the
GM address computed from the index registers, and the next load waits for these writes. The
numbers are not computed: the kernel only moves bytes, so the result is exact by construction.
Assumed (the A2 kernel of this op is not public): the buffer layout and the single buffering.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from npusim import isa
from npusim.isa.target import VectorTarget
from npusim.kernels.scatter_update.checks import ScatterUpdateProblem

KERNEL_NAME = "ScatterUpdate"


@dataclass(frozen=True)
class Load:
    """One MTE2 load of ``rows`` consecutive blocks from block ``first`` (``nbytes`` of each,
    from byte ``offset`` of the block)."""

    first: int
    rows: int
    offset: int
    nbytes: int


@dataclass(frozen=True)
class ScatterUpdatePlan:
    """Per used core, its loads in order; ``index_elements`` indices (rounded up to 8) and
    ``buffer_bytes`` for the data in UB."""

    cores: tuple[tuple[int, tuple[Load, ...]], ...]
    index_elements: int
    buffer_bytes: int

    @property
    def used_cores(self) -> int:
        return len(self.cores)


def plan_scatter_update(problem: ScatterUpdateProblem, target: VectorTarget) -> ScatterUpdatePlan:
    """Split ``problem``'s blocks over ``target``'s vector cores and into loads that fit its UB."""
    per_core = -(-problem.bs // target.cores)
    index_elements = -(-problem.index_count // 8) * 8
    buffer_bytes = (target.ub_bytes - target.ub_aligned(index_elements * problem.indices_dtype.itemsize)) // target.ub_alignment * target.ub_alignment
    block = problem.block_bytes
    itemsize = problem.input_dtype.itemsize
    cores = []
    for core, first in enumerate(range(0, problem.bs, per_core)):
        last = min(first + per_core, problem.bs)
        loads: list[Load] = []
        if block <= buffer_bytes:
            group = buffer_bytes // block
            loads = [Load(r, min(group, last - r), 0, block) for r in range(first, last, group)]
        else:
            piece = buffer_bytes // max(itemsize, target.block_bytes) * max(itemsize, target.block_bytes)
            loads = [Load(r, 1, offset, min(piece, block - offset)) for r in range(first, last) for offset in range(0, block, piece)]
        cores.append((core, tuple(loads)))
    return ScatterUpdatePlan(tuple(cores), index_elements, buffer_bytes)


def build_scatter_update(problem: ScatterUpdateProblem, plan: ScatterUpdatePlan, tensors: dict[str, Any], *,
                         skipped_rows: frozenset[int] = frozenset(), op_args: dict | None = None) -> isa.Kernel:
    """The kernel of ``plan`` on contiguous ``tensors`` ``input`` (written in place), ``indices``, ``updates``."""
    target = tensors["input"]
    kernel = isa.Kernel(KERNEL_NAME, die=target.device, system=target.system, op_args=op_args)
    for core, loads in plan.cores:
        _lower_core(kernel.vector_core(core), problem, plan, tensors, loads, skipped_rows)
    return kernel


def _lower_core(p: isa.CoreProgram, problem: ScatterUpdateProblem, plan: ScatterUpdatePlan, tensors: dict[str, Any],
                loads: tuple[Load, ...], skipped_rows: frozenset[int]) -> None:
    itemsize = problem.input_dtype.itemsize
    indices = p.alloc(plan.index_elements, problem.indices_dtype)
    buffer = p.alloc(plan.buffer_bytes // itemsize, problem.input_dtype)
    p.copy(indices, isa.gm(tensors["indices"]), nbytes=problem.index_count * problem.indices_dtype.itemsize, name="load indices")
    p.set_flag("MTE2", "SCALAR", 0)
    p.wait_flag("MTE2", "SCALAR", 0)
    registers: dict[int, list] = {}
    block_elements = problem.block_bytes // itemsize
    for i, load in enumerate(loads):
        with p.tile(i):
            if i:
                p.wait_flag("MTE3", "MTE2", 0)
            count = load.nbytes // itemsize
            p.copy(buffer[: load.rows * count], isa.gm(tensors["updates"], load.first * block_elements + load.offset // itemsize),
                   nbytes=load.rows * load.nbytes, burst_count=load.rows, burst_bytes=load.nbytes,
                   src_gap=problem.block_bytes - load.nbytes, name="load updates")
            p.set_flag("MTE2", "MTE3", 0)
            p.wait_flag("MTE2", "MTE3", 0)
            for j in range(load.rows):
                row = load.first + j
                batch, head = divmod(row, problem.heads)
                if batch not in registers:
                    positions = [batch] if problem.index_rank == 1 else [2 * batch, 2 * batch + 1]
                    registers[batch] = [p.read_scalar(indices, k, name="read index") for k in positions]
                if row in skipped_rows:
                    continue
                if problem.index_rank == 1:
                    destination = (batch * problem.heads + head) * problem.axis_len + registers[batch][0]
                else:
                    dest_batch, offset = registers[batch]
                    destination = (dest_batch * problem.heads + head) * problem.axis_len + offset
                p.copy(isa.gm(tensors["input"], destination * problem.row_elements + load.offset // itemsize),
                       buffer[j * count: (j + 1) * count], name="store block")
            if i + 1 < len(loads):
                p.set_flag("MTE3", "MTE2", 0)
