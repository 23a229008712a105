"""The checks of ``torch_npu.npu_quant_matmul`` on Atlas A2 / A3, from its op page (op-plugin
``docs/zh/custom_APIs/torch_npu/torch_npu-npu_quant_matmul.md``: 参数说明, 约束说明 and table 2 of the
dtype combinations) and op-plugin's ``QuantMatmulKernelNpuOpApi.cpp`` (the batch broadcast, the
float32 scale converted by ``npu_trans_quant_param``).

Formulas (功能说明): ``out = x1 @ x2 * scale + offset``; with an int32 ``bias``
``(x1 @ x2 + bias) * scale + offset``; with a bfloat16 / float32 ``bias`` ``x1 @ x2 * scale + bias``;
with ``pertoken_scale`` the product is also multiplied by it per row. npusim computes them as
FixPipe's epilogue (:class:`~npusim.isa.instructions.Dequant`): the int32 accumulator (exact) and
an int32 bias summed exactly, then in float32, each operation rounded: ``* scale``, ``* pertoken``,
``+ offset``, ``+ bias``; the result rounded to nearest even into the output dtype (int8 saturated).
A float32 scale without ``pertoken_scale`` for a float16 or int8 output is first packed by
``npu_trans_quant_param`` (op-plugin does it: its scale is truncated to 19 bits, its offset rounded to
an integer in [-256, 255]); an int64 scale is such a packed one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import ml_dtypes
import numpy as np

from npusim.errors import OpArgumentError
from npusim.kernels.cube.op import folds_batch, layout

OP = "npu_quant_matmul"
I8, I32, I64 = np.dtype(np.int8), np.dtype(np.int32), np.dtype(np.int64)
F16, BF16, F32 = np.dtype(np.float16), np.dtype(ml_dtypes.bfloat16), np.dtype(np.float32)
MAX_INNER = 65535
"""The last dim of x1 and x2 may not exceed 65535 (约束说明)."""

COMBINATIONS: dict[np.dtype, tuple[tuple[np.dtype, ...], bool, tuple[np.dtype, ...], bool]] = {
    # output dtype -> (scale dtypes, offset allowed, bias dtypes, pertoken allowed), table 2 of the op page (x1 = x2 = int8)
    I8: ((I64, F32), True, (I32,), False),
    F16: ((I64, F32), False, (I32, BF16, F32), True),
    BF16: ((F32, BF16), False, (I32, BF16, F32), True),
}
"""Table 2 (Atlas A2 / A3) for int8 inputs: per output dtype the scale dtypes, whether an offset may
be given, the bias dtypes and whether pertoken_scale may be given. A float16 output takes an int64
scale only without pertoken_scale, and pertoken_scale only with a float32 scale (rows 1 and 4)."""
OUTPUT_DTYPES = {"int8": I8, "float16": F16, "bfloat16": BF16, "int32": I32}


@dataclass(frozen=True)
class QuantMatmulProblem:
    """One accepted call: ``out[*batch, m, n]`` from ``x1[*, m, k] @ x2[*, k, n]`` (layouts as
    :class:`~npusim.kernels.matmul.checks.MatmulProblem`), the epilogue's vectors (``bias`` int32
    starts the accumulator; ``scale``, ``offset``, ``token`` and ``post_bias`` for FixPipe) and
    which of them hold one value (``scalars``), ``packed``: the scale as npu_trans_quant_param packs it."""

    api: str
    batch: tuple[int, ...]
    m: int
    n: int
    k: int
    in_dtype: np.dtype
    out_dtype: np.dtype
    a_trans: bool
    b_trans: bool
    vectors: tuple[tuple[str, np.dtype], ...]
    scalars: frozenset[str]
    packed: bool
    fold: bool
    empty: bool = False

    @property
    def products(self) -> int:
        return 1 if self.fold else int(np.prod(self.batch))


def reject(argument: str, value: Any, rule: str) -> OpArgumentError:
    return OpArgumentError(f"{OP}: {argument} = {value}: {rule}")


def output_dtype(name: str | None) -> np.dtype:
    """The dtype of the result for ``output_dtype`` (a dtype name; None: int8)."""
    if name is None:
        return I8
    if name not in OUTPUT_DTYPES:
        raise reject("output_dtype", name, f"must be None or one of {', '.join(OUTPUT_DTYPES)} (Atlas A2 / A3)")
    return OUTPUT_DTYPES[name]


def _vector_length(argument: str, tensor: Any, allowed: tuple[int, ...], rule: str) -> int:
    if tensor.ndim != 1 or tensor.shape[0] not in allowed:
        raise reject(f"{argument}.shape", list(tensor.shape), rule)
    return tensor.shape[0]


def check_quant_matmul(x1: Any, x2: Any, scale: Any, offset: Any | None, pertoken_scale: Any | None, bias: Any | None, out_dtype: str | None,
                       out: Any, group_sizes: Any = None) -> QuantMatmulProblem:
    """Check a call (tensors: objects with ``shape``, ``dtype``, ``ndim``, ``strides``)."""
    if group_sizes is not None:
        raise reject("group_sizes", list(group_sizes), "per-group quantisation (A8W4 / MX) is not modelled by npusim; pass None")
    dtypes = {"x1": np.dtype(x1.dtype), "x2": np.dtype(x2.dtype)}
    if dtypes["x1"] == I32 or dtypes["x2"] == I32:
        raise reject("x1.dtype", dtypes["x1"].name, "int32 inputs (int4 packed eight to an int32) are not modelled by npusim; use int8")
    for name, dtype in dtypes.items():
        if dtype != I8:
            raise reject(f"{name}.dtype", dtype.name, "must be int8 (or int32 for int4) on Atlas A2 / A3")
    for name, tensor in (("x1", x1), ("x2", x2)):
        if not 2 <= tensor.ndim <= 6:
            raise reject(f"{name}.shape", list(tensor.shape), "must have 2 to 6 dims")
        if tensor.shape[-1] > MAX_INNER:
            raise reject(f"{name}.shape", list(tensor.shape), f"its last dim may not exceed {MAX_INNER}")
    m, k = x1.shape[-2:]
    k2, n = x2.shape[-2:]
    if k != k2:
        raise reject("x2.shape", list(x2.shape), f"its k ({k2}, the second-to-last dim) must equal x1's ({k}, the last dim)")
    rank = max(x1.ndim, x2.ndim)
    lead1, lead2 = (1,) * (rank - x1.ndim) + tuple(x1.shape[:-2]), (1,) * (rank - x2.ndim) + tuple(x2.shape[:-2])
    batch = []
    for a, b in zip(lead1, lead2):
        if a != b and a > 1 and b > 1:
            raise reject("x2.shape", list(x2.shape), f"its batch dims do not broadcast with x1's {list(x1.shape)} (each pair equal or one of them 1)")
        batch.append(max(a, b))
    result = output_dtype(out_dtype)
    if result == I32:
        raise reject("output_dtype", "int32", "an int32 result (the accumulator without dequantisation) is not modelled by npusim; "
                     "use int8, float16 or bfloat16")
    scale_dtypes, offset_ok, bias_dtypes, pertoken_ok = COMBINATIONS[result]
    s_dtype = np.dtype(scale.dtype)
    if s_dtype not in scale_dtypes:
        raise reject("scale.dtype", s_dtype.name, f"with output_dtype {result.name} must be one of {', '.join(d.name for d in scale_dtypes)} "
                     "(table 2 of the op page)")
    scalars = set()
    if _vector_length("scale", scale, (1, n), f"must be 1-D of 1 or n = {n} values (n: x2's last dim)") == 1 and n > 1:
        scalars.add("scale")
    vectors: list[tuple[str, np.dtype]] = []
    if bias is not None and np.dtype(bias.dtype) == I32:
        vectors.append(("bias", I32))
    vectors.append(("scale", s_dtype))
    if offset is not None:
        if not offset_ok:
            raise reject("offset", list(offset.shape), f"is taken only with an int8 output (table 2), not {result.name}")
        if np.dtype(offset.dtype) != F32:
            raise reject("offset.dtype", np.dtype(offset.dtype).name, "must be float32")
        if _vector_length("offset", offset, (1, n), f"must be 1-D of 1 or n = {n} values") == 1 and n > 1:
            scalars.add("offset")
        vectors.append(("offset", F32))
    if pertoken_scale is not None:
        if not pertoken_ok:
            raise reject("pertoken_scale", list(pertoken_scale.shape), f"is not taken with an {result.name} output (table 2)")
        if np.dtype(pertoken_scale.dtype) != F32:
            raise reject("pertoken_scale.dtype", np.dtype(pertoken_scale.dtype).name, "must be float32")
        if result == F16 and s_dtype != F32:
            raise reject("scale.dtype", s_dtype.name, "with pertoken_scale and a float16 output must be float32 (table 2)")
        _vector_length("pertoken_scale", pertoken_scale, (m,), f"must be 1-D of m = {m} values (m: x1's second-to-last dim)")
        vectors.append(("token", F32))
    if bias is not None:
        b_dtype = np.dtype(bias.dtype)
        if b_dtype not in bias_dtypes:
            raise reject("bias.dtype", b_dtype.name, f"with output_dtype {result.name} must be one of {', '.join(d.name for d in bias_dtypes)} "
                         "(table 2 of the op page)")
        if tuple(bias.shape) != (n,) and not (bias.ndim == 3 and rank == 3 and tuple(bias.shape) == (batch[0], 1, n)):
            raise reject("bias.shape", list(bias.shape), f"must be [{n}] (or [batch, 1, {n}] for a 3-D output)")
        if bias.ndim == 3:
            raise reject("bias.shape", list(bias.shape), "a 3-D bias (one per batch) is not modelled by npusim; pass a 1-D bias")
        if b_dtype != I32:
            vectors.append(("post_bias", b_dtype))
    packed = s_dtype == F32 and pertoken_scale is None and result in (F16, I8)
    fold = folds_batch(x1, x2, tuple(batch)) and pertoken_scale is None  # a per-token scale restarts with each batch
    if tuple(out.shape) != (*batch, m, n) or np.dtype(out.dtype) != result:
        raise reject("out", f"{list(out.shape)} {np.dtype(out.dtype).name}", f"must be {[*batch, m, n]} {result.name}")
    empty = 0 in (m, n) or 0 in batch
    if k == 0 and not empty:
        raise reject("x1.shape", list(x1.shape), "has k = 0, which npusim does not model")
    return QuantMatmulProblem(OP, tuple(batch), m, n, k, I8, result, layout(x1) == "col", layout(x2) == "col", tuple(vectors),
                              frozenset(scalars), packed, fold, empty)


def result_shape(x1_shape: tuple[int, ...], x2_shape: tuple[int, ...]) -> tuple[int, ...]:
    """The shape of the result: the batch dims broadcast, then ``[m, n]`` (mismatches are for the check to refuse)."""
    rank = max(len(x1_shape), len(x2_shape))
    lead1 = (1,) * (rank - len(x1_shape)) + tuple(x1_shape[:-2])
    lead2 = (1,) * (rank - len(x2_shape)) + tuple(x2_shape[:-2])
    return (*(max(a, b) for a, b in zip(lead1, lead2)), x1_shape[-2], x2_shape[-1])
