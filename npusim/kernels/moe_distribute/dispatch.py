"""torch_npu.npu_moe_distribute_dispatch (aclnnMoeDistributeDispatch) as a registered op (:mod:`.op`)."""

from __future__ import annotations

from npusim.config.registry import OPS
from npusim.kernels.moe_distribute.op import MoeDispatch


@OPS.register("moe_distribute_dispatch")
class MoeDistributeDispatch(MoeDispatch):
    name = "moe_distribute_dispatch"
    kernel_name = "MoeDistributeDispatch"
    version = 1
    tensors = ("x", "expert_ids", "scales", "x_active_mask", "expert_scales")
    optional = frozenset({"scales", "x_active_mask", "expert_scales"})
