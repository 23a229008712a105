"""The rules of ``torch_npu.npu_dequant_swiglu_quant`` (op-plugin docs/zh/custom_APIs/torch_npu/
torch_npu-npu_dequant_swiglu_quant.md and ``DequantSwigluQuantOpApi.cpp``, read at 517f2e7d), each
refused naming the argument, the value and the rule.

Modelled: ``swiglu_mode`` 0 (``swish(a) * b`` with ``swish(z) = z / (1 + exp(-z))``, ``a`` the left
half of each row with ``activate_left``, else the right), ``quant_mode`` 1 (dynamic per-row int8:
``scale = max|out| * (1 / 127)``, ``y = rint(out / scale)``, as ops-nn's kernel computes it), x
int32 (dequantised by ``weight_scale`` per column of its group and ``activation_scale`` per row) or
float16 / bfloat16 (a ``weight_scale`` is allowed and, as in ops-nn's kernel, not read), ``quant_scale`` (smooth scales per group), ``group_index`` (rows per group,
count mode). Refused as not modelled: static quantisation, the variant SwiGLUs (modes 1 and 2), a
bias, the Ascend 950 overrides.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import ml_dtypes
import numpy as np

from npusim.errors import OpArgumentError

API = "npu_dequant_swiglu_quant"
I32, I64, I8 = np.dtype(np.int32), np.dtype(np.int64), np.dtype(np.int8)
F16, BF16, F32 = np.dtype(np.float16), np.dtype(ml_dtypes.bfloat16), np.dtype(np.float32)
X_DTYPES = (I32, F16, BF16)
QUANT_SCALE_DTYPES = (F32, F16, BF16)
MAX_GROUPED_H = 10496
"""With group_index, H (half of x's last dim) is at most 10496 and a multiple of 64 (约束说明)."""
GROUPED_H_ALIGN = 64
ASCEND950_ONLY = ("dst_type", "round_mode", "activate_dim")


def reject(argument: str, value: Any, rule: str) -> OpArgumentError:
    return OpArgumentError(f"torch_npu.{API}: {argument} = {value}: {rule}")


@dataclass(frozen=True)
class SwigluQuantProblem:
    """One accepted call: ``tokens`` rows of ``2 * h`` values of ``dtype``; ``groups`` (None: no
    group_index, every row one group); the optional tensors given."""

    tokens: int
    h: int
    dtype: np.dtype
    groups: int | None
    activate_left: bool
    weight_scale: bool
    activation_scale: bool
    quant_scale: np.dtype | None

    @property
    def empty(self) -> bool:
        return self.tokens == 0

    @property
    def param_groups(self) -> int:
        """Rows of the per-group parameters (weight_scale, quant_scale)."""
        return self.groups or 1

    def output_shapes(self) -> dict[str, tuple[tuple[int, ...], np.dtype]]:
        return {"y": ((self.tokens, self.h), I8), "scale": ((self.tokens,), F32)}


def _shape(tensor: Any) -> tuple[int, ...]:
    return tuple(int(d) for d in tensor.shape)


def _number(name: str, value: Any, rule: str, *, positive: bool = False) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise reject(name, repr(value), "must be a number")
    value = float(value)
    if not math.isfinite(value) or (positive and value <= 0):
        raise reject(name, value, rule)
    return value


def check_dequant_swiglu_quant(args: dict) -> SwigluQuantProblem:
    """Check a call (``args``: every argument by name, tensors as objects with shape and dtype)."""
    for name in ASCEND950_ONLY:
        if args.get(name) is not None:
            raise reject(name, args[name], "an Ascend 950 option, not modelled on Atlas A2 / A3: leave it None")
    x = args["x"]
    shape = _shape(x)
    if len(shape) != 2:
        raise reject("x.shape", list(shape), "x must be 2-D [TokensNum, 2H]")
    tokens, width = shape
    if width % 2:
        raise reject("x.shape[-1]", width, "must be even (its two halves are the SwiGLU's two inputs)")
    h = width // 2
    dtype = np.dtype(x.dtype)
    if dtype not in X_DTYPES:
        raise reject("x.dtype", dtype.name, "must be int32, float16 or bfloat16")
    quant_mode = args.get("quant_mode", 0)
    if quant_mode not in (0, 1):
        raise reject("quant_mode", quant_mode, "must be 0 (static) or 1 (dynamic)")
    swiglu_mode = args.get("swiglu_mode", 0)
    if swiglu_mode not in (0, 1, 2):
        raise reject("swiglu_mode", swiglu_mode, "must be 0, 1 or 2")
    _number("clamp_limit", args.get("clamp_limit", 7.0), "must be a positive finite number", positive=True)
    _number("glu_alpha", args.get("glu_alpha", 1.702), "must be finite")
    _number("glu_bias", args.get("glu_bias", 1.0), "must be finite")
    group_index = args.get("group_index")
    groups = None
    if group_index is not None:
        if _shape(group_index) == () or len(_shape(group_index)) != 1 or np.dtype(group_index.dtype) != I64:
            raise reject("group_index", f"{list(_shape(group_index))} {np.dtype(group_index.dtype).name}",
                         "must be a 1-D int64 tensor (each group's row count)")
        groups = _shape(group_index)[0]
        if groups < 1:
            raise reject("group_index.shape", [groups], "must hold at least one group")
        if h > MAX_GROUPED_H or h % GROUPED_H_ALIGN:
            raise reject("x.shape[-1]", width, f"with group_index, H = {h} (half of it) must be at most {MAX_GROUPED_H} and a "
                         f"multiple of {GROUPED_H_ALIGN}")
    param_groups = groups or 1
    weight_scale = args.get("weight_scale")
    if weight_scale is not None:
        if np.dtype(weight_scale.dtype) != F32:
            raise reject("weight_scale.dtype", np.dtype(weight_scale.dtype).name, "must be float32")
        if _shape(weight_scale) != (param_groups, width):
            raise reject("weight_scale.shape", list(_shape(weight_scale)), f"must be [groupNum, 2H] = [{param_groups}, {width}]")
    activation_scale = args.get("activation_scale")
    if dtype == I32:
        if activation_scale is None:
            raise reject("activation_scale", None, "must be given for an int32 x (its per-row dequantisation)")
        if weight_scale is None:
            raise reject("weight_scale", None, "must be given for an int32 x in npusim (the op page advises it; without it the "
                         "kernel's dequantisation is not documented)")
    elif activation_scale is not None:
        raise reject("activation_scale", "a tensor", f"must be None for a {dtype.name} x")
    if activation_scale is not None:
        if np.dtype(activation_scale.dtype) != F32:
            raise reject("activation_scale.dtype", np.dtype(activation_scale.dtype).name, "must be float32")
        if _shape(activation_scale) != (tokens, 1):
            raise reject("activation_scale.shape", list(_shape(activation_scale)), f"must be [TokensNum, 1] = [{tokens}, 1]")
    bias = args.get("bias")
    if bias is not None:
        if group_index is not None:
            raise reject("bias", "a tensor", "must be None with group_index")
        if dtype != I32:
            raise reject("bias", "a tensor", f"must be None for a {dtype.name} x")
        raise reject("bias", "a tensor", "is not modelled; leave it None")
    quant_scale = args.get("quant_scale")
    qs_dtype = None
    if quant_scale is not None:
        qs_dtype = np.dtype(quant_scale.dtype)
        if qs_dtype not in QUANT_SCALE_DTYPES:
            raise reject("quant_scale.dtype", qs_dtype.name, "must be float32, float16 or bfloat16")
        if _shape(quant_scale) != (param_groups, h):
            raise reject("quant_scale.shape", list(_shape(quant_scale)), f"must be [groupNum, H] = [{param_groups}, {h}]")
    if args.get("quant_offset") is not None:
        if group_index is not None:
            raise reject("quant_offset", "a tensor", "must be None with group_index")
        raise reject("quant_offset", "a tensor", "belongs to static quantisation, which is not modelled; leave it None")
    if quant_mode == 0:
        raise reject("quant_mode", 0, "static quantisation is not modelled; use quant_mode=1 (dynamic)")
    if swiglu_mode != 0:
        raise reject("swiglu_mode", swiglu_mode, "the variant SwiGLUs (clamped, glu_alpha, glu_bias) are not modelled; use 0")
    activate_left = args.get("activate_left", False)
    if not isinstance(activate_left, (bool, np.bool_)):
        raise reject("activate_left", repr(activate_left), "must be True or False")
    return SwigluQuantProblem(tokens, h, dtype, groups, bool(activate_left), weight_scale is not None, activation_scale is not None, qs_dtype)


def group_rows(problem: SwigluQuantProblem, counts: np.ndarray | None) -> list[tuple[int, int, int]]:
    """(group, first row, rows) of each group with rows, from ``group_index``'s values (None: no
    group_index, all rows one group); a count below 0 or a sum above TokensNum is a
    :class:`~npusim.errors.WorkloadError` (the op page: non-negative counts the network keeps within x)."""
    from npusim.errors import WorkloadError

    if counts is None:
        return [(0, 0, problem.tokens)] if problem.tokens else []
    counts = np.asarray(counts, dtype=np.int64)
    if (counts < 0).any():
        g = int(np.flatnonzero(counts < 0)[0])
        raise WorkloadError(f"torch_npu.{API}: group_index[{g}] = {int(counts[g])} on the device: the counts must be non-negative "
                            "(count mode)")
    total = int(counts.sum())
    if total > problem.tokens:
        raise WorkloadError(f"torch_npu.{API}: group_index sums to {total} on the device, more than x's {problem.tokens} rows: "
                            "the kernel would read past x (the op page: the network keeps the sum within TokensNum)")
    out, row = [], 0
    for g, count in enumerate(counts.tolist()):
        if count:
            out.append((g, row, count))
        row += count
    return out
