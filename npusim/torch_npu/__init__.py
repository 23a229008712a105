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

from npusim import __version__ as _npusim_version
from npusim.errors import OpArgumentError, UsageError
from npusim.frontend.aclnn import OpCall, copy, options, run_op
from npusim.frontend.tensor import empty
from npusim.kernels.op import OpOptions as Options
from npusim.kernels.quant_scatter.checks import DEFAULT_AXIS, DEFAULT_QUANT_AXIS

__all__ = ["Options", "__version__", "get_npu_format", "npu_dequant_swiglu_quant", "npu_format_cast", "npu_moe_gating_top_k",
           "npu_moe_distribute_combine", "npu_moe_distribute_combine_v2", "npu_moe_distribute_dispatch", "npu_moe_distribute_dispatch_v2",
           "npu_quant_scatter", "npu_quant_scatter_", "npu_quantize", "options", "scatter_update", "scatter_update_"]

TORCH = importlib.util.find_spec("torch") is not None
"""Whether torch is installed: then the ops also take torch npu tensors."""

if TORCH:
    import torch

    from npusim.frontend.torch_device import install as _install

    _install()
    npu = torch.npu
    __all__.append("npu")

__version__ = f"{torch.__version__.split('+')[0] if TORCH else '0'}+npusim.{_npusim_version}"
"""torch_npu's version follows torch's (torch_npu 2.6.0 goes with torch 2.6.0): the installed torch's,
with npusim's version as the local part (``2.13.0+npusim.0.1.0``)."""

ND_FORMATS = {0: "NCHW", 1: "NHWC", 2: "ND"}
"""ACL formats whose bytes are the tensor's plain row-major layout (acl_base.h aclFormat): the only
layout npusim's npu tensors have."""
OTHER_FORMATS = {3: "NC1HWC0", 4: "FRACTAL_Z", 29: "FRACTAL_NZ"}


def get_npu_format(tensor) -> int:
    """``torch_npu.get_npu_format``: the tensor's ACL format; npusim's npu tensors are ND (2)."""
    return 2


def npu_format_cast(tensor, acl_format: int, customize_dtype=None):
    """``torch_npu.npu_format_cast(tensor, acl_format)``: the tensor in another ACL storage format.
    npusim's tensors are ND: a cast to an ND format (0 NCHW, 1 NHWC, 2 ND) returns the tensor
    itself (its bytes are already in that layout); a private format (29 FRACTAL_NZ ...) is not
    modelled and is refused, naming it."""
    if isinstance(acl_format, bool) or not isinstance(acl_format, int):
        raise OpArgumentError(f"npu_format_cast: acl_format = {acl_format!r}: must be an int (an aclFormat: 2 is ND, 29 FRACTAL_NZ)")
    if acl_format in ND_FORMATS:
        return tensor
    name = OTHER_FORMATS.get(acl_format, f"format {acl_format}")
    raise UsageError(f"npu_format_cast: acl_format = {acl_format} ({name}): npusim models ND tensors only (formats "
                     f"{', '.join(f'{k} {v}' for k, v in ND_FORMATS.items())}); private formats such as FRACTAL_NZ are not "
                     "modelled: leave the tensor ND")


def _is_torch(value) -> bool:
    return TORCH and isinstance(value, torch.Tensor)


def _dtype_name(dtype) -> str | None:
    """A dtype argument (None, a name, a numpy or torch dtype) as its name."""
    if dtype is None or isinstance(dtype, str):
        return dtype
    if TORCH and isinstance(dtype, torch.dtype):
        return str(dtype).removeprefix("torch.")
    import numpy as np

    return np.dtype(dtype).name


def npu_quant_scatter_(input, indices, updates, quant_scales, quant_zero_points=None, axis=DEFAULT_AXIS, quant_axis=DEFAULT_QUANT_AXIS, reduce="update",
                       dst_type=None, round_mode="rint"):
    """Quantise ``updates`` to int8 (``rint(f32(updates) / f32(quant_scales) [+ f32(zero points)])``,
    saturated) and write them into ``input`` along ``axis`` at ``indices``, in place; returns ``input``.

    ``indices`` is 1-D ``[B]`` (batch ``b`` goes to rows ``indices[b]`` of input batch ``b``) or 2-D
    ``[B, 2]`` (``(batch, row)`` pairs). Empty tensors make it a no-op. ``axis`` and ``quant_axis``
    default to the documented signature's 0 and 1, which the op refuses on every product it runs
    on, as on the device: give them (``axis=-2, quant_axis=-1``). ``dst_type`` (None or int8)
    and ``round_mode`` ('rint') are the schema's; other values are Ascend 950 features, refused.
    See ``docs/quant_scatter.md``.
    """
    if _is_torch(input):
        return torch.ops.npu.npu_quant_scatter_(input, indices, updates, quant_scales, quant_zero_points, axis, quant_axis, reduce,
                                                dst_type, round_mode)
    call = OpCall.prepare("quant_scatter", "npu_quant_scatter_", _quant_scatter_args(locals()))
    call.issue(input)
    return input


def npu_quant_scatter(input, indices, updates, quant_scales, quant_zero_points=None, axis=DEFAULT_AXIS, quant_axis=DEFAULT_QUANT_AXIS, reduce="update",
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
    ``input.shape[axis]``; a new tensor. ``div_mode=False`` (aclnnAscendQuantV3) multiplies by the
    scales instead (``rint(f32(input) * f32(scales) [+ f32(zero_points)])`` to int8)."""
    if _is_torch(input):
        return torch.ops.npu.npu_quantize(input, scales, zero_points, dtype, axis, div_mode)
    from npusim.kernels.quantize.checks import output_dtype

    name = _dtype_name(dtype)
    out = empty(input.shape, output_dtype(name, bool(div_mode)), device=input.device)
    run_op("quantize", "npu_quantize", {"input": input, "scales": scales, "zero_points": zero_points, "out": out, "dtype": name,
                                        "axis": axis, "div_mode": div_mode}, out=out)
    return out


def _dtype_code(dtype):
    """A dtype argument of an ``int? dtype`` schema slot: torch passes its ScalarType code."""
    if dtype is None or not TORCH:
        return dtype
    if isinstance(dtype, str):
        dtype = getattr(torch, dtype)
    from npusim.frontend.torch_device.ops import SCALAR_TYPE_CODES

    return {d: code for code, d in SCALAR_TYPE_CODES.items()}[dtype]


def npu_quant_matmul(x1, x2, scale, *, offset=None, pertoken_scale=None, bias=None, output_dtype=None, group_sizes=None, **dtypes):
    """int8 ``x1 @ x2`` dequantised: ``x1 @ x2 * scale + offset``, ``(x1 @ x2 + bias) * scale`` (int32
    bias), ``x1 @ x2 * scale [* pertoken_scale] + bias`` (bfloat16 / float32 bias); the result int8
    (default), float16 or bfloat16 (``output_dtype``). See docs/torch.md (numerics, timing)."""
    if _is_torch(x1):
        return torch.ops.npu.npu_quant_matmul(x1, x2, scale, offset=offset, pertoken_scale=pertoken_scale, bias=bias,
                                              output_dtype=_dtype_code(output_dtype), group_sizes=group_sizes, **dtypes)
    from npusim.kernels.quant_matmul.checks import output_dtype as result_dtype
    from npusim.kernels.quant_matmul.checks import result_shape

    name = _dtype_name(output_dtype)
    out = empty(result_shape(tuple(x1.shape), tuple(x2.shape)), result_dtype(name), device=x1.device)
    run_op("quant_matmul", "npu_quant_matmul", {"x1": x1, "x2": x2, "scale": scale, "offset": offset, "pertoken_scale": pertoken_scale,
                                                "bias": bias, "out": out, "output_dtype": name, "group_sizes": group_sizes}, out=out)
    return out


def npu_grouped_matmul(x, weight, *, bias=None, scale=None, offset=None, antiquant_scale=None, antiquant_offset=None, per_token_scale=None,
                       group_list=None, split_item=0, group_type=None, group_list_type=0, act_type=0, output_dtype=None, **others):
    """Many matrix products in one kernel: groups of one x's rows (``group_type=0``, ``group_list``
    counts or running sums, one y) or separate products (``group_type=-1``); int8 with per-channel
    ``scale`` and ``per_token_scale``, or float16 / bfloat16 / float32. Returns a list of tensors.
    See docs/torch.md."""
    if _is_torch(x[0]):
        return torch.ops.npu.npu_grouped_matmul(x, weight, bias=bias, scale=scale, offset=offset, antiquant_scale=antiquant_scale,
                                                antiquant_offset=antiquant_offset, per_token_scale=per_token_scale, group_list=group_list,
                                                split_item=split_item, group_type=group_type, group_list_type=group_list_type,
                                                act_type=act_type, output_dtype=_dtype_code(output_dtype), **others)
    from npusim.kernels.grouped_matmul.checks import output_dtype as result_dtype
    from npusim.kernels.grouped_matmul.checks import result_shapes
    from npusim.kernels.grouped_matmul.op import arguments

    name = _dtype_name(output_dtype)
    dtype = result_dtype(name, x[0].dtype, None if not scale else scale[0].dtype)
    outs = [empty(shape, dtype, device=x[0].device) for shape in result_shapes([tuple(t.shape) for t in x], [tuple(t.shape) for t in weight],
                                                                                 split_item)]
    lists = {"x": x, "weight": weight, "bias": bias, "scale": scale, "per_token_scale": per_token_scale, "y": outs}
    args = arguments(lists, group_list=group_list, offset=offset, antiquant_scale=antiquant_scale, split_item=split_item,
                     group_type=group_type, group_list_type=group_list_type, act_type=act_type, output_dtype=name)
    run_op("grouped_matmul", "npu_grouped_matmul", args, out=outs[0])
    return outs


__all__ += ["npu_grouped_matmul", "npu_quant_matmul"]

# -- MoE expert parallelism (docs/moe.md) ------------------------------------------------------------


def npu_moe_gating_top_k(x, k, *, bias=None, input_ids=None, tid2eid=None, k_group=1, group_count=1, group_select_mode=0, renorm=0,
                         norm_type=0, out_flag=False, routed_scaling_factor=1.0, eps=1e-20):
    """A router's choice: the norm (``norm_type`` 1 sigmoid, 0 softmax) of each token's scores, plus
    ``bias`` for the choice, the ``k_group`` best of ``group_count`` groups, the ``k`` best experts of
    those; returns ``(y, expert_idx, normOut)``. See docs/moe.md."""
    args = dict(locals())
    if _is_torch(x):
        return torch.ops.npu.npu_moe_gating_top_k(**args)
    return _device_op("moe_gating_top_k", "npu_moe_gating_top_k", args)


def npu_dequant_swiglu_quant(x, *, weight_scale=None, activation_scale=None, bias=None, quant_scale=None, quant_offset=None,
                             group_index=None, activate_left=False, quant_mode=0, dst_type=None, round_mode=None, activate_dim=None,
                             swiglu_mode=0, clamp_limit=7.0, glu_alpha=1.702, glu_bias=1.0):
    """The activation between an MoE layer's grouped matmuls: ``x`` (int32 dequantised by
    ``weight_scale`` and ``activation_scale``, or float16 / bfloat16) through SwiGLU
    (``activate_left``: the left half activated), times ``quant_scale``, quantised per row to int8
    (``quant_mode=1``); ``group_index`` the rows of each group. Returns ``(y, scale)``. See
    docs/moe.md."""
    args = dict(locals())
    if _is_torch(x):
        return torch.ops.npu.npu_dequant_swiglu_quant(**args)
    return _device_op("dequant_swiglu_quant", "npu_dequant_swiglu_quant", args)


def _device_op(name: str, api: str, args: dict):
    """Check, allocate the outputs on the call's device, issue; returns the outputs in order."""
    from npusim.frontend.aclnn import DeviceOpCall

    call = DeviceOpCall.prepare(name, api, args)
    outputs = {out: empty(shape, dtype, device=call.die, control=out in call.op.control_outputs)
               for out, (shape, dtype) in call.output_specs().items()}
    call.issue(outputs)
    return tuple(outputs.values())


def npu_moe_distribute_dispatch_v2(x, expert_ids, group_ep, ep_world_size, ep_rank_id, moe_expert_num, *, scales=None, x_active_mask=None,
                                   expert_scales=None, elastic_info=None, performance_info=None, group_tp="", tp_world_size=0, tp_rank_id=0,
                                   expert_shard_type=0, shared_expert_num=1, shared_expert_rank_num=0, quant_mode=0, global_bs=0,
                                   expert_token_nums_type=1, comm_alg="", zero_expert_num=0, copy_expert_num=0, const_expert_num=0,
                                   y_dtype=None, x_dtype=None, scales_dtype=None):
    """Send each token of this rank to the ranks of its top-k experts (called on every rank of the
    EP group ``group_ep``, each with its ``ep_rank_id``); returns ``(expand_x, dynamic_scales,
    assist_info_for_combine, expert_token_nums, ep_recv_counts, tp_recv_counts, expand_scales)``:
    the tokens this rank's experts received (int8 with ``quant_mode=2``, their scales in
    ``dynamic_scales``), grouped by local expert then sender. See docs/moe.md."""
    args = dict(locals())
    if _is_torch(x):
        return torch.ops.npu.npu_moe_distribute_dispatch_v2(**args)
    for ignored in ("y_dtype", "x_dtype", "scales_dtype"):
        if args.pop(ignored) is not None:
            raise UsageError(f"npu_moe_distribute_dispatch_v2: {ignored} (an Ascend 950 dtype override) is not modelled; leave it None")
    return _device_op("moe_distribute_dispatch_v2", "npu_moe_distribute_dispatch_v2", args)


def npu_moe_distribute_combine_v2(expand_x, expert_ids, assist_info_for_combine, ep_send_counts, expert_scales, group_ep, ep_world_size,
                                  ep_rank_id, moe_expert_num, *, tp_send_counts=None, x_active_mask=None, expand_scales=None,
                                  shared_expert_x=None, elastic_info=None, ori_x=None, const_expert_alpha_1=None, const_expert_alpha_2=None,
                                  const_expert_v=None, performance_info=None, group_tp="", tp_world_size=0, tp_rank_id=0,
                                  expert_shard_type=0, shared_expert_num=1, shared_expert_rank_num=0, global_bs=0, comm_quant_mode=0,
                                  comm_alg="", zero_expert_num=0, copy_expert_num=0, const_expert_num=0):
    """Send each expert output back to the rank of its token and sum each token's outputs weighted
    by ``expert_scales`` (float32); returns the combined tokens (BS, H). See docs/moe.md."""
    args = dict(locals())
    if _is_torch(expand_x):
        return torch.ops.npu.npu_moe_distribute_combine_v2(**args)
    return _device_op("moe_distribute_combine_v2", "npu_moe_distribute_combine_v2", args)[0]


def npu_moe_distribute_dispatch(x, expert_ids, group_ep, ep_world_size, ep_rank_id, moe_expert_num, *, scales=None, x_active_mask=None,
                                expert_scales=None, group_tp="", tp_world_size=0, tp_rank_id=0, expert_shard_type=0, shared_expert_num=1,
                                shared_expert_rank_num=0, quant_mode=0, global_bs=0, expert_token_nums_type=1):
    """The first dispatch op: as :func:`npu_moe_distribute_dispatch_v2`, returning ``expand_idx``
    (BS * K: each pair's position among this rank's pairs of its expert) in place of the assist
    entries. See docs/moe.md."""
    args = dict(locals())
    if _is_torch(x):
        return torch.ops.npu.npu_moe_distribute_dispatch(**args)
    return _device_op("moe_distribute_dispatch", "npu_moe_distribute_dispatch", args)


def npu_moe_distribute_combine(expand_x, expert_ids, expand_idx, ep_send_counts, expert_scales, group_ep, ep_world_size, ep_rank_id,
                               moe_expert_num, *, tp_send_counts=None, x_active_mask=None, activation_scale=None, weight_scale=None,
                               group_list=None, expand_scales=None, shared_expert_x=None, group_tp="", tp_world_size=0, tp_rank_id=0,
                               expert_shard_type=0, shared_expert_num=1, shared_expert_rank_num=0, global_bs=0, out_dtype=0,
                               comm_quant_mode=0, group_list_type=0):
    """The first combine op, the partner of :func:`npu_moe_distribute_dispatch`. See docs/moe.md."""
    args = dict(locals())
    if _is_torch(expand_x):
        return torch.ops.npu.npu_moe_distribute_combine(**args)
    return _device_op("moe_distribute_combine", "npu_moe_distribute_combine", args)[0]

def _mc2(name: str):
    """An MC2 op (a matmul fused with a collective, docs/collectives.md): torch npu tensors of ranks
    whose process group has the hccl backend; its communicator named by ``hcom``."""
    def op(*args, **kwargs):
        if not TORCH:
            from npusim.errors import UsageError

            raise UsageError(f"torch_npu.{name} runs in torch programs (its hcom is a torch.distributed process group's "
                             "communicator); install npusim[torch]")
        return getattr(torch.ops.npu, name)(*args, **kwargs)

    op.__name__ = op.__qualname__ = name
    return op


npu_mm_all_reduce_base = _mc2("npu_mm_all_reduce_base")
"""``all_reduce(x1 @ x2)`` in one launch, each row tile's all-reduce overlapping the next tile's matmul."""
npu_mm_reduce_scatter_base = _mc2("npu_mm_reduce_scatter_base")
"""``reduce_scatter(input @ x2)`` over ``world_size`` ranks, pipelined by row tiles."""
npu_all_gather_base_mm = _mc2("npu_all_gather_base_mm")
"""``(all_gather(input) @ x2, all_gather(input))``: the rank's own rows multiplied while the others arrive."""
__all__ += ["npu_all_gather_base_mm", "npu_mm_all_reduce_base", "npu_mm_reduce_scatter_base"]
