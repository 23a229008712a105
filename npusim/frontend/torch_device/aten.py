"""torch's own ops on npu tensors: the PrivateUse1 kernels npusim registers with ``torch.library``.

- factories (``empty``, ``empty_strided``) allocate GM (:func:`~.tensors.new_tensor`);
- views (``as_strided``, ``view``, ``_reshape_alias``, ``unfold``) are torch's own metadata kernels,
  so every view op works; ``resize_`` keeps the storage when it is large enough, else moves the
  tensor to new GM;
- host copies (``.npu()``, ``.cpu()``, ``copy_`` to or from a CPU tensor, ``.item()``) are
  blocking: the host first waits for the work issued so far, as torch_npu's blocking copies do,
  then moves the bytes (the transfer itself takes no simulated time);
- device copies run as kernels through the launch path, as eager aclnn calls: ``clone``,
  ``contiguous``, ``copy_`` between npu tensors (``aclnnInplaceCopy``: ``ViewCopy``), dtype
  conversions (``aclnnCast``: the ``cast`` op), ``fill_`` / ``zero_`` (``aclnnInplaceFillScalar``);
  so do ``add`` / ``sub`` of two npu tensors of one dtype (``aclnnAdd`` / ``aclnnSub``, alpha 1);
- any other op runs on the host (a *host fallback*, so that printing, arithmetic for checks and the
  like work): the host waits for the device, the op runs on CPU copies of its npu arguments laid
  out as on the device (sizes, strides and offsets over a copy of the storage they touch, so that
  an op reading strides or returning a view computes what it would on the device), the npu
  arguments it writes (``Tensor(a!)`` in its schema, resized when it resizes them) get the copies'
  values back, a result that views an input becomes that view of the npu input, any other result a
  new npu tensor. It costs no simulated time, is marked as an instant event ("host fallback") on
  the die's timeline and counted per op in the run summary, with one HostFallbackWarning per op
  and session naming the program's line. Inside a graph capture it is an error (it synchronises).

Autograd is not modelled: an op on npu tensors run by a backward pass (``loss.backward()``,
``torch.autograd.grad``) is a UsageError saying so (:func:`outside_backward`); forward ops on
tensors that require grad run as any others (a model's parameters do).
"""

from __future__ import annotations

import functools
import math
import warnings
import weakref
from collections.abc import Callable

import torch
import torch.utils._pytree

from npusim.callsite import callsite
from npusim.errors import UsageError
from npusim.frontend import aclnn
from npusim.frontend.session import Session, current_session
from npusim.frontend.torch_device.tensors import NUMPY_DTYPES, device_tensor, is_npu, new_tensor, to_numpy, to_torch, values, view_of
from npusim.kernels.elementwise.op import BINARY_DTYPES
from npusim.trace.summary import HOST_FALLBACK

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


DEVICE_BINARY = {"add": ("aclnnAdd", aten.add.Tensor), "sub": ("aclnnSub", aten.sub.Tensor)}
"""torch's binary ops that run on the device (``npusim.kernels.elementwise``): name -> its aclnn API and aten overload."""


def _binary(name: str, self, other, alpha=1):
    """``torch.add`` / ``torch.sub`` of two npu tensors of one dtype the vector unit computes, alpha
    1: a kernel of the device (broadcast inputs are made contiguous on the device first); any other
    call (a Python number, mixed dtypes, another alpha) runs on the host."""
    api, overload = DEVICE_BINARY[name]
    if not (is_npu(self) and is_npu(other) and self.dtype == other.dtype and self.device == other.device and alpha == 1
            and not isinstance(alpha, bool) and NUMPY_DTYPES.get(self.dtype) in BINARY_DTYPES):
        return host_fallback(None, overload, self, other, alpha=alpha)
    shape = torch.broadcast_shapes(self.shape, other.shape)
    out = new_tensor(shape, self.dtype, self.device.index)
    what = f"torch.{name}"
    args = {"input": device_tensor(self.expand(shape), what, "input"), "other": device_tensor(other.expand(shape), what, "other"),
            "out": device_tensor(out, what, "the result")}
    with aclnn.host_call(api, shape=list(shape)):
        aclnn.run_op(name, what, args, out=args["out"])
    return out


def add(self, other, alpha=1):
    return _binary("add", self, other, alpha)


def sub(self, other, alpha=1):
    return _binary("sub", self, other, alpha)


def _local_scalar_dense(self):
    return values(self).reshape(()).item()


def resize_(self, size, memory_format=None):
    """``tensor.resize_(size)``: the same storage when it holds the new size, else new GM (the old
    values kept in its first elements, as torch keeps them), contiguous strides either way."""
    size = [int(s) for s in size]
    strides = [math.prod(size[i + 1:]) for i in range(len(size))]
    needed = (self.storage_offset() + math.prod(size)) * self.element_size()
    if needed > self.untyped_storage().nbytes():
        grown = new_tensor([self.storage_offset() + math.prod(size)], self.dtype, self.device.index)
        kept = min(self.untyped_storage().nbytes() // self.element_size(), grown.numel())
        if kept and current_session().with_data:
            old = view_of(aten.as_strided.default, self, [kept], [1], 0)
            device_tensor(grown, "tensor.resize_", "the new storage").host_view()[:kept] = values(old)
        view_of(aten.set_.source_Storage_storage_offset, self, grown.untyped_storage(), self.storage_offset(), size, strides)
    else:
        view_of(aten.as_strided_.default, self, size, strides, self.storage_offset())
    return self


class HostFallbackWarning(UserWarning):
    """A torch op the npu device does not model ran on the host instead."""


_warned: weakref.WeakKeyDictionary[Session, set] = weakref.WeakKeyDictionary()
"""Per session, the op names and program lines a host fallback warning has named."""


def _note_fallback(session: Session, op, die: int) -> None:
    """Warn once per op name and session, naming the program's line (and not again for that line:
    one ``print(x)`` runs a dozen ops on the host); mark each fallback in the trace (the summary
    counts them per op)."""
    name = str(op.overloadpacket)  # the op as the program calls it (aten.exp), whichever overload (out=, Scalar ...) ran
    where = callsite()
    at = f" at {where}" if where is not None else ""
    seen = _warned.setdefault(session, set())
    if name not in seen and where not in seen:
        seen.update((name, where))
        text = (f"{name} is not modelled on the npu device: it ran on the host{at} (no simulated time; the result is torch's "
                "CPU result); every op that runs on the host is counted in the run summary (host_fallbacks) and marked in the trace "
                "(docs/torch.md)")
        if where is not None:
            warnings.warn_explicit(text, HostFallbackWarning, where.filename, where.lineno)
        else:
            warnings.warn(text, HostFallbackWarning, stacklevel=2)
    session.system.recorder.instant(int(session.env.now), die, "host fallback", f"{name} ran on the host{at}", category=HOST_FALLBACK,
                                    key=name)


def _span(t: torch.Tensor) -> tuple[int, int]:
    """The storage elements ``[lo, hi)`` an npu tensor's view touches."""
    first = int(t.storage_offset())
    if t.numel() == 0:
        return first, first
    return first, first + sum(int(size - 1) * int(stride) for size, stride in zip(t.shape, t.stride())) + 1


def _host_copy(t: torch.Tensor) -> tuple[torch.Tensor, int]:
    """A CPU tensor with the sizes, strides and element offsets of npu tensor ``t`` over a copy of
    the storage elements it touches (so an op that reads strides, aliases or resizes sees what it
    would on the device), and the storage element its copy starts at."""
    lo, hi = _span(t)
    flat = torch.empty(hi - lo, dtype=t.dtype)  # torch's own storage: resizable, as the op may need
    if hi > lo:
        flat.copy_(to_torch(values(view_of(aten.as_strided.default, t, [hi - lo], [1], lo))))
    return flat.as_strided(t.shape, t.stride(), t.storage_offset() - lo), lo


def _written(op, args: tuple, kwargs: dict) -> list:
    """The values of the arguments the op's schema marks as written (``Tensor(a!)``)."""
    written = []
    for position, argument in enumerate(op._schema.arguments):
        if argument.alias_info is None or not argument.alias_info.is_write:
            continue
        value = kwargs[argument.name] if argument.name in kwargs else args[position] if position < len(args) else None
        written.extend(torch.utils._pytree.tree_leaves(value))
    return written


def host_fallback(keyset, op, *args, **kwargs):
    """Run ``op`` on the host, on CPU copies of its npu arguments laid out as on the device; what it
    writes goes back to the device, a result that views an input becomes the same view of the npu
    tensor, any other result a new npu tensor."""
    inputs = [a for a in torch.utils._pytree.tree_leaves((args, kwargs)) if is_npu(a)]
    device = inputs[0].device if inputs else torch.device("npu", torch.npu.current_device())
    session = current_session()
    session.synchronize()
    _note_fallback(session, op, device.index)
    copies: dict[int, tuple[torch.Tensor, torch.Tensor, int]] = {}  # id(npu tensor) -> (it, its CPU copy, the copy's first element)

    def to_host(a):
        if not is_npu(a):
            return a
        if id(a) not in copies:
            copy, lo = _host_copy(a)
            copies[id(a)] = (a, copy, lo)
        return copies[id(a)][1]

    on_host = torch.utils._pytree.tree_map(to_host, (args, kwargs))
    bases = {copy.untyped_storage().data_ptr(): (npu_tensor, lo) for npu_tensor, copy, lo in copies.values()}
    result = op(*on_host[0], **on_host[1])
    written = {id(copy): npu_tensor for npu_tensor, copy, _ in (copies[id(a)] for a in _written(op, args, kwargs) if is_npu(a))}
    for npu_tensor, copy, _ in copies.values():
        if id(copy) in written:
            _write_back(npu_tensor, copy, str(op))

    def to_device(r):
        if not isinstance(r, torch.Tensor):
            return r
        if id(r) in written:
            return written[id(r)]
        base = bases.get(r.untyped_storage().data_ptr()) if r.untyped_storage().nbytes() else None
        if base is not None:  # a view of an input: the same view of the npu tensor
            npu_tensor, lo = base
            return view_of(aten.as_strided.default, npu_tensor, r.shape, r.stride(), r.storage_offset() + lo)
        return _to_device(r, device)

    return torch.utils._pytree.tree_map(to_device, result)


def _write_back(npu_tensor: torch.Tensor, copy: torch.Tensor, api: str) -> None:
    """The values an op wrote into the CPU copy of an npu argument, into the argument (resized to
    the copy's shape first when the op resized it, as ``out=`` arguments are)."""
    if tuple(copy.shape) != tuple(npu_tensor.shape):
        resize_(npu_tensor, copy.shape)
    target = device_tensor(npu_tensor, api, "a written argument")
    if target.system.with_data:
        target.host_view()[...] = to_numpy(copy)


def _dense(value: torch.Tensor) -> bool:
    """Whether ``value``'s elements fill its storage span exactly once (a permutation of a contiguous layout)."""
    expected = 1
    for stride, size in sorted((stride, size) for size, stride in zip(value.shape, value.stride()) if size != 1):
        if stride != expected:
            return False
        expected *= size
    return True


def _to_device(value: torch.Tensor, device: torch.device) -> torch.Tensor:
    """A new npu tensor with the values of CPU tensor ``value``, laid out as it is when it is dense
    (torch keeps a permuted input's layout, ``preserve_format``), else contiguous."""
    dense = _dense(value) and value.storage_offset() == 0
    out = new_tensor(value.shape, value.dtype, device.index, value.stride() if dense else None)
    target = device_tensor(out, "host fallback", "its result")
    if target.system.with_data:
        target.host_view()[...] = to_numpy(value)
    return out


def _reshape_alias(self, size, stride):
    return view_of(aten._reshape_alias.default, self, size, stride)


def unfold(self, dimension, size, step):
    return view_of(aten.unfold.default, self, dimension, size, step)


KERNELS: dict[str, Callable[..., object]] = {
    "empty.memory_format": empty_memory_format,
    "empty_strided": empty_strided,
    "as_strided": as_strided,
    "view": view,
    "_reshape_alias": _reshape_alias,
    "unfold": unfold,
    "resize_": resize_,
    "copy_": copy_,
    "_copy_from": _copy_from,
    "_copy_from_and_resize": _copy_from_and_resize,
    "_to_copy": _to_copy,
    "clone": clone,
    "fill_.Scalar": fill_,
    "add.Tensor": add,
    "sub.Tensor": sub,
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
