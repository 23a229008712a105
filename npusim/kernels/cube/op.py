"""What the cube ops (matmul, npu_quant_matmul, npu_grouped_matmul) share as registered ops: the
hardware their tiling reads (:class:`~npusim.isa.target.CubeTarget`), the operand layouts their
kernels read as they are, and the plan: the default tiling, or the one ``torch_npu.options
(matmul_tiling=...)`` gives, checked against the cube's buffers."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from npusim.isa.target import CubeTarget
from npusim.kernels.cube.kernel import Gemm
from npusim.kernels.cube.pipeline import vector_bytes
from npusim.kernels.cube.tiling import BASIC_BLOCK, CubeSchedule, CubeTiling, default_tiling, tiling_choice
from npusim.kernels.op import Op, OpOptions
from npusim.kernels.shmem.tile_ops import GmView

SERIES = frozenset({"atlas_a2", "atlas_a3"})
"""The product series the cube kernels are modelled on: split dies whose AIC cores have FixPipe
(L0C -> GM); the 310P's cube results go L0C -> UB, a kernel not modelled."""


def layout(tensor: Any) -> str | None:
    """How the last two dims of ``tensor`` (a DeviceTensor) lie in GM: ``"row"`` (its rows
    contiguous: ND), ``"col"`` (its columns contiguous: the transpose of an ND matrix, which the
    kernels read as it is, as aclnn's matmuls take a transposed operand), or None (copied first:
    any other layout, and rows or columns that overlap, as an expanded dim's stride 0 makes them)."""
    item = tensor.dtype.itemsize
    rows, cols = tensor.shape[-2:]
    row_stride, col_stride = tensor.strides[-2:]
    if (cols == 1 or col_stride == item) and (rows == 1 or row_stride >= cols * item):
        return "row"
    if (rows == 1 or row_stride == item) and (cols == 1 or col_stride >= rows * item):
        return "col"
    return None


def folds_batch(a: Any, b: Any, batch: tuple[int, ...]) -> bool:
    """Whether ``a @ b`` with output batch dims ``batch`` runs as one product of ``batch x m`` rows,
    as aclnn's matmuls run it: ``b`` one matrix for every batch, ``a`` in the row layout with the
    rows of all its matrices evenly spaced."""
    if not batch or any(size != 1 for size in b.shape[:-2]) or layout(a) != "row" or tuple(a.shape[:-2]) != batch:
        return False
    stride = a.strides[-2]
    for size, step in zip(reversed(a.shape[:-1]), reversed(a.strides[:-1])):
        if size > 1 and step != stride:
            return False
        stride = step * size
    return True


def matrix(tensor: Any, batch: tuple[int, ...] = (), *, transposed: bool = False) -> GmView:
    """The GM view of matrix ``batch`` of ``tensor`` (its leading dims broadcast as numpy does:
    a dim of size 1 repeats) as the kernel reads it: rows of the last dim, or with ``transposed``
    (a ``"col"`` layout) rows of the second-to-last dim."""
    offset = tensor.offset_bytes
    lead = tensor.shape[:-2]
    for index, size, stride in zip(batch[len(batch) - len(lead):], lead, tensor.strides[:-2]):
        offset += (index if size > 1 else 0) * stride
    row, col = tensor.strides[-2:]
    return GmView(tensor.allocation, offset, (col, row) if transposed else (row, col))


def vector(tensor: Any, offset_elements: int = 0) -> GmView:
    """The GM view of a 1-D run of ``tensor``'s values (contiguous) from ``offset_elements`` on."""
    item = tensor.dtype.itemsize
    return GmView(tensor.allocation, tensor.offset_bytes + offset_elements * item, (item,))


def product_gemms(problem: Any, a: Any, b: Any, out: Any, vectors: tuple[GmView, ...]) -> list[Gemm]:
    """The matrix products of a (batched) product ``out = a @ b``: one of ``batch x m`` rows when
    the problem folds its batch (``problem.fold``), else one per batch index; every product's
    epilogue vectors start at ``vectors``."""
    if problem.fold or not problem.batch:
        first = (0,) * len(problem.batch)
        rows = problem.m * int(np.prod(problem.batch))
        return [Gemm(matrix(a, first), matrix(b, first, transposed=problem.b_trans), matrix(out, first), rows, problem.n, problem.k, vectors)]
    return [Gemm(matrix(a, index, transposed=problem.a_trans), matrix(b, index, transposed=problem.b_trans), matrix(out, index),
                 problem.m, problem.n, problem.k, vectors) for index in np.ndindex(*problem.batch)]


@dataclass(frozen=True)
class CubePlan:
    """A cube op's host tiling: the kernel's TCubeTiling and how it spreads its blocks."""

    tiling: CubeTiling
    schedule: CubeSchedule


class CubeOp(Op):
    """Base of the cube ops: their problem has ``api``, ``m``, ``n``, ``k`` (the largest product's),
    ``in_dtype``, ``products`` (matrix products the kernel runs together) and ``vectors`` (the
    epilogue's vectors: name, dtype)."""

    series = SERIES

    @classmethod
    def target(cls, system: Any) -> CubeTarget:
        return CubeTarget.of(system)

    @classmethod
    def reads_as_is(cls, problem: Any, name: str, tensor: Any) -> bool:
        if tensor.ndim >= 2 and name in cls.matrices:
            return layout(tensor) is not None
        return tensor.is_contiguous()

    matrices: frozenset[str] = frozenset()
    """The tensor arguments read as matrices, in either layout (:func:`layout`)."""

    @classmethod
    def plan(cls, problem: Any, target: CubeTarget, settings, options: OpOptions) -> CubePlan:
        item = np.dtype(problem.in_dtype).itemsize
        reserved = vector_bytes(problem.vectors, *BASIC_BLOCK)
        default = default_tiling(problem.m, problem.n, problem.k, item, target, blocks_beside=problem.products, reserved_l1=reserved)
        tiling, schedule = tiling_choice(dict(options.matmul_tiling), default, CubeSchedule(target.cores), problem.api)
        tiling.check(target, item, problem.api, vector_bytes(problem.vectors, tiling.base_m, tiling.base_n))
        schedule.check(target, problem.api)
        return CubePlan(tiling, schedule)

    @classmethod
    def describe(cls, problem: Any, plan: CubePlan) -> dict:
        t, s = plan.tiling, plan.schedule
        return {"m": problem.m, "n": problem.n, "k": problem.k, "products": problem.products, "base": [t.base_m, t.base_n, t.base_k],
                "step_k": [t.step_ka, t.step_kb], "buffers": [t.l1_buffers, t.l0_buffers, t.l0c_buffers], "cores": s.cores,
                "order": s.order, "assignment": s.assignment}
