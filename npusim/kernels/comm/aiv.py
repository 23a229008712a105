"""What an AIV core does with the windows of a communication group (:mod:`.group`), one helper per
thing, written with the ISA: the vendor's kernels write tokens straight into peers' windows with
MTE3 stores over the scale-up fabric (HCCS on A2, UB on A3; no SDMA), signal with 32-byte status
entries after their data, and spin reading their own status words until the peers' entries arrive.

- :func:`split_to_cores`: an even split of n items over cores (the kernels' ``SplitToCore``);
- :func:`window_address`: a GM address in a rank's window area;
- :func:`signal`: write a status entry (flag = the call's epoch, a count) into a rank's area,
  after the copies before it on the core's MTE3 queue;
- :func:`wait_for`: spin until status entries of the core's own area hold the epoch
  (:meth:`~npusim.isa.program.CoreProgram.poll`).
"""

from __future__ import annotations

import numpy as np

from npusim import isa
from npusim.isa.instructions import GmAddress, LocalTensor
from npusim.kernels.comm.group import STATUS_BYTES, Area

ENTRY_WORDS = STATUS_BYTES // 4


def split_to_cores(items: int, cores: int, core: int) -> range:
    """The items of ``core`` when ``items`` are split as evenly as possible over ``cores`` (the
    first ``items % cores`` cores take one more)."""
    base, extra = divmod(items, cores)
    start = base * core + min(core, extra)
    return range(start, start + base + (core < extra))


def window_address(area: Area, epoch: int, offset: int) -> GmAddress:
    """Byte ``offset`` of the data half that the call of ``epoch`` uses in ``area``."""
    assert area.data is not None
    return GmAddress(area.data, area.half(epoch) + offset)


def status_address(area: Area, entry: int) -> GmAddress:
    return GmAddress(area.status, entry * STATUS_BYTES)


def status_buffer(p: isa.CoreProgram, entries: int) -> LocalTensor:
    """UB for ``entries`` status entries a core writes (one each, so no entry is overwritten
    before its store has read it)."""
    return p.alloc(max(1, entries) * ENTRY_WORDS, np.int32)


def signal(p: isa.CoreProgram, buffer: LocalTensor, slot: int, area: Area, entry: int, epoch: int, count: int = 0,
           name: str = "signal") -> None:
    """Write entry ``entry`` of ``area``'s status words (flag ``epoch``, ``count``) from slot ``slot``
    of ``buffer``: two scalar writes into UB, then a 32-byte MTE3 store (control data: it lands
    with data off too), ordered after the core's earlier MTE3 stores."""
    entry_ub = buffer[slot * ENTRY_WORDS : (slot + 1) * ENTRY_WORDS]
    p.write_scalar(entry_ub, epoch, 0, control=True)
    p.write_scalar(entry_ub, count, 1, control=True)
    p.pipe_barrier("MTE3")
    p.copy(status_address(area, entry), entry_ub, STATUS_BYTES, name=name, control=True)


def wait_for(p: isa.CoreProgram, area: Area, first: int, entries: int, epoch: int, *, need: int | None = None,
             name: str = "wait status", waiting_for: str = "peers' status entries") -> None:
    """Spin until ``need`` (default all) of the ``entries`` status entries from ``first`` hold
    ``epoch`` (written by the peers' :func:`signal`)."""
    if entries:
        p.poll(status_address(area, first), entries, epoch, stride=STATUS_BYTES, need=need, name=name, waiting_for=waiting_for)


def read_status(area: Area, first: int, entries: int) -> np.ndarray:
    """The (flag, count) words of ``entries`` status entries from ``first`` (control memory: real
    with data off too), as an ``(entries, 2)`` array, for the host model to read what the core read."""
    assert area.status.data is not None
    words = area.status.data[first * STATUS_BYTES : (first + entries) * STATUS_BYTES].view(np.int32).reshape(entries, ENTRY_WORDS)
    return words[:, :2].copy()
