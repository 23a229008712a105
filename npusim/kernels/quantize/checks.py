"""Argument checks of ``torch_npu.npu_quantize`` with ``div_mode=True``, as op-plugin's
``QuantizeKernelNpuOpApi.cpp`` (the dtype map) and hicann/ops-nn ``quant/quantize/op_api/aclnn_quantize.cpp``
(``aclnnQuantize`` on DAV_2201, the A2/A3 architecture) make them.

Numerics (the ops-nn golden ``quant/quantize/tests/assets/golden.py``): in float32,
``out = rint(f32(x) / f32(scales) [+ f32(zero_points)])`` saturated to the output dtype (int8,
uint8 or int32; NaN gives 0), with scales and zero points of one element (per tensor) or of
``x.shape[axis]`` elements broadcast along ``axis``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import ml_dtypes
import numpy as np

from npusim import formats
from npusim.config.products import PRODUCTS
from npusim.errors import OpArgumentError

OP_NAME = "npu_quantize"
F16, F32, BF16 = np.dtype(np.float16), np.dtype(np.float32), np.dtype(ml_dtypes.bfloat16)
X_DTYPES = (F32, F16, BF16)
SCALE_DTYPES = (F32, F16, BF16)
ZERO_POINT_DTYPES = (np.dtype(np.int8), np.dtype(np.uint8), np.dtype(np.int32), BF16)
OUTPUT_DTYPES = {"qint8": np.int8, "int8": np.int8, "quint8": np.uint8, "uint8": np.uint8, "qint32": np.int32, "int32": np.int32}
"""op-plugin's QUANTIZE_SUPPORT_MAP restricted to what aclnnQuantize writes on A2/A3 (INT8, UINT8, INT32)."""
ASCEND_950_ONLY = ("float8_e4m3fn", "float8_e5m2", "hifloat8")
"""The outputs aclnnQuantize adds on the Ascend 950 (its page: ACL_HIFLOAT8, ACL_FLOAT8_E4M3FN, ACL_FLOAT8_E5M2)."""
ASCEND_950_ZERO_POINT_DTYPES = (*ZERO_POINT_DTYPES, F32)
"""Zero points on the Ascend 950: FLOAT32 too (the page excludes it on A2/A3 only)."""
ROUNDING = {"hifloat8": "round"}
"""The rounding of the fp32 result to each output where it is not 'rint' (half to even): hifloat8
converts with ROUND (ties away, its TA) or HYBRID only, and aclnnQuantize takes no round mode, so
ROUND, pypto-cast.md's only mode to DT_HF8 [M]; every 8-bit float saturates as the integers do [L]."""
MAX_RANK = 8


def output_dtype(name: str) -> np.dtype:
    """The dtype ``npu_quantize`` returns for its ``dtype`` argument (a dtype name); whether the
    product writes it is :func:`check_quantize`'s question."""
    if name in ASCEND_950_ONLY:
        return formats.dtype_named(name)
    if name not in OUTPUT_DTYPES:
        raise OpArgumentError(f"{OP_NAME}: dtype = {name}: must be Int8, UInt8 or Int32 (torch.qint8, torch.quint8, torch.int32, "
                              "or torch.int8, torch.uint8)")
    return np.dtype(OUTPUT_DTYPES[name])


@dataclass(frozen=True)
class QuantizeProblem:
    """One accepted call: ``x`` viewed as ``[outer, channels, inner]`` around ``axis`` (per tensor:
    ``[1, 1, elements]``), the scales (and zero points) one per channel."""

    shape: tuple[int, ...]
    x_dtype: np.dtype
    scales_dtype: np.dtype
    zero_points_dtype: np.dtype | None
    out_dtype: np.dtype
    view: tuple[int, int, int]
    empty: bool = False

    @property
    def channels(self) -> int:
        return self.view[1]

    @property
    def inner(self) -> int:
        return self.view[2]


def _reject(argument: str, value: Any, rule: str) -> OpArgumentError:
    return OpArgumentError(f"{OP_NAME}: {argument} = {value}: {rule}")


def check_quantize(x: Any, scales: Any, zero_points: Any | None, dtype: str, axis: Any, div_mode: Any, *, product: str) -> QuantizeProblem:
    """Check a call (tensors: objects with ``shape`` and ``dtype``; ``dtype``: the output dtype's name)."""
    if div_mode is not True:
        raise _reject("div_mode", repr(div_mode), "div_mode=False (aclnnAscendQuant: multiplying by the scales) is not modelled "
                      "by npusim; use div_mode=True (dividing, aclnnQuantize)")
    out = output_dtype(dtype)
    target = PRODUCTS.get(product)
    on_950 = target.series == "ascend_950"
    if dtype in ASCEND_950_ONLY and not on_950:
        raise OpArgumentError(f"{OP_NAME}: dtype = {dtype}: quantising to {dtype} is an Ascend 950 feature; on {target.label} "
                              "aclnnQuantize writes int8, uint8 or int32: use torch.qint8, torch.quint8 or torch.int32, "
                              "or a config of the Ascend 950 (ascend-950pr)")
    x_dtype, s_dtype = np.dtype(x.dtype), np.dtype(scales.dtype)
    z_dtype = None if zero_points is None else np.dtype(zero_points.dtype)
    zero_point_dtypes = ASCEND_950_ZERO_POINT_DTYPES if on_950 else ZERO_POINT_DTYPES
    for name, got, allowed in (("input.dtype", x_dtype, X_DTYPES), ("scales.dtype", s_dtype, SCALE_DTYPES),
                               ("zero_points.dtype", z_dtype, zero_point_dtypes)):
        if got is not None and got not in allowed:
            raise _reject(name, got.name, f"not supported on {target.label}; allowed: " + ", ".join(d.name for d in allowed))
    if BF16 in (s_dtype, z_dtype) and (x_dtype != BF16 or s_dtype != BF16 or z_dtype not in (None, BF16)):
        raise _reject("(input, scales, zero_points) dtypes", f"({x_dtype.name}, {s_dtype.name}, {z_dtype.name if z_dtype else None})",
                      "with bfloat16 scales or zero points, input, scales and zero points must all be bfloat16")
    shape = tuple(int(d) for d in x.shape)
    ndim = len(shape)
    if ndim > MAX_RANK:
        raise _reject("input.shape", shape, f"input may have at most {MAX_RANK} dims")
    if len(scales.shape) != 1:
        raise _reject("scales.shape", tuple(scales.shape), "scales must be 1-D")
    size = int(scales.shape[0])
    if zero_points is not None:
        if len(zero_points.shape) != 1:
            raise _reject("zero_points.shape", tuple(zero_points.shape), "zero_points must be 1-D")
        if int(zero_points.shape[0]) != size:
            raise _reject("zero_points.shape", tuple(zero_points.shape), f"zero_points must have as many elements as scales ({size})")
    elements = math.prod(shape)
    empty = elements == 0 or size == 0

    def problem(view):
        return QuantizeProblem(shape, x_dtype, s_dtype, z_dtype, out, view, empty)

    if size == 1 or empty:
        return problem((1, 1, elements))
    if isinstance(axis, bool) or not isinstance(axis, (int, np.integer)) or not -ndim <= axis < ndim:
        raise _reject("axis", axis, f"axis must be in [-{ndim}, {ndim - 1}] for rank-{ndim} input (scales has {size} elements)")
    axis = int(axis) % ndim
    if size != shape[axis]:
        raise _reject("scales.shape", (size,), f"scales must have 1 element or input.shape[{axis}] = {shape[axis]} (axis {axis})")
    return problem((math.prod(shape[:axis]), shape[axis], math.prod(shape[axis + 1:])))
