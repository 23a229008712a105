"""``torch_npu.npu_quant_matmul``: int8 x int8 on the cube with a dequantising epilogue
(op-plugin ``docs/zh/custom_APIs/torch_npu/torch_npu-npu_quant_matmul.md``)."""
