"""A collective as HCCL runs it: a sequence of steps, each a set of transfers between the ranks of a
communicator, that the runtime plays over the fabric (``npusim.frontend.hccl``).

Every rank has one work buffer (HCCL's communication buffer, ``HCCL_BUFFSIZE``) laid out the same on
every rank; a transfer copies ``nbytes`` from ``src_offset`` of the sender's buffer to
``dst_offset`` of the receiver's, or, with ``reduce``, combines them into the receiver's bytes
(``dst = dst op src``, HCCL's inline reduce). A rank is the index of a member of the communicator.

A rank takes part in the steps that have a transfer from or to it, in order: it starts step ``k``
when it has finished its previous step, and a transfer of step ``k`` starts once both its ends have
started step ``k`` (the receiver's buffer is free, the sender's data is ready: HCCL's handshake). So
groups that share no rank run their steps concurrently, and an algorithm only has to say which
transfers may run together. Byte offsets are whole elements of the op's dtype.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import NamedTuple

WORK, INPUT, OUTPUT = "work", "input", "output"
"""The buffers a transfer reads and writes: the rank's work buffer, or the op's input or output
tensor (the staging copies into and out of the work buffer)."""


class Transfer(NamedTuple):
    """``nbytes`` from byte ``src_offset`` of rank ``src``'s buffer ``src_buffer`` to ``dst_offset`` of
    rank ``dst``'s ``dst_buffer`` (``src == dst``: a copy inside one die); ``reduce``: combined into
    the receiver's bytes."""

    src: int
    dst: int
    src_offset: int
    dst_offset: int
    nbytes: int
    reduce: bool = False
    src_buffer: str = WORK
    dst_buffer: str = WORK

    # built here, interpreted, the rewritten transfer shares the other fields' objects (compiled code, staging's, would box
    # each integer anew: 19 MB more at the peak of planning the 768-die all-reduce)
    def reading(self, buffer: str, offset: int) -> Transfer:
        """This transfer reading from ``offset`` of ``buffer`` instead."""
        return Transfer(self.src, self.dst, offset, self.dst_offset, self.nbytes, self.reduce, buffer, self.dst_buffer)

    def writing(self, buffer: str, offset: int) -> Transfer:
        """This transfer writing to ``offset`` of ``buffer`` instead."""
        return Transfer(self.src, self.dst, self.src_offset, offset, self.nbytes, self.reduce, self.src_buffer, buffer)


class Region(NamedTuple):
    """``nbytes`` at byte ``offset`` of the work buffer."""

    offset: int
    nbytes: int


Block = tuple[Region, ...]
"""What an algorithm moves as one unit: usually one region; the data of several ranks that a level
gathered (their blocks need not be adjacent in the buffer) is several."""


@dataclass(frozen=True)
class Step:
    """Transfers that may run at once; ``label`` names them in the trace (algorithm, phase, index),
    ``level`` is the HCCL level they belong to (0: inside a server, 1: between servers, 2: between
    SuperPoDs; -1: a local copy of the op's staging)."""

    label: str
    level: int
    transfers: tuple[Transfer, ...]


StepList = list[list[Transfer]]
"""What an algorithm's primitive returns: its steps in order, each the transfers that run together."""


@dataclass
class Schedule:
    """A whole collective: its steps, the algorithm of each HCCL level it used, and the bytes of
    work buffer each rank needs."""

    steps: list[Step] = field(default_factory=list)
    algorithms: dict[int, str] = field(default_factory=dict)
    work_bytes: int = 0

    def add(self, label: str, level: int, steps: StepList) -> None:
        """Append ``steps`` (the empty ones dropped), each labelled ``label i/n``."""
        kept = [tuple(step) for step in steps if step]
        for i, transfers in enumerate(kept):
            self.steps.append(Step(f"{label} {i + 1}/{len(kept)}" if len(kept) > 1 else label, level, transfers))

    def by_rank(self, ranks: int) -> list[list[RankStep]]:
        """For each rank, the steps it takes part in, in order, with its transfers in each (one pass
        over the schedule)."""
        taking: list[list[RankStep]] = [[] for _ in range(ranks)]
        for index, step in enumerate(self.steps):
            mine: dict[int, RankStep] = {}
            for t in step.transfers:
                src, dst = t.src, t.dst
                entry = mine.get(src)
                if entry is None:
                    entry = mine[src] = RankStep(index, step, {}, [])
                    taking[src].append(entry)
                to_dst = entry.outgoing.get(dst)
                if to_dst is None:
                    entry.outgoing[dst] = [t]
                else:
                    to_dst.append(t)
                if dst != src:
                    entry = mine.get(dst)
                    if entry is None:
                        entry = mine[dst] = RankStep(index, step, {}, [])
                        taking[dst].append(entry)
                    entry.incoming.append(t)
        return taking


class RankStep(NamedTuple):
    """One rank's part of a step: its transfers out, by receiver (in the step's order), and in."""

    position: int
    """The step's index in the schedule."""
    step: Step
    outgoing: dict[int, list[Transfer]]
    incoming: list[Transfer]

def concurrent(groups: Iterable[StepList]) -> StepList:
    """The steps of groups that share no rank, run side by side: step ``k`` of each group together."""
    merged: StepList = []
    for steps in groups:
        for k, step in enumerate(steps):
            if k == len(merged):
                merged.append([])
            merged[k].extend(step)
    return merged


def size(block: Block) -> int:
    """The bytes of ``block``."""
    return sum(r.nbytes for r in block)


def moves(src: int, dst: int, block: Block, reduce: bool = False) -> list[Transfer]:
    """The transfers that move ``block`` from rank ``src`` to the same place of rank ``dst``."""
    return [Transfer(src, dst, r.offset, r.offset, r.nbytes, reduce) for r in block if r.nbytes]


def join(blocks: Iterable[Block]) -> Block:
    """Blocks as one, adjacent regions merged."""
    merged: list[Region] = []
    for region in (r for block in blocks for r in block):
        if merged and merged[-1].offset + merged[-1].nbytes == region.offset:
            merged[-1] = Region(merged[-1].offset, merged[-1].nbytes + region.nbytes)
        elif region.nbytes:
            merged.append(region)
    return tuple(merged)


def split(block: Block, parts: int, itemsize: int) -> list[Block]:
    """``block`` cut into ``parts`` consecutive blocks of whole elements, the first ones one element
    longer when the elements do not divide evenly (HCCL's slicing of a buffer among ranks)."""
    base, extra = divmod(size(block) // itemsize, parts)
    wanted = [(base + (1 if i < extra else 0)) * itemsize for i in range(parts)]
    pieces: list[Block] = []
    regions = [r for r in block if r.nbytes]
    index, used = 0, 0
    for need in wanted:
        piece: list[Region] = []
        while need:
            region = regions[index]
            take = min(need, region.nbytes - used)
            piece.append(Region(region.offset + used, take))
            need -= take
            used += take
            if used == region.nbytes:
                index, used = index + 1, 0
        pieces.append(tuple(piece))
    return pieces
