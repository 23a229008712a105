"""torch_npu's ``npu_moe_gating_top_k`` (aclnnMoeGatingTopK): a router's expert choice per token."""
