"""torch_npu.npu_moe_distribute_combine (aclnnMoeDistributeCombine) as a registered op (:mod:`.op`)."""

from __future__ import annotations

from npusim.config.registry import OPS
from npusim.kernels.moe_distribute.op import MoeCombine


@OPS.register("moe_distribute_combine")
class MoeDistributeCombine(MoeCombine):
    name = "moe_distribute_combine"
    kernel_name = "MoeDistributeCombine"
    version = 1
    tensors = ("expand_x", "expert_ids", "expand_idx", "ep_send_counts", "expert_scales", "tp_send_counts", "x_active_mask",
               "activation_scale", "weight_scale", "group_list", "expand_scales", "shared_expert_x")
    optional = frozenset({"tp_send_counts", "x_active_mask", "activation_scale", "weight_scale", "group_list", "expand_scales",
                          "shared_expert_x"})
