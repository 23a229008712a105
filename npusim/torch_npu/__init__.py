"""``torch_npu`` on the simulator: its custom ops with op-plugin's signatures, on npu tensors.

    import npusim.torch_npu as torch_npu          # instead of: import torch_npu
    torch_npu.npu_quant_scatter_(cache, indices, updates, scales, zero_points, axis=-2, quant_axis=-1)

With torch installed (``pip install 'npusim[torch]'``), importing this module registers the
simulated ``npu`` device with torch (:mod:`npusim.frontend.torch_device`): ``tensor.npu()``,
``torch.empty(..., device="npu")``, ``torch.npu.*`` work inside a session, and the ops take torch
tensors (each call is an eager op: the host pays its launch; ``torch.compile`` with
:mod:`npusim.torchair` captures them). Without torch, the ops take npusim device tensors
(``npusim.tensor``), as before: no host thread, the kernels are queued when called.

Either way, each function names its registered op (:mod:`npusim.kernels`) and hands the call to the
launch path every op shares (:mod:`npusim.frontend.aclnn`): checks as the real op makes them (an
error names the argument, its value and the rule), contiguous copies, the kernels on the current
stream of the input's device, the copy back into a non-contiguous ``input``. Nothing runs until the
session synchronises. What the real API has no argument for is set with :func:`options`.
"""

from __future__ import annotations

import importlib.util

from npusim.frontend.aclnn import OpCall, copy, options, run_op
from npusim.frontend.tensor import empty
from npusim.kernels.op import OpOptions as Options

__all__ = ["Options", "hifloat8", "npu_quant_scatter", "npu_quant_scatter_", "npu_quantize", "options", "scatter_update",
           "scatter_update_"]

TORCH = importlib.util.find_spec("torch") is not None
"""Whether torch is installed: then the ops also take torch npu tensors."""

hifloat8: int | str = "hifloat8"
"""``torch_npu.hifloat8`` as a ``dst_type``: with torch, torch_npu's int code (values held in
torch.uint8); without torch, the format's name."""

if TORCH:
    import torch

    from npusim.frontend.torch_device import install as _install

    _install()
    npu = torch.npu
    __all__.append("npu")
    from npusim.frontend.torch_device.ops import HIFLOAT8_CODE

    hifloat8 = HIFLOAT8_CODE


def _is_torch(value) -> bool:
    return TORCH and isinstance(value, torch.Tensor)


def _dtype_name(dtype) -> str | None:
    """A dtype argument (None, a name, a numpy or torch dtype) as its name."""
    if dtype is None or isinstance(dtype, str):
        return dtype
    if TORCH and dtype == hifloat8:
        return "hifloat8"
    if TORCH and isinstance(dtype, torch.dtype):
        return str(dtype).removeprefix("torch.")
    import numpy as np

    return np.dtype(dtype).name


def npu_quant_scatter_(input, indices, updates, quant_scales, quant_zero_points=None, axis=-2, quant_axis=-1, reduce="update",
                       dst_type=None, round_mode="rint"):
    """Quantise ``updates`` to int8 (``rint(f32(updates) / f32(quant_scales) [+ f32(zero points)])``,
    saturated) and write them into ``input`` along ``axis`` at ``indices``, in place; returns ``input``.

    ``indices`` is 1-D ``[B]`` (batch ``b`` goes to rows ``indices[b]`` of input batch ``b``) or 2-D
    ``[B, 2]`` (``(batch, row)`` pairs). Empty tensors make it a no-op. ``dst_type`` and
    ``round_mode`` select the Ascend 950 kernel's output (aclnnInplaceQuantScatterV2): int8 (None),
    float8_e4m3fn or float8_e5m2 with 'rint', :data:`hifloat8` with 'round' or 'hybrid', written into
    input's bytes; on Atlas A2/A3 and the 310P they are ignored with a warning (int8, half to even),
    as the device does. See ``docs/quant_scatter.md``.
    """
    if _is_torch(input):
        return torch.ops.npu.npu_quant_scatter_(input, indices, updates, quant_scales, quant_zero_points, axis, quant_axis, reduce,
                                                dst_type, round_mode)
    call = OpCall.prepare("quant_scatter", "npu_quant_scatter_", _quant_scatter_args(locals()))
    call.issue(input)
    return input


def npu_quant_scatter(input, indices, updates, quant_scales, quant_zero_points=None, axis=-2, quant_axis=-1, reduce="update",
                      dst_type=None, round_mode="rint"):
    """The out-of-place :func:`npu_quant_scatter_`: a new contiguous tensor holding a clone of
    ``input`` (copied on the device by a ``Clone`` kernel, charged in the timeline) with the
    quantised updates written in; ``input`` is left untouched."""
    if _is_torch(input):
        return torch.ops.npu.npu_quant_scatter(input, indices, updates, quant_scales, quant_zero_points, axis, quant_axis, reduce,
                                               dst_type, round_mode)
    call = OpCall.prepare("quant_scatter", "npu_quant_scatter", _quant_scatter_args(locals()))
    out = empty(input.shape, input.dtype, device=input.device)
    copy(out, input, "Clone", "npu_quant_scatter: clone of input")
    call.issue(out)
    return out


def _quant_scatter_args(given: dict) -> dict:
    args = {name: given[name] for name in ("input", "indices", "updates", "quant_scales", "quant_zero_points", "axis", "quant_axis",
                                           "reduce", "round_mode")}
    return {**args, "dst_type": _dtype_name(given["dst_type"])}


def scatter_update_(data, indices, updates, axis):
    """Write ``updates`` into ``data`` along ``axis`` at ``indices`` (1-D ``[B]``, 2-D ``[B, 2]`` or
    0-D), in place; returns ``data``."""
    if _is_torch(data):
        return torch.ops.npu.scatter_update_(data, indices, updates, axis)
    run_op("scatter_update", "scatter_update_", {"input": data, "indices": indices, "updates": updates, "axis": axis}, out=data)
    return data


def scatter_update(data, indices, updates, axis):
    """The out-of-place :func:`scatter_update_` (a ``Clone`` of ``data``, then the scatter)."""
    if _is_torch(data):
        return torch.ops.npu.scatter_update(data, indices, updates, axis)
    call = OpCall.prepare("scatter_update", "scatter_update", {"input": data, "indices": indices, "updates": updates, "axis": axis})
    out = empty(data.shape, data.dtype, device=data.device)
    copy(out, data, "Clone", "scatter_update: clone of data")
    call.issue(out)
    return out


def npu_quantize(input, scales, zero_points, dtype, axis=1, div_mode=True):
    """``rint(f32(input) / f32(scales) [+ f32(zero_points)])`` saturated to ``dtype`` (``torch.qint8``
    -> int8, ``torch.quint8`` -> uint8, ``torch.int32``), scales of 1 element or of
    ``input.shape[axis]``; a new tensor. Only ``div_mode=True`` (aclnnQuantize) is modelled."""
    if _is_torch(input):
        return torch.ops.npu.npu_quantize(input, scales, zero_points, dtype, axis, div_mode)
    from npusim.kernels.quantize.checks import output_dtype

    name = _dtype_name(dtype)
    out = empty(input.shape, output_dtype(name), device=input.device)
    run_op("quantize", "npu_quantize", {"input": input, "scales": scales, "zero_points": zero_points, "out": out, "dtype": name,
                                        "axis": axis, "div_mode": div_mode}, out=out)
    return out
