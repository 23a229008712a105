"""The simulated ``npu`` device in torch, built on torch's own extension points (docs/torch.md):
torch's PrivateUse1 backend renamed ``npu`` with a Python device module (``torch.npu``), device
hooks and guard; aten kernels for that key registered with ``torch.library`` (factories, views,
copies, casts, fills; a fallback refusing the rest); torch_npu's custom ops as ``torch.ops.npu.*``;
the ``hccl`` backend of ``torch.distributed`` (:mod:`.distributed`).
:func:`install` does it once per process (``import npusim.torch_npu`` calls it).
"""

from __future__ import annotations

import torch
from torch.utils.backend_registration import _setup_privateuseone_for_python_backend

from npusim.frontend.torch_device import aten, distributed, npu_module, ops
from npusim.frontend.torch_device.tensors import DEVICE_TYPE

_libraries: list[torch.library.Library] = []


def install() -> None:
    """Register the npu device and its ops with torch (idempotent)."""
    if _libraries:
        return
    _setup_privateuseone_for_python_backend(DEVICE_TYPE, backend_module=npu_module.module())
    kernels = torch.library.Library("aten", "IMPL")
    aten.register(kernels)
    fallback = torch.library.Library("_", "IMPL")
    aten.register_fallback(fallback)
    custom = torch.library.Library("npu", "DEF")
    ops.register(custom)
    _libraries.extend((kernels, fallback, custom))
    distributed.install()
