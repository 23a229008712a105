"""``npu_moe_gating_top_k`` as a registered op, written on the device when it starts (its input is a
router's output computed just before: :class:`~npusim.kernels.op.DeviceOp`).

Each vector core takes a share of the tokens; per token it loads the row of router scores, computes
the norm with vector instructions (sigmoid: ``1 / (1 + exp(-x))``; softmax: ``exp(x)`` over its
halving sum), stores ``normOut``, adds the bias, and selects the groups and the experts: sorting
work the vector unit does (per-group maxima or top-2 sums, the order of the groups, the masked top-k)
that is timed as those vector passes, its result (:func:`.checks.gate`, from the same values) written
by the scalar unit into the ``y`` and ``expert_idx`` rows the core stores. With data off the rows hold
zeros; the time is the same.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from npusim.config.registry import OPS
from npusim.isa import Kernel, gm
from npusim.isa.target import VectorTarget
from npusim.kernels.comm.aiv import split_to_cores
from npusim.kernels.moe_gating.checks import GatingProblem, check_gating, gate
from npusim.kernels.op import DeviceOp, Run

F32, I32 = np.dtype(np.float32), np.dtype(np.int32)


@OPS.register("moe_gating_top_k")
class MoeGatingTopK(DeviceOp):
    """torch_npu's npu_moe_gating_top_k (aclnnMoeGatingTopK -> MoeGatingTopK)."""

    name = "moe_gating_top_k"
    kernel_name = "MoeGatingTopK"
    series = frozenset({"atlas_a2", "atlas_a3"})
    tensors = ("x", "bias", "input_ids", "tid2eid")
    optional = frozenset({"bias", "input_ids", "tid2eid"})
    output = ""

    @classmethod
    def check(cls, product: str, args: Mapping[str, Any]) -> GatingProblem:
        return check_gating(dict(args))

    @classmethod
    def plan_for(cls, problem: GatingProblem, system) -> int:
        return VectorTarget.of(system).cores

    @classmethod
    def outputs(cls, problem: GatingProblem) -> dict:
        return problem.output_shapes()

    @classmethod
    def prepare(cls, problem, plan, tensors, system) -> dict:
        return {"tensors": dict(tensors), "system": system}

    @classmethod
    def describe(cls, problem: GatingProblem, plan) -> dict:
        return {"tokens": problem.tokens, "experts": problem.experts, "k": problem.k, "groups": problem.group_count,
                "k_group": problem.k_group, "norm_type": problem.norm_type}

    @classmethod
    def steps(cls, problem: GatingProblem, plan: int, tensors: Mapping[str, Any], context: dict, op: int):
        system = context["system"]
        t = context["tensors"]
        if system.with_data:
            bias = t["bias"].host_view() if t.get("bias") is not None else None
            y, idx, _ = gate(problem, t["x"].host_view(), bias)
        else:
            y, idx = np.zeros((problem.tokens, problem.k), problem.dtype), np.zeros((problem.tokens, problem.k), np.int32)
        yield Run((_kernel(problem, plan, t, system, op, y, idx),))


def _kernel(problem: GatingProblem, cores: int, t: Mapping[str, Any], system, op: int, y: np.ndarray, idx: np.ndarray) -> Kernel:
    kernel = Kernel(MoeGatingTopK.kernel_name, die=t["x"].device, system=system, op=op)
    e, k, dtype = problem.experts, problem.k, problem.dtype
    for core in range(cores):
        tokens = split_to_cores(problem.tokens, cores, core)
        if not tokens:
            continue
        p = kernel.vector_core(core)
        row, norm, tmp, ones = p.alloc(e, dtype), p.alloc(e, F32), p.alloc(e, F32), p.alloc(e, F32)
        y_row, idx_row = p.alloc(k, dtype), p.alloc(k, I32)
        p.dup(ones, 1.0, name="ones")
        if problem.bias:
            bias, bias_in = p.alloc(e, F32), p.alloc(e, dtype)
            p.copy(bias_in, gm(t["bias"], 0), e * dtype.itemsize, name="load bias")
            p.set_flag("MTE2", "VECTOR", 1)
            p.wait_flag("MTE2", "VECTOR", 1)
            p.cast(bias, bias_in, name="bias f32")
        for i, token in enumerate(tokens):
            if i:
                p.wait_flag("VECTOR", "MTE2", 0)
            p.copy(row, gm(t["x"], token * e), e * dtype.itemsize, name="load scores")
            p.set_flag("MTE2", "VECTOR", 0)
            p.wait_flag("MTE2", "VECTOR", 0)
            if i:
                p.wait_flag("MTE3", "VECTOR", 0)
            p.cast(norm, row, name="scores f32")
            p.set_flag("VECTOR", "MTE2", 0)
            if problem.norm_type == 1:
                p.neg(tmp, norm, name="sigmoid: -x")
                p.exp(tmp, tmp, name="sigmoid: exp")
                p.adds(tmp, tmp, 1.0, name="sigmoid: 1 + exp")
                p.div(norm, ones, tmp, name="sigmoid: 1 / (1 + exp)")
            else:
                p.exp(norm, norm, name="softmax: exp")
                p.reduce("reduce_sum", tmp[0:1], norm, ((1, e), (e, 1)), (1,), name="softmax: sum")
                p.set_flag("VECTOR", "SCALAR", 0)
                p.wait_flag("VECTOR", "SCALAR", 0)
                total = p.read_scalar(tmp, 0, name="softmax: read sum")
                p.dup(tmp, total, name="softmax: broadcast sum")
                p.div(norm, norm, tmp, name="softmax: exp / sum")
            if problem.out_flag:
                p.set_flag("VECTOR", "MTE3", 1)
                p.wait_flag("VECTOR", "MTE3", 1)
                p.copy(gm(t["out"], token * e), norm, e * 4, name="store normOut")
            group = e // problem.group_count
            p.vector_time([("add", e, F32) if problem.bias else ("copy", e, F32),  # score = norm + bias
                           ("max", e, F32), ("max", e, F32) if problem.group_select_mode else ("copy", problem.group_count, F32),
                           ("max", problem.group_count * problem.group_count, F32),  # the order of the groups
                           ("copy", e, F32),  # the kept groups' experts, the rest masked
                           *[("max", problem.k_group * group, F32)] * k,  # the k largest, one pass each
                           ("add", k, F32), ("div", k, F32), ("mul", k, F32)], "choose experts")
            p.set_flag("VECTOR", "SCALAR", 1)
            p.wait_flag("VECTOR", "SCALAR", 1)
            for j in range(k):
                p.write_scalar(idx_row, int(idx[token, j]), j)
                p.write_scalar(y_row, y[token, j].item(), j)
            p.copy(gm(t["expert_idx"], token * k), idx_row, k * 4, name="store expert_idx")
            p.copy(gm(t["y"], token * k), y_row, k * dtype.itemsize, name="store y")
            p.set_flag("MTE3", "VECTOR", 0)
        p.wait_flag("VECTOR", "MTE2", 0)
        p.wait_flag("MTE3", "VECTOR", 0)
    return kernel

