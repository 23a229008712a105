"""``pypto.converter`` / ``pypto.from_torch``: a torch tensor as the tensor a PyPTO kernel takes.

On the chip ``from_torch`` wraps a torch npu tensor's device memory in a PyPTO tensor descriptor
(its name, shape, dtype, format and which axes are dynamic) for a kernel launch. On npusim the
kernel's arguments are device tensors, so ``from_torch`` gives the npusim device tensor over the npu
tensor's bytes (``npusim.torch_npu``'s "npu" device): a kernel writes into the torch tensor, as on
the chip. ``name`` and ``dynamic_axis`` name and mark the descriptor for the framework's compiler:
they are recorded as hints (``session.pypto_hints``) and do not change the model. npusim models the
ND layout only: ``tensor_format=TILEOP_NZ`` is refused, and so is a ``dtype`` that is not the
tensor's own (the framework reinterprets the bytes; npusim has no such view). A CPU tensor gives
its data for a function recorded on the host (:mod:`.host_data`), which copies it in and out when
it runs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from npusim.errors import OpArgumentError, UsageError
from npusim.frontend.pypto.control import record_hint
from npusim.frontend.pypto.host_data import HostTensor
from npusim.frontend.tensor import DeviceTensor
from npusim.kernels.shmem.dtypes import DataType, TileOpFormat

if TYPE_CHECKING:
    import torch

__all__ = ["from_torch"]


def _dtype_from(dtype: torch.dtype) -> DataType:
    """The PyPTO type of a torch dtype (the framework's own helper of this name, which its tests call)."""
    from npusim.frontend.torch_device.tensors import numpy_dtype

    numpy = numpy_dtype(dtype, "pypto.from_torch")
    try:
        return DataType.from_numpy(numpy)
    except ValueError:
        raise OpArgumentError(f"pypto.from_torch: {dtype} has no PyPTO data type that npusim models; "
                              f"use one of {', '.join(t.name for t in DataType)}") from None


def from_torch(tensor: Any, name: str = "", dynamic_axis: list[int] | None = None, tensor_format: TileOpFormat | None = None,
               dtype: DataType | None = None) -> DeviceTensor | HostTensor:
    """``pypto.from_torch(tensor, name, dynamic_axis, tensor_format, dtype)``: the device tensor of a
    contiguous torch npu tensor; of a CPU tensor, its data for a function recorded on the host
    (``pypto.runtime._device_run_once_data_from_host``, :mod:`.host_data`). See the module docstring."""
    import torch

    from npusim.frontend.torch_device.tensors import device_tensor

    what = f"pypto.from_torch({name!r})" if name else "pypto.from_torch"
    if not isinstance(tensor, torch.Tensor):
        raise OpArgumentError(f"{what}: got {type(tensor).__name__}; it converts a torch tensor (on the npu device: tensor.npu())")
    if not tensor.is_contiguous():
        raise OpArgumentError(f"{what}: the tensor (shape {list(tensor.shape)}, strides {list(tensor.stride())}) is not contiguous; "
                              "pass tensor.contiguous()")
    if tensor_format not in (None, TileOpFormat.TILEOP_ND):
        raise UsageError(f"{what}: tensor_format={tensor_format}: npusim models the ND layout only; leave tensor_format unset")
    own = _dtype_from(tensor.dtype)
    if dtype is not None and dtype != own:
        raise UsageError(f"{what}: dtype={dtype} reinterprets a {own} tensor's bytes, which npusim does not model; "
                         f"convert the tensor (tensor.to(...)) or leave dtype unset")
    axes = list(dynamic_axis or [])
    bad = [axis for axis in axes if not -tensor.dim() <= axis < tensor.dim()]
    if bad:
        raise OpArgumentError(f"{what}: dynamic_axis {bad} out of range for a {tensor.dim()}-d tensor")
    record_hint("from_torch", {key: value for key, value in (("name", name), ("dynamic_axis", axes)) if value})
    if tensor.device.type == "cpu":
        return HostTensor(tensor, name, own)
    return device_tensor(tensor, what, "tensor")
