"""torch_npu.npu_moe_distribute_combine_v2 (aclnnMoeDistributeCombineV2..V4) as a registered op (:mod:`.op`)."""

from __future__ import annotations

from npusim.config.registry import OPS
from npusim.kernels.moe_distribute.op import MoeCombine


@OPS.register("moe_distribute_combine_v2")
class MoeDistributeCombineV2(MoeCombine):
    name = "moe_distribute_combine_v2"
    kernel_name = "MoeDistributeCombineV2"
    version = 2
