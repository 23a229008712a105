"""torch_npu's custom ops as torch ops (``torch.ops.npu.*``), with op-plugin's schemas
(``op_plugin/config/op_plugin_functions.yaml`` of Ascend/op-plugin), so ``torch.compile`` captures
them as single graph nodes. Each has a fake kernel (shapes only, for tracing) and an npu kernel that
hands the call to the launch path every op shares (:mod:`npusim.frontend.aclnn`), as one eager
host call of its aclnn API.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from npusim.config.registry import OPS
from npusim.errors import OpArgumentError
from npusim.frontend import aclnn
from npusim.frontend.session import current_session
from npusim.frontend.torch_device.tensors import NUMPY_DTYPES, TORCH_DTYPES, device_tensor, new_tensor
from npusim.kernels.grouped_matmul.checks import output_dtype as grouped_output_dtype
from npusim.kernels.grouped_matmul.checks import result_shapes as grouped_result_shapes
from npusim.kernels.grouped_matmul.op import arguments as grouped_arguments
from npusim.kernels.quant_matmul.checks import output_dtype as quant_output_dtype
from npusim.kernels.quant_matmul.checks import result_shape as quant_result_shape
from npusim.kernels.quant_scatter.checks import DEFAULT_AXIS, DEFAULT_QUANT_AXIS
from npusim.kernels.quantize.checks import output_dtype

SCHEMAS = {
    "npu_quant_scatter": "npu_quant_scatter(Tensor self, Tensor indices, Tensor updates, Tensor quant_scales, "
                         "Tensor? quant_zero_points=None, int axis=0, int quant_axis=1, str reduce='update', "
                         "int? dst_type=None, str? round_mode='rint') -> Tensor",
    "npu_quant_scatter_": "npu_quant_scatter_(Tensor(a!) self, Tensor indices, Tensor updates, Tensor quant_scales, "
                          "Tensor? quant_zero_points=None, int axis=0, int quant_axis=1, str reduce='update', "
                          "int? dst_type=None, str? round_mode='rint') -> Tensor(a!)",
    "npu_quantize": "npu_quantize(Tensor self, Tensor scales, Tensor? zero_points, int dtype, int axis=1, bool div_mode=True) -> Tensor",
    "scatter_update": "scatter_update(Tensor self, Tensor indices, Tensor updates, int axis) -> Tensor",
    "scatter_update_": "scatter_update_(Tensor(a!) self, Tensor indices, Tensor updates, int axis) -> Tensor(a!)",
    "npu_quant_matmul": "npu_quant_matmul(Tensor x1, Tensor x2, Tensor scale, *, Tensor? offset=None, Tensor? pertoken_scale=None, "
                        "Tensor? bias=None, int? output_dtype=None, int? x1_dtype=None, int? x2_dtype=None, int? pertoken_scale_dtype=None, "
                        "int? scale_dtype=None, int[]? group_sizes=None, Tensor? y_scale=None) -> Tensor",
    "npu_grouped_matmul": "npu_grouped_matmul(Tensor[] x, Tensor[] weight, *, Tensor[]? bias=None, Tensor[]? scale=None, "
                          "Tensor[]? offset=None, Tensor[]? antiquant_scale=None, Tensor[]? antiquant_offset=None, "
                          "Tensor[]? per_token_scale=None, Tensor? group_list=None, Tensor[]? activation_input=None, "
                          "Tensor[]? activation_quant_scale=None, Tensor[]? activation_quant_offset=None, int? split_item=0, "
                          "int? group_type=None, int? group_list_type=0, int? act_type=0, int[]? tuning_config=None, "
                          "int? output_dtype=None, int? x_dtype=None, int? weight_dtype=None, int? scale_dtype=None, "
                          "int? per_token_scale_dtype=None) -> Tensor[]",
    "npu_grouped_matmul.List": "npu_grouped_matmul.List(Tensor[] x, Tensor[] weight, *, Tensor[]? bias=None, Tensor[]? scale=None, "
                               "Tensor[]? offset=None, Tensor[]? antiquant_scale=None, Tensor[]? antiquant_offset=None, "
                               "Tensor[]? per_token_scale=None, int[]? group_list=None, Tensor[]? activation_input=None, "
                               "Tensor[]? activation_quant_scale=None, Tensor[]? activation_quant_offset=None, int? split_item=0, "
                               "int? group_type=None, int? group_list_type=0, int? act_type=0, ScalarType? output_dtype=None) -> Tensor[]",
    "npu_dequant_swiglu_quant": "npu_dequant_swiglu_quant(Tensor x, *, Tensor? weight_scale=None, Tensor? activation_scale=None, "
                                "Tensor? bias=None, Tensor? quant_scale=None, Tensor? quant_offset=None, Tensor? group_index=None, "
                                "bool activate_left=False, int quant_mode=0, int? dst_type=None, int? round_mode=None, "
                                "int? activate_dim=None, int swiglu_mode=0, float clamp_limit=7.0, float glu_alpha=1.702, "
                                "float glu_bias=1.0) -> (Tensor, Tensor)",
    "npu_moe_gating_top_k": "npu_moe_gating_top_k(Tensor x, int k, *, Tensor? bias=None, Tensor? input_ids=None, Tensor? tid2eid=None, "
                            "int k_group=1, int group_count=1, int group_select_mode=0, int renorm=0, int norm_type=0, "
                            "bool out_flag=False, float routed_scaling_factor=1.0, float eps=1e-20) -> (Tensor, Tensor, Tensor)",
    "npu_moe_distribute_dispatch": "npu_moe_distribute_dispatch(Tensor x, Tensor expert_ids, str group_ep, int ep_world_size, int ep_rank_id, "
                                   "int moe_expert_num, *, Tensor? scales=None, Tensor? x_active_mask=None, Tensor? expert_scales=None, "
                                   "str group_tp=\"\", int tp_world_size=0, int tp_rank_id=0, int expert_shard_type=0, "
                                   "int shared_expert_num=1, int shared_expert_rank_num=0, int quant_mode=0, int global_bs=0, "
                                   "int expert_token_nums_type=1) -> (Tensor, Tensor, Tensor, Tensor, Tensor, Tensor, Tensor)",
    "npu_moe_distribute_dispatch_v2": "npu_moe_distribute_dispatch_v2(Tensor x, Tensor expert_ids, str group_ep, int ep_world_size, "
                                      "int ep_rank_id, int moe_expert_num, *, Tensor? scales=None, Tensor? x_active_mask=None, "
                                      "Tensor? expert_scales=None, Tensor? elastic_info=None, Tensor? performance_info=None, "
                                      "str group_tp=\"\", int tp_world_size=0, int tp_rank_id=0, int expert_shard_type=0, "
                                      "int shared_expert_num=1, int shared_expert_rank_num=0, int quant_mode=0, int global_bs=0, "
                                      "int expert_token_nums_type=1, str comm_alg=\"\", int zero_expert_num=0, int copy_expert_num=0, "
                                      "int const_expert_num=0, int? y_dtype=None, int? x_dtype=None, int? scales_dtype=None) "
                                      "-> (Tensor, Tensor, Tensor, Tensor, Tensor, Tensor, Tensor)",
    "npu_moe_distribute_combine": "npu_moe_distribute_combine(Tensor expand_x, Tensor expert_ids, Tensor expand_idx, Tensor ep_send_counts, "
                                  "Tensor expert_scales, str group_ep, int ep_world_size, int ep_rank_id, int moe_expert_num, *, "
                                  "Tensor? tp_send_counts=None, Tensor? x_active_mask=None, Tensor? activation_scale=None, "
                                  "Tensor? weight_scale=None, Tensor? group_list=None, Tensor? expand_scales=None, "
                                  "Tensor? shared_expert_x=None, str group_tp=\"\", int tp_world_size=0, int tp_rank_id=0, "
                                  "int expert_shard_type=0, int shared_expert_num=1, int shared_expert_rank_num=0, int global_bs=0, "
                                  "int out_dtype=0, int comm_quant_mode=0, int group_list_type=0) -> Tensor",
    "npu_moe_distribute_combine_v2": "npu_moe_distribute_combine_v2(Tensor expand_x, Tensor expert_ids, Tensor assist_info_for_combine, "
                                     "Tensor ep_send_counts, Tensor expert_scales, str group_ep, int ep_world_size, int ep_rank_id, "
                                     "int moe_expert_num, *, Tensor? tp_send_counts=None, Tensor? x_active_mask=None, "
                                     "Tensor? expand_scales=None, Tensor? shared_expert_x=None, Tensor? elastic_info=None, "
                                     "Tensor? ori_x=None, Tensor? const_expert_alpha_1=None, Tensor? const_expert_alpha_2=None, "
                                     "Tensor? const_expert_v=None, Tensor? performance_info=None, str group_tp=\"\", "
                                     "int tp_world_size=0, int tp_rank_id=0, int expert_shard_type=0, int shared_expert_num=1, "
                                     "int shared_expert_rank_num=0, int global_bs=0, int comm_quant_mode=0, str comm_alg=\"\", "
                                     "int zero_expert_num=0, int copy_expert_num=0, int const_expert_num=0) -> Tensor",
}
"""op-plugin's schema of each op."""

SCALAR_TYPE_CODES: dict[int, torch.dtype] = {}
"""c10 ScalarType code -> dtype, for ``int dtype`` arguments (torch passes a dtype as its code)."""


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
    dtype = SCALAR_TYPE_CODES.get(code)
    return str(dtype).removeprefix("torch.") if dtype is not None else f"ScalarType {code}"


def npu_quant_scatter_(self, indices, updates, quant_scales, quant_zero_points=None, axis=DEFAULT_AXIS, quant_axis=DEFAULT_QUANT_AXIS,
                       reduce="update", dst_type=None, round_mode="rint"):
    api = "npu_quant_scatter_"
    args = _quant_scatter_args(self, indices, updates, quant_scales, quant_zero_points, axis, quant_axis, reduce, dst_type,
                               round_mode, api)
    with aclnn.host_call("aclnnInplaceQuantScatter"):
        aclnn.run_op("quant_scatter", api, args, out=args["input"])
    return self


def npu_quant_scatter(self, indices, updates, quant_scales, quant_zero_points=None, axis=DEFAULT_AXIS, quant_axis=DEFAULT_QUANT_AXIS,
                      reduce="update", dst_type=None, round_mode="rint"):
    api = "npu_quant_scatter"
    args = _quant_scatter_args(self, indices, updates, quant_scales, quant_zero_points, axis, quant_axis, reduce, dst_type,
                               round_mode, api)
    call = aclnn.OpCall.prepare("quant_scatter", api, args)
    out = new_tensor(self.shape, self.dtype, self.device.index)
    result = device_tensor(out, api, "the result")
    with aclnn.host_call("aclnnInplaceQuantScatter"):
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
    out = new_tensor(self.shape, TORCH_DTYPES[output_dtype(_dtype_of(dtype), div_mode)], self.device.index)
    args = {"input": device_tensor(self, api, "input"), "scales": device_tensor(scales, api, "scales"),
            "zero_points": None if zero_points is None else device_tensor(zero_points, api, "zero_points"),
            "out": device_tensor(out, api, "the result"), "dtype": _dtype_of(dtype), "axis": axis, "div_mode": div_mode}
    with aclnn.host_call("aclnnQuantize" if div_mode else "aclnnAscendQuantV3"):
        aclnn.run_op("quantize", api, args, out=args["out"])
    return out


def _unmodelled(api: str, **given) -> None:
    """Arguments of the schema npusim does not model: each must be None."""
    for name, value in given.items():
        if value is not None:
            raise OpArgumentError(f"{api}: {name} = {value!r}: not modelled by npusim (its dtype overrides are for fp8 / int4 inputs); pass None")


def _quant_matmul_out(x1, x2, output_dtype) -> torch.Tensor:
    shape = quant_result_shape(tuple(x1.shape), tuple(x2.shape))
    return torch.empty(shape, dtype=TORCH_DTYPES[quant_output_dtype(_dtype_of(output_dtype))], device=x1.device)


def npu_quant_matmul(x1, x2, scale, *, offset=None, pertoken_scale=None, bias=None, output_dtype=None, x1_dtype=None, x2_dtype=None,
                     pertoken_scale_dtype=None, scale_dtype=None, group_sizes=None, y_scale=None):
    api = "npu_quant_matmul"
    _unmodelled(api, x1_dtype=x1_dtype, x2_dtype=x2_dtype, pertoken_scale_dtype=pertoken_scale_dtype, scale_dtype=scale_dtype, y_scale=y_scale)
    dtype = quant_output_dtype(_dtype_of(output_dtype))
    out = new_tensor(quant_result_shape(tuple(x1.shape), tuple(x2.shape)), TORCH_DTYPES[dtype], x1.device.index)
    result = device_tensor(out, api, "the result")
    tensors = {"x1": x1, "x2": x2, "scale": scale, "offset": offset, "pertoken_scale": pertoken_scale, "bias": bias}
    args = {name: None if t is None else device_tensor(t, api, name) for name, t in tensors.items()}
    with aclnn.host_call("aclnnQuantMatmulV5"):
        aclnn.run_op("quant_matmul", api, {**args, "out": result, "output_dtype": _dtype_of(output_dtype), "group_sizes": group_sizes},
                     out=result)
    return out


def _fake_quant_matmul(x1, x2, scale, *, output_dtype=None, **_):
    return _quant_matmul_out(x1, x2, output_dtype)


def _grouped_dtype(x, scale, output_dtype):
    name = output_dtype if isinstance(output_dtype, str) or output_dtype is None else _dtype_of(output_dtype)
    scale_dtype = None if not scale else NUMPY_DTYPES[scale[0].dtype]
    return TORCH_DTYPES[grouped_output_dtype(name, NUMPY_DTYPES[x[0].dtype], scale_dtype)]


def npu_grouped_matmul(x, weight, *, bias=None, scale=None, offset=None, antiquant_scale=None, antiquant_offset=None, per_token_scale=None,
                       group_list=None, activation_input=None, activation_quant_scale=None, activation_quant_offset=None, split_item=0,
                       group_type=None, group_list_type=0, act_type=0, tuning_config=None, output_dtype=None, x_dtype=None, weight_dtype=None,
                       scale_dtype=None, per_token_scale_dtype=None):
    api = "npu_grouped_matmul"
    _unmodelled(api, activation_input=activation_input, activation_quant_scale=activation_quant_scale,
                activation_quant_offset=activation_quant_offset, antiquant_offset=antiquant_offset, x_dtype=x_dtype,
                weight_dtype=weight_dtype, scale_dtype=scale_dtype, per_token_scale_dtype=per_token_scale_dtype)
    dtype = _grouped_dtype(x, scale, output_dtype)
    shapes = grouped_result_shapes([tuple(t.shape) for t in x], [tuple(t.shape) for t in weight], split_item)
    outs = [new_tensor(shape, dtype, x[0].device.index) for shape in shapes]

    def devices(name, tensors):
        return None if tensors is None else [device_tensor(t, api, f"{name}[{i}]") for i, t in enumerate(tensors)]

    lists = {"x": devices("x", x), "weight": devices("weight", weight), "bias": devices("bias", bias), "scale": devices("scale", scale),
             "per_token_scale": devices("per_token_scale", per_token_scale), "y": devices("y", outs)}
    if isinstance(group_list, torch.Tensor):
        group_list = device_tensor(group_list, api, "group_list")
    name = output_dtype if isinstance(output_dtype, str) or output_dtype is None else _dtype_of(output_dtype)
    args = grouped_arguments(lists, group_list=group_list, offset=offset, antiquant_scale=antiquant_scale, split_item=split_item,
                             group_type=group_type, group_list_type=group_list_type, act_type=act_type, output_dtype=name)
    with aclnn.host_call("aclnnGroupedMatmulV4"):
        aclnn.run_op("grouped_matmul", api, args, out=lists["y"][0])
    return outs


def npu_grouped_matmul_list(x, weight, *, bias=None, scale=None, offset=None, antiquant_scale=None, antiquant_offset=None, per_token_scale=None,
                            group_list=None, activation_input=None, activation_quant_scale=None, activation_quant_offset=None, split_item=0,
                            group_type=None, group_list_type=0, act_type=0, output_dtype=None):
    return npu_grouped_matmul(x, weight, bias=bias, scale=scale, offset=offset, antiquant_scale=antiquant_scale, antiquant_offset=antiquant_offset,
                              per_token_scale=per_token_scale, group_list=None if group_list is None else list(group_list),
                              activation_input=activation_input, activation_quant_scale=activation_quant_scale,
                              activation_quant_offset=activation_quant_offset, split_item=split_item, group_type=group_type,
                              group_list_type=group_list_type, act_type=act_type,
                              output_dtype=None if output_dtype is None else str(output_dtype).removeprefix("torch."))


def _fake_grouped_matmul(x, weight, *, scale=None, split_item=0, output_dtype=None, **_):
    dtype = _grouped_dtype(x, scale, output_dtype if not isinstance(output_dtype, torch.dtype) else str(output_dtype).removeprefix("torch."))
    shapes = grouped_result_shapes([tuple(t.shape) for t in x], [tuple(t.shape) for t in weight], split_item)
    return [torch.empty(shape, dtype=dtype, device=x[0].device) for shape in shapes]


def _fake_same(self, *args, **kwargs):
    return self


def _fake_like(self, *args, **kwargs):
    return torch.empty_like(self)


def _fake_quantize(self, scales, zero_points, dtype, axis=1, div_mode=True):
    return torch.empty(self.shape, dtype=TORCH_DTYPES[output_dtype(_dtype_of(dtype), div_mode)], device=self.device)


DEVICE_OPS = {"npu_dequant_swiglu_quant": ("dequant_swiglu_quant", "aclnnDequantSwigluQuant"),
              "npu_moe_gating_top_k": ("moe_gating_top_k", "aclnnMoeGatingTopK"),
              "npu_moe_distribute_dispatch": ("moe_distribute_dispatch", "aclnnMoeDistributeDispatch"),
              "npu_moe_distribute_dispatch_v2": ("moe_distribute_dispatch_v2", "aclnnMoeDistributeDispatchV2"),
              "npu_moe_distribute_combine": ("moe_distribute_combine", "aclnnMoeDistributeCombine"),
              "npu_moe_distribute_combine_v2": ("moe_distribute_combine_v2", "aclnnMoeDistributeCombineV2")}
"""torch_npu's ops written on the device when they start (DeviceOp): the registered op and the aclnn API each calls."""
MOE_DTYPE_OVERRIDES = ("y_dtype", "x_dtype", "scales_dtype")


def _device_args(api: str, kwargs: dict, convert) -> dict:
    """The call's arguments with its tensors converted (``convert(tensor, name)``); the Ascend 950
    dtype overrides refused."""
    args = {}
    for name, value in kwargs.items():
        if name in MOE_DTYPE_OVERRIDES:
            if value is not None:
                raise OpArgumentError(f"torch_npu.{api}: {name} = {value} (an Ascend 950 dtype override) is not modelled; leave it None")
            continue
        args[name] = convert(value, name) if isinstance(value, torch.Tensor) else value
    return args


def _device_kernel(api: str):
    name, aclnn_api = DEVICE_OPS[api]
    params = _schema_params(SCHEMAS[api])

    def kernel(*args, **kwargs):
        kwargs.update(zip(params, args))
        call = aclnn.DeviceOpCall.prepare(name, api, _device_args(api, kwargs, lambda t, n: device_tensor(t, api, n)))
        outputs = {out: new_tensor(shape, TORCH_DTYPES[dtype], call.die, control=out in call.op.control_outputs)
                   for out, (shape, dtype) in call.output_specs().items()}
        with aclnn.host_call(aclnn_api):
            call.issue({out: device_tensor(t, api, out) for out, t in outputs.items()})
        values = tuple(outputs.values())
        return values if len(values) > 1 else values[0]

    def fake(*args, **kwargs):
        kwargs.update(zip(params, args))
        op = OPS.get(name)
        spec = current_session().system.spec
        problem = op.check_call(spec, {**_device_args(api, kwargs, _FakeTensor.of), "api": api})
        device = next(value.device for value in kwargs.values() if isinstance(value, torch.Tensor))
        values = tuple(torch.empty(shape, dtype=TORCH_DTYPES[dtype], device=device)
                       for shape, dtype in op.outputs(problem).values())
        return values if len(values) > 1 else values[0]

    return kernel, fake


class _FakeTensor:
    """A traced tensor as the checks see it: its shape and numpy dtype."""

    def __init__(self, t: torch.Tensor) -> None:
        self.shape, self.dtype, self.ndim = tuple(t.shape), NUMPY_DTYPES[t.dtype], t.dim()

    @classmethod
    def of(cls, t: torch.Tensor, name: str) -> _FakeTensor:
        return cls(t)


def _schema_params(schema: str) -> list[str]:
    """The positional parameter names of an op schema (before ``*``)."""
    inside = schema[schema.index("(") + 1 : schema.index(")")]
    names = []
    for part in inside.split(","):
        part = part.strip()
        if part == "*":
            break
        names.append(part.split()[-1].split("=")[0])
    return names


KERNELS: dict[str, tuple[Callable, Callable]] = {
    "npu_quant_scatter": (npu_quant_scatter, _fake_like), "npu_quant_scatter_": (npu_quant_scatter_, _fake_same),
    "npu_quantize": (npu_quantize, _fake_quantize), "scatter_update": (scatter_update, _fake_like),
    "scatter_update_": (scatter_update_, _fake_same), "npu_quant_matmul": (npu_quant_matmul, _fake_quant_matmul),
    "npu_grouped_matmul": (npu_grouped_matmul, _fake_grouped_matmul),
    "npu_grouped_matmul.List": (npu_grouped_matmul_list, _fake_grouped_matmul),
    **{api: _device_kernel(api) for api in DEVICE_OPS}}


def register(library: torch.library.Library) -> None:
    """Define the ``npu::`` ops with their npu kernels and fake kernels (the MC2 ops': :mod:`.mc2`)."""
    from npusim.frontend.torch_device import mc2

    for name, schema in {**SCHEMAS, **mc2.SCHEMAS}.items():
        library.define(schema)
        kernel, fake = {**KERNELS, **mc2.KERNELS}[name]
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
