"""torch tensors on the simulated ``npu`` device and the npusim device tensors they are.

An npu tensor is a plain ``torch.Tensor`` of device ``npu:<die>`` (torch's PrivateUse1 backend,
renamed) whose storage holds no host memory: its data pointer is a simulated GM address, encoded
as ``session serial << 48 | die << 37 | address + 1``. Its size, strides and storage offset are
torch's own, so every view op of torch works on it unchanged; :func:`device_tensor` turns it into
the :class:`~npusim.frontend.tensor.DeviceTensor` view of the same GM bytes that the launch path
takes, and :func:`new_tensor` allocates GM for a new one. A tensor knows its session: using it in
another one is an error.
"""

from __future__ import annotations

import ctypes
import itertools
import math
import weakref

import ml_dtypes
import numpy as np
import torch

from npusim.errors import OpArgumentError, UsageError
from npusim.frontend.session import Session, current_session
from npusim.frontend.tensor import DeviceTensor
from npusim.hw.memory import Allocation

DEVICE_TYPE = "npu"

NUMPY_DTYPES: dict[torch.dtype, np.dtype] = {
    torch.bool: np.dtype(np.bool_),
    torch.uint8: np.dtype(np.uint8),
    torch.int8: np.dtype(np.int8),
    torch.int16: np.dtype(np.int16),
    torch.int32: np.dtype(np.int32),
    torch.int64: np.dtype(np.int64),
    torch.float16: np.dtype(np.float16),
    torch.bfloat16: np.dtype(ml_dtypes.bfloat16),
    torch.float32: np.dtype(np.float32),
    torch.float64: np.dtype(np.float64),
}
"""The dtypes an npu tensor may have, and the numpy dtype of their bytes."""
TORCH_DTYPES = {numpy: torch_dtype for torch_dtype, numpy in NUMPY_DTYPES.items()}

_SERIAL_SHIFT, _DIE_SHIFT = 48, 37
_serials = itertools.count(1)
_session_serials: weakref.WeakKeyDictionary[Session, int] = weakref.WeakKeyDictionary()
_allocations: dict[int, tuple[weakref.ref[Session], Allocation, tuple]] = {}
"""data pointer of a storage -> (its session, its GM allocation, what its DLPack import refers to)."""

class _DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int), ("device_id", ctypes.c_int)]


class _DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", _DLDevice), ("ndim", ctypes.c_int), ("dtype", _DLDataType),
                ("shape", ctypes.POINTER(ctypes.c_int64)), ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


class _DLManagedTensor(ctypes.Structure):
    pass


_DELETER = ctypes.CFUNCTYPE(None, ctypes.POINTER(_DLManagedTensor))
_DLManagedTensor._fields_ = [("dl_tensor", _DLTensor), ("manager_ctx", ctypes.c_void_p), ("deleter", _DELETER)]
_NO_DELETER = _DELETER()  # NULL, which DLPack allows and torch skips: GM is never freed, the storage owns no host memory (a Python
# deleter would run as torch frees the tensor, and clear an exception being raised past it: a SystemError)
_DL_EXT_DEV = 12  # DLPack's extension device, which torch maps to its PrivateUse1 backend
_DL_CODES = {"b": 6, "i": 0, "u": 1, "f": 2, "V": 4}  # bool, int, uint, float, bfloat (ml_dtypes' kind is V)
_new_capsule = ctypes.pythonapi.PyCapsule_New
_new_capsule.restype, _new_capsule.argtypes = ctypes.py_object, [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]


def _from_address(pointer: int, die: int, shape: list[int], strides: list[int], dtype: np.dtype) -> tuple[torch.Tensor, tuple]:
    """A tensor of device npu:<die> over ``pointer``, made through DLPack (the one Python route to a
    PrivateUse1 tensor on any device index); returns it and the structures it refers to."""
    sizes, steps = (ctypes.c_int64 * len(shape))(*shape), (ctypes.c_int64 * len(shape))(*strides)
    managed = _DLManagedTensor()
    managed.dl_tensor = _DLTensor(pointer, _DLDevice(_DL_EXT_DEV, die), len(shape), _DLDataType(_DL_CODES[dtype.kind], dtype.itemsize * 8, 1),
                                  sizes, steps, 0)
    managed.deleter = _NO_DELETER
    return torch.utils.dlpack.from_dlpack(_new_capsule(ctypes.addressof(managed), b"dltensor", None)), (sizes, steps, managed)


_CPU_KEYS = torch._C.DispatchKeySet(torch._C.DispatchKey.CPU)
"""torch's generic view kernels (sizes and strides only, no data) are reached through the CPU key."""


def numpy_dtype(dtype: torch.dtype, what: str) -> np.dtype:
    try:
        return NUMPY_DTYPES[dtype]
    except KeyError:
        raise OpArgumentError(
            f"{what}: dtype {dtype} is not one an npusim npu tensor can hold; use one of "
            + ", ".join(str(d) for d in NUMPY_DTYPES)
        ) from None


def _serial(session: Session) -> int:
    serial = _session_serials.get(session)
    if serial is None:
        serial = _session_serials[session] = next(_serials)
    return serial


def new_tensor(shape, dtype: torch.dtype, die: int, strides=None, *, control: bool = False) -> torch.Tensor:
    """A new npu tensor in the GM of die ``die`` of the running session (zero-filled); ``control``:
    its bytes are real in a timing-only run too (:func:`npusim.frontend.tensor.empty`)."""
    session = current_session()
    np_dtype = numpy_dtype(dtype, "torch.empty(device='npu')")
    shape = [int(s) for s in shape]
    if strides is None:
        strides = [math.prod(shape[i + 1:]) for i in range(len(shape))]
    strides = [int(s) for s in strides]
    elements = 1 + sum((size - 1) * stride for size, stride in zip(shape, strides)) if all(shape) else 0
    nbytes = elements * np_dtype.itemsize
    allocation = session.system.die(die).memory.allocate(max(nbytes, 1), f"tensor{shape}<{np_dtype}>", control=control)
    pointer = _serial(session) << _SERIAL_SHIFT | die << _DIE_SHIFT | allocation.address + 1
    tensor, keep = _from_address(pointer, die, shape, strides, np_dtype)
    _allocations[pointer] = (weakref.ref(session), allocation, keep)
    return tensor


def view_of(func, *args, **kwargs) -> torch.Tensor:
    """Run torch's own kernel of view op ``func`` (metadata only) on npu tensors."""
    return func.redispatch(_CPU_KEYS, *args, **kwargs)


def is_npu(value) -> bool:
    return isinstance(value, torch.Tensor) and value.device.type == DEVICE_TYPE


def owner(t: torch.Tensor) -> tuple[Session | None, Allocation]:
    """The session of an npu tensor (None once collected) and its GM allocation."""
    entry = _allocations.get(t.untyped_storage().data_ptr())
    if entry is None:
        raise UsageError(f"an npu tensor of shape {list(t.shape)} that npusim did not make; create npu tensors with "
                         "tensor.npu(), .to('npu') or torch.empty(..., device='npu') after importing npusim.torch_npu")
    session_ref, allocation, _ = entry
    return session_ref(), allocation


def device_tensor(t: torch.Tensor, api: str, name: str) -> DeviceTensor:
    """The npusim device tensor that npu tensor ``t`` (argument ``name`` of ``api``) is, in the
    running session."""
    if not isinstance(t, torch.Tensor):
        raise OpArgumentError(f"{api}: {name} = {type(t).__name__}: must be a torch tensor on the npu device")
    if t.device.type != DEVICE_TYPE:
        raise OpArgumentError(f"{api}: {name} is on {t.device}, not on an npu device; move it there first ({name}.npu())")
    session, allocation = owner(t)
    if session is not current_session():
        raise UsageError(
            f"{api}: {name} (shape {list(t.shape)}, {t.device}) belongs to another npusim session (one that has ended, "
            "or not the innermost running one); create it in the session that runs the op"
        )
    return _view(session.system, allocation, t, api)


def _view(system, allocation: Allocation, t: torch.Tensor, api: str) -> DeviceTensor:
    """``t``'s view of its allocation (its storage starts where the allocation does)."""
    itemsize = t.element_size()
    return DeviceTensor(system, allocation, t.storage_offset() * itemsize, tuple(t.shape), tuple(s * itemsize for s in t.stride()),
                        numpy_dtype(t.dtype, api))


def values(t: torch.Tensor) -> np.ndarray:
    """The values of npu tensor ``t`` as numpy (after the work issued so far; synchronises)."""
    session, allocation = owner(t)
    view = _view(None, allocation, t, "tensor.cpu()")
    if session is not None and session.result is None:
        session.synchronize()
    return view.host_view().copy()


def to_torch(array: np.ndarray) -> torch.Tensor:
    """A CPU torch tensor of ``array``'s values (bfloat16 through its bits)."""
    array = np.ascontiguousarray(array).reshape(array.shape)  # ascontiguousarray makes a 0-d array 1-d
    if array.dtype == NUMPY_DTYPES[torch.bfloat16]:
        return torch.from_numpy(array.view(np.int16)).view(torch.bfloat16)
    return torch.from_numpy(array)


def to_numpy(t: torch.Tensor) -> np.ndarray:
    """The values of CPU tensor ``t`` as numpy (bfloat16 through its bits)."""
    t = t.detach().contiguous()
    if t.dtype == torch.bfloat16:
        return t.view(torch.int16).numpy().view(NUMPY_DTYPES[torch.bfloat16])
    numpy_dtype(t.dtype, "copy to the npu device")
    return t.numpy()
