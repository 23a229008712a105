"""The rules of ``torch_npu.npu_moe_gating_top_k`` (op-plugin docs/zh/custom_APIs/torch_npu/
torch_npu-npu_moe_gating_top_k.md, read at 517f2e7d), each refused naming the argument, the value and
the rule, and the op's arithmetic as its page defines it (its equivalent computation), in float32:

- norm: ``norm_type`` 1 sigmoid ``1 / (1 + exp(-x))``; 0 softmax over the experts (npusim computes
  ``exp(x) / sum(exp(x))``, the sum by pairwise halving, the vector unit's order);
- ``normOut`` is the norm's result; the bias is added to it for the choice only;
- ``group_count`` groups of experts scored by their largest (``group_select_mode`` 0) or their two
  largest summed (1); the ``k_group`` best groups kept (ties to the lower group), then the ``k`` best
  experts of those (ties to the lower expert);
- ``y`` = the normOut values of the chosen experts, divided by their sum plus ``eps`` when
  ``norm_type`` is 1, times ``routed_scaling_factor``, in x's dtype.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import ml_dtypes
import numpy as np

from npusim.errors import OpArgumentError

API = "npu_moe_gating_top_k"
X_DTYPES = (np.dtype(np.float16), np.dtype(ml_dtypes.bfloat16), np.dtype(np.float32))
MAX_EXPERTS = 2048


def reject(argument: str, value: Any, rule: str) -> OpArgumentError:
    return OpArgumentError(f"torch_npu.{API}: {argument} = {value}: {rule}")


@dataclass(frozen=True)
class GatingProblem:
    tokens: int
    experts: int
    k: int
    dtype: np.dtype
    bias: bool
    k_group: int
    group_count: int
    group_select_mode: int
    norm_type: int
    out_flag: bool
    routed_scaling_factor: float
    eps: float
    empty: bool = False

    def output_shapes(self) -> dict[str, tuple[tuple[int, ...], np.dtype]]:
        return {"y": ((self.tokens, self.k), self.dtype), "expert_idx": ((self.tokens, self.k), np.dtype(np.int32)),
                "out": ((self.tokens, self.experts), np.dtype(np.float32))}


def _int(name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise reject(name, repr(value), "must be an int")
    return int(value)


def check_gating(args: dict) -> GatingProblem:
    x = args["x"]
    shape = tuple(int(d) for d in x.shape)
    if len(shape) != 2:
        raise reject("x.shape", shape, "x must be 2-D (tokens, experts)")
    tokens, experts = shape
    dtype = np.dtype(x.dtype)
    if dtype not in X_DTYPES:
        raise reject("x.dtype", dtype.name, "must be float16, bfloat16 or float32")
    if experts > MAX_EXPERTS:
        raise reject("x.shape[-1]", experts, f"the experts may be at most {MAX_EXPERTS}")
    k, k_group, groups = _int("k", args["k"]), _int("k_group", args.get("k_group", 1)), _int("group_count", args.get("group_count", 1))
    mode, renorm, norm = (_int(n, args.get(n, 0)) for n in ("group_select_mode", "renorm", "norm_type"))
    if groups <= 0 or experts % groups or experts // groups <= 2:
        raise reject("group_count", groups, f"must divide the {experts} experts into groups of more than 2")
    if -(-(experts // groups) // 32) * 32 * groups > MAX_EXPERTS:
        raise reject("group_count", groups, f"the group size aligned to 32, times group_count, may be at most {MAX_EXPERTS}")
    if not 1 <= k_group <= groups:
        raise reject("k_group", k_group, f"must be in [1, group_count] = [1, {groups}]")
    if not 1 <= k <= experts // groups * k_group:
        raise reject("k", k, f"must be in [1, x.shape[-1] / group_count * k_group] = [1, {experts // groups * k_group}]")
    if mode not in (0, 1):
        raise reject("group_select_mode", mode, "0 (a group's largest score) or 1 (its two largest summed)")
    if renorm != 0:
        raise reject("renorm", renorm, "only 0 (norm, then top-k) is supported")
    if norm not in (0, 1):
        raise reject("norm_type", norm, "0 (softmax) or 1 (sigmoid)")
    bias = args.get("bias")
    if bias is not None:
        if tuple(bias.shape) != (experts,):
            raise reject("bias.shape", tuple(bias.shape), f"must be (x.shape[-1],) = ({experts},)")
        if np.dtype(bias.dtype) != dtype:
            raise reject("bias.dtype", np.dtype(bias.dtype).name, f"must be x's dtype ({dtype.name})")
    for name in ("input_ids", "tid2eid"):
        if args.get(name) is not None:
            raise reject(name, "a tensor", "the hash routing mode is not modelled by npusim: pass None")
    out_flag = args.get("out_flag", False)
    if not isinstance(out_flag, bool):
        raise reject("out_flag", repr(out_flag), "must be a bool")
    return GatingProblem(tokens, experts, k, dtype, bias is not None, k_group, groups, mode, norm, out_flag,
                         float(args.get("routed_scaling_factor", 1.0)), float(args.get("eps", 1e-20)), tokens == 0)


def halving_sum(values: np.ndarray) -> np.ndarray:
    """Row sums by pairwise halving (the vector unit's reduction order, docs/pypto.md)."""
    from npusim.isa.vector import halving_reduce

    return halving_reduce(values, np.add)


def gate(problem: GatingProblem, x: np.ndarray, bias: np.ndarray | None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(y, expert_idx, normOut)`` of ``x`` (see the module docstring)."""
    f32 = np.float32
    x = x.astype(f32)
    with np.errstate(over="ignore"):
        if problem.norm_type == 1:
            norm = (f32(1) / (f32(1) + np.exp(-x))).astype(f32)
        else:
            e = np.exp(x).astype(f32)
            norm = (e / halving_sum(e)[:, None]).astype(f32)
    score = norm + bias.astype(f32) if bias is not None else norm.copy()
    grouped = score.reshape(problem.tokens, problem.group_count, -1)
    if problem.group_select_mode == 0:
        group_score = grouped.max(axis=-1)
    else:
        top2 = -np.sort(-grouped, axis=-1)[..., :2]
        group_score = (top2[..., 0] + top2[..., 1]).astype(f32)
    keep = np.argsort(-group_score, axis=-1, kind="stable")[:, : problem.k_group]
    masked = np.full_like(grouped, -np.inf)
    rows = np.arange(problem.tokens)[:, None]
    masked[rows, keep] = grouped[rows, keep]
    idx = np.argsort(-masked.reshape(problem.tokens, -1), axis=-1, kind="stable")[:, : problem.k]
    y = np.take_along_axis(norm, idx, axis=1)
    if problem.norm_type == 1:
        y = (y / (halving_sum(y)[:, None] + f32(problem.eps))).astype(f32)
    y = (y * f32(problem.routed_scaling_factor)).astype(f32)
    return y.astype(problem.dtype), idx.astype(np.int32), norm
