"""torch_npu's custom ops as torch ops (``torch.ops.npu.*``), with op-plugin's schemas
(``op_plugin/config/op_plugin_functions.yaml`` of Ascend/op-plugin), so ``torch.compile`` captures
them as single graph nodes. Each has a fake kernel (shapes only, for tracing) and an npu kernel that
hands the call to the launch path every op shares (:mod:`npusim.frontend.aclnn`), as one eager
host call of its aclnn API.
"""

from __future__ import annotations

import torch

from npusim.frontend import aclnn
from npusim.frontend.torch_device.tensors import TORCH_DTYPES, device_tensor, new_tensor
from npusim.kernels.quant_scatter.op import aclnn_api
from npusim.kernels.quantize.checks import output_dtype

SCHEMAS = {
    "npu_quant_scatter": "npu_quant_scatter(Tensor self, Tensor indices, Tensor updates, Tensor quant_scales, "
                         "Tensor? quant_zero_points=None, int axis=-2, int quant_axis=-1, str reduce='update', "
                         "int? dst_type=None, str? round_mode='rint') -> Tensor",
    "npu_quant_scatter_": "npu_quant_scatter_(Tensor(a!) self, Tensor indices, Tensor updates, Tensor quant_scales, "
                          "Tensor? quant_zero_points=None, int axis=-2, int quant_axis=-1, str reduce='update', "
                          "int? dst_type=None, str? round_mode='rint') -> Tensor(a!)",
    "npu_quantize": "npu_quantize(Tensor self, Tensor scales, Tensor? zero_points, int dtype, int axis=1, bool div_mode=True) -> Tensor",
    "scatter_update": "scatter_update(Tensor self, Tensor indices, Tensor updates, int axis) -> Tensor",
    "scatter_update_": "scatter_update_(Tensor(a!) self, Tensor indices, Tensor updates, int axis) -> Tensor(a!)",
}
"""op-plugin's schema of each op."""

SCALAR_TYPE_CODES: dict[int, torch.dtype] = {}
"""c10 ScalarType code -> dtype, for ``int dtype`` arguments (torch passes a dtype as its code)."""

HIFLOAT8_CODE = 290
"""``torch_npu.hifloat8``: torch has no hifloat8, so torch_npu names it by an int code of its own
(c10_npu::DType::HIFLOAT8) passed as an ``int dtype`` argument, its values held in torch.uint8.
npusim's code is above every c10 ScalarType; compare by the name ``torch_npu.hifloat8``, not by value."""


def _quant_scatter_args(self, indices, updates, quant_scales, quant_zero_points, axis, quant_axis, reduce, dst_type,
                        round_mode, api: str) -> dict:
    tensors = {"input": self, "indices": indices, "updates": updates, "quant_scales": quant_scales,
               "quant_zero_points": quant_zero_points}
    args = {name: None if t is None else device_tensor(t, api, name) for name, t in tensors.items()}
    return {**args, "axis": axis, "quant_axis": quant_axis, "reduce": reduce, "dst_type": _dtype_of(dst_type),
            "round_mode": round_mode}


def _dtype_of(code) -> str | None:
    """The name of the dtype an ``int dtype`` argument carries (``qint8``, ``float8_e5m2``...)."""
    if code is None:
        return None
    if code == HIFLOAT8_CODE:
        return "hifloat8"
    dtype = SCALAR_TYPE_CODES.get(code)
    return str(dtype).removeprefix("torch.") if dtype is not None else f"ScalarType {code}"


def npu_quant_scatter_(self, indices, updates, quant_scales, quant_zero_points=None, axis=-2, quant_axis=-1, reduce="update",
                       dst_type=None, round_mode="rint"):
    api = "npu_quant_scatter_"
    args = _quant_scatter_args(self, indices, updates, quant_scales, quant_zero_points, axis, quant_axis, reduce, dst_type,
                               round_mode, api)
    with aclnn.host_call(aclnn_api(args["input"].system.spec.product)):
        aclnn.run_op("quant_scatter", api, args, out=args["input"])
    return self


def npu_quant_scatter(self, indices, updates, quant_scales, quant_zero_points=None, axis=-2, quant_axis=-1, reduce="update",
                      dst_type=None, round_mode="rint"):
    api = "npu_quant_scatter"
    args = _quant_scatter_args(self, indices, updates, quant_scales, quant_zero_points, axis, quant_axis, reduce, dst_type,
                               round_mode, api)
    call = aclnn.OpCall.prepare("quant_scatter", api, args)
    out = new_tensor(self.shape, self.dtype, self.device.index)
    result = device_tensor(out, api, "the result")
    with aclnn.host_call(aclnn_api(args["input"].system.spec.product)):
        aclnn.copy(result, args["input"], "Clone", f"{api}: clone of input")
        call.issue(result)
    return out


def scatter_update_(self, indices, updates, axis):
    api = "scatter_update_"
    args = {name: device_tensor(t, api, name) for name, t in (("input", self), ("indices", indices), ("updates", updates))}
    with aclnn.host_call("aclnnInplaceScatterUpdate"):
        aclnn.run_op("scatter_update", api, {**args, "axis": axis}, out=args["input"])
    return self


def scatter_update(self, indices, updates, axis):
    api = "scatter_update"
    args = {name: device_tensor(t, api, name) for name, t in (("input", self), ("indices", indices), ("updates", updates))}
    call = aclnn.OpCall.prepare("scatter_update", api, {**args, "axis": axis})
    out = new_tensor(self.shape, self.dtype, self.device.index)
    result = device_tensor(out, api, "the result")
    with aclnn.host_call("aclnnInplaceScatterUpdate"):
        aclnn.copy(result, args["input"], "Clone", f"{api}: clone of input")
        call.issue(result)
    return out


def npu_quantize(self, scales, zero_points, dtype, axis=1, div_mode=True):
    api = "npu_quantize"
    out = new_tensor(self.shape, _torch_output(dtype), self.device.index)
    args = {"input": device_tensor(self, api, "input"), "scales": device_tensor(scales, api, "scales"),
            "zero_points": None if zero_points is None else device_tensor(zero_points, api, "zero_points"),
            "out": device_tensor(out, api, "the result"), "dtype": _dtype_of(dtype), "axis": axis, "div_mode": div_mode}
    with aclnn.host_call("aclnnQuantize"):
        aclnn.run_op("quantize", api, args, out=args["out"])
    return out


def _fake_same(self, *args, **kwargs):
    return self


def _fake_like(self, *args, **kwargs):
    return torch.empty_like(self)


def _fake_quantize(self, scales, zero_points, dtype, axis=1, div_mode=True):
    return torch.empty(self.shape, dtype=_torch_output(dtype), device=self.device)


def _torch_output(dtype) -> torch.dtype:
    """The torch dtype of npu_quantize's result: hifloat8 codes in torch.uint8, as torch_npu holds them."""
    name = str(_dtype_of(dtype))
    return torch.uint8 if name == "hifloat8" else TORCH_DTYPES[output_dtype(name)]


KERNELS = {"npu_quant_scatter": (npu_quant_scatter, _fake_like), "npu_quant_scatter_": (npu_quant_scatter_, _fake_same),
           "npu_quantize": (npu_quantize, _fake_quantize), "scatter_update": (scatter_update, _fake_like),
           "scatter_update_": (scatter_update_, _fake_same)}


def register(library: torch.library.Library) -> None:
    """Define the ``npu::`` ops with their npu kernels and fake kernels."""
    for name, schema in SCHEMAS.items():
        library.define(schema)
        kernel, fake = KERNELS[name]
        library.impl(name, kernel, "PrivateUse1")
        torch.library.register_fake(f"npu::{name}", fake, lib=library)
    _probe_scalar_type_codes(library)


def _probe_scalar_type_codes(library: torch.library.Library) -> None:
    """Learn the ScalarType code of each dtype by passing it as an ``int`` argument of a probe op."""
    seen: list[int] = []
    library.define("_npusim_dtype_code(Tensor self, int dtype) -> Tensor")
    library.impl("_npusim_dtype_code", lambda self, dtype: (seen.append(dtype), self)[1], "CompositeExplicitAutograd")
    probe = torch.empty(0)
    names = ["bool", "uint8", "int8", "int16", "int32", "int64", "float16", "bfloat16", "float32", "float64", "qint8", "quint8",
             "qint32", "quint4x2", "float8_e4m3fn", "float8_e5m2"]
    for name in names:
        dtype = getattr(torch, name)
        torch.ops.npu._npusim_dtype_code(probe, dtype)
        SCALAR_TYPE_CODES[seen[-1]] = dtype
