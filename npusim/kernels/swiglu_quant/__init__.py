"""torch_npu's ``npu_dequant_swiglu_quant`` (aclnnDequantSwigluQuant): the activation between an
MoE layer's two grouped matmuls, dequantised, SwiGLU, dynamically requantised to int8."""
