"""``npu_quant_matmul`` as a registered op: one cube kernel (QuantBatchMatmulV3) whose FixPipe
dequantises each block on its way out (:mod:`npusim.kernels.quant_matmul.checks` gives the
numerics), with MatMulV3's default tiling for int8 or ``torch_npu.options(matmul_tiling=...)``."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from npusim.config.registry import OPS
from npusim.kernels.cube.kernel import gemm_kernel
from npusim.kernels.cube.op import CubeOp, CubePlan, product_gemms, vector
from npusim.kernels.cube.pipeline import GemmShape
from npusim.kernels.op import ValueCheck
from npusim.kernels.quant_matmul.checks import OP, QuantMatmulProblem, check_quant_matmul

VECTOR_ARGUMENTS = {"bias": "bias", "scale": "scale", "offset": "offset", "token": "pertoken_scale", "post_bias": "bias"}
"""The tensor argument each epilogue vector of the kernel is read from."""


@OPS.register("quant_matmul")
class QuantMatmul(CubeOp):
    """torch_npu's npu_quant_matmul (aclnnQuantMatmulV5 -> QuantBatchMatmulV3) for int8 inputs."""

    name = "quant_matmul"
    kernel_name = "QuantBatchMatmulV3"
    tensors = ("x1", "x2", "scale", "offset", "pertoken_scale", "bias", "out")
    optional = frozenset({"offset", "pertoken_scale", "bias"})
    output = "out"
    matrices = frozenset({"x1", "x2"})

    @classmethod
    def check(cls, product: str, args: Mapping[str, Any]) -> QuantMatmulProblem:
        return check_quant_matmul(args["x1"], args["x2"], args["scale"], args.get("offset"), args.get("pertoken_scale"), args.get("bias"),
                                  args.get("output_dtype"), args["out"], args.get("group_sizes"))

    @classmethod
    def lower(cls, problem: QuantMatmulProblem, plan: CubePlan, tensors: Mapping[str, Any], check: ValueCheck, op_args: dict) -> list:
        out = tensors["out"]
        vectors = tuple(vector(tensors[VECTOR_ARGUMENTS[name]]) for name, _ in problem.vectors)
        gemms = product_gemms(problem, tensors["x1"], tensors["x2"], out, vectors)
        shape = GemmShape(problem.in_dtype, problem.out_dtype, problem.a_trans, problem.b_trans, problem.vectors, OP, problem.scalars,
                          problem.packed)
        return [gemm_kernel(cls.kernel_name, out.device, shape, plan.tiling, plan.schedule, gemms, system=out.system, op_args=op_args)]
