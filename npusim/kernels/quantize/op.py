"""``npu_quantize`` as a registered op (no settings: it uses every vector core of the die)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from npusim.config.registry import OPS
from npusim.isa.target import VectorTarget
from npusim.kernels.op import Op, OpOptions, ValueCheck
from npusim.kernels.quantize.checks import QuantizeProblem, check_quantize
from npusim.kernels.quantize.kernel import KERNEL_NAME, QuantizePlan, build_quantize, plan_quantize


@OPS.register("quantize")
class Quantize(Op):
    """torch_npu's npu_quantize: div_mode=True (aclnnQuantize -> Quantize), div_mode=False
    (aclnnAscendQuantV3 -> AscendQuantV2); the same kernel, dividing or multiplying by the scales."""

    name = "quantize"
    series = frozenset({"atlas_a2", "atlas_a3"})  # the aclnnQuantize build modelled is DAV_2201's (checks.py)
    kernel_name = KERNEL_NAME
    tensors = ("input", "scales", "zero_points", "out")
    optional = frozenset({"zero_points"})
    output = "out"

    @classmethod
    def check(cls, product: str, args: Mapping[str, Any]) -> QuantizeProblem:
        return check_quantize(args["input"], args["scales"], args["zero_points"], args["dtype"], args["axis"], args["div_mode"],
                              product=product)

    @classmethod
    def plan(cls, problem: QuantizeProblem, target: VectorTarget, settings, options: OpOptions) -> QuantizePlan:
        return plan_quantize(problem, target)

    @classmethod
    def lower(cls, problem: QuantizeProblem, plan: QuantizePlan, tensors: Mapping[str, Any], check: ValueCheck, op_args: dict) -> list:
        return [build_quantize(problem, plan, dict(tensors), op_args)]

    @classmethod
    def describe(cls, problem: QuantizeProblem, plan: QuantizePlan) -> dict:
        return {"input": list(problem.shape), "view": list(problem.view), "dtype": problem.out_dtype.name, "cores": plan.used_cores,
                "div_mode": not problem.multiply}
