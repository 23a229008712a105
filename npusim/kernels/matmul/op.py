"""torch's matrix products on the npu device as a registered op: one cube kernel (MatMulV3, or
BatchMatMulV3 for a batch that does not fold into rows) with MatMulV3's default tiling
(:mod:`npusim.kernels.cube.tiling`) or ``torch_npu.options(matmul_tiling=...)``."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from npusim.config.registry import OPS
from npusim.kernels.cube.kernel import gemm_kernel
from npusim.kernels.cube.op import CubeOp, CubePlan, product_gemms, vector
from npusim.kernels.cube.pipeline import GemmShape
from npusim.kernels.matmul.checks import MatmulProblem, check_matmul
from npusim.kernels.op import ValueCheck


@OPS.register("matmul")
class Matmul(CubeOp):
    """``out = self @ mat2 (+ bias)`` (aclnnMatmul, aclnnMm, aclnnBatchMatMul, aclnnAddmm with beta = alpha = 1)."""

    name = "matmul"
    kernel_name = "MatMulV3"
    tensors = ("self", "mat2", "bias", "out")
    optional = frozenset({"bias"})
    output = "out"
    matrices = frozenset({"self", "mat2"})

    @classmethod
    def check(cls, product: str, args: Mapping[str, Any]) -> MatmulProblem:
        return check_matmul(args.get("api", "torch.matmul"), args["self"], args["mat2"], args.get("bias"), args["out"])

    @classmethod
    def lower(cls, problem: MatmulProblem, plan: CubePlan, tensors: Mapping[str, Any], check: ValueCheck, op_args: dict) -> list:
        a, b, out, bias = tensors["self"], tensors["mat2"], tensors["out"], tensors.get("bias")
        gemms = product_gemms(problem, a, b, out, () if bias is None else (vector(bias),))
        shape = GemmShape(problem.in_dtype, problem.out_dtype, problem.a_trans, problem.b_trans, problem.vectors, "matmul")
        name = "BatchMatMulV3" if len(gemms) > 1 else cls.kernel_name
        return [gemm_kernel(name, out.device, shape, plan.tiling, plan.schedule, gemms, system=out.system, op_args=op_args)]
