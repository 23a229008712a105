"""Communication groups of a simulated machine: who is which rank, and each rank's window.

A group is named as the real API names it (``group_ep``: the HCCL communicator's name); it forms
as its ranks call ops with it, each rank from its own device (:meth:`CommGroup.join`), and is
complete once every rank of its world size has joined, as an HCCL communicator exists once every
rank has initialised it. What the real ops require to be the same on every rank (the world size,
the number of experts ...) is checked as each rank joins, naming the rank that differs.

Each rank has a window in its own GM, the HCCL buffer of the group: areas that other ranks write
into (:class:`Area`: the data, in two halves used alternately by successive calls, as the vendor's
kernels switch buffers so that a fast rank's next call cannot overwrite what a slow rank still
reads, and status words: flags and counts in control memory, real bytes with data off too). The
configured buffer size (``hccl.buffer``, ``HCCL_BUFFSIZE``) is what the ops check their needs
against; only the bytes an area uses are allocated.

Flags carry the call's epoch: the ``n``-th call of an op on every rank of a group signals ``n``,
so a status word never needs clearing and a stale flag never matches.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from dataclasses import dataclass

from npusim.errors import OpArgumentError
from npusim.hw.memory import Allocation

STATUS_BYTES = 32
"""One status entry: a flag word and a count word in one 32-byte DMA block (the vendor's kernels
keep ``(flag, count)`` per block of 8 int32; the block is the MTE granule)."""


@dataclass
class Area:
    """One area of a rank's window: ``data`` (two halves of ``half_bytes``, None until first used)
    and ``status`` (control memory)."""

    data: Allocation | None
    half_bytes: int
    status: Allocation

    def half(self, epoch: int) -> int:
        """Byte offset in ``data`` of the half the call of ``epoch`` uses."""
        return (epoch % 2) * self.half_bytes


class CommGroup:
    """One communication group of a system: its name, world size and ranks (rank -> die)."""

    def __init__(self, system, name: str, world_size: int, buffer_bytes: int) -> None:
        self.system = system
        self.name = name
        self.world_size = world_size
        self.buffer_bytes = buffer_bytes
        self.members: dict[int, int] = {}
        self.agreed: dict[str, tuple[object, int]] = {}  # attribute -> (its value, the rank that gave it first)
        self.epochs: dict[tuple[int, str], int] = {}  # (rank, what) -> calls so far
        self.areas: dict[tuple[int, str, int, int], Area] = {}
        self.on_complete: list[Callable[[], None]] = []
        self.notes: dict = {}  # what an op's call leaves for a later call of the group (the send plan of a dispatch, by (rank, epoch))

    @property
    def complete(self) -> bool:
        return len(self.members) == self.world_size

    def join(self, api: str, rank: int, die: int, world_size: int) -> None:
        """Rank ``rank`` on die ``die`` uses the group (OpArgumentError for a second die of one
        rank, a second rank of one die or another world size)."""
        if world_size != self.world_size:
            first = min(self.members) if self.members else rank
            raise OpArgumentError(
                f"{api}: rank {rank} (device {die}) calls group {self.name!r} with ep_world_size={world_size}, but rank {first} "
                f"called it with {self.world_size}; the world size must be the same on every rank of a group (the op's rule: "
                "group_ep, ep_world_size ... are the same on all cards); pass the same ep_world_size everywhere"
            )
        known = self.members.get(rank)
        if known is not None and known != die:
            raise OpArgumentError(
                f"{api}: ep_rank_id={rank} of group {self.name!r} is called from device {die}, but device {known} already is that "
                "rank; each card of a group has its own ep_rank_id (the op's rule: ep_rank_id values do not repeat in a group)"
            )
        for other, other_die in self.members.items():
            if other_die == die and other != rank:
                raise OpArgumentError(
                    f"{api}: device {die} calls group {self.name!r} as ep_rank_id={rank}, but it already is rank {other}; a card "
                    "keeps its rank in a group: pass the same ep_rank_id on every call from one device"
                )
        if known is None:
            self.members[rank] = die
            if self.complete:
                callbacks, self.on_complete = self.on_complete, []
                for callback in callbacks:
                    callback()

    def agree(self, api: str, rank: int, attribute: str, value: object) -> None:
        """Every rank must give ``attribute`` the same value (OpArgumentError naming the ranks)."""
        known = self.agreed.get(attribute)
        if known is None:
            self.agreed[attribute] = (value, rank)
        elif known[0] != value:
            raise OpArgumentError(
                f"{api}: rank {rank} passes {attribute}={value!r} for group {self.name!r}, but rank {known[1]} passed "
                f"{known[0]!r}; the op requires the same {attribute} on every card of the group (and in every layer)"
            )

    def die_of(self, rank: int) -> int:
        """The die of ``rank`` (the group must be complete)."""
        return self.members[rank]

    def next_epoch(self, rank: int, what: str) -> int:
        """The epoch of rank ``rank``'s next call of ``what`` (1, 2, ...): the ``n``-th call on every rank has epoch ``n``."""
        key = (rank, what)
        epoch = self.epochs.get(key, 0) + 1
        self.epochs[key] = epoch
        return epoch

    def area(self, rank: int, name: str, half_bytes: int, status_bytes: int) -> Area:
        """Area ``name`` of rank ``rank``'s window, sized for one use (made on first use on the rank's die)."""
        key = (rank, name, half_bytes, status_bytes)
        area = self.areas.get(key)
        if area is None:
            memory = self.system.die(self.members[rank]).memory
            data = memory.allocate(2 * half_bytes, f"{self.name} window {name} (rank {rank})", window=True) if half_bytes else None
            status = memory.allocate(max(status_bytes, STATUS_BYTES), f"{self.name} status {name} (rank {rank})", control=True)
            area = self.areas[key] = Area(data, half_bytes, status)
        return area


_GROUPS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
"""system -> {group name -> CommGroup}."""


def comm_group(system, api: str, name: str, world_size: int, buffer_bytes: int) -> CommGroup:
    """The group ``name`` of ``system``, made by the first rank that names it."""
    groups = _GROUPS.setdefault(system, {})
    group = groups.get(name)
    if group is None:
        group = groups[name] = CommGroup(system, name, world_size, buffer_bytes)
    return group


def groups_of(system) -> list[CommGroup]:
    """The groups of ``system`` so far, by name."""
    groups = _GROUPS.get(system, {})
    return [groups[name] for name in sorted(groups)]
