"""``scatter_update_`` as a registered op: the aclnn checks, the split over the vector cores (all
of the die's: the op takes no settings), the host's reading of the indices and the lowering."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from npusim.config.registry import OPS
from npusim.isa.target import VectorTarget
from npusim.kernels.op import Op, OpOptions, ValueCheck
from npusim.kernels.scatter_index import value_check
from npusim.kernels.scatter_update.checks import ScatterUpdateProblem, check_scatter_update
from npusim.kernels.scatter_update.kernel import KERNEL_NAME, ScatterUpdatePlan, build_scatter_update, plan_scatter_update


@OPS.register("scatter_update")
class ScatterUpdate(Op):
    """torch_npu's scatter_update (aclnnInplaceScatterUpdate -> Scatter)."""

    name = "scatter_update"
    series = frozenset({"atlas_a2", "atlas_a3"})  # the kernel modelled is the A2/A3 one (checks.py)
    kernel_name = KERNEL_NAME
    tensors = ("input", "indices", "updates")
    output = "input"

    @classmethod
    def check(cls, product: str, args: Mapping[str, Any]) -> ScatterUpdateProblem:
        return check_scatter_update(args["input"], args["indices"], args["updates"], args["axis"], product=product)

    @classmethod
    def plan(cls, problem: ScatterUpdateProblem, target: VectorTarget, settings, options: OpOptions) -> ScatterUpdatePlan:
        return plan_scatter_update(problem, target)

    @classmethod
    def value_inputs(cls, problem: ScatterUpdateProblem) -> tuple[str, ...]:
        return ("indices",)

    @classmethod
    def check_values(cls, problem: ScatterUpdateProblem, values: Mapping[str, Any], options: OpOptions) -> ValueCheck:
        indices = np.reshape(values["indices"], problem.indices_shape)  # a 0-D index is one batch
        check = value_check(problem, indices, options, stacklevel=7)
        return ValueCheck(read={"indices": values["indices"]}, lowering=check.lowering, warning=check.warning)

    @classmethod
    def lower(cls, problem: ScatterUpdateProblem, plan: ScatterUpdatePlan, tensors: Mapping[str, Any], check: ValueCheck,
              op_args: dict) -> list:
        return [build_scatter_update(problem, plan, dict(tensors), skipped_rows=check.lowering.get("skipped_rows", frozenset()),
                                     op_args=op_args)]

    @classmethod
    def describe(cls, problem: ScatterUpdateProblem, plan: ScatterUpdatePlan) -> dict:
        return {"cores": plan.used_cores, "input": list(problem.input_shape), "updates": list(problem.updates_shape),
                "indices": list(problem.indices_shape), "axis": problem.axis}
