"""The QuantUpdateScatter kernel as per-core ISA programs, lowered from its tiling.

:func:`build_quant_scatter` turns a :class:`~.tiling.QuantScatterPlan` into one vector-core program per
used core, as the TIK kernel runs:

- prologue: MTE2 loads the tiling arguments from GM, the scalar unit reads each one;
- per iteration (``tile`` = the core's iteration index): MTE2 loads all indices (first iteration),
  the updates chunk, the scales and zero points when the iteration needs them; the VECTOR chain
  converts to fp32, divides by the scales row by row (or column by column), adds the zero points and
  converts to int8 by the plan's output chain (A2/A3: fp32 -> int16 (round half to even) -> fp16 ->
  int8; 310P: through int32), with the plan's instructions and repeat counts; the SCALAR unit reads each destination's index from UB into a register; MTE3 writes
  each block of int8 (whole 32-byte blocks) at the GM address computed from those registers.

The numbers are computed by the simulated vector instructions on the bytes in UB, and land where
the index read at run time says. Single-buffered (the real kernel), an iteration's loads wait for
the previous iteration's writes; double-buffered (the what-if), iterations alternate between two
sets of UB buffers and synchronise only with the iteration two before, so the loads of one overlap
the vector work and writes of the previous one.

The GM tensors must be contiguous (the aclnn layer makes contiguous copies first, see
:mod:`npusim.kernels.view_copy`); they are duck-typed device tensors (``allocation``,
``offset_bytes``, ``dtype``, ``device``, ``system``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from npusim import formats, isa
from npusim.kernels.quant_scatter.checks import ASCEND_950_DST_TYPES, QuantScatterProblem
from npusim.kernels.quant_scatter.op import KERNEL_NAME
from npusim.kernels.quant_scatter.tiling import (
    TILING_ARG_COUNT,
    Iteration,
    QuantScatterPlan,
    VectorStep,
)

_OPERAND_EVENTS = {"updates": 0, "scales": 1, "zero_points": 2}
"""MTE2 -> VECTOR event ids per loaded operand (plus 3 for the second buffer set)."""

_ARGS_EVENT, _INDICES_EVENT = 0, 1
"""MTE2 -> SCALAR event ids: tiling arguments, indices."""


@dataclass(frozen=True)
class QuantScatterTensors:
    """The kernel's GM operands, all contiguous: ``input`` (int8, written in place), ``indices``,
    ``updates``, ``scales``, ``zero_points`` (or None) and ``tiling`` (int64[36], see
    :func:`tiling_arguments`)."""

    input: Any
    indices: Any
    updates: Any
    scales: Any
    zero_points: Any | None
    tiling: Any


def tiling_arguments(problem: QuantScatterProblem, plan: QuantScatterPlan) -> np.ndarray:
    """The int64 tiling arguments the kernel loads: npusim fills the first slots with what the plan
    knows (mode, cores, units per core, chunk, the merged shapes, index rank); the real kernel's
    order of its 36 arguments is not public, so the rest stay 0. Only their load and reads are timed."""
    known = [plan.mode, plan.used_cores, plan.each_core_units, plan.last_core_units, plan.chunk_elements,
             *problem.input_view, *problem.updates_view, problem.last_dim, problem.index_rank]
    arguments = np.zeros(TILING_ARG_COUNT, dtype=np.int64)
    arguments[: len(known)] = known
    return arguments


def build_quant_scatter(
    problem: QuantScatterProblem,
    plan: QuantScatterPlan,
    tensors: QuantScatterTensors,
    *,
    skipped_rows: frozenset[int] = frozenset(),
    op_args: dict | None = None,
) -> isa.Kernel:
    """The kernel of ``plan`` on the die of ``tensors.input``; launch it with ``kernel.launch()``.

    ``skipped_rows`` are bs rows (``b * H + h``) whose write the unchecked-index emulation drops
    (it would land outside input): their index is still read, their block not written.
    """
    kernel = isa.Kernel(KERNEL_NAME, die=tensors.input.device, system=tensors.input.system, op_args=op_args)
    for core in plan.cores:
        _CoreLowering(kernel.vector_core(core.core), problem, plan, tensors, skipped_rows).run(core.iterations)
    return kernel


class _CoreLowering:
    """Appends one core's instructions: its UB buffers, the prologue, then iteration after iteration."""

    def __init__(self, program: isa.CoreProgram, problem: QuantScatterProblem, plan: QuantScatterPlan,
                 tensors: QuantScatterTensors, skipped_rows: frozenset[int]) -> None:
        self.p = program
        self.problem = problem
        self.tensors = tensors
        self.skipped_rows = skipped_rows
        layout = plan.ub_layout
        self.copies = layout.copies
        self.indices = program.alloc(layout.index_elements, problem.indices_dtype)
        self.arguments = program.alloc(TILING_ARG_COUNT, np.int64)
        buffers = layout.buffers()
        staged = [{name: program.alloc(n, dtype) for name, n, dtype, is_staged in buffers if is_staged}
                  for _ in range(layout.copies)]
        work = {name: program.alloc(n, dtype) for name, n, dtype, is_staged in buffers if not is_staged}
        self.sets = [dict(ping_or_pong, **work) for ping_or_pong in staged]
        self.quant_set = 0  # the buffer set holding the scales / zero points loaded last (read as
        # loaded when they are fp32, so they must be found where they were loaded)
        self.registers: dict[int, list] = {}  # bs row -> the scalar registers of its index

    def run(self, iterations: tuple[Iteration, ...]) -> None:
        p = self.p
        p.copy(self.arguments, isa.gm(self.tensors.tiling), name="load tiling")
        p.set_flag("MTE2", "SCALAR", _ARGS_EVENT)
        p.wait_flag("MTE2", "SCALAR", _ARGS_EVENT)
        for index in range(TILING_ARG_COUNT):
            p.read_scalar(self.arguments, index, name="read tiling argument")
        for i, iteration in enumerate(iterations):
            with p.tile(i):
                self._iteration(i, iteration, len(iterations))

    # -- one iteration -------------------------------------------------------------------------

    def _iteration(self, i: int, it: Iteration, count: int) -> None:
        p, t = self.p, self.tensors
        double = self.copies == 2
        event = i % self.copies
        buffers = self.sets[event]
        if double and i >= 2:
            p.wait_flag("VECTOR", "MTE2", event)  # the vector work that read this set is done
        elif not double and i > 0:
            p.wait_flag("MTE3", "MTE2", 0)  # the real kernel: the next loads follow this iteration's writes

        loaded = []
        if it.indices_bytes:
            p.copy(self.indices, isa.gm(t.indices), nbytes=it.indices_bytes, name="load indices")
            p.set_flag("MTE2", "SCALAR", _INDICES_EVENT)
        for operand, nbytes, tensor, offset in (("updates", it.updates_bytes, t.updates, it.updates_offset),
                                                ("scales", it.scales_bytes, t.scales, it.scales_offset),
                                                ("zero_points", it.zero_point_bytes, t.zero_points, it.scales_offset)):
            if nbytes:
                p.copy(buffers[operand], isa.gm(tensor, offset), nbytes=nbytes, name=f"load {operand.replace('_', ' ')}")
                p.set_flag("MTE2", "VECTOR", _OPERAND_EVENTS[operand] + 3 * event)
                loaded.append(operand)
        if it.scales_bytes:
            self.quant_set = event

        if double and i >= 2:
            p.wait_flag("MTE3", "VECTOR", event)  # the writes that read this set's int8 result are done
        waited: set[str] = set()
        for step in it.vector:
            for operand in step.operands:
                if operand in loaded and operand not in waited:
                    p.wait_flag("MTE2", "VECTOR", _OPERAND_EVENTS[operand] + 3 * event)
                    waited.add(operand)
            self._vector_step(step, buffers, self.sets[self.quant_set])
        if double and i + 2 < count:
            p.set_flag("VECTOR", "MTE2", event)
        p.set_flag("VECTOR", "MTE3", event)

        if it.indices_bytes:
            p.wait_flag("MTE2", "SCALAR", _INDICES_EVENT)
        p.wait_flag("VECTOR", "MTE3", event)
        for write in it.writes:
            self._write(write, it, buffers["int8"])
        if double and i + 2 < count:
            p.set_flag("MTE3", "VECTOR", event)
        elif not double and i + 1 < count:
            p.set_flag("MTE3", "MTE2", 0)

    def _write(self, write, it: Iteration, result: isa.LocalTensor) -> None:
        p, problem = self.p, self.problem
        _, heads, axis_len, row_elements = problem.input_view
        batch, head = divmod(write.bs_row, heads)
        if write.index_reads:
            positions = [batch] if problem.index_rank == 1 else [2 * batch, 2 * batch + 1]
            self.registers[write.bs_row] = [p.read_scalar(self.indices, k, name="read index") for k in positions]
        if write.bs_row in self.skipped_rows:
            return
        registers = self.registers[write.bs_row]
        if problem.index_rank == 1:
            (offset,) = registers
            row = (batch * heads + head) * axis_len + offset
        else:
            dest, offset = registers
            row = (dest * heads + head) * axis_len + offset
        local = write.bs_row * problem.rows * row_elements + write.column - it.updates_offset
        p.copy(isa.gm(self.tensors.input, row * row_elements + write.column), result[local : local + write.nbytes],
               name="store block")

    # -- vector --------------------------------------------------------------------------------

    def _vector_step(self, step: VectorStep, buffers: dict, quant: dict) -> None:
        p = self.p
        if step.kind == "cast":
            src, dst = self._cast_operands(step, buffers, quant)
            name = f"cast {step.dtype_in}->{step.dtype_out}"
            offset = 0
            for issue in step.issues:
                count = issue.lanes * issue.repeats
                p.cast(dst[offset:], src[offset:], count=count, rounding=step.rounding or "rint", name=name)
                offset += count
            return
        work = buffers["fp32"]
        operand = step.operands[1]
        factors = quant.get(f"{operand}_fp32", quant[operand])  # fp32 scales are used as loaded
        if step.columns:
            row = self.problem.last_dim
            lanes = step.issues[0].lanes  # one repeat of columns
            for block in range(step.times):
                column, first_row = block * lanes, 0
                for issue in step.issues:
                    at = first_row * row + column
                    p.vector(step.kind, work[at:], work[at:], factors[column:], count=issue.lanes * issue.repeats,
                             repeat_strides=(row, row, 0), name=step.kind)
                    first_row += issue.repeats
            return
        for r in range(step.times):
            offset = 0
            for issue in step.issues:
                count = issue.lanes * issue.repeats
                at = r * step.elements + offset
                p.vector(step.kind, work[at:], work[at:], factors[offset:], count=count, name=step.kind)
                offset += count

    def _cast_operands(self, step: VectorStep, buffers: dict, quant: dict) -> tuple[isa.LocalTensor, isa.LocalTensor]:
        """(source, destination) of a conversion in the kernel's buffers."""
        if step.dtype_out == "float32":
            operand = step.operands[0]
            if operand == "updates":
                return buffers["updates"], buffers["fp32"]
            return quant[operand], quant[f"{operand}_fp32"]
        return self._output_place(step.dtype_in, buffers), self._output_place(step.dtype_out, buffers)

    @staticmethod
    def _output_place(dtype: str, buffers: dict) -> isa.LocalTensor:
        """Where the output chain keeps a value of ``dtype``: fp32 in the fp32 buffer, an integer
        intermediate (int16, int32) in the updates buffer, fp16 over the fp32 buffer, int8 (or the
        Ascend 950's 8-bit float) in the result buffer; each buffer's earlier contents are dead by then."""
        if dtype == "int8" or dtype in ASCEND_950_DST_TYPES:  # the written format, one byte each
            return buffers["int8"].reinterpret(formats.dtype_named(dtype))
        if dtype in ("float32", "float16"):
            return buffers["fp32"].reinterpret(np.dtype(dtype))
        return buffers["updates"].reinterpret(np.dtype(dtype))
