"""``cast``, ``fill``, ``add`` and ``sub`` as registered ops (no settings: they use every vector core of the die)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import ml_dtypes
import numpy as np

from npusim.config.registry import OPS
from npusim.errors import OpArgumentError
from npusim.isa.target import VectorTarget
from npusim.kernels.elementwise.kernel import ElementwisePlan, ElementwiseProblem, build_elementwise, plan_elementwise
from npusim.kernels.op import Op, OpOptions, ValueCheck


class _Elementwise(Op):
    output = "out"

    @classmethod
    def plan(cls, problem: ElementwiseProblem, target: VectorTarget, settings, options: OpOptions) -> ElementwisePlan:
        return plan_elementwise(problem, target)

    @classmethod
    def lower(cls, problem: ElementwiseProblem, plan: ElementwisePlan, tensors: Mapping[str, Any], check: ValueCheck,
              op_args: dict) -> list:
        return [build_elementwise(cls.kernel_name, problem, plan, dict(tensors), op_args)]

    @classmethod
    def describe(cls, problem: ElementwiseProblem, plan: ElementwisePlan) -> dict:
        return {"shape": list(problem.shape), "dtype": problem.dst_dtype.name, "cores": plan.used_cores}


@OPS.register("cast")
class Cast(_Elementwise):
    """A dtype conversion of ``input`` into ``out`` (same shape): torch's ``tensor.to(dtype)``."""

    name = "cast"
    kernel_name = "Cast"
    tensors = ("input", "out")

    @classmethod
    def check(cls, product: str, args: Mapping[str, Any]) -> ElementwiseProblem:
        source, out = args["input"], args["out"]
        if tuple(source.shape) != tuple(out.shape):
            raise OpArgumentError(f"cast: out.shape = {tuple(out.shape)}: must equal input.shape {tuple(source.shape)}")
        return ElementwiseProblem(tuple(source.shape), np.dtype(source.dtype), np.dtype(out.dtype))


@OPS.register("fill")
class Fill(_Elementwise):
    """``out`` filled with one value: torch's ``fill_``, ``zero_`` (and so ``torch.zeros``)."""

    name = "fill"
    kernel_name = "Fill"
    tensors = ("out",)

    @classmethod
    def check(cls, product: str, args: Mapping[str, Any]) -> ElementwiseProblem:
        value = args["value"]
        if not isinstance(value, (bool, int, float, np.number)):
            raise OpArgumentError(f"fill: value = {value!r}: must be a number")
        return ElementwiseProblem(tuple(args["out"].shape), None, np.dtype(args["out"].dtype), value)


BINARY_DTYPES = tuple(np.dtype(d) for d in (np.float32, np.float16, ml_dtypes.bfloat16, np.int32))
"""The dtypes torch_npu's Add / Sub compute on the A2/A3 vector unit that npusim models (bf16 in float32)."""


class _Binary(_Elementwise):
    """``out = input <op> other``, all three of one shape and dtype (the caller broadcasts)."""

    tensors = ("input", "other", "out")

    @classmethod
    def check(cls, product: str, args: Mapping[str, Any]) -> ElementwiseProblem:
        first, other, out = args["input"], args["other"], args["out"]
        for name, tensor in (("other", other), ("out", out)):
            if tuple(tensor.shape) != tuple(first.shape):
                raise OpArgumentError(f"{cls.name}: {name}.shape = {tuple(tensor.shape)}: must equal input.shape {tuple(first.shape)}")
            if np.dtype(tensor.dtype) != np.dtype(first.dtype):
                raise OpArgumentError(f"{cls.name}: {name}.dtype = {np.dtype(tensor.dtype).name}: must equal input.dtype "
                                      f"{np.dtype(first.dtype).name}")
        if np.dtype(first.dtype) not in BINARY_DTYPES:
            raise OpArgumentError(f"{cls.name}: input.dtype = {np.dtype(first.dtype).name}: the vector unit computes "
                                  f"{', '.join(d.name for d in BINARY_DTYPES)}")
        return ElementwiseProblem(tuple(first.shape), np.dtype(first.dtype), np.dtype(out.dtype), binary=cls.name)


@OPS.register("add")
class Add(_Binary):
    """``input + other``: torch's ``add`` (``aclnnAdd``) with alpha 1."""

    name = "add"
    kernel_name = "Add"


@OPS.register("sub")
class Sub(_Binary):
    """``input - other``: torch's ``sub`` (``aclnnSub``) with alpha 1."""

    name = "sub"
    kernel_name = "Sub"
