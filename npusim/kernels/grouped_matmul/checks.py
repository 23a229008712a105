"""The checks of ``torch_npu.npu_grouped_matmul`` on Atlas A2 / A3, from its op page (op-plugin
``docs/zh/custom_APIs/torch_npu/torch_npu-npu_grouped_matmul.md``: 参数说明, 约束说明, table 1 (List[int]
group_list), table 2 (Tensor group_list) and the scene tables) and op-plugin's
``GroupedMatmulKernelNpuOpApi.cpp`` (group_type required with a Tensor group_list; the counts of x,
weight and group_list per split_item).

Forms modelled (the ones MoE layers use, and independent products):

- ``group_type=0`` (groups of x's rows), one x ``[M, K]``, the weights one ``[E, K, N]`` tensor or a
  list of E ``[K, N]`` (either may be the transpose of a contiguous ``[N, K]``), ``split_item`` 2 or 3,
  one y ``[M, N]``; ``group_list`` a Tensor of E int64 (``group_list_type`` 0: running sums, the last
  equal to M; 1: counts summing to M) or a list of ints (running sums, the ``.List`` overload);
- ``group_type=-1`` with a Tensor group_list's schema: lists of x ``[m_i, K_i]`` and weight ``[K_i, N_i]``,
  ``split_item`` 0 or 1, no group_list, one y per product.

Formulas (功能说明): ``y_i = x_i @ w_i + bias_i``; per-channel ``y_i = (x_i @ w_i + bias_i) * scale_i``;
per-token ``y_i = (x_i @ w_i + bias_i) * scale_i * per_token_scale_i`` (int32 bias); npusim computes them
as npu_quant_matmul's FixPipe epilogue (:mod:`npusim.kernels.quant_matmul.checks`). A Tensor
group_list is read by the kernel when it starts, so the counts may come from work queued before it
(an MoE dispatch); they are checked then. In a timing-only run its values are unknown unless it
lives in control memory (kept without data): the rows are then taken as split evenly over the
groups (a :class:`GroupSizesAssumedWarning`).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Any

import ml_dtypes
import numpy as np

from npusim.errors import OpArgumentError
from npusim.kernels.cube.op import layout

OP = "npu_grouped_matmul"
I8, I32, I64 = np.dtype(np.int8), np.dtype(np.int32), np.dtype(np.int64)
F16, BF16, F32 = np.dtype(np.float16), np.dtype(ml_dtypes.bfloat16), np.dtype(np.float32)
MAX_TENSORS = 128
"""x, weight and their companions hold at most 128 tensors (参数说明)."""
MAX_GROUPS = {"single": 1024, "list": 128}
"""group_list holds at most 1024 groups with one weight tensor, 128 with a list of weights (场景限制)."""
INNER_LIMIT = 65536
"""The last dim of each x and weight must be below 65536 (约束说明: InnerLimit)."""

NON_QUANT: dict[np.dtype, tuple[np.dtype, ...]] = {F16: (F16,), BF16: (F32,), F32: (F32,)}
"""Table 2, non-quantised rows: x = weight dtype -> bias dtypes (the result has x's dtype)."""
QUANT_OUTPUTS = {I64: I8, BF16: BF16, F32: F16}
"""Table 2, int8 rows: the scale's dtype -> the result's dtype (int64: per-channel only; bfloat16 and
float32 with or without per_token_scale); the bias is int32."""
OUTPUT_DTYPES = {"int8": I8, "float16": F16, "bfloat16": BF16, "float32": F32, "int32": I32}


class GroupSizesAssumedWarning(UserWarning):
    """A timing-only run cannot read a Tensor group_list: its groups were taken as even."""


@dataclass(frozen=True)
class GroupedMatmulProblem:
    """One accepted call. ``grouped``: groups of one x's rows (group_type 0), else separate products;
    ``groups`` products; ``m`` (x's rows, or the largest product's), ``n``, ``k``; ``counts``: the
    rows of each group when known on the host (the List[int] form, or the separate products'),
    None when the kernel reads them from ``group_list`` (``group_list_type`` 0 or 1);
    ``single_weight``: one ``[E, K, N]`` weight tensor; ``b_trans``: the weights transposed; the
    epilogue's vectors as npu_quant_matmul's."""

    api: str
    grouped: bool
    groups: int
    m: int
    n: int
    k: int
    in_dtype: np.dtype
    out_dtype: np.dtype
    b_trans: bool
    single_weight: bool
    counts: tuple[int, ...] | None
    group_list_type: int
    vectors: tuple[tuple[str, np.dtype], ...]
    packed: bool
    empty: bool = False
    a_trans: bool = False
    scalars: frozenset[str] = frozenset()

    @property
    def products(self) -> int:
        return self.groups


def reject(argument: str, value: Any, rule: str) -> OpArgumentError:
    return OpArgumentError(f"{OP}: {argument} = {value}: {rule}")


def output_dtype(name: str | None, x_dtype: np.dtype, scale_dtype: np.dtype | None) -> np.dtype:
    """The result's dtype: ``output_dtype`` (a dtype name), or by default x's (int8 with an int64 scale)."""
    if name is None:
        return x_dtype if scale_dtype is None else QUANT_OUTPUTS.get(scale_dtype, x_dtype)
    if name not in OUTPUT_DTYPES:
        raise reject("output_dtype", name, f"must be None or one of {', '.join(OUTPUT_DTYPES)}")
    return OUTPUT_DTYPES[name]


def _list(argument: str, value: Any, length: int | None = None) -> list:
    if value is None:
        return []
    if not isinstance(value, (list, tuple)) or not value:
        raise reject(argument, value, "must be a non-empty list of tensors")
    if len(value) > MAX_TENSORS:
        raise reject(argument, f"a list of {len(value)}", f"may hold at most {MAX_TENSORS} tensors")
    if length is not None and len(value) != length:
        raise reject(argument, f"a list of {len(value)}", f"must hold {length} tensors, one per weight")
    return list(value)


def check_grouped_matmul(x: list, weight: list, bias: list | None, scale: list | None, offset: Any, antiquant_scale: Any,
                         per_token_scale: list | None, group_list: Any, split_item: int, group_type: int | None, group_list_type: int,
                         act_type: int, out_dtype: str | None, *, list_form: bool = False) -> GroupedMatmulProblem:
    """Check a call: ``x``, ``weight`` ... lists of tensors (objects with ``shape``, ``dtype``,
    ``ndim``, ``strides``); ``group_list`` a tensor, a list of ints (``list_form``: the ``.List``
    overload) or None."""
    x, weight = _list("x", x), _list("weight", weight)
    if not x or not weight:
        raise reject("x" if not x else "weight", [], "neither x nor weight may be empty")
    for argument, value in (("offset", offset), ("antiquant_scale", antiquant_scale)):
        if value is not None:
            raise reject(argument, "a list", "only None is modelled by npusim (offsets, pseudo-quantisation of the weights)")
    if act_type != 0:
        raise reject("act_type", act_type, "activations fused into the epilogue are not modelled by npusim; pass 0 and apply it after")
    if split_item not in (0, 1, 2, 3):
        raise reject("split_item", split_item, "must be one of 0, 1, 2, 3")
    if list_form:
        if group_type not in (None, 0):
            raise reject("group_type", group_type, "must be None with a List[int] group_list (m-axis groups)")
        group_type = 0 if group_list is not None else -1
    elif group_type is None:
        raise reject("group_type", None, "must be given with the Tensor form (-1: separate products, 0: groups of x's rows, 2: of k)")
    if group_type == 2:
        raise reject("group_type", 2, "groups along k are not modelled by npusim; use -1 or 0")
    if group_type not in (-1, 0):
        raise reject("group_type", group_type, "must be -1, 0 or 2")
    x_dtype, w_dtype = np.dtype(x[0].dtype), np.dtype(weight[0].dtype)
    for argument, tensors in (("x", x), ("weight", weight)):
        for i, tensor in enumerate(tensors):
            if np.dtype(tensor.dtype) != np.dtype(tensors[0].dtype):
                raise reject(f"{argument}[{i}].dtype", np.dtype(tensor.dtype).name, f"must equal {argument}[0]'s {np.dtype(tensors[0].dtype).name}")
            if tensor.shape[-1] >= INNER_LIMIT:
                raise reject(f"{argument}[{i}].shape", list(tensor.shape), f"its last dim must be below {INNER_LIMIT} (InnerLimit)")
    if x_dtype != w_dtype:
        raise reject("weight[0].dtype", w_dtype.name, f"must equal x's {x_dtype.name} (pseudo-quantised int8 weights are not modelled)")
    scales = _list("scale", scale)
    s_dtype = np.dtype(scales[0].dtype) if scales else None
    result = output_dtype(out_dtype, x_dtype, s_dtype)
    tokens = _list("per_token_scale", per_token_scale)
    biases = _list("bias", bias)
    vectors: list[tuple[str, np.dtype]] = []
    packed = False
    if x_dtype == I8:
        if s_dtype is None:
            raise reject("scale", None, "int8 inputs need a scale (table 2: perchannel / pertoken quantisation)")
        if s_dtype not in QUANT_OUTPUTS or result != QUANT_OUTPUTS[s_dtype]:
            raise reject("scale[0].dtype", s_dtype.name, f"with output_dtype {result.name} is not a row of table 2 (int64 -> int8, "
                         "bfloat16 -> bfloat16, float32 -> float16)")
        if tokens and s_dtype == I64:
            raise reject("per_token_scale", "a list", "is not taken with an int64 scale (table 2: pertoken rows have a bfloat16 or float32 scale)")
        if biases:
            vectors.append(("bias", I32))
        vectors.append(("scale", s_dtype))
        if tokens:
            vectors.append(("token", F32))
    elif x_dtype in NON_QUANT:
        if scales or tokens:
            raise reject("scale" if scales else "per_token_scale", "a list", f"is for int8 inputs, not {x_dtype.name}")
        if result != x_dtype:
            raise reject("output_dtype", result.name, f"must be None or {x_dtype.name} for {x_dtype.name} inputs (table 2)")
        if biases:
            vectors.append(("post_bias", np.dtype(biases[0].dtype)))
    else:
        raise reject("x[0].dtype", x_dtype.name, "must be float16, bfloat16, float32 or int8 (int4 is not modelled)")
    for i, b in enumerate(biases):
        allowed: tuple[np.dtype, ...] = (I32,) if x_dtype == I8 else NON_QUANT[x_dtype]
        if np.dtype(b.dtype) not in allowed:
            raise reject(f"bias[{i}].dtype", np.dtype(b.dtype).name, f"must be {' or '.join(d.name for d in allowed)} for {x_dtype.name} inputs (table 2)")
    single_weight = len(weight) == 1 and weight[0].ndim == 3
    b_trans = layout(weight[0]) == "col"
    if group_type == 0:
        return _grouped(x, weight, biases, scales, tokens, group_list, split_item, group_list_type, list_form, single_weight, b_trans,
                        x_dtype, result, tuple(vectors), packed)
    return _separate(x, weight, biases, scales, tokens, group_list, split_item, b_trans, x_dtype, result, tuple(vectors))


def _weights(weight: list, single: bool) -> tuple[int, int, int]:
    """(groups, k, n) of the weights, checked alike."""
    if single:
        w = weight[0]
        return w.shape[0], w.shape[1], w.shape[2]
    for i, w in enumerate(weight):
        if w.ndim != 2:
            raise reject(f"weight[{i}].shape", list(w.shape), "must be 2-D ([k, n]) in a list of weights")
        if tuple(w.shape) != tuple(weight[0].shape):
            raise reject(f"weight[{i}].shape", list(w.shape), f"must equal weight[0]'s {list(weight[0].shape)} (groups of x's rows share k and n)")
    return len(weight), weight[0].shape[0], weight[0].shape[1]


def _per_group(argument: str, tensors: list, groups: int, length: int, single: bool) -> None:
    """A per-group vector argument: one ``[groups, length]`` tensor with one weight tensor, else one ``[length]`` per weight."""
    if not tensors:
        return
    if single:
        if len(tensors) != 1 or tuple(tensors[0].shape) not in ((groups, length), (groups, 1, length)):
            raise reject(f"{argument}", [list(t.shape) for t in tensors], f"must be one tensor of [{groups}, {length}] (one row per group)")
    elif len(tensors) != groups or any(tuple(t.shape) != (length,) for t in tensors):
        raise reject(f"{argument}", [list(t.shape) for t in tensors], f"must be {groups} tensors of [{length}], one per weight")


def _grouped(x, weight, biases, scales, tokens, group_list, split_item, group_list_type, list_form, single, b_trans, x_dtype, result, vectors,
             packed) -> GroupedMatmulProblem:
    if split_item not in (2, 3):
        raise reject("split_item", split_item, "must be 2 or 3 for groups of one x's rows with one y (split_item 0 / 1 with a group_list "
                     "makes one y per group, which npusim does not model)")
    if len(x) != 1 or x[0].ndim != 2:
        raise reject("x", [list(t.shape) for t in x], "must be one 2-D tensor [m, k] for groups of its rows (a list of x is not modelled)")
    if layout(x[0]) != "row":
        raise reject("x[0]", "a transposed tensor", "x may not be transposed (场景限制)")
    groups, k, n = _weights(weight, single)
    m = x[0].shape[0]
    if x[0].shape[1] != k:
        raise reject("weight", [list(w.shape) for w in weight], f"k ({k}) must equal x's last dim ({x[0].shape[1]})")
    if group_list is None:
        raise reject("group_list", None, "must be given for groups of x's rows (group_type 0)")
    _per_group("scale", scales, groups, n, single)
    _per_group("bias", biases, groups, n, single)
    if tokens and (len(tokens) != 1 or tuple(tokens[0].shape) != (m,)):
        raise reject("per_token_scale", [list(t.shape) for t in tokens], f"must be one tensor of [{m}] (one per row of x)")
    limit = MAX_GROUPS["single" if single else "list"]
    counts = None
    if list_form:
        counts = group_sizes(list(group_list), 0, m, limit)
        if len(counts) != groups:
            raise reject("group_list", list(group_list), f"must hold one value per weight ({groups})")
    else:
        if group_list_type == 2:
            raise reject("group_list_type", 2, "([group index, size] pairs) is not modelled by npusim; pass counts (1) or running sums (0)")
        if group_list_type not in (0, 1):
            raise reject("group_list_type", group_list_type, "must be 0 (running sums), 1 (counts) or 2")
        if np.dtype(group_list.dtype) != I64 or tuple(group_list.shape) != (groups,):
            raise reject("group_list", f"{list(group_list.shape)} {np.dtype(group_list.dtype).name}", f"must be a 1-D int64 tensor of "
                         f"{groups} values, one per group (weight's first dim)")
        if groups > limit:
            raise reject("group_list", f"{groups} groups", f"may hold at most {limit} groups")
    empty = 0 in (m, n)
    return GroupedMatmulProblem(OP, True, groups, m, n, k, x_dtype, result, b_trans, single, counts, group_list_type, vectors, packed, empty)


def _separate(x, weight, biases, scales, tokens, group_list, split_item, b_trans, x_dtype, result, vectors) -> GroupedMatmulProblem:
    if split_item not in (0, 1):
        raise reject("split_item", split_item, "must be 0 or 1 for separate products (group_type -1): one y per x")
    if group_list is not None:
        raise reject("group_list", "given", "must be None for separate products (group_type -1)")
    if len(x) != len(weight):
        raise reject("weight", f"a list of {len(weight)}", f"must hold one tensor per x ({len(x)})")
    for i, (xi, wi) in enumerate(zip(x, weight)):
        if xi.ndim != 2 or wi.ndim != 2:
            raise reject(f"x[{i}].shape", [list(xi.shape), list(wi.shape)], "x and weight must be 2-D for separate products (npusim)")
        if xi.shape[1] != wi.shape[0]:
            raise reject(f"weight[{i}].shape", list(wi.shape), f"its k ({wi.shape[0]}) must equal x[{i}]'s last dim ({xi.shape[1]})")
        if layout(xi) != "row":
            raise reject(f"x[{i}]", "a transposed tensor", "x may not be transposed (场景限制)")
        if (layout(wi) == "col") != b_trans:
            raise reject(f"weight[{i}]", "its layout", "every weight is transposed, or none is (场景限制)")
    ks = {xi.shape[1] for xi in x}
    if len(ks) > 1:
        raise reject("x", [list(xi.shape) for xi in x], "products of different k are not modelled in one kernel by npusim")
    ns = [wi.shape[1] for wi in weight]
    for argument, tensors, lengths in (("scale", scales, ns), ("bias", biases, ns), ("per_token_scale", tokens, [xi.shape[0] for xi in x])):
        if tensors and (len(tensors) != len(x) or any(tuple(t.shape) != (length,) for t, length in zip(tensors, lengths))):
            raise reject(argument, [list(t.shape) for t in tensors], f"must be {len(x)} tensors of {lengths} values, one per product")
    counts = tuple(xi.shape[0] for xi in x)
    m, n, k = max(counts), max(ns), ks.pop()
    return GroupedMatmulProblem(OP, False, len(x), m, n, k, x_dtype, result, b_trans, False, counts, 0, vectors, False, 0 in (m, n))


def group_sizes(values: Any, group_list_type: int, m: int, limit: int) -> tuple[int, ...]:
    """The rows of each group from ``group_list``'s values (type 0: running sums ending at most at
    ``m``; type 1: counts summing to at most ``m``), checked as the op page says (aclnnGroupedMatmulV4
    and later: "the sum is at most x's first dimension"; the rows after the groups are not computed
    and their output rows not written, as an MoE dispatch's expand_x holds more rows than tokens)."""
    values = [int(v) for v in values]
    if len(values) > limit:
        raise reject("group_list", f"{len(values)} groups", f"may hold at most {limit} groups")
    if group_list_type == 0:
        for i, (before, after) in enumerate(zip([0, *values], values)):
            if after < before:
                raise reject("group_list", values, f"group_list[{i}] - group_list[{i - 1}] = {after - before}: running sums must not decrease "
                             "(group_list_type 0), nor start below 0")
        if values and values[-1] > m:
            raise reject("group_list", values, f"its last value ({values[-1]}) must be at most x's rows ({m}) (group_list_type 0)")
        return tuple(after - before for before, after in zip([0, *values], values))
    if any(v < 0 for v in values):
        raise reject("group_list", values, "counts must not be negative (group_list_type 1)")
    if sum(values) > m:
        raise reject("group_list", values, f"counts must sum to at most x's rows ({m}), not {sum(values)} (group_list_type 1)")
    return tuple(values)


def even_sizes(m: int, groups: int) -> tuple[int, ...]:
    """The group sizes a timing-only run takes for a group_list it cannot read: ``m`` rows split evenly."""
    warnings.warn(f"{OP}: a timing-only run cannot read group_list's values: its {m} rows are taken as split evenly over {groups} groups "
                  "(run with data for the real split)", GroupSizesAssumedWarning, stacklevel=2)
    base, extra = divmod(m, groups)
    return tuple(base + (g < extra) for g in range(groups))


def result_shapes(x_shapes: list[tuple[int, ...]], weight_shapes: list[tuple[int, ...]], split_item: int) -> list[tuple[int, ...]]:
    """The shapes of the results (split_item 2 / 3: one of every x's rows by the weights' n; 0 / 1:
    one per x); shapes the check refuses get a shape all the same."""
    n = weight_shapes[0][-1]
    if split_item in (2, 3):
        return [(sum(shape[0] for shape in x_shapes), n)]
    return [(*shape[:-1], weight_shapes[min(i, len(weight_shapes) - 1)][-1]) for i, shape in enumerate(x_shapes)]
