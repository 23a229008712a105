"""Device tensors: arrays in the GM of one die, like torch NPU tensors.

A :class:`DeviceTensor` is a view (shape, strides, byte offset) of a GM allocation, so transposed
and sliced tensors are non-contiguous views of the same bytes, as on the device. Reading values
(``numpy()``) first runs the simulation until all issued work is done, as ``.cpu()`` synchronises.
"""

from __future__ import annotations

import math

import numpy as np

from npusim.errors import UsageError
from npusim.frontend.session import active_system, session_of
from npusim.hw.memory import Allocation
from npusim.hw.system import System


class DeviceTensor:
    """A strided view of a GM allocation on die ``device``; strides are in bytes."""

    __slots__ = ("system", "allocation", "offset_bytes", "shape", "strides", "dtype")

    def __init__(self, system: System, allocation: Allocation, offset_bytes: int, shape: tuple[int, ...], strides: tuple[int, ...], dtype) -> None:
        self.system = system
        self.allocation = allocation
        self.offset_bytes = offset_bytes
        self.shape = tuple(int(s) for s in shape)
        self.strides = tuple(int(s) for s in strides)
        self.dtype = np.dtype(dtype)

    # -- metadata ------------------------------------------------------------------------------

    @property
    def device(self) -> int:
        return self.allocation.die

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    @property
    def nbytes(self) -> int:
        return self.size * self.dtype.itemsize

    def dim(self) -> int:
        return self.ndim

    def numel(self) -> int:
        return self.size

    def element_strides(self) -> tuple[int, ...]:
        """Strides in elements, as torch reports them."""
        return tuple(s // self.dtype.itemsize for s in self.strides)

    def is_contiguous(self) -> bool:
        expected = self.dtype.itemsize
        for size, stride in zip(reversed(self.shape), reversed(self.strides)):
            if size != 1 and stride != expected:
                return False
            expected *= size
        return True

    def __repr__(self) -> str:
        return f"DeviceTensor(shape={list(self.shape)}, dtype={self.dtype}, device=npu:{self.device}{'' if self.is_contiguous() else ', non-contiguous'})"

    # -- views ---------------------------------------------------------------------------------

    def _layout(self) -> tuple[np.ndarray, np.ndarray]:
        """A numpy array with this tensor's shape and strides over a 0-byte placeholder, used only to
        let numpy compute the layout of a view (its memory is never touched)."""
        base = np.zeros(1, dtype=np.uint8)
        return np.lib.stride_tricks.as_strided(base, shape=self.shape, strides=self.strides), base

    def _view_from_layout(self, layout: np.ndarray, base: np.ndarray) -> DeviceTensor:
        shift = layout.__array_interface__["data"][0] - base.__array_interface__["data"][0]
        return DeviceTensor(self.system, self.allocation, self.offset_bytes + shift, layout.shape, layout.strides, self.dtype)

    def __getitem__(self, index) -> DeviceTensor:
        """Basic indexing and slicing give a view (advanced indexing is not a view and is refused)."""
        parts = index if isinstance(index, tuple) else (index,)
        if not all(isinstance(p, (int, slice, type(Ellipsis), type(None))) for p in parts):
            raise UsageError(f"indexing {self!r} with {index!r}: only integers and slices give a device view")
        if not any(p is Ellipsis for p in parts):
            parts = parts + (Ellipsis,)  # keeps a 0-d result a view: the placeholder is never read
        layout, base = self._layout()
        try:
            view = layout[parts]
        except IndexError as error:
            raise UsageError(f"indexing {self!r} with {index!r}: {error}") from None
        return self._view_from_layout(np.asarray(view), base)

    def transpose(self, dim0: int, dim1: int) -> DeviceTensor:
        layout, base = self._layout()
        return self._view_from_layout(np.swapaxes(layout, dim0, dim1), base)

    def permute(self, *dims: int) -> DeviceTensor:
        layout, base = self._layout()
        return self._view_from_layout(np.transpose(layout, dims), base)

    @property
    def T(self) -> DeviceTensor:
        layout, base = self._layout()
        return self._view_from_layout(layout.T, base)

    def view(self, *shape: int) -> DeviceTensor:
        """The same contiguous bytes with another shape (torch ``view``; one dim may be -1)."""
        if not self.is_contiguous():
            raise UsageError(f"view() needs a contiguous tensor; {self!r} is not (copy it first)")
        shape = tuple(shape[0]) if len(shape) == 1 and isinstance(shape[0], (tuple, list)) else tuple(shape)
        if shape.count(-1) == 1:
            known = math.prod(s for s in shape if s != -1)
            shape = tuple(self.size // known if s == -1 and known else s for s in shape)
        if math.prod(shape) != self.size or any(s < 0 for s in shape):
            raise UsageError(f"cannot view {list(self.shape)} ({self.size} elements) as {list(shape)}")
        return DeviceTensor(self.system, self.allocation, self.offset_bytes, shape, contiguous_strides(shape, self.dtype.itemsize), self.dtype)

    reshape = view

    # -- values --------------------------------------------------------------------------------

    def host_view(self) -> np.ndarray:
        """The tensor's values as a numpy view of the simulated GM (no synchronisation)."""
        data = self.allocation.data
        if data is None:
            raise UsageError("this run simulates timing only (--no-data / data=False): tensor values are not kept")
        return np.ndarray(self.shape, dtype=self.dtype, buffer=data, offset=self.offset_bytes, strides=self.strides)

    def numpy(self) -> np.ndarray:
        """The values after everything issued so far has been simulated (a copy); after its session
        has ended, the final values."""
        session = session_of(self.system)
        if session is not None and session.result is None:
            session.synchronize()
        return self.host_view().copy()

    def cpu(self) -> np.ndarray:
        """Alias of :meth:`numpy` (synchronises, like ``tensor.cpu()``)."""
        return self.numpy()


def contiguous_strides(shape: tuple[int, ...], itemsize: int) -> tuple[int, ...]:
    """Row-major strides in bytes."""
    return tuple(itemsize * math.prod(shape[i + 1 :]) for i in range(len(shape)))


def tensor(array, device: int = 0, *, dtype=None) -> DeviceTensor:
    """A contiguous device tensor in the GM of die ``device``, initialised from ``array``."""
    system = active_system()
    values = np.ascontiguousarray(np.asarray(array, dtype=dtype))
    device_tensor = empty(values.shape, values.dtype, device=device)
    if system.with_data:
        device_tensor.host_view()[...] = values
    return device_tensor


def empty(shape, dtype, device: int = 0, *, control: bool = False) -> DeviceTensor:
    """An uninitialised (zero-filled) contiguous device tensor. ``control``: its bytes are real in
    a timing-only run too (an op's counts, which later ops read to size their work)."""
    system = active_system()
    shape = tuple(int(s) for s in (shape if isinstance(shape, (tuple, list)) else (shape,)))
    dtype = np.dtype(dtype)
    nbytes = math.prod(shape) * dtype.itemsize
    allocation = system.die(device).memory.allocate(nbytes, f"tensor{list(shape)}<{dtype}>", control=control)
    return DeviceTensor(system, allocation, 0, shape, contiguous_strides(shape, dtype.itemsize), dtype)


def zeros(shape, dtype, device: int = 0) -> DeviceTensor:
    """A zero-filled contiguous device tensor."""
    return empty(shape, dtype, device)
