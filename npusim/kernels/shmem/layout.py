"""Where shmem tensors and their signals live in a group's windows, and how signal slots are numbered.

Every PE of a communication group has two windows that every other PE of the group can address: a
data window (HCCL's buffer, 200 MiB by default) and a signal ("status") window (1 MiB by default).
``create_shmem_tensor`` takes ``align_up(bytes, 512)`` of the data window and an int32 signal area of
``align_up(4 * n_pes * 8 * max_tiles, 512)`` bytes of the signal window, where ``max_tiles`` is the
largest tile count of the shmem_signal ops on the tensor (1 until one needs more);
``create_shmem_signal`` takes only a signal area. The signal area holds, per (owner PE, tile), one
8 x int32 = 32-byte slot.

Each execution of a create allocates anew (a create inside a loop allocates every iteration) from a
bump pointer per group and window that wraps to offset 0 when the next area would pass the window's
end; so a program may create more than a window holds, and a late area then reuses the memory of an
early one. Only an area larger than the whole window is refused.

The framework knows every create and every signal op of a program before it runs, so the offsets
above are final when it starts. A launch whose kernels read device values runs while it is still
being built: its groups are *frozen* when it starts (:meth:`ShmemGroup.freeze`), the areas so far
keep their offsets, a later area goes after the last one (wrapping the same way), and an area whose
signal numbering grows after that moves to the end of the signal window, which only an area no
signal op has used yet may do.

Sources: ``shmem_operation_impl.cpp`` (CreateShmemTensor, GetSignalBufferSize, UpdataSignalMaxTile),
``distributed_common.h`` (GetTotalTileNum, SHMEM_SIGNAL_STRIDE, SHMEM_SIZE_ALIGN), ``tileop_shmem.h``
(ShmemSignal, ShmemClearFlag), ``shmem_wait_until.h`` (CalculateTaskAddress),
``device_execute_context.cpp`` (the shmem allocator), ``comm_context.h`` (address encoding),
``comm_group_recorder.cpp`` and ``aikernel_data.h`` (HCCL_GROUP_NUM = 2).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from npusim.errors import OpArgumentError, UsageError
from npusim.kernels.shmem.checks import (
    check_data_shape,
    check_dtype,
    check_group_name,
    check_n_pes,
    check_signal_view,
)
from npusim.kernels.shmem.dtypes import DataType
from npusim.kernels.shmem.tiling import tile_grid

SHMEM_ALIGN_BYTES = 512
"""Every data and signal area is aligned up to 512 bytes."""
SIGNAL_SLOT_INT32S = 8
"""int32 words per signal slot; only word 0 is written and polled."""
SIGNAL_SLOT_BYTES = SIGNAL_SLOT_INT32S * DataType.DT_INT32.itemsize
"""32 bytes per (owner PE, tile) slot: one atomic-add block."""
SIGNAL_ONLY_SHAPE = (1, SIGNAL_SLOT_INT32S)
"""Per-PE shape of the signal tensor that ``create_shmem_signal`` makes."""
DATA_WINDOW_BYTES = 200 * 2**20
"""Default data window per PE and group (HCCL buffer size, 200 MiB)."""
SIGNAL_WINDOW_BYTES = 2**20
"""Default signal window per PE and group (1 MiB)."""
MAX_GROUPS = 2
"""Communication groups per program, i.e. per PE (HCCL_GROUP_NUM; the address encoding would allow 4)."""
MAX_SIGNAL_TILES = 2**12 - 1
"""Largest max_tiles of a signal area: it is encoded in 12 bits of the shmem address."""


def align_up(size_bytes: int, alignment_bytes: int = SHMEM_ALIGN_BYTES) -> int:
    """``size_bytes`` rounded up to a multiple of ``alignment_bytes``."""
    return -(-size_bytes // alignment_bytes) * alignment_bytes


def data_area_bytes(shape: Sequence[int], dtype: DataType) -> int:
    """Bytes of the data window one shmem tensor takes on each PE."""
    return align_up(math.prod(shape) * dtype.itemsize)


def signal_area_bytes(n_pes: int, max_tiles: int) -> int:
    """Bytes of the signal window one shmem tensor takes on each PE: a slot per (owner PE, tile)."""
    return align_up(n_pes * max_tiles * SIGNAL_SLOT_BYTES)


def signal_clear_bytes(n_pes: int, max_tiles: int) -> int:
    """Bytes that shmem_clear_signal zeroes from the start of a signal area.

    As the framework's ShmemClearFlag is written, it zeroes ``n_pes * max_tiles`` int32 words in whole
    512-byte stores, dropping the remainder, so it covers only part of the area (it does not multiply
    by the 8 words of a slot); a faithful simulation clears exactly this much.
    """
    words_per_store = SHMEM_ALIGN_BYTES // DataType.DT_INT32.itemsize
    return (n_pes * max_tiles // words_per_store) * SHMEM_ALIGN_BYTES


@dataclass(frozen=True)
class SignalGrid:
    """How a shmem_signal or shmem_wait_until op numbers the signal slots of its tiles.

    The shmem tensor (per-PE data shape ``tensor_shape``) is seen as a grid of views of ``view_shape``
    (which must divide it); each view has ``view_tile_num`` tiles of ``tile_shape``. A tile at
    ``tile_offset`` (absolute, in the tensor) gets slot ``view_index * view_tile_num + tile_in_view``,
    both numbered with the first dim fastest (unlike the row-major tile expansion order). Owner PE
    ``src_pe`` has row ``src_pe`` of ``total_tiles`` slots, so the slot's byte offset in the signal
    area is ``(src_pe * total_tiles + slot) * 32``. Signal and wait must use the same view and tile
    shape to meet in the same slot.
    """

    tensor_shape: tuple[int, ...]
    view_shape: tuple[int, ...]
    tile_shape: tuple[int, ...]

    @classmethod
    def of(
        cls, op: str, tensor_shape: Sequence[int], view_shape: Sequence[int], tile_shape: Sequence[int]
    ) -> SignalGrid:
        """The grid of a signal/wait op, checked: the view divides the tensor."""
        check_signal_view(op, tensor_shape, view_shape)
        return _signal_grid(tuple(tensor_shape), tuple(view_shape), tuple(tile_shape))

    @functools.cached_property
    def tiles_per_dim(self) -> tuple[int, ...]:
        """Tiles of one view per dim (kept once asked: a grid numbers every tile of its op)."""
        return tile_grid(self.view_shape, self.tile_shape)

    @functools.cached_property
    def view_tile_num(self) -> int:
        """Tiles in one view (kept once asked)."""
        return math.prod(self.tiles_per_dim)

    @functools.cached_property
    def total_tiles(self) -> int:
        """Slots per owner PE: tiles per view times views in the tensor (kept once asked)."""
        return self.view_tile_num * math.prod(t // v for t, v in zip(self.tensor_shape, self.view_shape))

    def slot_index(self, tile_offset: Sequence[int]) -> int:
        """The slot of the tile at ``tile_offset`` (absolute, in the tensor) within its owner's row."""
        tiles_per_dim = self.tiles_per_dim
        tile_in_view, view_index = 0, 0
        tile_stride, view_stride = 1, 1
        for offset, dim, view, tile, tiles in zip(
            tile_offset, self.tensor_shape, self.view_shape, self.tile_shape, tiles_per_dim
        ):
            tile_in_view += (offset % view) // tile * tile_stride
            view_index += offset // view * view_stride
            tile_stride *= tiles
            view_stride *= dim // view
        return view_index * self.view_tile_num + tile_in_view

    def slot_byte_offset(self, src_pe: int, tile_offset: Sequence[int]) -> int:
        """Byte offset in the signal area of owner ``src_pe``'s slot for the tile at ``tile_offset``."""
        return (src_pe * self.total_tiles + self.slot_index(tile_offset)) * SIGNAL_SLOT_BYTES


@functools.lru_cache(maxsize=256)
def _signal_grid(tensor_shape: tuple[int, ...], view_shape: tuple[int, ...], tile_shape: tuple[int, ...]) -> SignalGrid:
    """The grid of these shapes, one for the ops that ask (frozen, its tile counts kept once asked)."""
    return SignalGrid(tensor_shape, view_shape, tile_shape)


@dataclass(eq=False)
class ShmemAllocation:
    """One execution of create_shmem_tensor / create_shmem_signal in a group: a symmetric tensor, the
    same on every PE. ``dtype`` and ``data_shape`` are None for a signal-only tensor. Its offsets in the
    windows depend on the areas created before it, so ask its :class:`ShmemGroup`."""

    group_name: str
    group_index: int
    n_pes: int
    dtype: DataType | None
    data_shape: tuple[int, ...] | None
    signal_max_tiles: int = 1
    signal_used: bool = False  # a signal, wait or clear op uses its slots

    @property
    def signal_shape(self) -> tuple[int, ...]:
        """Per-PE shape of the int32 signal tensor: ``[n_pes, *data_shape]`` (``[n_pes, 1, 8]`` signal-only)."""
        return (self.n_pes, *(self.data_shape or SIGNAL_ONLY_SHAPE))

    @property
    def data_bytes(self) -> int:
        """Bytes of the data window it takes on each PE (0 for a signal-only tensor)."""
        return 0 if self.data_shape is None or self.dtype is None else data_area_bytes(self.data_shape, self.dtype)

    @property
    def signal_bytes(self) -> int:
        """Bytes of the signal window it takes on each PE."""
        return signal_area_bytes(self.n_pes, self.signal_max_tiles)


@dataclass
class _Placement:
    """Where a frozen group put an allocation's areas: byte offsets in its windows."""

    data: int | None  # of its data in the data window (None: a signal-only tensor)
    signal: int  # of its signal area in the signal window


@dataclass(eq=False)
class ShmemGroup:
    """A communication group: its index (creation order), n_pes, window sizes per PE, and its
    allocations in creation order."""

    name: str
    index: int
    n_pes: int
    data_window_bytes: int
    signal_window_bytes: int
    allocations: list[ShmemAllocation] = field(default_factory=list)
    frozen: bool = False
    _placed: dict[int, _Placement] = field(default_factory=dict)  # frozen: id(allocation) -> where its areas are
    _ends: list[int] = field(default_factory=lambda: [0, 0])  # frozen: the ends of the last data and signal areas

    def data_offset_bytes(self, allocation: ShmemAllocation) -> int | None:
        """Offset of ``allocation``'s data in the data window (None for a signal-only tensor)."""
        if allocation.data_shape is None:
            return None
        if self.frozen:
            return self._placed[id(allocation)].data
        return self._offset(allocation, [a.data_bytes for a in self.allocations], self.data_window_bytes)

    def signal_offset_bytes(self, allocation: ShmemAllocation) -> int:
        """Offset of ``allocation``'s signal area in the signal window."""
        if self.frozen:
            return self._placed[id(allocation)].signal
        return self._offset(allocation, [a.signal_bytes for a in self.allocations], self.signal_window_bytes)

    def freeze(self) -> None:
        """The program starts running while it is still built: keep the offsets of the areas so
        far; later areas go after them (module docstring)."""
        if self.frozen:
            return
        placed: dict[int, _Placement] = {}
        ends = [0, 0]
        for a in self.allocations:
            data, signal = self.data_offset_bytes(a), self.signal_offset_bytes(a)
            placed[id(a)] = _Placement(data, signal)
            if data is not None:
                ends[0] = data + a.data_bytes
            ends[1] = signal + a.signal_bytes
        self._placed, self._ends, self.frozen = placed, ends, True

    def place(self, allocation: ShmemAllocation) -> None:
        """Frozen: put a new area after the last one."""
        data = None if allocation.data_shape is None else self._bump(0, allocation.data_bytes, self.data_window_bytes)
        self._placed[id(allocation)] = _Placement(data, self._bump(1, allocation.signal_bytes, self.signal_window_bytes))

    def regrow(self, allocation: ShmemAllocation, op: str) -> None:
        """Frozen: ``allocation``'s signal area grew; it moves to the end of the signal window."""
        if allocation.signal_used:
            raise OpArgumentError(
                f"{op}: numbers {allocation.signal_max_tiles} signal slots per PE in shmem tensor of group {self.name!r}, "
                "more than the signal, wait and clear ops built on it before a device-valued read started the launch; "
                "give every signal and wait on a shmem tensor the same view and tile shape, or build the largest one first"
            )
        self._placed[id(allocation)].signal = self._bump(1, allocation.signal_bytes, self.signal_window_bytes)

    def _bump(self, window: int, size: int, window_bytes: int) -> int:
        start = 0 if self._ends[window] + size > window_bytes else self._ends[window]
        self._ends[window] = start + size
        return start

    def _offset(self, allocation: ShmemAllocation, sizes: list[int], window_bytes: int) -> int:
        """The wrapping bump allocator: an area that would pass the window's end starts at 0."""
        end = 0
        for candidate, size in zip(self.allocations, sizes):
            start = 0 if end + size > window_bytes else end
            if candidate is allocation:
                return start
            end = start + size
        raise UsageError(f"the allocation is not in group {self.name!r}")


class ShmemGroupRegistry:
    """The shmem tensors of one launch, per communication group, with the framework's limits: one
    ``n_pes`` per group, group names of 1..127 characters, and each area no larger than its window
    (the limit of :data:`MAX_GROUPS` groups per PE is the launch's to check: its PEs may use
    different groups)."""

    def __init__(
        self,
        *,
        data_window_bytes: int = DATA_WINDOW_BYTES,
        signal_window_bytes: int = SIGNAL_WINDOW_BYTES,
    ) -> None:
        self.data_window_bytes = data_window_bytes
        self.signal_window_bytes = signal_window_bytes
        self._groups: dict[str, ShmemGroup] = {}

    @property
    def groups(self) -> list[ShmemGroup]:
        """The groups in creation order."""
        return list(self._groups.values())

    def group(self, name: str) -> ShmemGroup:
        """The group called ``name`` (KeyError if nothing was created in it)."""
        return self._groups[name]

    def create_tensor(
        self, group_name: str, n_pes: int, dtype: DataType, shape: Sequence[int], *, op: str = "create_shmem_tensor"
    ) -> ShmemAllocation:
        """Register a shmem data tensor of per-PE ``shape`` (and its signal area)."""
        check_data_shape(op, "shape", shape)
        check_dtype(op, "dtype", dtype)
        group = self._group_for(op, group_name, n_pes)
        allocation = ShmemAllocation(group_name, group.index, n_pes, dtype, tuple(shape))
        if allocation.data_bytes > self.data_window_bytes:
            raise OpArgumentError(
                f"{op}: shape={list(shape)} of {dtype.name} needs {allocation.data_bytes} bytes, more than the "
                f"{self.data_window_bytes}-byte data window each PE has for group {group_name!r}; create a smaller "
                "shmem tensor and move the data through it block by block in a loop"
            )
        self._add(op, group, allocation)
        return allocation

    def create_signal(self, group_name: str, n_pes: int, *, op: str = "create_shmem_signal") -> ShmemAllocation:
        """Register a signal-only tensor (for barriers)."""
        group = self._group_for(op, group_name, n_pes)
        allocation = ShmemAllocation(group_name, group.index, n_pes, None, None)
        self._add(op, group, allocation)
        return allocation

    def record_signal_tiles(self, allocation: ShmemAllocation, total_tiles: int, *, op: str = "shmem_signal") -> None:
        """A shmem_signal op on ``allocation`` numbers ``total_tiles`` slots per owner PE: grow its area."""
        if total_tiles > MAX_SIGNAL_TILES:
            raise OpArgumentError(
                f"{op}: total_tiles={total_tiles} slots per PE exceed the {MAX_SIGNAL_TILES} a signal area can "
                "number (12 bits of the shmem address); use a larger tile shape or a larger signal view"
            )
        if total_tiles <= allocation.signal_max_tiles:
            return
        grown = signal_area_bytes(allocation.n_pes, total_tiles)
        if grown > self.signal_window_bytes:
            raise OpArgumentError(
                f"{op}: total_tiles={total_tiles} needs a signal area of {grown} bytes (n_pes={allocation.n_pes} x "
                f"{total_tiles} slots x {SIGNAL_SLOT_BYTES} B), more than the {self.signal_window_bytes}-byte signal "
                f"window of group {allocation.group_name!r}; use a larger tile shape"
            )
        allocation.signal_max_tiles = total_tiles
        group = self._groups[allocation.group_name]
        if group.frozen:
            group.regrow(allocation, op)

    def _group_for(self, op: str, group_name: str, n_pes: int) -> ShmemGroup:
        check_group_name(op, group_name)
        check_n_pes(op, n_pes)
        group = self._groups.get(group_name)
        if group is None:
            # registered by _add once it holds an allocation
            return ShmemGroup(group_name, len(self._groups), n_pes, self.data_window_bytes, self.signal_window_bytes)
        if n_pes != group.n_pes:
            raise OpArgumentError(
                f"{op}: n_pes={n_pes} differs from n_pes={group.n_pes} of the earlier shmem tensors of group "
                f"{group_name!r}; every shmem tensor of a group must have the same n_pes"
            )
        return group

    def _add(self, op: str, group: ShmemGroup, allocation: ShmemAllocation) -> None:
        if allocation.signal_bytes > self.signal_window_bytes:
            raise OpArgumentError(
                f"{op}: n_pes={allocation.n_pes} needs a signal area of {allocation.signal_bytes} bytes, more than "
                f"the {self.signal_window_bytes}-byte signal window of group {group.name!r}"
            )
        group.allocations.append(allocation)
        self._groups.setdefault(group.name, group)
        if group.frozen:
            group.place(allocation)
