"""The split of a contiguous element range over the vector cores and its lowering.

Each used core takes an equal share of the elements (a multiple of one 32-byte block of both
dtypes), streamed through UB in chunks: MTE2 loads a chunk of the source, VECTOR converts it
(through float32 when converting float64 to a 16-bit float, as torch does), MTE3 stores it, the
next load waiting for the store. A fill has no source: VECTOR fills one chunk once (``dup``) and
MTE3 stores it over the core's share. A binary op (``add``, ``sub``) loads a chunk of each source
and computes in the dtype's arithmetic (bf16 through float32, which the A2/A3 vector unit computes
bf16 in: converted, computed, rounded back once, the correctly rounded result torch's CPU gives).
Assumed (torch_npu's Cast, Fill, Add and Sub kernels are not modelled from their sources): the
single buffering and the chunk size (half the UB per buffer).
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
    with ``value``); ``binary`` names the vector instruction (``add``, ``sub``) of an op of two
    sources of ``src_dtype``, ``input`` and ``other``."""

    shape: tuple[int, ...]
    src_dtype: np.dtype | None
    dst_dtype: np.dtype
    value: Any = None
    binary: str | None = None

    @property
    def elements(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))

    @property
    def empty(self) -> bool:
        return self.elements == 0

    @property
    def staged(self) -> bool:
        """float64 -> 16-bit float goes through float32 (torch rounds the same way); a binary op on
        bf16 computes in float32."""
        if self.binary is not None:
            return self.src_dtype is not None and self.src_dtype.kind == "V"
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
    sources = 0 if problem.src_dtype is None else 2 if problem.binary is not None else 1
    itemsizes = [problem.dst_dtype.itemsize] + ([problem.src_dtype.itemsize] * sources if problem.src_dtype is not None else [])
    align = max(target.block_bytes // size for size in itemsizes)
    per_core = -(-problem.elements // target.cores)
    per_core = -(-per_core // align) * align
    bytes_per_element = sum(itemsizes) + (FLOAT32.itemsize * (sources if problem.binary else 1) if problem.staged else 0)
    chunk = max(align, (target.ub_bytes // 2 // bytes_per_element) // align * align)
    shares = tuple((core, first, min(per_core, problem.elements - first))
                   for core, first in enumerate(range(0, problem.elements, per_core)))
    return ElementwisePlan(shares, min(chunk, per_core))


def build_elementwise(name: str, problem: ElementwiseProblem, plan: ElementwisePlan, tensors: dict[str, Any], op_args: dict) -> isa.Kernel:
    """The kernel on contiguous ``tensors``: ``out`` and, for a cast, ``input`` (a binary op: and ``other``)."""
    out = tensors["out"]
    kernel = isa.Kernel(name, die=out.device, system=out.system, op_args=op_args)
    for core, first, count in plan.shares:
        p = kernel.vector_core(core)
        if problem.binary is not None:
            _binary_core(p, problem, plan, tensors, first, count)
            continue
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


def _binary_core(p: isa.CoreProgram, problem: ElementwiseProblem, plan: ElementwisePlan, tensors: dict[str, Any], first: int,
                 count: int) -> None:
    """One core's share of a binary op: per chunk, load both sources, compute, store."""
    size = min(plan.chunk, count)
    sources = [p.alloc(size, problem.src_dtype) for _ in range(2)]
    wide = [p.alloc(size, FLOAT32) for _ in range(2)] if problem.staged else None
    result = p.alloc(size, problem.dst_dtype)
    kind = problem.binary
    assert kind is not None
    for i, start in enumerate(range(first, first + count, plan.chunk)):
        n = min(plan.chunk, first + count - start)
        with p.tile(i):
            if i:
                p.wait_flag("MTE3", "MTE2", 0)
            for buffer, name in zip(sources, ("input", "other")):
                p.copy(buffer[:n], isa.gm(tensors[name], start), name=f"load {name}")
            p.set_flag("MTE2", "VECTOR", 0)
            p.wait_flag("MTE2", "VECTOR", 0)
            if wide is not None:
                for to, buffer in zip(wide, sources):
                    p.cast(to[:n], buffer[:n], name=f"cast {problem.src_dtype}->float32")
                p.vector(kind, wide[0][:n], wide[0][:n], wide[1][:n], name=kind)
                p.cast(result[:n], wide[0][:n], rounding="rint", name=f"cast float32->{problem.dst_dtype}")
            else:
                p.vector(kind, result[:n], sources[0][:n], sources[1][:n], name=kind)
            p.set_flag("VECTOR", "MTE3", 0)
            p.wait_flag("VECTOR", "MTE3", 0)
            p.copy(isa.gm(tensors["out"], start), result[:n], name="store")
            if start + plan.chunk < first + count:
                p.set_flag("MTE3", "MTE2", 0)
