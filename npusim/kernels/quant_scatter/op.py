"""``npu_quant_scatter_`` as a registered op: the aclnn checks, the kernel's tiling and its
lowering, and the host's reading of the indices (checks against the destination, overlaps)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

import numpy as np
from pydantic import Field

from npusim.config.products import PRODUCTS
from npusim.config.registry import OPS
from npusim.config.schema import CoreCount, Spec
from npusim.errors import OpArgumentError, UsageError
from npusim.isa.target import VectorTarget
from npusim.kernels.op import Op, OpOptions, ValueCheck

if TYPE_CHECKING:
    from npusim.kernels.quant_scatter.checks import QuantScatterProblem
    from npusim.kernels.quant_scatter.tiling import QuantScatterPlan

# The checks, tiling and lowering are imported when the op is first called: a config that only
# sets ``ops.quant_scatter`` is validated without them.

KERNEL_NAME = "QuantUpdateScatter"
"""The kernel's op type, as the vendor's profiler names it."""


def _tiling_a2_a3(problem: QuantScatterProblem, target: VectorTarget, *, vector_cores: int, double_buffer: bool = False) -> QuantScatterPlan:
    """The A2/A3 build's tiling (:func:`.tiling.plan_quant_scatter`)."""
    from npusim.kernels.quant_scatter.tiling import plan_quant_scatter

    return plan_quant_scatter(problem, target, vector_cores=vector_cores, double_buffer=double_buffer)


def _tiling_310p(problem: QuantScatterProblem, target: VectorTarget, *, vector_cores: int, double_buffer: bool = False) -> QuantScatterPlan:
    """The 310P build's tiling (:func:`.tiling_inference.plan_quant_scatter_310p`)."""
    from npusim.kernels.quant_scatter.tiling_inference import plan_quant_scatter_310p

    return plan_quant_scatter_310p(problem, target, vector_cores=vector_cores, double_buffer=double_buffer)


class QuantScatterSettings(Spec):
    """How ``npu_quant_scatter_`` (the QuantUpdateScatter kernel) is launched."""

    vector_cores: CoreCount = Field(description="vector cores the op's tiling splits its work over (at most the die's)")


@OPS.register("quant_scatter")
class QuantScatter(Op):
    """torch_npu's quantise-and-scatter (aclnnInplaceQuantScatter -> QuantUpdateScatter)."""

    name = "quant_scatter"
    kernel_name = KERNEL_NAME
    tensors = ("input", "indices", "updates", "quant_scales", "quant_zero_points")
    optional = frozenset({"quant_zero_points"})
    output = "input"
    Settings = QuantScatterSettings

    @classmethod
    def check_settings(cls, settings: QuantScatterSettings, spec: Any) -> None:
        kind = PRODUCTS.get(spec.product).vector_cores
        cores = spec.die.cores[kind].count
        if settings.vector_cores > cores:
            raise ValueError(
                f"ops.quant_scatter.vector_cores is {settings.vector_cores}, but a die has {cores} vector cores "
                f"(die.cores.{kind}.count); use at most {cores}"
            )

    @classmethod
    def check(cls, product: str, args: Mapping[str, Any]) -> QuantScatterProblem:
        from npusim.kernels.quant_scatter.checks import OP_NAME, check_output_mode, check_quant_scatter

        for name in ("axis", "quant_axis"):
            value = args[name]
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
                raise OpArgumentError(f"{OP_NAME}: {name} = {value!r}: must be an int (a dimension of updates, negative counts from the end)")
        check_output_mode(args.get("dst_type"), args.get("round_mode", "rint"))
        return check_quant_scatter(args["input"], args["indices"], args["updates"], args["quant_scales"],
                                   args["quant_zero_points"], int(args["axis"]), int(args["quant_axis"]), args["reduce"],
                                   product=product)

    tilings: dict[str, Callable[..., QuantScatterPlan]] = {"atlas_a2": _tiling_a2_a3, "atlas_a3": _tiling_a2_a3, "atlas_inference": _tiling_310p}
    """The kernel's host tiling per product series (TIK quant_update_scatter.py: the A2/A3 build, and
    the 310P build with its own output chain and updates buffer, :mod:`.tiling_inference`)."""

    @classmethod
    def plan(cls, problem: QuantScatterProblem, target: VectorTarget, settings: QuantScatterSettings | None,
             options: OpOptions) -> QuantScatterPlan:
        from npusim.kernels.quant_scatter.checks import OP_NAME

        assert settings is not None  # the launch path requires the settings of an op that declares them
        product = PRODUCTS.get(target.product)
        tiling = cls.tilings.get(product.series)
        if tiling is None:
            raise UsageError(f"{OP_NAME}: the {product.label} kernel is not modelled; modelled: "
                             f"{', '.join(sorted(cls.tilings))} (register its tiling in QuantScatter.tilings)")
        return tiling(problem, target, vector_cores=settings.vector_cores, double_buffer=options.double_buffer)

    @classmethod
    def value_inputs(cls, problem: QuantScatterProblem) -> tuple[str, ...]:
        return ("indices",)

    @classmethod
    def check_values(cls, problem: QuantScatterProblem, values: Mapping[str, Any], options: OpOptions) -> ValueCheck:
        from npusim.kernels.scatter_index import value_check

        return value_check(problem, values["indices"], options, stacklevel=7)

    @classmethod
    def host_tensors(cls, problem: QuantScatterProblem, plan: QuantScatterPlan) -> dict[str, Any]:
        from npusim.kernels.quant_scatter.kernel import tiling_arguments

        return {"tiling": tiling_arguments(problem, plan)}

    @classmethod
    def lower(cls, problem: QuantScatterProblem, plan: QuantScatterPlan, tensors: Mapping[str, Any], check: ValueCheck,
              op_args: dict) -> list:
        from npusim.kernels.quant_scatter.kernel import QuantScatterTensors, build_quant_scatter

        operands = QuantScatterTensors(input=tensors["input"], indices=tensors["indices"], updates=tensors["updates"],
                                       scales=tensors["quant_scales"], zero_points=tensors["quant_zero_points"],
                                       tiling=tensors["tiling"])
        skipped = check.lowering.get("skipped_rows", frozenset())
        return [build_quant_scatter(problem, plan, operands, skipped_rows=skipped, op_args=op_args)]

    @classmethod
    def describe(cls, problem: QuantScatterProblem, plan: QuantScatterPlan) -> dict:
        return {"mode": int(plan.mode), "cores": plan.used_cores, "double_buffer": plan.double_buffer,
                "input": list(problem.input_shape), "updates": list(problem.updates_shape),
                "indices": list(problem.indices_shape), "axis": problem.axis}
