"""The quantize kernel on the vector cores.

``x`` is a ``[outer, channels, inner]`` view (:mod:`.checks`). Each core loads the scales (and
zero points) once and converts them to float32. When ``inner`` is 1 (per channel along the last
dim) a core takes whole rows of ``channels`` elements and divides each row by the scales vector,
one ``div`` per row; otherwise a core takes (outer, channel) rows of ``inner`` elements, reads the
row's scale into a scalar register and broadcasts it (``dup``) before the ``div`` (per tensor is one
row). Per chunk: MTE2 loads x, VECTOR converts it to float32, divides by the scales (multiplies,
``div_mode=False``), adds the zero points, and converts to the output dtype with round-half-to-even
and saturation; MTE3 stores it, and the next
load waits for the store. Assumed (the A2 kernel is not public): this layout, the single buffering.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from npusim import isa
from npusim.isa.target import VectorTarget
from npusim.kernels.quantize.checks import F32, QuantizeProblem

KERNEL_NAME = "Quantize"
MULTIPLYING_KERNEL_NAME = "AscendQuantV2"
"""The kernel aclnnAscendQuantV3 (div_mode=False) launches."""


@dataclass(frozen=True)
class Piece:
    """``count`` elements of x from element ``first``: whole rows of ``channels`` (inner 1), or a
    part of one row of ``inner`` elements of channel ``channel``."""

    first: int
    count: int
    channel: int


@dataclass(frozen=True)
class QuantizePlan:
    cores: tuple[tuple[int, tuple[Piece, ...]], ...]
    chunk: int
    quant_elements: int

    @property
    def used_cores(self) -> int:
        return len(self.cores)


def plan_quantize(problem: QuantizeProblem, target: VectorTarget) -> QuantizePlan:
    outer, channels, inner = problem.view
    vector_rows = inner == 1 and channels > 1
    quant = -(-(channels if vector_rows else channels) // 8) * 8
    quant_bytes = quant * (problem.scales_dtype.itemsize + F32.itemsize) * (2 if problem.zero_points_dtype is not None else 1)
    per_element = problem.x_dtype.itemsize + 2 * F32.itemsize + problem.out_dtype.itemsize
    capacity = (target.ub_bytes - target.ub_aligned(quant_bytes) - 4 * target.ub_alignment) // per_element
    align = target.block_bytes
    if vector_rows:
        rows_per_chunk = max(1, capacity // channels)
        rows = outer
        per_core = -(-rows // target.cores)
        cores = []
        for core, start in enumerate(range(0, rows, per_core)):
            stop = min(start + per_core, rows)
            cores.append((core, tuple(Piece(r * channels, min(rows_per_chunk, stop - r) * channels, -1)
                                      for r in range(start, stop, rows_per_chunk))))
        return QuantizePlan(tuple(cores), rows_per_chunk * channels, quant)
    chunk = max(align, capacity // align * align)
    rows = outer * channels
    per_core = -(-rows // target.cores)
    cores = []
    for core, start in enumerate(range(0, rows, per_core)):
        pieces = []
        for row in range(start, min(start + per_core, rows)):
            for offset in range(0, inner, chunk):
                pieces.append(Piece(row * inner + offset, min(chunk, inner - offset), row % channels))
        cores.append((core, tuple(pieces)))
    return QuantizePlan(tuple(cores), min(chunk, inner), quant)


def build_quantize(problem: QuantizeProblem, plan: QuantizePlan, tensors: dict[str, Any], op_args: dict) -> isa.Kernel:
    """The kernel on contiguous ``tensors`` ``input``, ``scales``, ``zero_points`` (or None), ``out``."""
    out = tensors["out"]
    name = MULTIPLYING_KERNEL_NAME if problem.multiply else KERNEL_NAME
    kernel = isa.Kernel(name, die=out.device, system=out.system, op_args=op_args)
    for core, pieces in plan.cores:
        _lower_core(kernel.vector_core(core), problem, plan, tensors, pieces)
    return kernel


def _lower_core(p: isa.CoreProgram, problem: QuantizeProblem, plan: QuantizePlan, tensors: dict[str, Any], pieces) -> None:
    channels = problem.channels
    vector_rows = problem.inner == 1 and channels > 1
    factors = []
    for name, dtype in (("scales", problem.scales_dtype), ("zero_points", problem.zero_points_dtype)):
        if dtype is None:
            factors.append(None)
            continue
        loaded = p.alloc(plan.quant_elements, dtype)
        p.copy(loaded[:channels], isa.gm(tensors[name]), name=f"load {name.replace('_', ' ')}")
        as_f32 = loaded if dtype == F32 else p.alloc(plan.quant_elements, F32)
        factors.append((loaded, as_f32))
    p.set_flag("MTE2", "VECTOR", 1)
    p.wait_flag("MTE2", "VECTOR", 1)
    for pair in factors:
        if pair is not None and pair[0] is not pair[1]:
            p.cast(pair[1][:channels], pair[0][:channels], name=f"cast {pair[0].dtype}->float32")
    if not vector_rows:
        p.set_flag("VECTOR", "SCALAR", 0)
        p.wait_flag("VECTOR", "SCALAR", 0)
    x = p.alloc(plan.chunk, problem.x_dtype)
    work = p.alloc(plan.chunk, F32)
    broadcast = None if vector_rows else p.alloc(plan.chunk, F32)
    result = p.alloc(plan.chunk, problem.out_dtype)
    registers: dict[tuple[int, int], Any] = {}
    for i, piece in enumerate(pieces):
        n = piece.count
        with p.tile(i):
            if i:
                p.wait_flag("MTE3", "MTE2", 0)
            p.copy(x[:n], isa.gm(tensors["input"], piece.first), name="load x")
            p.set_flag("MTE2", "VECTOR", 0)
            p.wait_flag("MTE2", "VECTOR", 0)
            p.cast(work[:n], x[:n], name=f"cast {problem.x_dtype}->float32")
            for which, pair in enumerate(factors):
                if pair is None:
                    continue
                kind = ("mul" if problem.multiply else "div") if which == 0 else "add"
                if vector_rows:
                    for row in range(0, n, channels):
                        p.vector(kind, work[row:row + channels], work[row:row + channels], pair[1][:channels], name=kind)
                    continue
                key = (which, piece.channel)
                if key not in registers:
                    registers[key] = p.read_scalar(pair[1], piece.channel, name="read scale" if which == 0 else "read zero point")
                p.dup(broadcast[:n], registers[key], name="broadcast")
                p.vector(kind, work[:n], work[:n], broadcast[:n], name=kind)
            p.cast(result[:n], work[:n], rounding="rint", name=f"cast float32->{problem.out_dtype}")
            p.set_flag("VECTOR", "MTE3", 0)
            p.wait_flag("VECTOR", "MTE3", 0)
            p.copy(isa.gm(tensors["out"], piece.first), result[:n], name="store")
            if i + 1 < len(pieces):
                p.set_flag("MTE3", "MTE2", 0)
