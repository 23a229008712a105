"""torch_npu's MC2 ops as torch ops (``torch.ops.npu.npu_mm_all_reduce_base``,
``npu_mm_reduce_scatter_base``, ``npu_all_gather_base_mm``) with op-plugin's schemas: ``hcom`` names
the communicator of a process group of the hccl backend (``pg._get_backend(torch.device("npu"))
.get_hccl_comm_name(rank)``, as torch_npu's pages call it); each call is one eager host call of its
aclnn API whose pieces :mod:`npusim.frontend.hccl.mc2` queues on the current stream and the group's
HCCL stream."""

from __future__ import annotations

import torch

from npusim.frontend import aclnn
from npusim.frontend.hccl import mc2
from npusim.frontend.torch_device.distributed import group_of_comm_name
from npusim.frontend.torch_device.tensors import device_tensor, new_tensor

SCHEMAS = {
    "npu_mm_all_reduce_base": "npu_mm_all_reduce_base(Tensor x1, Tensor x2, str hcom, *, str reduce_op='sum', Tensor? bias=None, "
                              "Tensor? antiquant_scale=None, Tensor? antiquant_offset=None, Tensor? x3=None, Tensor? dequant_scale=None, "
                              "Tensor? pertoken_scale=None, Tensor? comm_quant_scale_1=None, Tensor? comm_quant_scale_2=None, "
                              "int antiquant_group_size=0, int comm_turn=0) -> Tensor",
    "npu_mm_reduce_scatter_base": "npu_mm_reduce_scatter_base(Tensor self, Tensor x2, str hcom, int world_size, *, str reduce_op='sum', "
                                  "Tensor? bias=None, Tensor? x1_scale=None, Tensor? x2_scale=None, int comm_turn=0, "
                                  "int? output_dtype=None, str? comm_mode=None) -> Tensor",
    "npu_all_gather_base_mm": "npu_all_gather_base_mm(Tensor self, Tensor x2, str hcom, int world_size, *, Tensor? bias=None, "
                              "Tensor? x1_scale=None, Tensor? x2_scale=None, int gather_index=0, bool gather_output=True, "
                              "int comm_turn=0, int? output_dtype=None, str? comm_mode=None) -> (Tensor, Tensor)",
}
"""op-plugin's schema of each op (op_plugin_functions.yaml; torchair's converters quote the same)."""


def _given(api: str, **optional) -> list[str]:
    """The optional arguments given that npusim does not model (each op's page: quantisation, x3, a bias)."""
    return [name for name, value in optional.items() if value is not None and value is not False]


def _mode(comm_mode) -> list[str]:
    return [] if comm_mode in (None, "ai_cpu") else ["comm_mode"]


def npu_mm_all_reduce_base(x1, x2, hcom, *, reduce_op="sum", bias=None, antiquant_scale=None, antiquant_offset=None, x3=None,
                           dequant_scale=None, pertoken_scale=None, comm_quant_scale_1=None, comm_quant_scale_2=None,
                           antiquant_group_size=0, comm_turn=0):
    api = "npu_mm_all_reduce_base"
    group = group_of_comm_name(hcom, api)
    out = new_tensor([*x1.shape[:-1], x2.shape[-1]], x1.dtype, x1.device.index)
    unsupported = _given(api, bias=bias, antiquant_scale=antiquant_scale, antiquant_offset=antiquant_offset, x3=x3,
                         dequant_scale=dequant_scale, pertoken_scale=pertoken_scale, comm_quant_scale_1=comm_quant_scale_1,
                         comm_quant_scale_2=comm_quant_scale_2) + (["antiquant_group_size"] if antiquant_group_size else [])
    with aclnn.host_call("aclnnMatmulAllReduce"):
        mc2.matmul_all_reduce(group.communicator, group.rank(), device_tensor(x1, api, "x1"), device_tensor(x2, api, "x2"),
                              device_tensor(out, api, "the result"), group.hccl_stream(x1.device.index), api=api, unsupported=unsupported,
                              reduce_op=reduce_op, comm_turn=comm_turn)
    return out


def npu_mm_reduce_scatter_base(self, x2, hcom, world_size, *, reduce_op="sum", bias=None, x1_scale=None, x2_scale=None, comm_turn=0,
                               output_dtype=None, comm_mode=None):
    api = "npu_mm_reduce_scatter_base"
    group = group_of_comm_name(hcom, api)
    rows = self.shape[0] // world_size if world_size else self.shape[0]
    out = new_tensor([rows, x2.shape[-1]], self.dtype, self.device.index)
    unsupported = _given(api, bias=bias, x1_scale=x1_scale, x2_scale=x2_scale, output_dtype=output_dtype) + _mode(comm_mode)
    with aclnn.host_call("aclnnMatmulReduceScatter"):
        mc2.matmul_reduce_scatter(group.communicator, group.rank(), device_tensor(self, api, "input"), device_tensor(x2, api, "x2"),
                                  device_tensor(out, api, "the result"), group.hccl_stream(self.device.index), api=api,
                                  world_size=world_size, unsupported=unsupported, reduce_op=reduce_op, comm_turn=comm_turn)
    return out


def npu_all_gather_base_mm(self, x2, hcom, world_size, *, bias=None, x1_scale=None, x2_scale=None, gather_index=0, gather_output=True,
                           comm_turn=0, output_dtype=None, comm_mode=None):
    api = "npu_all_gather_base_mm"
    group = group_of_comm_name(hcom, api)
    device = self.device.index
    out = new_tensor([self.shape[0] * world_size, x2.shape[-1]], self.dtype, device)
    gathered = new_tensor([self.shape[0] * world_size, self.shape[1]] if gather_output else [0], self.dtype, device)
    unsupported = _given(api, bias=bias, x1_scale=x1_scale, x2_scale=x2_scale, output_dtype=output_dtype) + _mode(comm_mode) + (
        ["gather_index"] if gather_index else [])
    with aclnn.host_call("aclnnAllGatherMatmul"):
        mc2.all_gather_matmul(group.communicator, group.rank(), device_tensor(self, api, "input"), device_tensor(x2, api, "x2"),
                              device_tensor(out, api, "the result"), device_tensor(gathered, api, "gather_out") if gather_output else None,
                              group.hccl_stream(device), api=api, world_size=world_size, unsupported=unsupported, comm_turn=comm_turn)
    return out, gathered


def _fake_mm_all_reduce(x1, x2, hcom, **kwargs):
    return torch.empty([*x1.shape[:-1], x2.shape[-1]], dtype=x1.dtype, device=x1.device)


def _fake_mm_reduce_scatter(self, x2, hcom, world_size, **kwargs):
    return torch.empty([self.shape[0] // world_size, x2.shape[-1]], dtype=self.dtype, device=self.device)


def _fake_all_gather_mm(self, x2, hcom, world_size, **kwargs):
    gathered = [self.shape[0] * world_size, self.shape[1]] if kwargs.get("gather_output", True) else [0]
    return (torch.empty([self.shape[0] * world_size, x2.shape[-1]], dtype=self.dtype, device=self.device),
            torch.empty(gathered, dtype=self.dtype, device=self.device))


KERNELS = {"npu_mm_all_reduce_base": (npu_mm_all_reduce_base, _fake_mm_all_reduce),
           "npu_mm_reduce_scatter_base": (npu_mm_reduce_scatter_base, _fake_mm_reduce_scatter),
           "npu_all_gather_base_mm": (npu_all_gather_base_mm, _fake_all_gather_mm)}
