"""torch's matrix products on npu tensors, as device kernels (the ``matmul`` op of
:mod:`npusim.kernels.matmul`): ``torch.matmul`` (``@``), ``mm``, ``bmm``, ``addmm`` and
``nn.functional.linear``, each one eager aclnn call (aclnnMatmul, aclnnMm, aclnnBatchMatMul,
aclnnAddmm). Vectors are made matrices as torch.matmul does (a leading or trailing dim of 1, dropped
from the result). A transposed operand is read as it is; other non-contiguous operands get a
``Contiguous`` copy first (the launch path). ``addmm`` with ``beta`` or ``alpha`` other than 1, or an
``input`` that is not one row broadcast over the result, is not modelled: it runs on the host
(a host fallback, marked in the trace)."""

from __future__ import annotations

import torch

from npusim.frontend import aclnn
from npusim.frontend.torch_device.tensors import device_tensor, new_tensor

aten = torch.ops.aten


def _product(api: str, aclnn_api: str, a: torch.Tensor, b: torch.Tensor, bias: torch.Tensor | None = None) -> torch.Tensor:
    """``a @ b (+ bias)`` with torch.matmul's shapes, on the device."""
    a2 = a.unsqueeze(0) if a.dim() == 1 else a
    b2 = b.unsqueeze(-1) if b.dim() == 1 else b
    lead_a, lead_b = tuple(a2.shape[:-2]), tuple(b2.shape[:-2])
    rank = max(len(lead_a), len(lead_b))
    lead_a, lead_b = (1,) * (rank - len(lead_a)) + lead_a, (1,) * (rank - len(lead_b)) + lead_b
    batch = tuple(max(x, y) for x, y in zip(lead_a, lead_b))  # mismatches are the op's check to name
    m, n = a2.shape[-2], b2.shape[-1]
    shape = list(batch) + ([m] if a.dim() > 1 else []) + ([n] if b.dim() > 1 else [])
    out = new_tensor(shape, a.dtype, a.device.index)
    work = out.view(*batch, m, n)
    result = device_tensor(work, api, "the result")
    args = {"api": api, "self": device_tensor(a2, api, "self"), "mat2": device_tensor(b2, api, "mat2"),
            "bias": None if bias is None else device_tensor(bias, api, "bias"), "out": result}
    with aclnn.host_call(aclnn_api, shapes=[list(a.shape), list(b.shape)]):
        aclnn.run_op("matmul", api, args, out=result)
    return out


def matmul(self, other):
    return _product("torch.matmul", "aclnnMatmul", self, other)


def mm(self, mat2):
    return _product("torch.mm", "aclnnMm", self, mat2)


def bmm(self, mat2):
    return _product("torch.bmm", "aclnnBatchMatMul", self, mat2)


def _row_bias(bias: torch.Tensor, n: int) -> bool:
    return tuple(bias.shape) in ((n,), (1, n))


def addmm(self, mat1, mat2, *, beta=1, alpha=1):
    if beta != 1 or alpha != 1 or mat1.dim() != 2 or mat2.dim() != 2 or not _row_bias(self, mat2.shape[-1]):
        from npusim.frontend.torch_device.aten import host_fallback

        return host_fallback(None, aten.addmm.default, self, mat1, mat2, beta=beta, alpha=alpha)
    return _product("torch.addmm", "aclnnAddmm", mat1, mat2, self)


def linear(input, weight, bias=None):
    if bias is not None and not _row_bias(bias, weight.shape[0]):
        from npusim.frontend.torch_device.aten import host_fallback

        return host_fallback(None, aten.linear.default, input, weight, bias)
    return _product("torch.nn.functional.linear", "aclnnMatmul", input, weight.t(), bias)


KERNELS = {"matmul": matmul, "mm": mm, "bmm": bmm, "addmm": addmm, "linear": linear}
"""The aten kernels of the matrix products, by overload name."""
