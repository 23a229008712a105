"""``torch_npu.npu_grouped_matmul``: many matrix products in one cube kernel, the rows of one x split
into groups by ``group_list`` (the experts of an MoE layer) or separate tensors per product
(op-plugin ``docs/zh/custom_APIs/torch_npu/torch_npu-npu_grouped_matmul.md``)."""
