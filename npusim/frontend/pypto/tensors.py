"""The values a PyPTO kernel handles on one PE: ``pypto.Tensor`` and the symmetric ``ShmemTensor``.

A :class:`Tensor` belongs to one PE's program and is one of

- a GM tensor (``location == "GM"``): a kernel argument (a device tensor on the PE's die), a view of
  one (``pypto.view``, slicing), or a ``shmem_get`` result;
- a UB tile tensor (``"UB"``): a ``shmem_load`` result, held tile by tile in the UB of the cores
  that loaded it, usable by ``shmem_store`` and by assignment into a GM tensor;
- a token (``"token"``): the int32 "dummy" an op returns, which only orders ops (``pred=[...]``).

Every tensor knows which tile ops wrote which part of it (``writes``: a tile op and a region, or
None for all of it), so that a pred on it makes an op wait for exactly those tile ops. A view shares
the writes of the tensor it views, shifted by its ``origin``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from npusim.errors import UsageError, WorkloadError
from npusim.kernels.shmem.dtypes import DataType
from npusim.kernels.shmem.tiling import Region

if TYPE_CHECKING:
    from npusim.frontend.pypto.runtime import PeProgram, ShmemArea, Task
    from npusim.frontend.tensor import DeviceTensor
    from npusim.kernels.shmem.tiling import Tile

LOCATIONS = ("GM", "UB", "token")


def regions_meet(a: Region, b: Region) -> bool:
    """True if two boxes of the same tensor share an element."""
    return all(ao < bo + bs and bo < ao + as_ for ao, as_, bo, bs in zip(a.offset, a.shape, b.offset, b.shape))


class Tensor:
    """``pypto.Tensor``: a tensor of one PE's program (see the module docstring)."""

    def __init__(self, program: PeProgram, location: str, shape: Sequence[int], dtype: DataType, *,
                 device: DeviceTensor | None = None, valid_shape: Sequence[int] | None = None,
                 writes: list | None = None, origin: Sequence[int] | None = None) -> None:
        assert location in LOCATIONS
        self.program = program
        self.location = location
        self.shape = tuple(int(s) for s in shape)
        self.dtype = dtype
        self.device = device
        self.valid_shape = tuple(valid_shape) if valid_shape is not None else self.shape
        self.writes: list[tuple[Task, Region | None]] = writes if writes is not None else []
        self.origin = tuple(origin) if origin is not None else (0,) * len(self.shape)
        self.tiles: list[Tile] = []  # a UB tile tensor: the tiles of the shmem_load that made it
        self.tile_shape: tuple[int, ...] | None = None

    @classmethod
    def token(cls, program: PeProgram, shape: Sequence[int], writes: list) -> Tensor:
        """An op's int32 token."""
        return cls(program, "token", shape, DataType.DT_INT32, writes=writes)

    @classmethod
    def of_device(cls, program: PeProgram, device: DeviceTensor) -> Tensor:
        """A kernel argument: a device tensor in the PE's GM."""
        try:
            dtype = DataType.from_numpy(device.dtype)
        except ValueError:
            raise WorkloadError(f"a kernel argument has dtype {device.dtype}, which PyPTO has no DataType for") from None
        return cls(program, "GM", device.shape, dtype, device=device)

    @property
    def pe(self) -> int:
        """The PE whose program this tensor belongs to."""
        return self.program.pe

    def dim(self) -> int:
        return len(self.shape)

    def tasks_for(self, region: Region | None) -> list[Task]:
        """The tile ops that wrote the part ``region`` of this tensor (None: all of it)."""
        if region is not None and any(self.origin):
            region = Region(tuple(o + r for o, r in zip(self.origin, region.offset)), region.shape)
        found: dict[int, Task] = {}
        for task, written in self.writes:
            if region is None or written is None or len(written.offset) != len(region.offset) or regions_meet(region, written):
                found.setdefault(id(task), task)
        return list(found.values())

    # -- views and assignment ----------------------------------------------------------------------

    def __getitem__(self, key) -> Tensor:
        """A view by integer indices and slices (``a[:2, 4:8]``), as ``pypto.view``; dims are kept."""
        from npusim.frontend.pypto.ops import view

        offsets, shape = self._box(key, "index")
        return view(self, shape, offsets)

    def __setitem__(self, key, value: Tensor) -> None:
        """``out[a:, b:] = tile`` assembles ``tile`` into this tensor at offsets ``[a, b]`` (as ``pypto.assemble``)."""
        from npusim.frontend.pypto.ops import assemble

        offsets, extent = self._box(key, "assign")
        if isinstance(value, Tensor):
            for dim, (size, limit) in enumerate(zip(value.shape, extent)):
                if size > limit:
                    raise UsageError(
                        f"assigning a tensor of shape {list(value.shape)} to {self!r}[{_key_text(key)}]: dim {dim} of the "
                        f"value ({size}) is larger than the slice ({limit})"
                    )
        assemble(value, offsets, self)

    def _box(self, key, what: str) -> tuple[list[int], list[int]]:
        """Offsets and sizes of the box a key selects (SymbolicScalars read on this tensor's PE)."""
        from npusim.frontend.pypto.symbolic import SymbolicScalar

        def concrete(value):
            return value.concrete(self.pe) if isinstance(value, SymbolicScalar) else value

        parts = [concrete(p) for p in key] if isinstance(key, tuple) else [concrete(key)]
        if sum(p is Ellipsis for p in parts) > 1:
            raise UsageError(f"tensor {what}: at most one ... in {key!r}")
        if Ellipsis in parts:
            at = parts.index(Ellipsis)
            parts[at:at + 1] = [slice(None)] * (len(self.shape) - len(parts) + 1)
        if len(parts) > len(self.shape):
            raise UsageError(f"tensor {what}: {key!r} has {len(parts)} indices for a tensor of {len(self.shape)} dims")
        parts += [slice(None)] * (len(self.shape) - len(parts))
        offsets, sizes = [], []
        for dim, (part, size) in enumerate(zip(parts, self.shape)):
            if isinstance(part, slice):
                if part.step not in (None, 1):
                    raise UsageError(f"tensor {what}: {key!r} has a step in dim {dim}; PyPTO slices take no step")
                start = 0 if part.start is None else concrete(part.start)
                stop = size if part.stop is None else concrete(part.stop)
                if not isinstance(start, int) or not isinstance(stop, int):
                    raise UsageError(f"tensor {what}: the slice {part!r} in dim {dim} must have int or SymbolicScalar bounds")
                start, stop = (start + size if start < 0 else start), (stop + size if stop < 0 else stop)
                offsets.append(start)
                sizes.append(stop - start)
            elif isinstance(part, int):
                offsets.append(part + size if part < 0 else part)
                sizes.append(1)
            else:
                raise UsageError(f"tensor {what}: {part!r} in dim {dim} is not an int, a SymbolicScalar or a slice")
        return offsets, sizes

    # -- arithmetic operators (pypto.add ...) -------------------------------------------------------

    def __add__(self, other): return _compute().add(self, other)
    def __radd__(self, other): return _compute().add(self, other)
    def __sub__(self, other): return _compute().sub(self, other)
    def __mul__(self, other): return _compute().mul(self, other)
    def __rmul__(self, other): return _compute().mul(self, other)
    def __truediv__(self, other): return _compute().div(self, other)
    def __neg__(self): return _compute().neg(self)

    def numpy(self):
        """The values of a GM tensor (synchronises the session, like ``tensor.cpu()``)."""
        if self.device is None:
            raise UsageError(f"{self!r} has no values on the host: only GM tensors (arguments, shmem_get results) do")
        return self.device.numpy()

    def __repr__(self) -> str:
        return f"pypto.Tensor({self.location}, shape={list(self.shape)}, {self.dtype.name}, PE {self.pe})"


def _compute():
    from npusim.frontend.pypto import compute

    return compute


def _key_text(key) -> str:
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
