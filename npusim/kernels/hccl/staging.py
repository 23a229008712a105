"""HCCL's single-op executors move the user's tensors themselves (hcomm's ``DMAReduceFlag_``, set by
the mesh, ring, double-ring and pipeline executors of A2 and A3): the first transfers read the input
tensor where it is, the last ones write into the output tensor, and the communication buffer holds
only what is reduced into or relayed: a rank copies into it only the part of its input that others
add into (its own slice), and out of it only what was reduced there.

:func:`direct` turns a pass that stages everything (copy the input into the buffer, run the
algorithm there, copy the buffer out) into that: reads of buffer bytes still holding untouched input
read the input; a copy that gives buffer bytes their final value writes the output instead (and the
later reads of them read it there); the staging copies left are those a reduction or an unwritten
byte needs. Byte ranges are followed per rank, so the rewrite holds for every algorithm and level.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Iterator, Sequence

from npusim.kernels.hccl.schedule import INPUT, OUTPUT, WORK, StepList, Transfer

Span = tuple[int, int, str, int]
"""``(start, end, buffer, offset of start in that buffer)``: where bytes ``start .. end`` of the work buffer live."""


class Where:
    """Where each byte of one rank's work buffer lives: in the buffer itself, still in the input
    tensor (not copied in), or already in the output tensor."""

    def __init__(self) -> None:
        self.starts: list[int] = []
        self.spans: list[Span] = []

    def pieces(self, start: int, end: int) -> Iterator[Span]:
        """The spans of ``start .. end`` (bytes nobody placed: the work buffer)."""
        at = start
        i = max(bisect_right(self.starts, start) - 1, 0)
        while at < end:
            span = self.spans[i] if i < len(self.spans) else None
            if span is None or span[0] >= end:
                yield (at, end, WORK, at)
                return
            s, e, buffer, offset = span
            if e <= at:
                i += 1
                continue
            if s > at:
                yield (at, s, WORK, at)
                at = s
                continue
            stop = min(e, end)
            yield (at, stop, buffer, offset + at - s)
            at = stop
            i += 1

    def place(self, start: int, end: int, buffer: str, offset: int) -> None:
        """Bytes ``start .. end`` now live in ``buffer`` from ``offset`` (WORK: the work buffer)."""
        spans = self.spans
        first = bisect_right(self.starts, start) - 1  # the span holding ``start``, else the first after it
        if first < 0 or spans[first][1] <= start:
            first += 1
        last = bisect_left(self.starts, end, first)  # past the last span starting before ``end``
        if first == last and buffer == WORK:
            return
        replaced: list[Span] = []
        if first < last and spans[first][0] < start:
            s, _, b, o = spans[first]
            replaced.append((s, start, b, o))
        if buffer != WORK:
            replaced.append((start, end, buffer, offset))
        if first < last and spans[last - 1][1] > end:
            s, e, b, o = spans[last - 1]
            replaced.append((end, e, b, o + end - s))
        spans[first:last] = replaced
        self.starts[first:last] = [span[0] for span in replaced]


def _split(t: Transfer, where: Where, base: int) -> Sequence[tuple[Transfer, str, int]]:
    """``t``, whose bytes of one side (source or destination) start at ``base``, cut where those bytes
    live in different places: each piece, with that place and the offset there (``t`` itself when its
    bytes live in one place)."""
    end = base + t.nbytes
    spans = where.spans
    i = bisect_right(where.starts, base) - 1
    if i >= 0 and spans[i][1] >= end:  # inside one span
        return ((t, spans[i][2], spans[i][3] + base - spans[i][0]),)
    if (i < 0 or spans[i][1] <= base) and (i + 1 >= len(spans) or spans[i + 1][0] >= end):  # in the buffer
        return ((t, WORK, base),)
    return [(t._replace(src_offset=t.src_offset + s - base, dst_offset=t.dst_offset + s - base, nbytes=e - s), buffer, offset)
            for s, e, buffer, offset in where.pieces(base, end)]


def _in_work(pieces: Sequence[tuple[Transfer, str, int]]) -> bool:
    """Whether :func:`_split`'s ``pieces`` are one piece, in the work buffer (the transfer as it is)."""
    return len(pieces) == 1 and pieces[0][1] == WORK


def direct(stage_in: list[Transfer], steps: StepList, stage_out: list[Transfer], ranks: int) -> tuple[list[Transfer], StepList, list[Transfer]]:
    """``(stage in, steps, stage out)`` of one pass, rewritten to read the input and write the output
    where the algorithm can (module docstring)."""
    # backward: the write that gives bytes their final value; a copy writes the output instead
    pending = [Where() for _ in range(ranks)]
    for t in stage_out:
        pending[t.src].place(t.src_offset, t.src_offset + t.nbytes, OUTPUT, t.dst_offset)
    reduced = [Where() for _ in range(ranks)]  # bytes whose final value a reduction leaves in the buffer
    written: StepList = []
    delivered: list[list[tuple[int, int, int, int]]] = []  # per step: (rank, buffer start, end, output offset) a copy delivered
    for step in reversed(steps):
        rewritten: list[Transfer] = []
        placed = []
        overwriting = []  # the transfers writing pending bytes (their final writes): before them, those bytes are the buffer's
        for t in step:
            pieces = _split(t, pending[t.dst], t.dst_offset)
            if _in_work(pieces):
                rewritten.append(t)
                continue
            overwriting.append(t)
            for piece, buffer, offset in pieces:
                if buffer == OUTPUT and not t.reduce:
                    rewritten.append(piece.writing(OUTPUT, offset))
                    placed.append((t.dst, piece.dst_offset, piece.dst_offset + piece.nbytes, offset))
                    continue
                if buffer == OUTPUT:
                    reduced[t.dst].place(piece.dst_offset, piece.dst_offset + piece.nbytes, OUTPUT, offset)
                rewritten.append(piece)
        for t in overwriting:
            pending[t.dst].place(t.dst_offset, t.dst_offset + t.nbytes, WORK, t.dst_offset)
        written.append(rewritten)
        delivered.append(placed)
    written.reverse()
    delivered.reverse()
    # forward: reads find bytes where they are; a reduction into untouched input copies it in first
    home = [Where() for _ in range(ranks)]
    for t in stage_in:
        home[t.dst].place(t.dst_offset, t.dst_offset + t.nbytes, INPUT, t.src_offset)
    kept_in: list[Transfer] = []
    read: StepList = []
    for step, placed in zip(written, delivered):
        rewritten = []
        for t in step:
            pieces = _split(t, home[t.src], t.src_offset) if t.src_buffer == WORK else ((t, WORK, 0),)
            if _in_work(pieces):
                rewritten.append(t)
                continue
            for piece, buffer, offset in pieces:
                rewritten.append(piece.reading(buffer, offset) if buffer != WORK else piece)
        for t in step:
            if t.dst_buffer != WORK:
                continue
            where = home[t.dst]
            if t.reduce:
                pieces = _split(t, where, t.dst_offset)
                if _in_work(pieces):  # the buffer's already
                    continue
                for piece, buffer, offset in pieces:
                    if buffer == INPUT:
                        kept_in.append(Transfer(t.dst, t.dst, offset, piece.dst_offset, piece.nbytes, src_buffer=INPUT))
            where.place(t.dst_offset, t.dst_offset + t.nbytes, WORK, t.dst_offset)
        for rank, start, end, offset in placed:  # later reads find a delivered value in the output
            home[rank].place(start, end, OUTPUT, offset)
        read.append(rewritten)
    kept_out: list[Transfer] = []
    for t in stage_out:  # what no copy delivered: left reduced in the buffer, or never written (still where it began)
        for piece, buffer, _ in _split(t, pending[t.src], t.src_offset):
            if buffer == OUTPUT:
                kept_out.extend(part.reading(place, at) if place != WORK else part
                                for part, place, at in _split(piece, home[t.src], piece.src_offset))
        kept_out.extend(piece for piece, buffer, _ in _split(t, reduced[t.src], t.src_offset) if buffer == OUTPUT)
    return kept_in, read, kept_out
