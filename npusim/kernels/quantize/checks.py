"""Argument checks of ``torch_npu.npu_quantize``, as op-plugin's ``QuantizeKernelNpuOpApi.cpp``
makes them and the aclnn API it calls on DAV_2201 (the A2/A3 architecture):

- ``div_mode=True``: ``aclnnQuantize`` (hicann/ops-nn ``quant/quantize/op_api/aclnn_quantize.cpp``):
  in float32, ``out = rint(f32(x) / f32(scales) [+ f32(zero_points)])`` saturated to the output dtype
  (int8, uint8 or int32; NaN gives 0; the ops-nn golden ``quant/quantize/tests/assets/golden.py``),
  scales and zero points of one element (per tensor) or of ``x.shape[axis]`` elements along ``axis``.
- ``div_mode=False``: ``aclnnAscendQuantV3`` with ``sqrtMode=false``, ``roundMode="round"`` and
  ``axis`` -1 unless the call's is below -1 (op-plugin's ``npu_quantize_by_ascend_quant``;
  ops-nn ``quant/ascend_quant_v2/op_host/op_api/aclnn_ascend_quant_v3.cpp`` and its
  ``docs/aclnnAscendQuantV3.md``): ``out = rint(f32(x) * f32(scale) [+ f32(offset)])`` saturated to
  int8 (``tests/assets/golden.py``; the kernel rounds to int32 with CAST_RINT and narrows), scale
  (and offset, of the scale's dtype and shape) 1-D of 1 or ``x.shape[axis]`` elements, or of x's rank
  with only dim ``axis`` not 1; ``axis`` one of x's last two dims; fp16 x takes fp16 scales, bf16 x
  bf16 scales, fp32 x any (converted to fp32, exactly).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import ml_dtypes
import numpy as np

from npusim.errors import OpArgumentError

OP_NAME = "npu_quantize"
F16, F32, BF16 = np.dtype(np.float16), np.dtype(np.float32), np.dtype(ml_dtypes.bfloat16)
X_DTYPES = (F32, F16, BF16)
SCALE_DTYPES = (F32, F16, BF16)
ZERO_POINT_DTYPES = (np.dtype(np.int8), np.dtype(np.uint8), np.dtype(np.int32), BF16)
OUTPUT_DTYPES = {"qint8": np.int8, "int8": np.int8, "quint8": np.uint8, "uint8": np.uint8, "qint32": np.int32, "int32": np.int32}
"""op-plugin's QUANTIZE_SUPPORT_MAP restricted to what aclnnQuantize writes on A2/A3 (INT8, UINT8, INT32)."""
ASCEND_950_ONLY = ("float8_e4m3fn", "float8_e5m2", "hifloat8")
MAX_RANK = 8


def output_dtype(name: str, div_mode: bool = True) -> np.dtype:
    """The dtype ``npu_quantize`` returns for its ``dtype`` argument (a dtype name)."""
    if not div_mode:
        return _ascend_quant_output(name)
    if name in ASCEND_950_ONLY:
        raise OpArgumentError(f"{OP_NAME}: dtype = {name}: quantising to {name} is an Ascend 950 feature; on Atlas A2/A3 "
                              "aclnnQuantize writes int8, uint8 or int32: use torch.qint8, torch.quint8 or torch.int32")
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
    multiply: bool = False  # div_mode=False: x times the scales (aclnnAscendQuantV3), else divided by them

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
    if not isinstance(div_mode, (bool, np.bool_)):
        raise _reject("div_mode", repr(div_mode), "must be True (divide by the scales, aclnnQuantize) or False (multiply, aclnnAscendQuant)")
    if not div_mode:
        return _check_ascend_quant(x, scales, zero_points, dtype, axis)
    out = output_dtype(dtype)
    x_dtype, s_dtype = np.dtype(x.dtype), np.dtype(scales.dtype)
    z_dtype = None if zero_points is None else np.dtype(zero_points.dtype)
    for name, got, allowed in (("input.dtype", x_dtype, X_DTYPES), ("scales.dtype", s_dtype, SCALE_DTYPES),
                               ("zero_points.dtype", z_dtype, ZERO_POINT_DTYPES)):
        if got is not None and got not in allowed:
            raise _reject(name, got.name, "not supported on Atlas A2/A3; allowed: " + ", ".join(d.name for d in allowed))
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


ASCEND_QUANT_OUTPUTS = {"qint8": np.int8, "int8": np.int8}
"""What aclnnAscendQuantV3 writes on A2/A3 that npusim models: int8 (its int4 packed in int32,
``torch.quint4x2`` / ``torch.int32``, is not modelled)."""
ASCEND_QUANT_X_DTYPES = (F32, F16, BF16)


def _ascend_quant_output(dtype: str) -> np.dtype:
    if dtype in ("quint4x2", "int32"):
        raise _reject("dtype", dtype, "div_mode=False packs int4 results into int32 (torch.quint4x2), which npusim does not model; "
                      "use torch.qint8")
    if dtype not in ASCEND_QUANT_OUTPUTS:
        raise _reject("dtype", dtype, "with div_mode=False (aclnnAscendQuantV3) the output must be torch.qint8 (int8) on Atlas A2/A3")
    return np.dtype(ASCEND_QUANT_OUTPUTS[dtype])


def _check_ascend_quant(x: Any, scales: Any, offsets: Any | None, dtype: str, axis: Any) -> QuantizeProblem:
    """``div_mode=False`` (module docstring): the checks of aclnnAscendQuantV3 on DAV_2201."""
    out = _ascend_quant_output(dtype)
    x_dtype, s_dtype = np.dtype(x.dtype), np.dtype(scales.dtype)
    o_dtype = None if offsets is None else np.dtype(offsets.dtype)
    for name, got in (("input.dtype", x_dtype), ("scales.dtype", s_dtype), ("zero_points.dtype", o_dtype)):
        if got is not None and got not in ASCEND_QUANT_X_DTYPES:
            raise _reject(name, got.name, "with div_mode=False it must be float32, float16 or bfloat16 (aclnnAscendQuantV3 on Atlas A2/A3)")
    if o_dtype is not None and o_dtype != s_dtype:
        raise _reject("zero_points.dtype", o_dtype.name, f"with div_mode=False it must be the scales' dtype ({s_dtype.name})")
    if x_dtype != F32 and s_dtype != x_dtype:
        raise _reject("scales.dtype", s_dtype.name, f"{x_dtype.name} input takes {x_dtype.name} scales (aclnnAscendQuantV3: only "
                      "float32 input takes scales of another dtype)")
    shape = tuple(int(d) for d in x.shape)
    ndim = len(shape)
    if not 1 <= ndim <= MAX_RANK:
        raise _reject("input.shape", shape, f"input must have 1 to {MAX_RANK} dims")
    if isinstance(axis, bool) or not isinstance(axis, (int, np.integer)):
        raise _reject("axis", axis, "must be an int")
    axis = int(axis) if axis < -1 else -1  # op-plugin: axis = axis < -1 ? axis : -1
    if not -ndim <= axis or (ndim > 2 and axis < -2):
        raise _reject("axis", axis, f"must be one of input's last two dims (-1 or -2) for rank-{ndim} input; op-plugin passes -1 "
                      "for any axis above -2")
    axis %= ndim
    scale_shape = tuple(int(d) for d in scales.shape)
    if offsets is not None and tuple(int(d) for d in offsets.shape) != scale_shape:
        raise _reject("zero_points.shape", tuple(offsets.shape), f"with div_mode=False it must be the scales' shape {scale_shape}")
    if len(scale_shape) not in (1, ndim):
        raise _reject("scales.shape", scale_shape, f"scales must be 1-D or have input's {ndim} dims")
    size = scale_shape[0] if len(scale_shape) == 1 else scale_shape[axis]
    if size not in (1, shape[axis]) or math.prod(scale_shape) != size:
        raise _reject("scales.shape", scale_shape, f"scales must have 1 or input.shape[{axis}] = {shape[axis]} elements along dim "
                      f"{axis} and 1 in every other dim")
    elements = math.prod(shape)
    empty = elements == 0 or size == 0
    view = (1, 1, elements) if size == 1 or empty else (math.prod(shape[:axis]), shape[axis], math.prod(shape[axis + 1:]))
    return QuantizeProblem(shape, x_dtype, s_dtype, o_dtype, out, view, empty, multiply=True)
