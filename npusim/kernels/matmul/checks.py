"""The checks of torch's matrix products on the npu device, as torch (``aten/src/ATen/native/
LinearAlgebra.cpp``: shapes, dtypes) and aclnn's matmuls (hicann/ops-nn ``matmul/mat_mul_v3/op_host/
op_api/aclnn_matmul.cpp``, ``aclnn_addmm.cpp``: the dtypes of Atlas A2 / A3) make them.

Numerics (docs/torch.md): the cube multiplies in blocks of 16 x 16 x (32 bytes of k); per block the
products are summed exactly and rounded to float32 once, then added to the float32 accumulator,
block after block in k order (:class:`~npusim.isa.instructions.Mmad`); a bias row starts the
accumulator (the bias table); FixPipe rounds the result to the output dtype to nearest even.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import ml_dtypes
import numpy as np

from npusim.errors import OpArgumentError
from npusim.kernels.cube.op import folds_batch, layout

F16, BF16, F32 = np.dtype(np.float16), np.dtype(ml_dtypes.bfloat16), np.dtype(np.float32)
DTYPES = (F16, BF16, F32)
"""The input dtypes of aclnnMatmul / aclnnMm / aclnnBatchMatMul / aclnnAddmm on Atlas A2 / A3 (the
result has the inputs' dtype)."""


@dataclass(frozen=True)
class MatmulProblem:
    """One accepted product ``out[*batch, m, n] = self[*, m, k] @ mat2[*, k, n] (+ bias[n])``:
    the layouts the kernel reads (``a_trans`` / ``b_trans``: the operand's columns are contiguous),
    ``fold``: the batch folded into m (mat2 the same matrix for every batch and self's rows evenly
    spaced across its batches, as aclnnMatmul runs it: one product of ``batch x m`` rows)."""

    api: str
    batch: tuple[int, ...]
    m: int
    n: int
    k: int
    in_dtype: np.dtype
    out_dtype: np.dtype
    a_trans: bool
    b_trans: bool
    fold: bool
    vectors: tuple[tuple[str, np.dtype], ...] = ()
    empty: bool = False

    @property
    def products(self) -> int:
        return 1 if self.fold else math.prod(self.batch)


def _reject(api: str, argument: str, value: Any, rule: str) -> OpArgumentError:
    return OpArgumentError(f"{api}: {argument} = {value}: {rule}")


def _broadcast(api: str, a: tuple[int, ...], b: tuple[int, ...]) -> tuple[int, ...]:
    rank = max(len(a), len(b))
    a, b = (1,) * (rank - len(a)) + a, (1,) * (rank - len(b)) + b
    out = []
    for x, y in zip(a, b):
        if x != y and 1 not in (x, y):
            raise _reject(api, "mat2 batch dims", list(b), f"do not broadcast with self's {list(a)} (torch's broadcasting rule: each "
                          "pair of dims equal or one of them 1)")
        out.append(max(x, y))
    return tuple(out)


def check_matmul(api: str, a: Any, b: Any, bias: Any | None, out: Any) -> MatmulProblem:
    """Check a product of device tensors ``a`` (self) and ``b`` (mat2), each of 2 or more dims."""
    for name, tensor in (("self", a), ("mat2", b)):
        if tensor.ndim < 2:
            raise _reject(api, f"{name}.shape", list(tensor.shape), "must have 2 or more dims (a vector is made a matrix first)")
    a_dtype, b_dtype = np.dtype(a.dtype), np.dtype(b.dtype)
    if a_dtype != b_dtype:
        raise _reject(api, "mat2.dtype", b_dtype.name, f"expected self and mat2 to have the same dtype, but got: {a_dtype.name} != {b_dtype.name}")
    if a_dtype not in DTYPES:
        raise _reject(api, "self.dtype", a_dtype.name, "is not supported by the npu's matmul (aclnnMatmul on Atlas A2 / A3 takes "
                      + ", ".join(d.name for d in DTYPES) + ")")
    m, k = a.shape[-2:]
    k2, n = b.shape[-2:]
    if k != k2:
        raise _reject(api, "mat2.shape", list(b.shape), f"mat1 and mat2 shapes cannot be multiplied ({m}x{k} and {k2}x{n})")
    batch = _broadcast(api, tuple(a.shape[:-2]), tuple(b.shape[:-2]))
    if tuple(out.shape) != (*batch, m, n) or np.dtype(out.dtype) != a_dtype:
        raise _reject(api, "out", f"{list(out.shape)} {np.dtype(out.dtype).name}", f"must be {[*batch, m, n]} {a_dtype.name}")
    vectors: tuple[tuple[str, np.dtype], ...] = ()
    if bias is not None:
        if tuple(bias.shape) not in ((n,), (1, n)):
            raise _reject(api, "bias.shape", list(bias.shape), f"must be [{n}] or [1, {n}]: one value per output column")
        if np.dtype(bias.dtype) not in (a_dtype, F32):
            raise _reject(api, "bias.dtype", np.dtype(bias.dtype).name, f"must be {a_dtype.name} or float32")
        vectors = (("bias", np.dtype(bias.dtype)),)
    empty = 0 in (m, n) or 0 in batch
    if k == 0 and not empty:
        raise _reject(api, "self.shape", list(a.shape), "has k = 0: an empty sum (zeros, or the bias) is not modelled by npusim's "
                      "matmul; make the result with torch.zeros")
    a_trans, b_trans = layout(a) == "col", layout(b) == "col"
    return MatmulProblem(api, batch, m, n, k, a_dtype, a_dtype, a_trans, b_trans, folds_batch(a, b, batch), vectors, empty)
