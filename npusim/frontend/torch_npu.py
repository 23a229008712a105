"""``torch_npu`` ops on the simulator, with the real signatures, on npusim device tensors.

    from npusim import torch_npu
    torch_npu.npu_quant_scatter_(cache, indices, updates, scales, zero_points, axis=-2, quant_axis=-1)

Each function names its registered op (:mod:`npusim.kernels`) and hands the call to the launch
path every op shares (:mod:`npusim.frontend.aclnn`): checks as the real op makes them (an error
names the argument, its value and the rule), contiguous copies, the kernels on the stream of the
input's device, the copy back into a non-contiguous ``input``. Nothing runs until the session
synchronises (``npusim.synchronize()``, ``tensor.numpy()``, the end of ``npusim run``).

What the real API has no argument for is set with :func:`options`, a context manager.
"""

from __future__ import annotations

from npusim.frontend.aclnn import OpCall, copy, options
from npusim.frontend.tensor import empty
from npusim.kernels.op import OpOptions as Options

__all__ = ["Options", "npu_quant_scatter", "npu_quant_scatter_", "options"]


def npu_quant_scatter_(input, indices, updates, quant_scales, quant_zero_points=None, axis=-2, quant_axis=-1, reduce="update"):
    """Quantise ``updates`` to int8 (``rint(f32(updates) / f32(quant_scales) [+ f32(zero points)])``,
    saturated) and write them into ``input`` along ``axis`` at ``indices``, in place; returns ``input``.

    ``indices`` is 1-D ``[B]`` (batch ``b`` goes to rows ``indices[b]`` of input batch ``b``) or 2-D
    ``[B, 2]`` (``(batch, row)`` pairs). Empty tensors make it a no-op. See :func:`options` for the
    simulator's settings and ``docs/quant_scatter.md`` for the model.
    """
    call = OpCall.prepare("quant_scatter", "npu_quant_scatter_", _quant_scatter_args(locals()))
    call.issue(input)
    return input


def npu_quant_scatter(input, indices, updates, quant_scales, quant_zero_points=None, axis=-2, quant_axis=-1, reduce="update"):
    """The out-of-place :func:`npu_quant_scatter_`: a new contiguous tensor holding a clone of
    ``input`` (copied on the device by a ``Clone`` kernel, charged in the timeline) with the
    quantised updates written in; ``input`` is left untouched."""
    call = OpCall.prepare("quant_scatter", "npu_quant_scatter", _quant_scatter_args(locals()))
    out = empty(input.shape, input.dtype, device=input.device)
    copy(out, input, "Clone", "npu_quant_scatter: clone of input")
    call.issue(out)
    return out


def _quant_scatter_args(given: dict) -> dict:
    return {name: given[name] for name in ("input", "indices", "updates", "quant_scales", "quant_zero_points", "axis", "quant_axis", "reduce")}
