"""``npu_dequant_swiglu_quant`` as a registered op, written on the device when it starts: its
``group_index`` holds counts computed just before (an MoE dispatch's ``expert_token_nums``), which
the kernel reads from GM (:class:`~npusim.kernels.op.DeviceOp`).

The kernel as ops-nn's DequantSwigluQuant runs it with a group index: the groups one after the
other, each group's rows split over all vector cores (``ceil(rows / cores)`` each); a core loads the
group's scales, then takes its rows a UB-full at a time: load the rows, cast them to float32
(int32 x: times the group's weight scales and each row's activation scale, broadcast across the
row), the two halves apart, ``act / (1 + exp(-act)) * gate`` (times the group's smooth scales),
each row's largest magnitude, ``scale = max * (1 / 127)``, the row divided by its scale, rounded to
int32 (half to even), to half, to int8; the rows and their scales stored. Rows past the groups'
sum are not written (the op page: they hold whatever was there).
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from npusim.config.registry import OPS
from npusim.isa import Kernel, gm
from npusim.isa.target import VectorTarget
from npusim.kernels.flags import Flags
from npusim.kernels.op import DeviceOp, Run
from npusim.kernels.swiglu_quant.checks import F16, F32, I8, I32, SwigluQuantProblem, check_dequant_swiglu_quant, group_rows

DYNAMIC_QUANT_FACTOR = np.float32(1.0 / 127.0)
"""The kernel multiplies each row's largest magnitude by float32(1 / 127) for its scale (ops-nn
``dequant_swiglu_quant.h``: DYNAMIC_QUANT_FACTOR)."""


class GroupIndexAssumedWarning(UserWarning):
    """A timing-only run cannot read a group_index that is not control memory: its rows were taken
    as all of x's, split evenly over the groups."""


@dataclass(frozen=True)
class SwigluQuantPlan:
    """``cores`` vector cores; ``rows``: the rows a core takes per UB-full (the tiling's
    UbFactorDimx)."""

    cores: int
    rows: int


def plan_swiglu_quant(problem: SwigluQuantProblem, target: VectorTarget) -> SwigluQuantPlan:
    """The rows per UB-full: what fits beside the group's scales (the x rows in their dtype, two
    float32 rows of 2H, the int8 result)."""
    h = problem.h
    params = (8 * h if problem.weight_scale else 0) + (4 * h + 2 * h if problem.quant_scale is not None else 0)
    per_row = 2 * h * problem.dtype.itemsize + 2 * (8 * h) + h + 16
    free = target.ub_bytes - params - 4 * target.ub_alignment * 8
    if free < per_row:
        from npusim.errors import OpArgumentError

        raise OpArgumentError(f"torch_npu.npu_dequant_swiglu_quant: x.shape[-1] = {2 * h}: one row and the scales need "
                              f"{per_row + params} bytes of UB, more than the {target.ub_bytes} a core has; the kernel's "
                              "column-split path is not modelled")
    return SwigluQuantPlan(target.cores, max(1, min(free // per_row, 255)))


@OPS.register("dequant_swiglu_quant")
class DequantSwigluQuant(DeviceOp):
    """torch_npu's npu_dequant_swiglu_quant (aclnnDequantSwigluQuant -> DequantSwigluQuant)."""

    name = "dequant_swiglu_quant"
    kernel_name = "DequantSwigluQuant"
    series = frozenset({"atlas_a2", "atlas_a3"})
    tensors = ("x", "weight_scale", "activation_scale", "bias", "quant_scale", "quant_offset", "group_index")
    optional = frozenset({"weight_scale", "activation_scale", "bias", "quant_scale", "quant_offset", "group_index"})
    output = ""

    @classmethod
    def check(cls, product: str, args: Mapping[str, Any]) -> SwigluQuantProblem:
        return check_dequant_swiglu_quant(dict(args))

    @classmethod
    def plan_for(cls, problem: SwigluQuantProblem, system) -> SwigluQuantPlan:
        return plan_swiglu_quant(problem, VectorTarget.of(system))

    @classmethod
    def outputs(cls, problem: SwigluQuantProblem) -> dict:
        return problem.output_shapes()

    @classmethod
    def prepare(cls, problem, plan, tensors, system) -> dict:
        return {"tensors": dict(tensors), "system": system}

    @classmethod
    def describe(cls, problem: SwigluQuantProblem, plan: SwigluQuantPlan) -> dict:
        return {"tokens": problem.tokens, "h": problem.h, "x": problem.dtype.name, "groups": problem.groups or 0,
                "rows per pass": plan.rows}

    @classmethod
    def steps(cls, problem: SwigluQuantProblem, plan: SwigluQuantPlan, tensors: Mapping[str, Any], context: dict, op: int):
        t = context["tensors"]
        index = t.get("group_index")
        if index is None:
            counts = None
        elif index.allocation.data is not None:
            counts = index.host_view().copy()
        else:
            warnings.warn("npu_dequant_swiglu_quant: group_index is not known in a timing-only run (it is not an op's count "
                          "output): all of x's rows are taken, split evenly over the groups", GroupIndexAssumedWarning, stacklevel=2)
            groups = problem.groups or 1
            counts = np.full(groups, problem.tokens // groups, np.int64)
            counts[: problem.tokens % groups] += 1
        yield Run((_kernel(problem, plan, t, context["system"], op, group_rows(problem, counts)),))


def _kernel(problem: SwigluQuantProblem, plan: SwigluQuantPlan, t: Mapping[str, Any], system, op: int,
            groups: list[tuple[int, int, int]]) -> Kernel:
    kernel = Kernel(DequantSwigluQuant.kernel_name, die=t["x"].device, system=system, op=op)
    h, dtype, chunk = problem.h, problem.dtype, plan.rows
    a_off, g_off = (0, h) if problem.activate_left else (h, 0)
    shares: dict[int, list[tuple[int, int, int]]] = {}
    for g, first, count in groups:
        factor = -(-count // plan.cores)
        for core in range(-(-count // factor)):
            start = first + core * factor
            shares.setdefault(core, []).append((g, start, min(factor, first + count - start)))
    for core in sorted(shares):
        p = kernel.vector_core(core)
        xin = p.alloc(chunk * 2 * h, dtype)
        xf = p.alloc(chunk * 2 * h, F32)
        wide = p.alloc(chunk * 2 * h, F32)
        out = p.alloc(chunk * h, I8)
        mx, sc = p.alloc(chunk, F32), p.alloc(chunk, F32)
        ws = p.alloc(2 * h, F32) if problem.weight_scale else None
        asc = p.alloc(chunk, F32) if problem.activation_scale else None
        qs = p.alloc(h, F32) if problem.quant_scale is not None else None
        qs_in = p.alloc(h, problem.quant_scale) if problem.quant_scale is not None and problem.quant_scale != F32 else None
        flags = Flags(p)
        for g, start, rows in shares[core]:
            _load_group_scales(p, problem, t, g, ws, qs, qs_in, flags)
            for row0 in range(start, start + rows, chunk):
                r = min(chunk, start + rows - row0)
                _rows(p, problem, t, flags, row0, r, xin, xf, wide, out, mx, sc, ws, asc, qs, a_off, g_off)
            if ws is not None or qs is not None:
                flags.set("VECTOR", "MTE2", 1)  # the group's scales are read no more
        flags.drain()
    return kernel


def _load_group_scales(p, problem: SwigluQuantProblem, t, g: int, ws, qs, qs_in, flags: Flags) -> None:
    """The group's weight scales (int32 x) and smooth scales into UB, in float32, once the
    previous group's are read no more."""
    h, qs_dtype = problem.h, problem.quant_scale
    if ws is None and qs_dtype is None:
        return
    flags.wait("VECTOR", "MTE2", 1)  # the previous group's scales are no longer read
    if ws is not None:
        p.copy(ws, gm(t["weight_scale"], g * 2 * h), 2 * h * 4, name="load weight_scale")
    if qs_dtype is not None:
        p.copy(qs_in if qs_in is not None else qs, gm(t["quant_scale"], g * h), h * qs_dtype.itemsize, name="load quant_scale")
    p.set_flag("MTE2", "VECTOR", 1)
    p.wait_flag("MTE2", "VECTOR", 1)
    if qs_in is not None:
        p.cast(qs, qs_in, name="quant_scale f32")


def _rows(p, problem: SwigluQuantProblem, t, flags: Flags, row0: int, r: int, xin, xf, wide, out, mx, sc, ws, asc, qs,
          a_off: int, g_off: int) -> None:
    """``r`` rows from ``row0``: load, dequantise, SwiGLU, quantise, store."""
    h, n = problem.h, r * problem.h
    flags.wait("VECTOR", "MTE2", 0)
    p.copy(xin[0 : 2 * n], gm(t["x"], row0 * 2 * h), 2 * n * problem.dtype.itemsize, name="load x rows")
    if asc is not None:
        p.copy(asc[0:r], gm(t["activation_scale"], row0), r * 4, name="load activation_scale")
    p.set_flag("MTE2", "VECTOR", 0)
    p.wait_flag("MTE2", "VECTOR", 0)
    x32 = xf[0 : 2 * n]
    p.cast(x32, xin[0 : 2 * n], name="x f32")
    if ws is not None:
        p.broadcast(wide[0 : 2 * n], ws, (r, 2 * h), (0, 1), (2 * h, 1), name="weight_scale rows")
        p.mul(x32, x32, wide[0 : 2 * n], name="dequant: weight_scale")
    if asc is not None:
        p.broadcast(wide[0 : 2 * n], asc[0:r], (r, 2 * h), (1, 0), (2 * h, 1), name="activation_scale rows")
        p.mul(x32, x32, wide[0 : 2 * n], name="dequant: activation_scale")
    flags.set("VECTOR", "MTE2", 0)
    act, gate, tmp = wide[0:n], wide[n : 2 * n], xf[0:n]
    p.broadcast(act, xf[a_off : a_off + (r - 1) * 2 * h + h], (r, h), (2 * h, 1), (h, 1), name="swiglu: act half")
    p.broadcast(gate, xf[g_off : g_off + (r - 1) * 2 * h + h], (r, h), (2 * h, 1), (h, 1), name="swiglu: gate half")
    p.muls(tmp, act, -1.0, name="swiglu: -act")
    p.exp(tmp, tmp, name="swiglu: exp")
    p.adds(tmp, tmp, 1.0, name="swiglu: 1 + exp")
    p.div(act, act, tmp, name="swiglu: act / (1 + exp)")
    p.mul(act, gate, act, name="swiglu: times gate")
    if qs is not None:
        p.broadcast(gate, qs, (r, h), (0, 1), (h, 1), name="quant_scale rows")
        p.mul(act, gate, act, name="quant: smooth scales")
    p.abs(gate, act, name="quant: abs")
    p.reduce("reduce_max", mx[0:r], gate, ((r, h), (h, 1)), (1,), name="quant: row max")
    flags.wait("MTE3", "VECTOR", 0)  # the previous rows' results are stored
    p.muls(sc[0:r], mx[0:r], DYNAMIC_QUANT_FACTOR, name="quant: scale = max / 127")
    p.broadcast(gate, sc[0:r], (r, h), (1, 0), (h, 1), name="quant: scale rows")
    p.div(act, act, gate, name="quant: divide by scale")
    as_int = gate.reinterpret(I32)[0:n]
    p.cast(as_int, act, "rint", name="quant: to int32")
    half = xf.reinterpret(F16)[0:n]
    p.cast(half, as_int, "round", name="quant: to half")
    p.cast(out[0:n], half, "trunc", name="quant: to int8")
    p.set_flag("VECTOR", "MTE3", 0)
    p.wait_flag("VECTOR", "MTE3", 0)
    p.copy(gm(t["y"], row0 * h), out[0:n], n, name="store y rows")
    p.copy(gm(t["scale"], row0), sc[0:r], r * 4, name="store scales")
    flags.set("MTE3", "VECTOR", 0)


__all__ = ["DequantSwigluQuant", "GroupIndexAssumedWarning", "plan_swiglu_quant"]
