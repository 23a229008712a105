"""The symmetric memory of a launch: its shmem tensors (:class:`ShmemArea`, the same offsets of
the group's windows on every PE), the boxes of shmem data tile ops write (:class:`RemoteWrite`) and
what landed in a signal slot since it was last cleared (:class:`SlotHistory`)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from npusim import isa
from npusim.errors import WorkloadError
from npusim.hw.memory import Allocation
from npusim.kernels.shmem.dtypes import DataType
from npusim.kernels.shmem.layout import SIGNAL_ONLY_SHAPE, ShmemAllocation, ShmemGroup
from npusim.kernels.shmem.tile_ops import GmView

if TYPE_CHECKING:
    from npusim.runtime.launch import ShmemLaunch
    from npusim.runtime.program import PeProgram


class ShmemArea:
    """One create_shmem_tensor / create_shmem_signal of the program: a symmetric tensor with an
    int32 signal area, at the same offsets of the group's windows on every PE. ``creator``: the PE
    that created it first; ``itemsize``: bytes per element (0: signal-only)."""

    def __init__(self, launch: ShmemLaunch, index: int, allocation: ShmemAllocation, creator: int = 0) -> None:
        self.launch = launch
        self.index = index
        self.allocation = allocation
        self.creator = creator
        dtype = allocation.dtype
        self.itemsize = dtype.itemsize if dtype is not None else 0
        self._views: dict[int, GmView] = {}  # rank -> data_view(rank), once its window exists
        self._labels: dict[int, str] = {}  # rank -> label(rank)
        self._signal_bases: dict[int, tuple[Allocation, int]] = {}  # rank -> (signal window, area offset)

    @property
    def dtype(self) -> DataType | None:
        return self.allocation.dtype

    @property
    def tensor_shape(self) -> tuple[int, ...]:
        return self.allocation.data_shape or SIGNAL_ONLY_SHAPE

    @property
    def group(self) -> ShmemGroup:
        return self.launch.registry.group(self.allocation.group_name)

    @property
    def members(self) -> tuple[int, ...]:
        """The launch's PEs of the tensor's group, by rank in the group."""
        return self.launch.group_members(self.allocation.group_name)

    def pe_of(self, rank: int) -> int:
        """The launch's PE of rank ``rank`` in the tensor's group."""
        return self.members[rank]

    def rank_of(self, program: PeProgram) -> int:
        """The rank of ``program``'s PE in the tensor's group."""
        return program.ranks[self.allocation.group_name]

    def label(self, rank: int) -> str:
        label = self._labels.get(rank)
        if label is None:
            members = self.members
            where = f"PE {rank}" if members[rank] == rank else f"rank {rank} (PE {members[rank]})"
            label = self._labels[rank] = f"shmem tensor #{self.index} (group {self.allocation.group_name!r}) on {where}"
        return label

    def data_view(self, rank: int) -> GmView:
        """The whole data tensor on rank ``rank`` of its group: its window, offset and (contiguous)
        strides. Kept once made (tile ops ask for it as they start): a window is allocated once,
        and the area's offset in it no longer moves by then (tile ops start after the launch is
        finished, or, in a launch that runs while it builds, in frozen groups, where data areas
        keep the offset they were placed at)."""
        view = self._views.get(rank)
        if view is None:
            itemsize = self.itemsize
            shape = self.tensor_shape
            strides = tuple(itemsize * math.prod(shape[i + 1:]) for i in range(len(shape)))
            window = self.launch.data_windows[(self.allocation.group_name, self.members[rank])]
            offset = self.group.data_offset_bytes(self.allocation)
            assert offset is not None, self.label(rank)  # a data tensor (its window exists) has its place in it
            view = self._views[rank] = GmView(window, offset, strides)
        return view

    def signal_address(self, rank: int, slot_offset_bytes: int) -> isa.GmAddress:
        """Byte ``slot_offset_bytes`` of this tensor's signal area on rank ``rank`` of its group. The
        area's window and offset are kept once found: asked for by the tile ops of signal, wait and
        clear ops, which mark the area used when built, and a used area's signal offset no longer
        moves (a launch that runs while it builds refuses to regrow it; otherwise tile ops start
        once every op is built)."""
        base = self._signal_bases.get(rank)
        if base is None:
            base = self._signal_bases[rank] = (self.launch.signal_windows[(self.allocation.group_name, self.members[rank])],
                                               self.group.signal_offset_bytes(self.allocation))
        window, offset = base[0], base[1] + slot_offset_bytes
        if offset + 4 > window.size_bytes:
            raise WorkloadError(
                f"{self.label(rank)}: a signal slot at byte {offset} lies past the signal areas the program's "
                "shmem_signal ops numbered; a shmem_wait_until must use the view and tile shape of its shmem_signal"
            )
        return isa.GmAddress(window, offset)


@dataclass(eq=False)
class RemoteWrite:
    """A tile op's store of a box of shmem data: ``shape`` elements at ``offset`` (in the tensor's
    elements) of ``area`` on rank ``pe`` of its group (``target``: the launch's PE of that rank); ``event`` is the index of its last
    store's event (-1 until recorded)."""

    area: ShmemArea
    pe: int
    offset: tuple[int, ...]
    shape: tuple[int, ...]
    event: int = -1
    target: int = field(init=False)  # found once (a launch's groups are fixed when it is made): each landed signal compares it per write

    def __post_init__(self) -> None:
        self.target = self.area.pe_of(self.pe)

    def overlaps(self, offset: Sequence[int], shape: Sequence[int]) -> bool:
        """True if the box ``shape`` at ``offset`` shares an element with this write's box."""
        for a, n, b, m in zip(self.offset, self.shape, offset, shape):  # noqa: SIM110 (1.7x faster than all(...); asked per signal store and write)
            if not (a < b + m and b < a + n):
                return False
        return True

    def landed(self, event: int) -> None:
        self.event = event


@dataclass
class SlotHistory:
    """What landed in one signal slot since it was last cleared: the happens-before bits of the
    tile ops that signalled it (``clock``) and the events of their stores (``signals``)."""

    clock: int = 0
    signals: list[int] = field(default_factory=list)
