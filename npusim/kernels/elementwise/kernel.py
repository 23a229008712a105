"""The split of a contiguous element range over the vector cores and its lowering.

Each used core takes an equal share of the elements (a multiple of one 32-byte block of both
dtypes), streamed through UB in chunks: MTE2 loads a chunk of the source, VECTOR converts it
(through float32 when converting float64 to a 16-bit float, as torch does), MTE3 stores it, the
next load waiting for the store. A fill has no source: VECTOR fills one chunk once (``dup``) and
MTE3 stores it over the core's share. Assumed (torch_npu's Cast and Fill kernels are not modelled
from their sources): the single buffering and the chunk size (half the UB per buffer).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from npusim import isa
from npusim.isa.target import VectorTarget

FLOAT32 = np.dtype(np.float32)


@dataclass(frozen=True)
class ElementwiseProblem:
    """``elements`` contiguous elements written as ``dst_dtype`` from ``src_dtype`` (None: a fill
    with ``value``)."""

    shape: tuple[int, ...]
    src_dtype: np.dtype | None
    dst_dtype: np.dtype
    value: Any = None

    @property
    def elements(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))

    @property
    def empty(self) -> bool:
        return self.elements == 0

    @property
    def staged(self) -> bool:
        """float64 -> 16-bit float goes through float32 (torch rounds the same way)."""
        return self.src_dtype is not None and self.src_dtype.itemsize == 8 and self.src_dtype.kind == "f" \
            and self.dst_dtype.itemsize == 2 and self.dst_dtype.kind in "fV"


@dataclass(frozen=True)
class ElementwisePlan:
    """``(core, first element, count)`` per used core; ``chunk`` elements per UB pass."""

    shares: tuple[tuple[int, int, int], ...]
    chunk: int

    @property
    def used_cores(self) -> int:
        return len(self.shares)


def plan_elementwise(problem: ElementwiseProblem, target: VectorTarget) -> ElementwisePlan:
    itemsizes = [problem.dst_dtype.itemsize] + ([problem.src_dtype.itemsize] if problem.src_dtype is not None else [])
    align = max(target.block_bytes // size for size in itemsizes)
    per_core = -(-problem.elements // target.cores)
    per_core = -(-per_core // align) * align
    bytes_per_element = sum(itemsizes) + (FLOAT32.itemsize if problem.staged else 0)
    chunk = max(align, (target.ub_bytes // 2 // bytes_per_element) // align * align)
    shares = tuple((core, first, min(per_core, problem.elements - first))
                   for core, first in enumerate(range(0, problem.elements, per_core)))
    return ElementwisePlan(shares, min(chunk, per_core))


def build_elementwise(name: str, problem: ElementwiseProblem, plan: ElementwisePlan, tensors: dict[str, Any], op_args: dict) -> isa.Kernel:
    """The kernel on contiguous ``tensors``: ``out`` and, for a cast, ``input``."""
    out = tensors["out"]
    kernel = isa.Kernel(name, die=out.device, system=out.system, op_args=op_args)
    for core, first, count in plan.shares:
        p = kernel.vector_core(core)
        result = p.alloc(min(plan.chunk, count), problem.dst_dtype)
        if problem.src_dtype is None:
            p.dup(result, problem.value, name="fill")
            p.set_flag("VECTOR", "MTE3", 0)
            p.wait_flag("VECTOR", "MTE3", 0)
            for start in range(first, first + count, plan.chunk):
                n = min(plan.chunk, first + count - start)
                p.copy(isa.gm(out, start), result[:n], name="store")
            continue
        source = p.alloc(min(plan.chunk, count), problem.src_dtype)
        stage = p.alloc(min(plan.chunk, count), FLOAT32) if problem.staged else None
        # torch converts floats to integers toward zero, and narrows floats to nearest even
        to_integer = np.dtype(problem.dst_dtype).kind in "iu"
        rounding = "trunc" if to_integer else "rint"
        for i, start in enumerate(range(first, first + count, plan.chunk)):
            n = min(plan.chunk, first + count - start)
            with p.tile(i):
                if i:
                    p.wait_flag("MTE3", "MTE2", 0)
                p.copy(source[:n], isa.gm(tensors["input"], start), name="load")
                p.set_flag("MTE2", "VECTOR", 0)
                p.wait_flag("MTE2", "VECTOR", 0)
                if stage is not None:
                    p.cast(stage[:n], source[:n], rounding="rint", name=f"cast {problem.src_dtype}->float32")
                    p.cast(result[:n], stage[:n], rounding=rounding, name=f"cast float32->{problem.dst_dtype}")
                else:
                    p.cast(result[:n], source[:n], rounding=rounding, name=f"cast {problem.src_dtype}->{problem.dst_dtype}")
                p.set_flag("VECTOR", "MTE3", 0)
                p.wait_flag("VECTOR", "MTE3", 0)
                p.copy(isa.gm(out, start), result[:n], name="store")
                if start + plan.chunk < first + count:
                    p.set_flag("MTE3", "MTE2", 0)
    return kernel
