"""The recorder's event rows: one 40-byte row of five int64 per executed instruction, packed into
one growing buffer (no object per event), and the DMA side columns that refer to rows by index.

A row (:data:`EVENT_ROW`) is lane, label, start ps, end ps, bytes; lane is (track, op) and label
(name, tile), each pair :func:`pack`-ed in 32-bit halves. :class:`EventRows` appends rows and the
DMA columns; :class:`~npusim.trace.recorder.Recorder` owns one (``Recorder.rows``) and is what
reads them back (columns, a table view, spans). The simulator's hot loop (the AI cores' pipes,
:mod:`npusim.hw.core`) records through :meth:`EventRows.put` with lane and label packed once per
pipe and per instruction.

This module is typed to mypy's strict level and compiled with the engine (setup.py: mypyc, in the
engine's shared library; :mod:`npusim.engine` chooses compiled or interpreted for all), so
:class:`EventRows` is a native class whose methods the compiled pipes call directly; interpreted,
it runs the same code with the same rows.
"""

from __future__ import annotations

import struct
from array import array
from typing import Any, Final

EVENT_ROW: Final = struct.Struct("<5q")
"""An event's row: lane (track << 32 | op + 1), label (name << 32 | tile + 1), start ps, end ps, bytes."""
ROW_BYTES: Final = EVENT_ROW.size
"""The size of a row in bytes (40)."""
FIRST_ROWS: Final = 4096
"""Rows the buffer holds at first; it doubles when full."""
_PACK_ROW: Final = EVENT_ROW.pack_into  # compiled: a C constant, no bound method per row


def pack(high: Any, low: Any) -> Any:
    """Two small ints in one int64 entry of a row: ``high`` in the upper 32 bits, ``low`` + 1 in
    the lower (``low`` may be -1, stored as 0); elementwise on numpy int64 arrays too (so typed
    ``Any``)."""
    return (high << 32) | (low + 1)


class EventRows:
    """The events of one run as packed rows (``buffer``: room for ``capacity`` rows, ``count`` of
    them in use), and per DMA event its fixed part and bottleneck (``transfer_event``,
    ``transfer_info``) and its tail, if any (``tail_event``, ``tail_ps``). It only appends; the
    recorder reads them."""

    def __init__(self) -> None:
        self.buffer = bytearray(ROW_BYTES * FIRST_ROWS)  # the rows, then free space
        self.capacity = FIRST_ROWS  # rows the buffer holds
        self.count = 0  # rows in use: the next event's index
        self.transfer_event = array("q")  # event index of a DMA,
        self.transfer_info = array("q")  # its fixed ps << 32 | (bottleneck resource index + 2)
        self.tail_event = array("q")  # event index of a DMA whose last byte was followed by a tail (an atomic add's read-modify-write),
        self.tail_ps = array("q")  # and the tail's time (ps)

    def record(self, track: int, name_id: int, start_ps: int, end_ps: int, nbytes: int, op: int, tile: int) -> int:
        """Append one executed instruction on lane ``track`` named ``name_id``, from ``start_ps``
        to ``end_ps`` (ps) moving ``nbytes`` bytes, of op ``op`` and tile ``tile`` (-1: none);
        returns its event index."""
        return self.put(pack(track, op), pack(name_id, tile), start_ps, end_ps, nbytes)

    def put(self, lane: int, label: int, start_ps: int, end_ps: int, nbytes: int) -> int:
        """:meth:`record` with lane and label already packed (:func:`pack`: (track, op), (name id,
        tile)); returns the event index. Grows the buffer (doubling it) when it is full."""
        index = self.count
        if index == self.capacity:
            self._grow()
        _PACK_ROW(self.buffer, index * ROW_BYTES, lane, label, start_ps, end_ps, nbytes)
        self.count = index + 1
        return index

    def _grow(self) -> None:
        """Double the buffer (by :data:`FIRST_ROWS` rows at least)."""
        added = max(self.capacity, FIRST_ROWS)
        self.buffer.extend(bytes(ROW_BYTES * added))
        self.capacity += added

    def put_packed(self, rows: bytes) -> None:
        """Append rows packed already (:data:`EVENT_ROW` each, little-endian), in their order."""
        del self.buffer[self.count * ROW_BYTES:]
        self.buffer += rows
        self.count += len(rows) // ROW_BYTES
        self.capacity = self.count

    def transfer(self, event: int, fixed_ps: int, bottleneck: int) -> None:
        """The DMA of event ``event`` spent ``fixed_ps`` (ps) before its bytes flowed and was
        limited by resource ``bottleneck`` (an index in the network, or the network's OWN_CAP /
        UNREGISTERED). Called in event order."""
        self.transfer_event.append(event)
        self.transfer_info.append(fixed_ps << 32 | (bottleneck + 2))

    def transfer_tail(self, event: int, tail_ps: int) -> None:
        """The DMA of event ``event`` ended ``tail_ps`` (ps) after its last byte arrived: its
        atomic add was applied at the L2 then (read-modify-write, after the earlier adds to the
        same blocks). Called in event order."""
        self.tail_event.append(event)
        self.tail_ps.append(tail_ps)
