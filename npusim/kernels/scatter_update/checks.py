"""Argument checks of ``torch_npu.scatter_update_`` (``aclnnInplaceScatterUpdate``), as the aclnn
wrapper of hicann/ops-nn ``index/scatter/op_api/aclnn_scatter_update.cpp`` makes them, plus the
shape rules of the op's API page (op-plugin ``docs/zh/custom_APIs/torch_npu/torch_npu-scatter_update.md``).

The mapping is the one of ``npu_quant_scatter_`` without quantisation (the ops-nn golden
``index/scatter/tests/assets/golden.py``): shapes are merged to ``[d0, H, S, T]`` around ``axis``
and batch ``b`` writes, for every ``h``, its ``U * T`` elements at row ``indices[b]`` of input batch
``b`` (1-D indices) or at row ``indices[b][1]`` of input batch ``indices[b][0]`` (2-D). A 0-D index
is one batch. The batches are those of updates with 1-D indices (the golden loops over
``updates.shape[0]``: indices may hold more values than that, the rest unused, as ops-nn's UT
``l2_inplace_scatter_update_test_err_dim_five`` accepts updates of batch 2 with 4 indices), those of
the indices when 2-D (updates may hold more batches); the aclnn wrapper checks neither, the kernel
would read past the shorter one, which npusim refuses. Every refusal is an
:class:`~npusim.errors.OpArgumentError`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, ClassVar

import ml_dtypes
import numpy as np

from npusim.errors import OpArgumentError

OP_NAME = "scatter_update_"

DATA_DTYPES = tuple(np.dtype(d) for d in (np.int8, np.float16, np.float32, ml_dtypes.bfloat16, np.int32))
"""What data and updates may hold on A2/A3 (aclnn ``DTYPE_SUPPORT_LIST_DATA``)."""
INDEX_DTYPES = (np.dtype(np.int32), np.dtype(np.int64))
MIN_RANK, MAX_RANK = 2, 8


@dataclass(frozen=True)
class ScatterUpdateProblem:
    """One accepted call: input viewed as ``[d0, H, S, T]``, updates as ``[B, H, U, T]`` (elements)."""

    product: str
    input_shape: tuple[int, ...]
    indices_shape: tuple[int, ...]
    updates_shape: tuple[int, ...]
    axis: int
    input_view: tuple[int, int, int, int]
    updates_view: tuple[int, int, int, int]
    index_rank: int
    input_dtype: np.dtype
    indices_dtype: np.dtype
    batches: int  # the batches written: updates.shape[0] with 0-D / 1-D indices, indices.shape[0] with 2-D
    empty: ClassVar[bool] = False
    op_name: ClassVar[str] = OP_NAME

    @property
    def heads(self) -> int:
        return self.input_view[1]

    @property
    def axis_len(self) -> int:
        return self.input_view[2]

    @property
    def rows(self) -> int:
        return self.updates_view[2]

    @property
    def row_elements(self) -> int:
        return self.input_view[3]

    @property
    def bs(self) -> int:
        """Blocks written: one per (batch, head), each ``rows * row_elements`` contiguous elements."""
        return self.batches * self.heads

    @property
    def block_bytes(self) -> int:
        return self.rows * self.row_elements * self.input_dtype.itemsize

    @property
    def index_count(self) -> int:
        return math.prod(self.indices_shape)


def _reject(argument: str, value: Any, rule: str) -> OpArgumentError:
    return OpArgumentError(f"{OP_NAME}: {argument} = {value}: {rule}")


def check_scatter_update(input: Any, indices: Any, updates: Any, axis: Any, *, product: str) -> ScatterUpdateProblem:
    """Check a call as the real op does (tensors: objects with ``shape`` and ``dtype``)."""
    dtypes = {name: np.dtype(t.dtype) for name, t in (("input", input), ("indices", indices), ("updates", updates))}
    if dtypes["input"] not in DATA_DTYPES:
        raise _reject("input.dtype", dtypes["input"].name, "not supported on Atlas A2/A3; allowed: " + ", ".join(d.name for d in DATA_DTYPES))
    if dtypes["indices"] not in INDEX_DTYPES:
        raise _reject("indices.dtype", dtypes["indices"].name, "indices must be int32 or int64")
    if dtypes["updates"] != dtypes["input"]:
        raise _reject("updates.dtype", dtypes["updates"].name, f"updates must have input's dtype ({dtypes['input'].name})")
    shapes = {name: tuple(int(d) for d in t.shape) for name, t in (("input", input), ("indices", indices), ("updates", updates))}
    in_shape, idx_shape, up_shape = shapes["input"], shapes["indices"], shapes["updates"]
    for name, shape in shapes.items():
        if math.prod(shape) == 0:
            raise _reject(f"{name}.shape", shape, "empty tensors are not supported by this op")
    ndim = len(in_shape)
    if not MIN_RANK <= ndim <= MAX_RANK:
        raise _reject("input.shape", in_shape, f"input must have rank {MIN_RANK}..{MAX_RANK}, not {ndim}")
    if len(up_shape) != ndim:
        raise _reject("updates.shape", up_shape, f"updates must have the rank of input ({ndim}, input.shape = {in_shape})")
    if isinstance(axis, bool) or not isinstance(axis, (int, np.integer)):
        raise _reject("axis", repr(axis), "must be an int (a dimension of input, negative counts from the end)")
    norm_axis = int(axis) + ndim if axis < 0 else int(axis)
    if not 1 <= norm_axis <= ndim - 1:
        raise _reject("axis", axis, f"axis must be in [1, {ndim - 1}] or [{1 - ndim}, -1] for rank-{ndim} input (never dim 0, the batch)")
    if len(idx_shape) > 2:
        raise _reject("indices.shape", idx_shape, "indices must be 0-D, 1-D [B] or 2-D [B, 2]")
    if len(idx_shape) == 2 and idx_shape[1] != 2:
        raise _reject("indices.shape", idx_shape, "2-D indices must have shape [B, 2] (batch, offset)")
    if not idx_shape and up_shape[0] != 1:
        raise _reject("updates.shape", up_shape, "a 0-D index scatters one batch: updates.shape[0] must be 1")
    if len(idx_shape) == 2:
        batches = idx_shape[0]
        if up_shape[0] < batches:
            raise _reject("updates.shape", up_shape, f"updates.shape[0] ({up_shape[0]}) must be at least indices.shape[0] ({batches}): "
                          "with 2-D indices, pair b writes updates batch b")
    else:
        batches = up_shape[0]
        if idx_shape and idx_shape[0] < batches:
            raise _reject("indices.shape", idx_shape, f"indices must have at least updates.shape[0] = {batches} values: with 1-D "
                          "indices, updates batch b is written at row indices[b] (further indices are not used)")
        if batches > in_shape[0]:
            raise _reject("updates.shape", up_shape, f"updates.shape[0] ({up_shape[0]}) must not exceed input.shape[0] ({in_shape[0]}): "
                          "with 1-D indices, updates batch b goes to input batch b")
    if up_shape[norm_axis] > in_shape[norm_axis]:
        raise _reject("updates.shape", up_shape, f"updates.shape[{norm_axis}] ({up_shape[norm_axis]}) along axis must not exceed "
                      f"input.shape[{norm_axis}] ({in_shape[norm_axis]})")
    for dim in range(1, ndim):
        if dim != norm_axis and up_shape[dim] != in_shape[dim]:
            raise _reject("updates.shape", up_shape, f"updates.shape[{dim}] ({up_shape[dim]}) must equal input.shape[{dim}] "
                          f"({in_shape[dim]}) (only dim 0 and the axis may differ)")

    def merged(shape):
        return (shape[0], math.prod(shape[1:norm_axis]), shape[norm_axis], math.prod(shape[norm_axis + 1:]))

    return ScatterUpdateProblem(product, in_shape, idx_shape if idx_shape else (1,), up_shape, norm_axis, merged(in_shape),
                                merged(up_shape), 2 if len(idx_shape) == 2 else 1, dtypes["input"], dtypes["indices"], batches)
