"""torch's own ops on npu tensors: the PrivateUse1 kernels npusim registers with ``torch.library``.

- factories (``empty``, ``empty_strided``) allocate GM (:func:`~.tensors.new_tensor`);
- views (``as_strided``, ``view``) are torch's own metadata kernels, so every view op works;
- host copies (``.npu()``, ``.cpu()``, ``copy_`` to or from a CPU tensor, ``.item()``) are
  blocking: the host first waits for the work issued so far, as torch_npu's blocking copies do,
  then moves the bytes (the transfer itself takes no simulated time);
- device copies run as kernels through the launch path, as eager aclnn calls: ``clone``,
  ``contiguous``, ``copy_`` between npu tensors (``aclnnInplaceCopy``: ``ViewCopy``), dtype
  conversions (``aclnnCast``: the ``cast`` op), ``fill_`` / ``zero_`` (``aclnnInplaceFillScalar``);
- any other op runs on the host (a *host fallback*, so that printing, arithmetic for checks and the
  like work): the host waits for the device, the op runs on CPU copies, the npu arguments it writes
  get the copies' values back and its results become new npu tensors; it costs no simulated time
  and is marked as an instant event ("host fallback") on the die's timeline, with one
  HostFallbackWarning per process. Inside a graph capture it is an error (it synchronises).

Autograd is not modelled: an op on npu tensors run by a backward pass (``loss.backward()``,
``torch.autograd.grad``) is a UsageError saying so (:func:`outside_backward`); forward ops on
tensors that require grad run as any others (a model's parameters do).
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Callable

import torch
import torch.utils._pytree

from npusim.errors import UsageError
from npusim.frontend import aclnn
from npusim.frontend.session import current_session
from npusim.frontend.torch_device.tensors import device_tensor, is_npu, new_tensor, to_numpy, to_torch, values, view_of

aten = torch.ops.aten


def _device_index(device) -> int:
    device = torch.device(device) if device is not None else None
    if device is None or device.index is None:
        return torch.npu.current_device()
    return device.index


def empty_memory_format(size, dtype=None, layout=None, device=None, pin_memory=None, memory_format=None):
    return new_tensor(size, dtype or torch.get_default_dtype(), _device_index(device))


def empty_strided(size, stride, dtype=None, layout=None, device=None, pin_memory=None):
    return new_tensor(size, dtype or torch.get_default_dtype(), _device_index(device), stride)


def as_strided(self, size, stride, storage_offset=None):
    return view_of(aten.as_strided.default, self, size, stride, storage_offset)


def view(self, size):
    return view_of(aten.view.default, self, size)


def _write_host_values(dst: torch.Tensor, src: torch.Tensor) -> None:
    """Host -> device: wait for the device, then write ``src`` (CPU) into npu ``dst``'s bytes."""
    session = current_session()
    session.synchronize()
    target = device_tensor(dst, "copy to the npu device", "the destination")
    if session.with_data:
        target.host_view()[...] = to_numpy(src.to(dst.dtype).expand(dst.shape))


def _device_copy(dst: torch.Tensor, src: torch.Tensor) -> None:
    """Device -> device: a ``ViewCopy`` kernel, or the ``cast`` op when the dtypes differ."""
    source = device_tensor(src, "tensor.copy_", "the source")
    target = device_tensor(dst, "tensor.copy_", "the destination")
    if src.dtype != dst.dtype:
        with aclnn.host_call("aclnnCast", dtype=str(dst.dtype)):
            aclnn.run_op("cast", "tensor.to", {"input": source, "out": target}, out=target)
        return
    if tuple(src.shape) != tuple(dst.shape):
        src = src.expand(dst.shape)
        source = device_tensor(src, "tensor.copy_", "the source")
    with aclnn.host_call("aclnnInplaceCopy", shape=list(dst.shape)):
        aclnn.copy(target, source, "ViewCopy", "tensor.copy_")


def copy_(self, src, non_blocking=False):
    if is_npu(self) and is_npu(src):
        _device_copy(self, src)
    elif is_npu(self):
        _write_host_values(self, src)
    else:
        self.copy_(to_torch(values(src)).to(self.dtype))
    return self


def _copy_from(self, dst, non_blocking=False):
    return copy_(dst, self, non_blocking)


def _copy_from_and_resize(self, dst):
    return copy_(dst, self)


def _to_copy(self, dtype=None, layout=None, device=None, pin_memory=None, non_blocking=False, memory_format=None):
    dtype = dtype or self.dtype
    target = torch.device(device) if device is not None else self.device
    if target.type == "cpu":
        return to_torch(values(self)).to(dtype)
    out = new_tensor(self.shape, dtype, _device_index(target) if target.index is not None or not is_npu(self) else self.device.index)
    return copy_(out, self)


def clone(self, memory_format=None):
    out = new_tensor(self.shape, self.dtype, self.device.index)
    with aclnn.host_call("aclnnInplaceCopy", shape=list(self.shape)):
        aclnn.copy(device_tensor(out, "tensor.clone", "the clone"), device_tensor(self, "tensor.clone", "the tensor"), "Clone",
                   "tensor.clone")
    return out


def fill_(self, value):
    target = device_tensor(self, "tensor.fill_", "the tensor")
    with aclnn.host_call("aclnnInplaceFillScalar", value=float(value) if not isinstance(value, bool) else value):
        aclnn.run_op("fill", "tensor.fill_", {"out": target, "value": value.item() if isinstance(value, torch.Tensor) else value},
                     out=target)
    return self


def zero_(self):
    return fill_(self, 0)


def _local_scalar_dense(self):
    return values(self).reshape(()).item()


class HostFallbackWarning(UserWarning):
    """A torch op the npu device does not model ran on the host instead."""


_warned: list[str] = []


def host_fallback(keyset, op, *args, **kwargs):
    """Run ``op`` on CPU copies of its npu arguments; its tensor results go back to the device."""
    inputs = [a for a in torch.utils._pytree.tree_leaves((args, kwargs)) if is_npu(a)]
    device = inputs[0].device if inputs else torch.device("npu", torch.npu.current_device())
    session = current_session()
    session.synchronize()
    if not _warned:
        _warned.append(str(op))
        warnings.warn(f"{op} is not modelled on the npu device: it ran on the host (no simulated time); further host fallbacks "
                      "are marked in the trace (docs/torch.md)", HostFallbackWarning, stacklevel=3)
    session.system.recorder.instant(session.env.now, device.index, "host fallback", f"{op} ran on the host", category="host")
    copies: dict[int, tuple[torch.Tensor, torch.Tensor]] = {}  # id(npu tensor) -> (it, its CPU copy)

    def to_host(a):
        if not is_npu(a):
            return a
        copies.setdefault(id(a), (a, to_torch(values(a))))
        return copies[id(a)][1]

    on_host = torch.utils._pytree.tree_map(to_host, (args, kwargs))
    result = op(*on_host[0], **on_host[1])
    for npu_tensor, copy in copies.values():  # what the op wrote in its npu arguments
        if op._schema.is_mutable and not torch.equal(copy, to_torch(values(npu_tensor))):
            device_tensor(npu_tensor, str(op), "a written argument").host_view()[...] = to_numpy(copy)
    written = {id(copy): npu_tensor for npu_tensor, copy in copies.values()}

    def to_device(r):
        if not isinstance(r, torch.Tensor):
            return r
        return written[id(r)] if id(r) in written else _to_device(r, device)

    return torch.utils._pytree.tree_map(to_device, result)


def _to_device(value: torch.Tensor, device: torch.device) -> torch.Tensor:
    out = new_tensor(value.shape, value.dtype, device.index)
    target = device_tensor(out, "host fallback", "its result")
    if target.system.with_data:
        target.host_view()[...] = to_numpy(value)
    return out


KERNELS: dict[str, Callable[..., object]] = {
    "empty.memory_format": empty_memory_format,
    "empty_strided": empty_strided,
    "as_strided": as_strided,
    "view": view,
    "copy_": copy_,
    "_copy_from": _copy_from,
    "_copy_from_and_resize": _copy_from_and_resize,
    "_to_copy": _to_copy,
    "clone": clone,
    "fill_.Scalar": fill_,
    "zero_": zero_,
    "_local_scalar_dense": _local_scalar_dense,
}
"""The aten kernels of the npu device, by overload name."""


def outside_backward(kernel: Callable, name: str) -> Callable:
    """``kernel`` (of the aten op ``name``, or None for the fallback: the op is its second
    argument), refusing to run inside a backward pass: autograd on npu tensors is not modelled."""

    @functools.wraps(kernel)
    def checked(*args, **kwargs):
        if torch._C._current_graph_task_id() >= 0:
            op = name or str(args[1])
            raise UsageError(f"autograd is not modelled on the npu device: the backward pass ran {op} on npu tensors; run the model under "
                             "torch.no_grad() or torch.inference_mode() on the npu device, and compute gradients on CPU tensors "
                             "(docs/torch.md, Limits)")
        return kernel(*args, **kwargs)

    return checked


def register(library: torch.library.Library) -> None:
    """Register the kernels (these and the matrix products of :mod:`.linalg`) and the refusing
    fallback for the PrivateUse1 ("npu") key."""
    from npusim.frontend.torch_device import linalg

    for name, kernel in {**KERNELS, **linalg.KERNELS}.items():
        library.impl(name, outside_backward(kernel, f"aten.{name}"), "PrivateUse1")


def register_fallback(library: torch.library.Library) -> None:
    library.fallback(outside_backward(host_fallback, ""), "PrivateUse1", with_keyset=True)
