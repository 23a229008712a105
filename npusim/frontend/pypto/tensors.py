"""The values a PyPTO kernel handles on one PE: ``pypto.Tensor`` and the symmetric ``ShmemTensor``.

A :class:`Tensor` belongs to one PE's program and is one of

- a GM tensor (``location == "GM"``): a kernel argument (a device tensor on the PE's die), a view of
  one (``pypto.view``, slicing), a kernel-local tensor (``pypto.tensor(shape, dtype)``), a
  ``shmem_get`` result or a compute result;
- a UB tile tensor (``"UB"``): a ``shmem_load`` result, held tile by tile in the UB of the cores
  that loaded it, usable by ``shmem_store``, by assignment into a GM tensor and by the compute ops
  (which read it from a GM copy that each tile op stores, see :meth:`Tensor.in_gm`);
- a token (``"token"``): the int32 "dummy" an op returns, which only orders ops (``pred=[...]``).

Every tensor knows which tile ops wrote which part of it (``writes``, :class:`~npusim.runtime.writes.Writes`: a tile op and a
region, or None for all of it), so that a pred on it makes an op wait for exactly those tile ops. A view
shares the writes of the tensor it views, shifted by its ``origin``. A write that covers earlier writes
whole, and waits for them, replaces them there: a loop that rewrites a tile keeps one write of it, not
one per iteration, and finds the writes a box meets without looking at the others.

Indexing follows the framework (``python/pypto/tensor.py``): an int (or SymbolicScalar) for every dim
reads one element on the device (a device-valued SymbolicScalar, ``GetTensorData``); slices give a
view; ints mixed with slices give a view without the indexed dims. Assigning to slices assembles the
value at the slices' starts (the stops are not used); to an int per dim writes one element
(``SetTensorData``); to ``[:]`` makes a kernel-local tensor the value (a kernel argument gets the
value assembled into it).

``pypto.Tensor(shape, dtype)`` inside a kernel makes a kernel-local tensor; outside one (in a jit
kernel's parameter annotations) it makes a :class:`TensorAnnotation`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any, NoReturn

import numpy as np

from npusim.errors import OpArgumentError, UsageError, WorkloadError
from npusim.kernels.shmem.dtypes import DataType, StatusType, TileOpFormat
from npusim.kernels.shmem.tiling import Region
from npusim.runtime.program import building_program
from npusim.runtime.symbolic import SymbolicScalar, value_of
from npusim.runtime.writes import Write, Writes

if TYPE_CHECKING:
    from types import ModuleType

    import numpy.typing as npt

    from npusim.frontend.tensor import DeviceTensor
    from npusim.kernels.shmem.tiling import Tile
    from npusim.runtime.program import PeProgram
    from npusim.runtime.shmem import ShmemArea
    from npusim.runtime.tasks import Task

LOCATIONS = ("GM", "UB", "token")


class TensorAnnotation:
    """``pypto.Tensor(shape, dtype, ...)`` written outside a kernel: what a jit kernel's parameter
    takes. ``shape`` lists ints (the size that dim must have), ``pypto.DYNAMIC`` / ``pypto.STATIC``
    (any size) and may end in ``...`` (any further dims); an empty or missing shape and a missing
    dtype take anything."""

    def __init__(self, shape: object = None, dtype: DataType | None = None, name: str = "", format: TileOpFormat | None = None) -> None:
        if shape is not None and not isinstance(shape, (list, tuple)):
            raise UsageError(f"pypto.Tensor(shape={shape!r}): the shape must be a list of ints, pypto.DYNAMIC and a final ...")
        self.shape = list(shape or [])
        for i, size in enumerate(self.shape):
            last = i == len(self.shape) - 1
            if not (isinstance(size, (int, StatusType)) and not isinstance(size, bool) or size is Ellipsis and last or _is_symbolic(size)):
                raise UsageError(f"pypto.Tensor(shape={shape!r}): dim {i} ({size!r}) must be an int, pypto.DYNAMIC / pypto.STATIC, "
                                 "a SymbolicScalar or (last) ...")
        if dtype is not None and not isinstance(dtype, DataType):
            raise UsageError(f"pypto.Tensor(dtype={dtype!r}): the dtype must be a pypto.DataType (pypto.DT_BF16 ...)")
        self.dtype = dtype
        self.name = name
        self.format = format

    def check(self, where: str, value: Tensor) -> None:
        """Refuse an argument ``value`` (a pypto.Tensor) that this annotation does not take (the
        framework's wording: "does not match the dtype / shape")."""
        if self.dtype is not None and value.dtype is not self.dtype:
            raise OpArgumentError(f"{where}: the argument's dtype {value.dtype.name} does not match the dtype {self.dtype.name} the "
                                  "parameter is annotated with")
        if not self.shape:
            return
        open_end = self.shape[-1] is Ellipsis
        fixed = self.shape[:-1] if open_end else self.shape
        if len(value.sizes) < len(fixed) or not open_end and len(value.sizes) != len(fixed):
            raise OpArgumentError(f"{where}: the argument's shape {list(value.shape)} does not match the shape {self!r} the parameter "
                                  f"is annotated with ({len(value.shape)} dims)")
        for dim, (size, want) in enumerate(zip(value.sizes, fixed)):
            if isinstance(want, int) and size != want:
                raise OpArgumentError(f"{where}: the argument's shape {list(value.sizes)} does not match the shape {self!r} the "
                                      f"parameter is annotated with (dim {dim} is {size}, not {want})")

    def __repr__(self) -> str:
        dims = ", ".join("..." if s is Ellipsis else repr(s) for s in self.shape)
        return f"pypto.Tensor([{dims}], {self.dtype.name if self.dtype else 'any dtype'})"


def _is_number(value: object) -> bool:
    """A Python or numpy number (not a bool: ``x == True`` is not the framework's comparison)."""
    return isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, (bool, np.bool_))


def _is_symbolic(value: object) -> bool:
    return isinstance(value, SymbolicScalar)


class Tensor:
    """``pypto.Tensor``: a tensor of one PE's program (see the module docstring)."""

    program: PeProgram
    location: str  # one of LOCATIONS
    sizes: tuple[int, ...]  # the size of each dim (``shape`` gives them as the framework's list)
    dtype: DataType
    valid_shape: tuple[int, ...]
    writes: Writes  # the tile ops that write it, with the region each writes
    origin: tuple[int, ...]
    tiles: list[Tile]  # a UB tile tensor: the tiles of the shmem_load that made it
    tile_shape: tuple[int, ...] | None
    name: str
    is_argument: bool  # a kernel argument (the caller's device tensor)
    host_declaration: tuple[list[int], DataType, str] | None  # declared on the host (pypto.function's parameter): shape, dtype, name
    destination: Destination | None  # an op's result: where its tile ops will store it
    _read: bool  # an op has used where its data is (see ``device``)
    _device: DeviceTensor | None
    _gm_copy: Tensor | None  # a UB tile tensor: the GM copy compute ops read
    autocast: Destination | None  # an upcast op's fp16 / bf16 result (computed in fp32 and cast down): where its fp32 value can be kept
    _unit_of: tuple[Destination, tuple[int, ...]] | None  # a view adding or dropping dims of size 1 of an op result not yet placed: its destination and shape

    def __new__(cls, shape: object = None, dtype: DataType | None = None, name: str = "", format: TileOpFormat | None = None) -> Any:
        """``pypto.Tensor(shape, dtype, name, format)``: a kernel-local tensor inside a kernel, an
        annotation (:class:`TensorAnnotation`) outside one."""
        program = building_program()
        if program is None:
            return TensorAnnotation(shape, dtype, name, format)
        return cls.local(program, shape, dtype, name, format)

    def __init__(self, *args: object, **kwargs: object) -> None:
        """Tensors are made by ``__new__`` and the class methods."""

    def __class_getitem__(cls, params: object) -> TensorAnnotation:
        """``pypto.Tensor[shape, dtype]``: the annotation syntax."""
        params = params if isinstance(params, tuple) else (params,)
        shape = next((p for p in params if isinstance(p, (list, tuple))), None)
        dtype = next((p for p in params if isinstance(p, DataType)), None)
        format = next((p for p in params if isinstance(p, TileOpFormat)), None)
        name = next((p for p in params if isinstance(p, str)), "")
        return TensorAnnotation(shape, dtype, name, format)

    @property
    def shape(self) -> list[int]:
        """The size of each dim, as a new list (the framework's ``Tensor.shape`` is a list:
        python/pypto/tensor.py), so ``x.shape == [4, 4]`` holds as it does there; npusim's own code
        reads the tuple ``sizes``."""
        return list(self.sizes)

    @classmethod
    def make(cls, program: PeProgram, location: str, shape: Sequence[int], dtype: DataType, *,
             device: DeviceTensor | None = None, valid_shape: Sequence[int] | None = None,
             writes: Writes | Iterable[Write] | None = None, origin: Sequence[int] | None = None) -> Tensor:
        """A tensor of ``program`` (the ops' results and views)."""
        assert location in LOCATIONS
        self = object.__new__(cls)
        self.program = program
        self.location = location
        self.sizes = tuple(map(int, shape))
        self.dtype = dtype
        self._read = False
        self.device = device
        self.destination = None
        self.valid_shape = tuple(valid_shape) if valid_shape is not None else self.sizes
        self.writes = writes if isinstance(writes, Writes) else Writes(writes or ())
        self.origin = tuple(origin) if origin is not None else (0,) * len(self.sizes)
        self.tiles = []
        self.tile_shape = None
        self.name = ""
        self.is_argument = False
        self.host_declaration = None
        self._gm_copy = None
        self._unit_of = None
        self.autocast = None
        return self

    @classmethod
    def token(cls, program: PeProgram, shape: Sequence[int], writes: Iterable[Write]) -> Tensor:
        """An op's int32 token."""
        return cls.make(program, "token", shape, DataType.DT_INT32, writes=writes)

    @classmethod
    def of_device(cls, program: PeProgram, device: DeviceTensor) -> Tensor:
        """A kernel argument: a device tensor in the PE's GM."""
        try:
            dtype = DataType.from_numpy(device.dtype)
        except ValueError:
            raise WorkloadError(f"a kernel argument has dtype {device.dtype}, which PyPTO has no DataType for") from None
        tensor = cls.make(program, "GM", device.shape, dtype, device=device)
        tensor.is_argument = True
        return tensor

    @classmethod
    def declared(cls, value: Tensor | TensorAnnotation, program: PeProgram, device: DeviceTensor, name: str) -> Tensor:
        """A tensor declared on the host (``pypto.tensor(shape, dtype, name)`` outside a kernel) as
        an argument of ``program`` over ``device``: the object ``value`` itself becomes that tensor
        (the framework's host tensor is one object, the function's parameter inside ``pypto.function``)."""
        tensor = cls.of_device(program, device)
        tensor.name = name
        tensor.host_declaration = (list(device.shape), tensor.dtype, name)
        value.__class__ = cls
        value.__dict__.clear()
        value.__dict__.update(tensor.__dict__)
        return value  # type: ignore[return-value]

    @classmethod
    def local(cls, program: PeProgram, shape: object, dtype: DataType | None, name: str = "", format: TileOpFormat | None = None) -> Tensor:
        """``pypto.tensor(shape, dtype, name)`` in a kernel: a new zero-filled GM tensor on the PE's die."""
        from npusim.frontend.tensor import empty

        what = f"pypto.Tensor(shape={shape!r}, dtype={dtype!r})"
        if shape is None and dtype is None:  # pypto.tensor(): a placeholder a later move gives its value
            placeholder = cls.make(program, "token", (), DataType.DT_INT32)
            placeholder.name = name or "empty"
            return placeholder
        if isinstance(shape, int) and not isinstance(shape, bool):
            shape = [shape]
        if not isinstance(shape, (list, tuple)) or not shape:
            raise UsageError(f"{what}: a kernel-local tensor needs a shape (a list of positive ints)")
        sizes = [value_of(program, s) if _is_symbolic(s) else s for s in shape]
        if any(not isinstance(s, int) or isinstance(s, bool) or s <= 0 for s in sizes):
            raise UsageError(f"{what}: every dim of a kernel-local tensor must be a positive int (got {sizes})")
        if dtype is None:
            dtype = DataType.DT_FP32  # the framework's default
        if not isinstance(dtype, DataType):
            raise UsageError(f"{what}: the dtype must be a pypto.DataType (pypto.DT_BF16 ...)")
        if format not in (None, TileOpFormat.TILEOP_ND):
            raise UsageError(f"{what}: format={format!r}: npusim models ND tensors only (TileOpFormat.TILEOP_ND)")
        tensor = cls.make(program, "GM", sizes, dtype, device=empty(tuple(sizes), dtype.numpy, device=program.die))
        tensor.name = name
        return tensor

    def _pin(self) -> None:
        """The op result's tile ops store where they do now: no assemble folds them elsewhere."""
        if self.destination is not None:
            self.destination.pinned = True
        if self._unit_of is not None:
            self._unit_of[0].pinned = True

    @property
    def device(self) -> DeviceTensor | None:
        """The device tensor holding the data; an op that asks has used where the data is, so the
        result can no longer be stored elsewhere (:meth:`fold_into`)."""
        self._read = True
        self._pin()
        if self.destination is not None:
            self._device = self.destination.device
        elif self._unit_of is not None:  # where the op result it views is now
            self._device = _compute()._as_shape(self._unit_of[0].device, self.sizes)
        return self._device

    @device.setter
    def device(self, value: DeviceTensor | None) -> None:
        self._device = value

    def as_read(self) -> Tensor:
        """The tensor as an op reads it now: marked read (its data stays where it is) and a copy of
        its state, so that the op's tile ops, built later, see this tensor even if the object is
        made another tensor's value meanwhile (``t.move(x)``, ``t[:] = x``: the framework's Move
        gives the object a new logical tensor; the ops that used the old one keep it)."""
        self._read = True
        self._pin()
        snapshot = object.__new__(Tensor)
        snapshot.__dict__.update(self.__dict__)
        return snapshot

    def gm(self) -> DeviceTensor:
        """The device tensor of a tensor in GM (as :attr:`device`); an error for one that has none."""
        device = self.device
        if device is None:
            raise UsageError(f"{self!r} is not in GM (a {self.location} tensor): this use needs a GM tensor")
        return device

    def fold_into(self, target: DeviceTensor) -> bool:
        """``assemble`` of a whole op result that nothing has read yet, whose tile ops have not been
        handed to a scheduler: they store into ``target`` instead (the framework folds the assemble
        into the producer's store); the result then lives there. False if it cannot."""
        if self._read or any(task.linked for task, _ in self.writes):
            return False
        if self._unit_of is not None:  # the producer's result, viewed with dims of size 1 added or dropped
            destination, shape = self._unit_of
            placed = _compute()._as_shape(target, shape)
            if destination.pinned or placed is None:
                return False
            destination.device, destination.pinned = placed, True
            self._device, self._unit_of = target, None
            return True
        if self.destination is None or self.destination.pinned:
            return False
        self.destination.device, self.destination.pinned = target, True
        self._device = target
        self.destination = None
        return True

    @property
    def pe(self) -> int:
        """The PE whose program this tensor belongs to."""
        return self.program.pe

    @property
    def dim(self) -> int:
        """The number of dims (a property, as the framework's)."""
        return len(self.shape)

    @property
    def format(self) -> TileOpFormat:
        return TileOpFormat.TILEOP_ND

    def tasks_for(self, region: Region | None) -> list[Task]:
        """The tile ops that wrote the part ``region`` of this tensor (None: all of it)."""
        if region is not None and any(self.origin):
            region = Region(tuple(o + r for o, r in zip(self.origin, region.offset)), region.shape)
        return self.writes.tasks(region)

    def in_gm(self, op: str) -> Tensor:
        """This tensor as a GM tensor an op can read: itself, or for a UB tile tensor the GM copy
        that each of its tile ops stores from UB after loading (made the first time it is needed)."""
        if self.location == "GM":
            return self
        if self.location == "token":
            raise OpArgumentError(f"pypto.{op}: {self!r} is an op's token (a pred), not data")
        if self._gm_copy is None:
            from npusim.frontend.pypto.ops import assemble

            copy = Tensor.local(self.program, list(self.sizes), self.dtype)
            assemble(self, [0] * len(self.sizes), copy)
            copy.valid_shape = self.valid_shape
            self._gm_copy = copy
        return self._gm_copy

    def become(self, value: Tensor) -> None:
        """``local[:] = value``: this kernel-local tensor is ``value`` from now on (the framework's move)."""
        if not isinstance(value, Tensor):
            raise UsageError(f"assigning {value!r} to {self!r}[:]: the value must be a pypto.Tensor")
        self.__dict__.update(value.__dict__)

    def move(self, value: Tensor) -> None:
        """``t.move(value)``: ``value`` becomes this tensor's value (the framework's Move): a kernel
        argument gets it assembled into its GM; a kernel-local tensor, a view or a placeholder
        (``pypto.tensor()``) is ``value`` from now on (the ops that used it before keep the old one)."""
        if not isinstance(value, Tensor):
            raise UsageError(f"{self!r}.move({value!r}): only a pypto.Tensor can be moved into a tensor")
        if self.is_argument:
            from npusim.frontend.pypto.ops import assemble

            assemble(value, [0] * len(self.sizes), self)
        else:
            self.become(value)

    # -- indexing --------------------------------------------------------------------------------

    def __getitem__(self, key: object) -> Tensor | SymbolicScalar:
        """Element read, view, or view without the indexed dims (see the module docstring)."""
        from npusim.frontend.pypto import compute
        from npusim.frontend.pypto.ops import view

        parts = self._normalize(key, "index")
        if _is_empty(parts):
            return self
        if all(_is_index(p) for p in parts):
            return compute.read_element(self, list(parts))
        keep = [isinstance(p, slice) for p in parts]
        slices = [p if isinstance(p, slice) else slice(p, p + 1) for p in parts]
        offsets, sizes = self._view_box(slices)
        viewed = view(self, sizes, offsets)
        if all(keep):
            return viewed
        return compute.reshape(viewed, [s for s, k in zip(viewed.shape, keep) if k])

    def __setitem__(self, key: object, value: Any) -> None:
        """Assemble ``value`` at the slices' starts, write one element, or (``[:]``) become ``value``."""
        from npusim.frontend.pypto import compute
        from npusim.frontend.pypto.ops import assemble

        parts = self._normalize(key, "assign")
        if _is_empty(parts):
            if self.is_argument:
                assemble(value, [0] * len(self.sizes), self)
            else:
                self.become(value)
            return
        if all(_is_index(p) for p in parts):
            compute.write_element(self, list(parts), value)
            return
        offsets = []
        for dim, part in enumerate(parts):
            if isinstance(part, slice):
                if part.start is not None:
                    offsets.append(part.start)
                elif part.stop is not None:
                    offsets.append(part.stop - self.shape[dim])
                else:
                    offsets.append(0)
            else:
                offsets.append(part)
        if not all(isinstance(p, slice) for p in parts):
            if not isinstance(value, Tensor):
                raise UsageError(f"assigning {value!r} to {self!r}[{_key_text(key)}]: the value must be a pypto.Tensor")
            slices = sum(isinstance(p, slice) for p in parts)
            if slices != len(value.sizes):
                raise UsageError(f"assigning a tensor of shape {list(value.shape)} to {self!r}[{_key_text(key)}]: the key has "
                                 f"{slices} slices; it needs one per dim of the value")
            dims = iter(value.sizes)
            value = compute.reshape(value.in_gm("assemble"), [next(dims) if isinstance(p, slice) else 1 for p in parts])
        assemble(value, offsets, self)

    def _normalize(self, key: object, what: str) -> tuple[Any, ...]:
        """The key with ``...`` expanded, missing trailing dims as ``:``, negative int indices and
        bounds counted from the end (the framework's normalisation)."""
        parts: list[Any] = list(key) if isinstance(key, tuple) else [key]
        for dim, part in enumerate(parts):
            if isinstance(part, slice) and isinstance(part.stop, Tensor):
                raise UsageError(f"tensor {what} {_key_text(key)}: a slice ending in a tensor is pypto.gather / pypto.scatter, "
                                 "which npusim does not model yet")
            if not (isinstance(part, slice) or _is_index(part) or part is Ellipsis):
                raise UsageError(f"tensor {what}: {part!r} in dim {dim} of {_key_text(key)} is not an int, a SymbolicScalar, "
                                 "a slice or ...")
        if sum(p is Ellipsis for p in parts) > 1:
            raise UsageError(f"tensor {what}: at most one ... in {_key_text(key)}")
        if Ellipsis in parts:
            at = parts.index(Ellipsis)
            parts[at:at + 1] = [slice(None)] * (len(self.shape) - len(parts) + 1)
        if len(parts) > len(self.sizes):
            raise UsageError(f"tensor {what}: {_key_text(key)} has {len(parts)} indices for a tensor of {len(self.shape)} dims")
        parts += [slice(None)] * (len(self.sizes) - len(parts))
        normal: list[Any] = []  # slices, and ints or SymbolicScalars for the indexed dims
        for dim, (part, size) in enumerate(zip(parts, self.sizes)):
            if isinstance(part, slice):
                if part.step not in (None, 1):
                    raise UsageError(f"tensor {what}: {_key_text(key)} has a step in dim {dim}; PyPTO slices take no step")
                start = part.start + size if isinstance(part.start, int) and part.start < 0 else part.start
                stop = part.stop + size if isinstance(part.stop, int) and part.stop < 0 else part.stop
                normal.append(slice(start, stop))
            else:
                normal.append(part + size if isinstance(part, int) and part < 0 else part)
        return tuple(normal)

    def _view_box(self, slices: Sequence[slice]) -> tuple[list[Any], list[int]]:
        """Offsets and sizes of the view that slices select; the sizes must be known (on this PE)."""
        offsets, sizes = [], []
        for dim, part in enumerate(slices):
            start = 0 if part.start is None else part.start
            stop = self.sizes[dim] if part.stop is None else part.stop
            size = stop - start
            offsets.append(start)
            sizes.append(value_of(self.program, size) if _is_symbolic(size) else size)
        return offsets, sizes

    # -- arithmetic operators (pypto.add ...) -------------------------------------------------------

    def __add__(self, other: object) -> Any: return _compute().add(self, other)
    def __radd__(self, other: object) -> Any: return _compute().add(self, other)
    def __sub__(self, other: object) -> Any: return _compute().sub(self, other)
    def __mod__(self, other: object) -> Any: return _op("remainder")(self, other)
    def __floordiv__(self, other: object) -> Any: return _op("floor")(_compute().div(self, other))
    def __rsub__(self, other: object) -> Any: return _compute().add(_compute().neg(self), other)  # other - x is exactly (-x) + other
    def __mul__(self, other: object) -> Any: return _compute().mul(self, other)
    def __rmul__(self, other: object) -> Any: return _compute().mul(self, other)
    def __truediv__(self, other: object) -> Any: return _compute().div(self, other)
    def __rtruediv__(self, other: object) -> Any: return _compute().divide_scalar_by(other, self)
    def __neg__(self) -> Any: return _compute().neg(self)
    def __pos__(self) -> Tensor: return self
    def __pow__(self, other: object) -> Any: return _op("pow")(self, other)
    def __matmul__(self, other: object) -> Any: return _compute().matmul(self, other, self.dtype)
    def __lt__(self, other: object) -> Any: return _op("lt")(self, other)
    def __le__(self, other: object) -> Any: return _op("le")(self, other)
    def __gt__(self, other: object) -> Any: return _op("gt")(self, other)
    def __ge__(self, other: object) -> Any: return _op("ge")(self, other)
    # a += b makes a name the new result, as the framework's in-place operators do
    __iadd__, __isub__, __imul__, __itruediv__ = __add__, __sub__, __mul__, __truediv__
    # == and != with a number compare elementwise (test_tensor_operators.py: y.move(x == 0.5)); between
    # tensors they stay identity (tensors are dict keys and list members here): use pypto.eq / pypto.ne

    def __eq__(self, other: object) -> Any:
        return _op("eq")(self, other) if _is_number(other) else NotImplemented

    def __ne__(self, other: object) -> Any:
        return _op("ne")(self, other) if _is_number(other) else NotImplemented

    __hash__ = object.__hash__

    def assemble(self, input: Tensor, offsets: Sequence[int | SymbolicScalar]) -> None:
        """``t.assemble(input, offsets)``: ``pypto.assemble(input, offsets, t)``."""
        _op("assemble")(input, offsets, self)

    def __iter__(self) -> NoReturn:
        raise UsageError(f"{self!r} is not iterable: index it (t[i, j]) or slice it")

    def numpy(self) -> npt.NDArray[Any]:
        """The values of a GM tensor (synchronises the session, like ``tensor.cpu()``)."""
        if self.device is None:
            raise UsageError(f"{self!r} has no values on the host: only GM tensors (arguments, shmem_get results) do")
        return self.device.numpy()

    def __repr__(self) -> str:
        name = f" {self.name!r}" if self.name else ""
        return f"pypto.Tensor({self.location}{name}, shape={list(self.sizes)}, {self.dtype.name}, PE {self.pe})"


def _is_index(part: object) -> bool:
    return isinstance(part, int) and not isinstance(part, bool) or _is_symbolic(part)


def _is_empty(parts: Sequence[object]) -> bool:
    return all(isinstance(p, slice) and p.start is None and p.stop is None for p in parts)


class Destination:
    """Where an op's tile ops store its result (a GM device tensor), read when each tile op runs,
    so that an ``assemble`` can point it into the tensor assembled into (:meth:`Tensor.fold_into`)."""

    __slots__ = ("device", "pinned", "exact")

    def __init__(self, device: DeviceTensor) -> None:
        self.device = device
        self.pinned = False  # an op has read it where it is, or an assemble has placed it
        self.exact: DeviceTensor | None = None  # an upcast op's result: where its tile ops also store it before the cast down


def _compute() -> ModuleType:
    from npusim.frontend.pypto import compute

    return compute


def _op(name: str) -> Any:
    """The ``pypto.<name>`` op (imported when first used: the ops import this module)."""
    import npusim.frontend.pypto as pypto

    return getattr(pypto, name)


TENSOR_METHODS = (
    "abs", "acos", "acosh", "add", "amax", "amin", "argmax", "argmin", "asin", "asinh", "atan", "atanh", "ceil", "clone", "cos", "cosh", "cumsum", "div",
    "erf", "erfc", "exp", "exp2", "expm1", "floor", "fmod", "greater", "hypot", "isfinite", "isnan", "log", "log1p", "log2", "log10",
    "logical_not", "lrelu", "matmul", "maximum", "minimum", "mul", "neg", "prod", "reciprocal", "relu", "reshape", "round", "rsqrt",
    "sigmoid", "sign", "signbit", "sin", "sinh", "softmax", "sqrt", "sub", "sum", "tan", "tanh", "transpose", "trunc", "unsqueeze",
    "view", "expand_clone", "var", "gather", "scatter", "scatter_", "scatter_update", "index_add", "index_add_",
    # not modelled yet: the method names the op (pypto.NOT_YET)
    "axpy_", "cumprod", "fillpad", "gathermask", "gcd", "mrgsort", "pad", "permute", "prelu", "quant_mx",
    "sort32", "topk", "tril", "triu",
)
"""The framework's Tensor methods that are ``pypto.<name>(tensor, ...)`` (python/pypto/tensor.py)."""


def _method(name: str) -> Callable[..., Any]:
    def method(self: Tensor, *args: Any, **kwargs: Any) -> Any:
        return _op(name)(self, *args, **kwargs)

    method.__name__ = method.__qualname__ = name
    method.__doc__ = f"``tensor.{name}(...)``: ``pypto.{name}(tensor, ...)``."
    return method


for _name in TENSOR_METHODS:
    setattr(Tensor, _name, _method(_name))


def _key_text(key: object) -> str:
    parts = key if isinstance(key, tuple) else (key,)
    shown = []
    for part in parts:
        if isinstance(part, slice):
            shown.append(f"{'' if part.start is None else part.start}:{'' if part.stop is None else part.stop}")
        else:
            shown.append("..." if part is Ellipsis else repr(part))
    return ", ".join(shown)


class ShmemTensor:
    """``pypto.ShmemTensor``: a symmetric tensor (every PE of the group has one), or a view of it.

    ``offsets`` / ``shape`` / ``valid_shape`` give the view in the per-PE tensor of ``tensor_shape``
    (the data shape; ``[1, 8]`` for a signal-only tensor)."""

    def __init__(self, program: PeProgram, area: ShmemArea, offsets: Sequence[int], shape: Sequence[int],
                 valid_shape: Sequence[int] | None = None) -> None:
        self.program = program
        self.area = area
        self.offsets = tuple(offsets)
        self.shape = tuple(shape)
        self.valid_shape = tuple(valid_shape) if valid_shape is not None else self.shape

    @property
    def tensor_shape(self) -> tuple[int, ...]:
        return self.area.tensor_shape

    @property
    def dtype(self) -> DataType | None:
        return self.area.dtype

    @property
    def n_pes(self) -> int:
        return self.area.allocation.n_pes

    @property
    def group_name(self) -> str:
        return self.area.allocation.group_name

    def __repr__(self) -> str:
        kind = "signal" if self.area.dtype is None else self.area.dtype.name
        return f"pypto.ShmemTensor(#{self.area.index}, group {self.group_name!r}, {kind}, view {list(self.shape)} at {list(self.offsets)})"
