"""torch_npu.npu_moe_distribute_dispatch_v2 (aclnnMoeDistributeDispatchV2..V4) as a registered op (:mod:`.op`)."""

from __future__ import annotations

from npusim.config.registry import OPS
from npusim.kernels.moe_distribute.op import MoeDispatch


@OPS.register("moe_distribute_dispatch_v2")
class MoeDistributeDispatchV2(MoeDispatch):
    name = "moe_distribute_dispatch_v2"
    kernel_name = "MoeDistributeDispatchV2"
    version = 2
