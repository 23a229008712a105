"""Which tile ops wrote which part of a tensor (:class:`Writes`), so that an op that reads a part
waits for exactly the tile ops that wrote it.

Every PyPTO tensor of a PE's program (the frontend's ``pypto.Tensor``) keeps one, shared by its
views: a write is a tile op and the region of the tensor's elements it wrote (None: all of it). An
op's pred, an op's input and an assignment ask it which tile ops wrote a box (:meth:`Writes.tasks`),
and a copy into the tensor adds its write after the earlier writers of its box
(:meth:`Writes.write`). Every op of a kernel asks, on every PE, so the module is typed to mypy's
strict level and runs compiled with the engine (setup.py: mypyc), or as Python with it.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Iterator

from npusim.kernels.shmem.tiling import Region
from npusim.runtime.tasks import Task

Write = tuple[Task, Region | None]
"""A tile op and the region of the tensor it wrote (None: all of it)."""


def regions_meet(a: Region, b: Region) -> bool:
    """True if two boxes of the same tensor share an element."""
    for ao, as_, bo, bs in zip(a.offset, a.shape, b.offset, b.shape):  # noqa: SIM110 (1.7x faster than all(...) interpreted; asked per tile op and pred)
        if not (ao < bo + bs and bo < ao + as_):
            return False
    return True


def region_covers(a: Region, b: Region) -> bool:
    """True if box ``a`` holds every element of box ``b`` (of the same tensor, the same dims)."""
    if len(a.offset) != len(b.offset):
        return False
    for ao, as_, bo, bs in zip(a.offset, a.shape, b.offset, b.shape):  # noqa: SIM110 (as regions_meet)
        if not (ao <= bo and bo + bs <= ao + as_):
            return False
    return True


class Writes:
    """The tile ops that wrote parts of one tensor (shared by its views), each with the region it
    wrote in the tensor's elements (None: all of it), in the order they were added.

    :meth:`meeting` finds the writes a box meets without looking at the others: the writes with a
    region are kept sorted by their first element in dim 0, so a box looks only at those that start
    less than the widest write before it (tiles of one tensor mostly lie apart). :meth:`write` adds a
    write that waits for the earlier writers of its region and drops those it covers whole: a reader
    of their part meets the new write, which ran after them, so a loop that rewrites one tile keeps
    one write of it (memory and time linear in the iterations, where every write would otherwise wait
    for every earlier one)."""

    __slots__ = ("_entries", "_next", "_firsts", "_serials", "_widest", "_dropped", "_broad")

    def __init__(self, writes: Iterable[Write] = ()) -> None:
        self._entries: dict[int, Write] = {}  # serial (order added) -> write, the live ones
        self._next = 0
        self._firsts: list[int] = []  # dim-0 start of each indexed write (those with a region of one dim or more), sorted
        self._serials: list[int] = []  # the serial of each, in the same order (dropped ones stay until the index is rebuilt)
        self._widest = 0  # the largest dim-0 extent of an indexed write
        self._dropped = 0  # indexed writes dropped since the index was last rebuilt
        self._broad: dict[int, None] = {}  # serials of the writes of all of the tensor (no region, or a 0-dim one)
        for write in writes:
            self.append(write)

    def __iter__(self) -> Iterator[Write]:
        return iter(list(self._entries.values()))

    def __len__(self) -> int:
        return len(self._entries)

    def append(self, write: Write) -> None:
        """Add a write (no waiting: the caller orders it)."""
        serial = self._next
        self._next += 1
        self._entries[serial] = write
        region = write[1]
        if region is None or not region.offset:
            self._broad[serial] = None
            return
        first = region.offset[0]
        at = bisect.bisect_right(self._firsts, first)
        self._firsts.insert(at, first)
        self._serials.insert(at, serial)
        self._widest = max(self._widest, region.shape[0])

    def write(self, task: Task, region: Region) -> None:
        """``task`` writes ``region``: it waits for the earlier writers of any of it, and the writes
        it covers whole are dropped (a later reader of their part meets this one, which comes after them)."""
        earlier = self._meeting(region)
        task.depend_on([self._entries[serial][0] for serial in earlier])
        for serial in earlier:
            written = self._entries[serial][1]
            if written is not None and region_covers(region, written):
                self._drop(serial)
        self.append((task, region))

    def meeting(self, region: Region | None) -> list[Write]:
        """The writes that share an element with ``region`` (None: every write), in the order they
        were added; a write of all of the tensor, or of other dims, meets every region. A tensor
        nothing wrote (a kernel argument, a pred of many ops) has none, found without looking."""
        if region is None or not self._entries:
            return list(self._entries.values())
        return [self._entries[serial] for serial in self._meeting(region)]

    def tasks(self, region: Region | None) -> list[Task]:
        """The tile ops of the writes :meth:`meeting` ``region``, each once, in the order of their first write."""
        found: dict[int, Task] = {}
        for task, _ in self.meeting(region):
            found.setdefault(id(task), task)
        return list(found.values())

    def _meeting(self, region: Region) -> list[int]:
        found = list(self._broad)
        if region.offset:
            low, high = region.offset[0], region.offset[0] + region.shape[0]
            start, stop = bisect.bisect_right(self._firsts, low - self._widest), bisect.bisect_left(self._firsts, high)
            entries = self._entries
            for serial in self._serials[start:stop]:
                write = entries.get(serial)
                if write is not None:
                    written = write[1]
                    if written is None or len(written.offset) != len(region.offset) or regions_meet(region, written):
                        found.append(serial)
        else:
            found.extend(serial for serial in self._serials if serial in self._entries)
        found.sort()
        return found

    def _drop(self, serial: int) -> None:
        del self._entries[serial]
        if self._broad.pop(serial, 0) is None:
            return
        self._dropped += 1
        if self._dropped > 16 + len(self._serials) // 2:  # rebuild the index without the dropped writes
            kept: list[tuple[int, int]] = []
            widest = 0
            for kept_serial, (_, written) in self._entries.items():
                if written is not None and written.offset:
                    kept.append((written.offset[0], kept_serial))
                    widest = max(widest, written.shape[0])
            kept.sort()
            self._firsts = [first for first, _ in kept]
            self._serials = [kept_serial for _, kept_serial in kept]
            self._widest, self._dropped = widest, 0
