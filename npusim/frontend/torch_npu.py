"""``torch_npu`` ops on the simulator, with the real signatures, on npusim device tensors.

    from npusim import torch_npu
    torch_npu.npu_quant_scatter_(cache, indices, updates, scales, zero_points, axis=-2, quant_axis=-1)

An op checks its arguments as the real one does (an error names the argument, its value and the
rule), then issues its kernels to the stream of the input's device, as the aclnn layer does:
contiguous copies of non-contiguous inputs (``Contiguous``), the op's kernel, and the copy of the
result back into a non-contiguous ``input`` (``ViewCopy``). Nothing runs until the session
synchronises (``npusim.synchronize()``, ``tensor.numpy()``, the end of ``npusim run``).

What the real API has no argument for is set with :func:`options`, a context manager.
"""

from __future__ import annotations

import contextlib
import dataclasses
import warnings
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Iterator

import numpy as np

from npusim.errors import ConfigError, OpArgumentError, RaceError, UsageError, WorkloadError
from npusim.frontend.tensor import DeviceTensor, empty, tensor
from npusim.kernels.quant_scatter import (
    OverlappingWritesWarning,
    QuantScatterPlan,
    QuantScatterProblem,
    QuantScatterTensors,
    build_quant_scatter,
    check_indices,
    check_quant_scatter,
    describe_overlaps,
    find_overlaps,
    plan_quant_scatter,
    tiling_arguments,
)
from npusim.kernels.view_copy import build_view_copy

__all__ = ["Options", "npu_quant_scatter", "npu_quant_scatter_", "options"]

_CHOICES = {"out_of_range": ("error", "unchecked"), "overlap": ("warn", "error")}


@dataclass(frozen=True)
class Options:
    """Simulator settings of the ``torch_npu`` ops (the real API has no argument for them).

    ``out_of_range``: ``"error"`` (default) refuses an index whose destination lies outside
    ``input``, naming the batch; ``"unchecked"`` emulates the hardware, which does not check: a
    block that stays inside ``input`` is written where the address arithmetic puts it, one that
    would leave it is dropped with an ``UncheckedIndexWarning`` (hardware would corrupt other memory).
    ``overlap``: batches writing overlapping destinations race on hardware (the result differs from
    run to run); ``"warn"`` (default) gives an ``OverlappingWritesWarning`` and a warning in the
    trace, ``"error"`` raises :class:`~npusim.errors.RaceError`.
    ``double_buffer``: run the what-if variant of the kernel with ping-pong UB buffers.
    """

    out_of_range: str = "error"
    overlap: str = "warn"
    double_buffer: bool = False


_OPTIONS: ContextVar[Options] = ContextVar("npusim_torch_npu_options", default=Options())


@contextlib.contextmanager
def options(*, out_of_range: str | None = None, overlap: str | None = None, double_buffer: bool | None = None) -> Iterator[Options]:
    """Within the block, ops use these settings (see :class:`Options`); unset ones are inherited::

        with torch_npu.options(double_buffer=True, overlap="error"):
            torch_npu.npu_quant_scatter_(cache, indices, updates, scales)
    """
    changes = {}
    for name, value in (("out_of_range", out_of_range), ("overlap", overlap)):
        if value is not None:
            if value not in _CHOICES[name]:
                raise UsageError(f"torch_npu.options: {name} = {value!r}: use one of {', '.join(map(repr, _CHOICES[name]))}")
            changes[name] = value
    if double_buffer is not None:
        if not isinstance(double_buffer, bool):
            raise UsageError(f"torch_npu.options: double_buffer = {double_buffer!r}: use True or False")
        changes["double_buffer"] = double_buffer
    token = _OPTIONS.set(dataclasses.replace(_OPTIONS.get(), **changes))
    try:
        yield _OPTIONS.get()
    finally:
        _OPTIONS.reset(token)


# ------------------------------------------------------------------------------- npu_quant_scatter


def npu_quant_scatter_(input, indices, updates, quant_scales, quant_zero_points=None, axis=-2, quant_axis=-1, reduce="update"):
    """Quantise ``updates`` to int8 (``rint(f32(updates) / f32(quant_scales) [+ f32(zero points)])``,
    saturated) and write them into ``input`` along ``axis`` at ``indices``, in place; returns ``input``.

    ``indices`` is 1-D ``[B]`` (batch ``b`` goes to rows ``indices[b]`` of input batch ``b``) or 2-D
    ``[B, 2]`` (``(batch, row)`` pairs). Empty tensors make it a no-op. See :func:`options` for the
    simulator's settings and ``docs/quant_scatter.md`` for the model.
    """
    call = _QuantScatterCall.prepare("npu_quant_scatter_", input, indices, updates, quant_scales, quant_zero_points,
                                     axis, quant_axis, reduce)
    call.issue(input)
    return input


def npu_quant_scatter(input, indices, updates, quant_scales, quant_zero_points=None, axis=-2, quant_axis=-1, reduce="update"):
    """The out-of-place :func:`npu_quant_scatter_`: a new contiguous tensor holding a clone of
    ``input`` (copied on the device by a ``Clone`` kernel, charged in the timeline) with the
    quantised updates written in; ``input`` is left untouched."""
    call = _QuantScatterCall.prepare("npu_quant_scatter", input, indices, updates, quant_scales, quant_zero_points,
                                     axis, quant_axis, reduce)
    out = empty(input.shape, input.dtype, device=input.device)
    _copy(out, input, "Clone", "npu_quant_scatter: clone of input")
    call.issue(out)
    return out


@dataclass
class _QuantScatterCall:
    """A checked call: the problem, its plan, the operands and what the host-side index check found."""

    api: str
    problem: QuantScatterProblem
    plan: QuantScatterPlan | None
    operands: dict
    skipped_rows: frozenset[int]
    overlap_message: str | None
    checked_indices: np.ndarray | None = None  # the index values checked on the host (with data)

    @classmethod
    def prepare(cls, api, input, indices, updates, quant_scales, quant_zero_points, axis, quant_axis, reduce) -> "_QuantScatterCall":
        operands = {"input": input, "indices": indices, "updates": updates, "quant_scales": quant_scales,
                    "quant_zero_points": quant_zero_points}
        _check_tensors(api, operands)
        for name, value in (("axis", axis), ("quant_axis", quant_axis)):
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
                raise OpArgumentError(f"{api}: {name} = {value!r}: must be an int (a dimension of updates, negative counts from the end)")
        spec = input.system.spec
        problem = check_quant_scatter(input, indices, updates, quant_scales, quant_zero_points, int(axis), int(quant_axis),
                                      reduce, product=spec.product)
        if problem.empty:
            return cls(api, problem, None, operands, frozenset(), None)
        settings = _OPTIONS.get()
        op_spec = spec.ops.quant_scatter if spec.ops else None
        if op_spec is None:
            raise ConfigError(
                f"{api}: the config {spec.name!r} has no ops.quant_scatter.vector_cores (how many vector cores the op "
                "uses); add it, e.g. `ops: {quant_scatter: {vector_cores: 48}}`, or extend a built-in config"
            )
        plan = plan_quant_scatter(problem, vector_cores=op_spec.vector_cores, ub_bytes=spec.die.aiv.ub.bytes,
                                  double_buffer=settings.double_buffer)
        skipped, overlap, checked = frozenset(), None, None
        if input.system.with_data:  # indices are data: without data (timing only) they cannot be checked
            checked = indices.host_view().copy()
            segments = check_indices(problem, checked, allow_out_of_range=settings.out_of_range == "unchecked")
            heads = problem.heads
            kept = {segment.batch * heads + h for segment in segments for h in segment.heads}
            skipped = frozenset(range(problem.bs)) - kept
            pairs = find_overlaps(segments)
            if pairs:
                overlap = describe_overlaps(segments, pairs)
                if settings.overlap == "error":
                    raise RaceError(overlap + " (torch_npu.options(overlap='error') is set)")
                warnings.warn(overlap, OverlappingWritesWarning, stacklevel=3)
        return cls(api, problem, plan, operands, skipped, overlap, checked)

    def issue(self, target: DeviceTensor) -> None:
        """Issue the kernels that write the result into ``target`` (``input``, or the clone)."""
        if self.plan is None:
            return
        problem, plan = self.problem, self.plan
        system, die = target.system, target.device
        work = target if target.is_contiguous() else _contiguous(target, self.api, "input")
        operands = {name: _contiguous(t, self.api, name) for name, t in self.operands.items()
                    if name != "input" and t is not None}
        tensors = QuantScatterTensors(
            input=work, indices=operands["indices"], updates=operands["updates"], scales=operands["quant_scales"],
            zero_points=operands.get("quant_zero_points"), tiling=tensor(tiling_arguments(problem, plan), device=die),
        )
        op_args = {"api": f"torch_npu.{self.api}", "mode": int(plan.mode), "cores": plan.used_cores,
                   "double_buffer": plan.double_buffer, "input": list(problem.input_shape),
                   "updates": list(problem.updates_shape), "indices": list(problem.indices_shape), "axis": problem.axis}
        kernel = build_quant_scatter(problem, plan, tensors, skipped_rows=self.skipped_rows, op_args=op_args)
        if self.checked_indices is not None:
            system.stream(die).submit(self._at_kernel_start(tensors.indices, system, die))
        kernel.launch()
        if work is not target:
            _copy(target, work, "ViewCopy", f"{self.api}: result into the non-contiguous input")


    def _at_kernel_start(self, indices: DeviceTensor, system, die: int):
        """A stream task just before the kernel: the indices in GM must still be the values checked
        on the host (work queued before the op may have written them); an overlap is marked in the
        trace where the racing kernel starts."""
        env, recorder = system.env, system.recorder

        def task():
            if not np.array_equal(indices.host_view(), self.checked_indices):
                raise WorkloadError(
                    f"{self.api}: indices changed between the call and the kernel's start (at {env.now / 1e6:.3f} us): work "
                    "queued before the op wrote them, so the simulator checked values the kernel does not read. "
                    "Synchronise before the call (npusim.synchronize(), or indices.numpy()) so the values are final"
                )
            if self.overlap_message is not None:
                recorder.instant(env.now, die, "overlapping writes", self.overlap_message)
            yield env.timeout(0)

        return task


def _check_tensors(api: str, operands: dict) -> None:
    """Every tensor argument is a device tensor of the session, on input's device."""
    for name, value in operands.items():
        if value is None and name == "quant_zero_points":
            continue
        if not isinstance(value, DeviceTensor):
            raise OpArgumentError(
                f"{api}: {name} = {type(value).__name__}: must be an npusim device tensor; "
                f"make one with npusim.tensor(array, device=...)"
            )
    input = operands["input"]
    for name, value in operands.items():
        if value is None or value is input:
            continue
        if value.system is not input.system:
            raise UsageError(f"{api}: {name} belongs to another npusim session than input; create both in the same session")
        if value.device != input.device:
            raise OpArgumentError(
                f"{api}: {name} is on device {value.device}, input on device {input.device}: all tensors of the op "
                f"must be on input's device; create {name} with device={input.device}"
            )


def _contiguous(view: DeviceTensor, api: str, name: str) -> DeviceTensor:
    """``view`` itself when contiguous, else a contiguous copy made on the device (``Contiguous``)."""
    if view.is_contiguous():
        return view
    copy = empty(view.shape, view.dtype, device=view.device)
    _copy(copy, view, "Contiguous", f"{api}: contiguous copy of {name}")
    return copy


def _copy(dst: DeviceTensor, src: DeviceTensor, name: str, purpose: str) -> None:
    build_view_copy(dst, src, name=name, op_args={"purpose": purpose, "shape": list(src.shape), "dtype": src.dtype.name}).launch()
