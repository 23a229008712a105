"""numpy references of the cube ops, written from their documentation (docs/torch.md "Numerics",
the op pages of npu_quant_matmul and npu_grouped_matmul), independently of npusim's kernels.

- A product accumulates in float32 (int32 for int8) over k in blocks of 32 bytes of k (16 fp16 /
  bf16, 8 fp32, 32 int8) in k order: each block's products summed exactly and rounded to float32
  once, then added to the accumulator (rounded to float32); a bias row is the accumulator's start.
- The result is rounded to the output dtype to nearest even.
- Dequantisation: ``acc * scale * pertoken + offset + bias``, in float32, each operation rounded,
  in that order; an int32 bias is added to the accumulator first; int8 results saturate.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np

BF16 = np.dtype(ml_dtypes.bfloat16)


def accumulate(a: np.ndarray, b: np.ndarray, start: np.ndarray | None = None) -> np.ndarray:
    """``start + a @ b`` ([m, k] @ [k, n]) as the cube accumulates it: float32 (int32 for ints)."""
    m, k = a.shape
    n = b.shape[1]
    if np.issubdtype(a.dtype, np.integer):
        total = a.astype(np.int64) @ b.astype(np.int64)
        if start is not None:
            total = total + start.astype(np.int64)
        return ((total + 2**31) % 2**32 - 2**31).astype(np.int32)
    block = 32 // a.dtype.itemsize
    acc = np.zeros((m, n), np.float32) if start is None else np.broadcast_to(start.astype(np.float32), (m, n)).copy()
    for first in range(0, k, block):
        exact = a[:, first:first + block].astype(np.float64) @ b[first:first + block].astype(np.float64)
        acc = (acc + exact.astype(np.float32)).astype(np.float32)
    return acc


def to_dtype(values: np.ndarray, dtype) -> np.ndarray:
    """``values`` rounded to ``dtype``: to nearest even for floats; saturated rint for int8."""
    dtype = np.dtype(dtype)
    if dtype == np.int8:
        return np.clip(np.rint(values.astype(np.float64)), -128, 127).astype(np.int8)
    return values.astype(np.float32).astype(dtype)


def matmul(a: np.ndarray, b: np.ndarray, bias: np.ndarray | None = None) -> np.ndarray:
    """torch's matmul / addmm / linear on the npu: the accumulation, then the inputs' dtype."""
    return to_dtype(accumulate(a, b, bias), a.dtype)


def fp19(scale: np.ndarray) -> np.ndarray:
    """A float32 scale as npu_trans_quant_param keeps it: its top 19 bits."""
    return (scale.astype(np.float32).view(np.uint32) & np.uint32(0xFFFFE000)).view(np.float32)


def dequantize(acc: np.ndarray, scale, *, token=None, offset=None, bias=None, out_dtype) -> np.ndarray:
    """The documented epilogue on an int32 accumulator."""
    value = acc.astype(np.float32) * np.asarray(scale, np.float32).reshape(1, -1)
    if token is not None:
        value = (value * np.asarray(token, np.float32).reshape(-1, 1)).astype(np.float32)
    if offset is not None:
        value = (value + np.asarray(offset, np.float32).reshape(1, -1)).astype(np.float32)
    if bias is not None:
        value = (value + np.asarray(bias, np.float32).reshape(1, -1)).astype(np.float32)
    return to_dtype(value, out_dtype)
