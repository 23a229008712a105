"""``torch_npu.npu_quantize`` (``div_mode=True``: ``aclnnQuantize``) on Atlas A2/A3: argument checks,
the split over the vector cores and the lowering (see ``docs/torch.md``)."""
