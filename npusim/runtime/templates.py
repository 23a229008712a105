"""A tile op's program kept for reuse: the builders' shares of a program (:class:`ProgramPiece`)
and the template made of the first program built from them (:class:`TileTemplate`)."""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import Any

from npusim.callsite import Callsite
from npusim.isa.instructions import Instruction
from npusim.isa.program import ProgramTemplate

PieceBuild = Callable[..., tuple[Any, Sequence[Instruction]]]
"""A piece's ``build(p, loaded, *gm) -> (its result, the instructions to hand its hook)``."""
PieceHook = Callable[[Sequence[Instruction], tuple[Any, ...]], None]
"""A piece's ``hook(instructions, gm)``."""


class ProgramPiece:
    """One builder's share of a tile op's program, made so that the program can be reused for other
    tile ops (:class:`TileTemplate`). ``key`` (hashable) fixes, with the strides of the GmViews of
    ``gm()``, every instruction ``build`` appends except their GM addresses, each one of the GM
    addresses ``gm()`` gives (GmViews or GmAddresses, computed when the tile op starts) plus a
    constant: the key holds the shapes, dtypes, names and constants the builder reads, ``gm()``
    everything that moves. ``build(p, loaded, *gm)`` appends the instructions and returns ``(its
    result, the instructions to hand hook)``; the pieces after the first (a load) get its result as
    ``loaded`` (the UB tile they store), the first gets None. ``hook(instructions, gm)``, if any,
    watches those instructions' events (it runs for a reused program too). ``source``: the program
    line of the op a consumer piece comes from, when not the tile op's own op (race reports name it)."""

    __slots__ = ("key", "gm", "build", "hook", "source")

    def __init__(self, key: Hashable, gm: Callable[[], tuple[Any, ...]], build: PieceBuild, hook: PieceHook | None = None,
                 source: Callsite | None = None) -> None:
        self.key, self.gm, self.build, self.hook, self.source = key, gm, build, hook, source


@dataclass(frozen=True)
class TileTemplate:
    """A tile op's program kept for reuse: the ISA template (:class:`~npusim.isa.program.ProgramTemplate`,
    GM addresses as offsets from its pieces' ``gm()`` concatenated); per piece, the positions of
    the instructions its ``build`` handed its hook; the positions of the instructions the task
    watches (:func:`watched`)."""

    program: ProgramTemplate
    marks: tuple[tuple[int, ...], ...]
    watched: tuple[int, ...]
    starts: tuple[int, ...]  # per consumer piece, the position of its first instruction (its program line starts there)


def watched(instructions: Sequence[Instruction]) -> list[Instruction]:
    """The instructions whose events a core task notes: the first, then the last of each pipe."""
    last_of_pipe = {}
    for instruction in instructions:
        last_of_pipe[instruction.pipe] = instruction
    return [instructions[0], *last_of_pipe.values()]


def hand_over(pieces: Sequence[ProgramPiece], handed: Sequence[Sequence[Instruction]], gms: Sequence[tuple[Any, ...]]) -> None:
    """Give each piece with a hook the instructions it handed over in this program and its GM addresses."""
    for piece, instructions, gm in zip(pieces, handed, gms):
        if piece.hook is not None:
            piece.hook(instructions, gm)
