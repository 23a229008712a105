"""Memories with real bytes: a die's GM (HBM) and a core's on-chip buffers (UB, L1, L0A/B/C).

Bytes are numpy ``uint8`` arrays allocated lazily, so a 768-die system costs nothing until a tensor
or a buffer is touched. With data disabled (``--no-data``) no byte array is ever allocated.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from npusim.errors import ResourceError
from npusim.units import format_bytes

GM_ALIGNMENT_BYTES = 512


class Allocation:
    """A contiguous range of one die's GM: ``size_bytes`` at ``address``, with its bytes if data is on.

    ``watchers`` (None, or a list of ``(first byte, end byte, callable)``): each callable is called
    each time a copy has written bytes of its range, with the instruction that wrote them (None for
    an engine's write, an RDMA write's): a core polling words of it (``CoreProgram.poll``) looks again.
    A ``window`` (a communication window) is written by other dies' cores and read after their
    status flags say so: flags the race check cannot follow, so it leaves the window out."""

    __slots__ = ("die", "address", "size_bytes", "label", "data", "watchers", "window")

    def __init__(self, die: int, address: int, size_bytes: int, label: str, data: np.ndarray | None) -> None:
        self.die = die
        self.address = address
        self.size_bytes = size_bytes
        self.label = label
        self.data = data
        self.watchers: list[tuple[int, int, Callable[[Any], None]]] | None = None
        self.window = False

    def __repr__(self) -> str:
        return f"Allocation(die{self.die}, {self.label}, {self.address:#x}+{self.size_bytes})"


class DeviceMemory:
    """The GM of one die: a bump allocator over its HBM capacity (512-byte aligned)."""

    def __init__(self, die: int, capacity_bytes: int, with_data: bool) -> None:
        self.die = die
        self.capacity_bytes = capacity_bytes
        self.with_data = with_data
        self.used_bytes = 0
        self.allocations: list[Allocation] = []
        self.before_bytes: Callable[[int, str], None] | None = None
        """Told of each allocation of data that will hold real bytes in this process's memory (its
        size in bytes and what it is, e.g. ``tensor[4096]<float16> on die 0``) once it fits in the
        HBM and before its bytes are allocated; may raise to refuse it (the run's memory budget,
        npusim.frontend.memory). Not of control memory (signals, flags, an op's counts: a few bytes)."""

    def allocate(self, size_bytes: int, label: str, *, control: bool = False, window: bool = False) -> Allocation:
        """Reserve ``size_bytes`` (zero-filled when data is on); ResourceError past the HBM size.

        ``control`` memory (signals, flags) always holds real bytes, even when data is off: its
        values decide when waits end, so timing-only runs need them too. A ``window`` is a
        communication window (:class:`Allocation`)."""
        address = -(-self.used_bytes // GM_ALIGNMENT_BYTES) * GM_ALIGNMENT_BYTES
        if address + size_bytes > self.capacity_bytes:
            raise ResourceError(
                f"die {self.die}: allocating {label} ({format_bytes(size_bytes)}) exceeds the HBM of "
                f"{format_bytes(self.capacity_bytes)} ({format_bytes(self.used_bytes)} already in use); "
                "use smaller tensors or a config with more HBM (die.hbm.size)"
            )
        if self.with_data and not control and self.before_bytes is not None:
            self.before_bytes(size_bytes, f"{label} on die {self.die}")
        data = np.zeros(size_bytes, dtype=np.uint8) if self.with_data or control else None
        allocation = Allocation(self.die, address, size_bytes, label, data)
        allocation.window = window
        self.used_bytes = address + size_bytes
        self.allocations.append(allocation)
        return allocation


class AtomicUnit:
    """The atomic-add logic at a die's L2: each atomic-add store reads, adds and writes its 32-byte
    blocks there after its bytes arrive, taking ``rmw_ps``; a store whose blocks overlap those of an
    earlier one still being applied waits for it, so atomic adds to the same blocks serialise.
    Times in ps."""

    BLOCK_BYTES = 32

    __slots__ = ("rmw_ps", "_busy")

    def __init__(self, rmw_ps: int) -> None:
        self.rmw_ps = rmw_ps
        self._busy: dict[int, list[tuple[int, int, int]]] = {}  # allocation address -> (first block, last block, busy until)

    def apply_at(self, allocation: Allocation, offset: int, span: int, arrival_ps: int) -> int:
        """When an atomic add of bytes ``offset .. offset + span`` of ``allocation``, arriving at
        ``arrival_ps``, has been applied."""
        first, last = offset // self.BLOCK_BYTES, (offset + span - 1) // self.BLOCK_BYTES
        busy = [entry for entry in self._busy.get(allocation.address, ()) if entry[2] > arrival_ps]
        start = max([arrival_ps] + [until for a, b, until in busy if a <= last and first <= b])
        done = start + self.rmw_ps
        busy.append((first, last, done))
        self._busy[allocation.address] = busy
        return done


FIRST_ALLOCATION_BYTES = 64
"""A local buffer's first allocation, in bytes: the signal words a timing-only run writes into UB
(4 to 32 bytes at its start in the shmem examples) fit it, so each of the 36,864 cores of a 768-die
run holds 64 bytes, not a page (144 MiB less)."""


class LocalBuffer:
    """One on-chip buffer of a core (UB, L1, L0A, L0B, L0C) of ``capacity_bytes``."""

    __slots__ = ("name", "capacity_bytes", "_bytes")

    def __init__(self, name: str, capacity_bytes: int) -> None:
        self.name = name
        self.capacity_bytes = capacity_bytes
        self._bytes: np.ndarray | None = None

    @property
    def bytes(self) -> np.ndarray:
        """All the buffer's bytes (zero where never written)."""
        return self.reach(self.capacity_bytes)

    def reach(self, end: int) -> np.ndarray:
        """The buffer's bytes, at least its first ``end``: they are allocated zero-filled only as far
        as they are used (doubling, from FIRST_ALLOCATION_BYTES), so the cores of a timing-only run, which write
        a few signal bytes into UB, do not each hold a whole UB. Growing moves the bytes: views of the
        result are valid until the next call that grows it, so an instruction that takes several
        views of one buffer reaches the furthest first (``isa.instructions.values_together``)."""
        data = self._bytes
        if data is None or len(data) < end:
            size = min(self.capacity_bytes, max(end, 2 * len(data) if data is not None else FIRST_ALLOCATION_BYTES))
            grown = np.zeros(size, dtype=np.uint8)
            if data is not None:
                grown[: len(data)] = data
            self._bytes = data = grown
        return data

    def view(self, offset_bytes: int, count: int, dtype: np.dtype) -> np.ndarray:
        """``count`` elements of ``dtype`` at ``offset_bytes``, as a writable view."""
        size = count * np.dtype(dtype).itemsize
        return self.reach(offset_bytes + size)[offset_bytes : offset_bytes + size].view(dtype)
