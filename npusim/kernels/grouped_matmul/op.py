"""``npu_grouped_matmul`` as a registered op: one cube kernel (GroupedMatmul) running every
product's output blocks, spread over the AIC cores one after the other across the products. With a
Tensor group_list the kernel reads the group sizes when it starts
(:class:`~npusim.isa.program.KernelAtStart`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from npusim.config.registry import OPS
from npusim.isa.program import KernelAtStart
from npusim.kernels.cube.kernel import Gemm, gemm_kernel
from npusim.kernels.cube.op import CubeOp, CubePlan, layout, matrix, vector
from npusim.kernels.cube.pipeline import GemmShape
from npusim.kernels.grouped_matmul.checks import MAX_GROUPS, OP, GroupedMatmulProblem, check_grouped_matmul, even_sizes, group_sizes
from npusim.kernels.op import ValueCheck

LISTS = ("x", "weight", "bias", "scale", "per_token_scale", "y")
"""The arguments that are lists of tensors, each element named ``x[0]``, ``x[1]`` ... among the op's tensors."""
VECTOR_ARGUMENTS = {"bias": "bias", "scale": "scale", "token": "per_token_scale", "post_bias": "bias"}


def arguments(lists: Mapping[str, list | None], **others: Any) -> dict[str, Any]:
    """The op's arguments: ``lists`` (the list arguments, None where not given) as they are and
    element by element, and ``others``."""
    args: dict[str, Any] = {**others}
    for name in LISTS:
        value = lists.get(name)
        args[name] = value
        for i, tensor in enumerate(value or ()):
            args[f"{name}[{i}]"] = tensor
    return args


def _elements(tensors: Mapping[str, Any], name: str) -> list:
    out, i = [], 0
    while f"{name}[{i}]" in tensors:
        out.append(tensors[f"{name}[{i}]"])
        i += 1
    return out


@OPS.register("grouped_matmul")
class GroupedMatmul(CubeOp):
    """torch_npu's npu_grouped_matmul (aclnnGroupedMatmulV4 -> GroupedMatmul)."""

    name = "grouped_matmul"
    kernel_name = "GroupedMatmul"
    tensors = ("x[0]", "weight[0]", "group_list", "y[0]")
    optional = frozenset({"group_list"})
    output = "y[0]"

    @classmethod
    def tensor_names(cls, args: Mapping[str, Any]) -> tuple[str, ...]:
        names = [f"{name}[{i}]" for name in LISTS[:-1] for i in range(len(args.get(name) or ()))]
        if args.get("group_list") is not None and not isinstance(args["group_list"], (list, tuple)):
            names.append("group_list")
        return (*names, *(f"y[{i}]" for i in range(len(args["y"]))))

    @classmethod
    def reads_as_is(cls, problem: Any, name: str, tensor: Any) -> bool:
        if name.startswith(("x[", "weight[")):
            return layout(tensor) is not None
        return tensor.is_contiguous()

    @classmethod
    def check(cls, product: str, args: Mapping[str, Any]) -> GroupedMatmulProblem:
        group_list = args.get("group_list")
        return check_grouped_matmul(args["x"], args["weight"], args.get("bias"), args.get("scale"), args.get("offset"),
                                    args.get("antiquant_scale"), args.get("per_token_scale"), group_list, args.get("split_item", 0),
                                    args.get("group_type"), args.get("group_list_type", 0), args.get("act_type", 0), args.get("output_dtype"),
                                    list_form=isinstance(group_list, (list, tuple)))

    @classmethod
    def lower(cls, problem: GroupedMatmulProblem, plan: CubePlan, tensors: Mapping[str, Any], check: ValueCheck, op_args: dict) -> list:
        lists = {name: _elements(tensors, name) for name in LISTS}
        out = lists["y"][0]
        shape = GemmShape(problem.in_dtype, problem.out_dtype, False, problem.b_trans, problem.vectors, OP)

        def kernel(counts: tuple[int, ...]):
            gemms = _gemms(problem, lists, counts)
            return gemm_kernel(cls.kernel_name, out.device, shape, plan.tiling, plan.schedule, gemms, system=out.system,
                               op_args={**op_args, "group sizes": list(counts)})

        if problem.counts is not None:
            return [kernel(problem.counts)]
        group_list = tensors["group_list"]
        limit = MAX_GROUPS["single" if problem.single_weight else "list"]

        def at_start():
            if group_list.allocation.data is not None:  # with data, or control memory kept in a timing-only run too
                return kernel(group_sizes(group_list.host_view(), problem.group_list_type, problem.m, limit))
            return kernel(even_sizes(problem.m, problem.groups))

        return [KernelAtStart(cls.kernel_name, out.device, at_start, system=out.system)]


def _gemms(problem: GroupedMatmulProblem, lists: Mapping[str, list], counts: tuple[int, ...]) -> list[Gemm]:
    """The products: each group's rows of x (grouped), or each x (separate), with its weight."""
    gemms, row = [], 0
    for g, count in enumerate(counts):
        if problem.grouped:
            x, y = lists["x"][0], lists["y"][0]
            a, c = matrix(x).shifted((row, 0)), matrix(y).shifted((row, 0))
            b = matrix(lists["weight"][0], (g,), transposed=problem.b_trans) if problem.single_weight else \
                matrix(lists["weight"][g], transposed=problem.b_trans)
        else:
            a, c = matrix(lists["x"][g]), matrix(lists["y"][g])
            b = matrix(lists["weight"][g], transposed=problem.b_trans)
        n = problem.n if problem.grouped else lists["weight"][g].shape[-1]
        vectors = []
        for name, _ in problem.vectors:
            source = lists[VECTOR_ARGUMENTS[name]]
            if name == "token":
                vectors.append(vector(source[0], row) if problem.grouped else vector(source[g]))
            elif problem.single_weight:
                vectors.append(vector(source[0], g * problem.n))
            else:
                vectors.append(vector(source[g]))
        if count and n:
            gemms.append(Gemm(a, b, c, count, n, problem.k, tuple(vectors)))
        row += count if problem.grouped else 0
    return gemms


__all__ = ["GroupedMatmul", "arguments"]
