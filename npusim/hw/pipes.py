"""The pipes of an AI core, named as the vendor's tools name them."""

from __future__ import annotations

import enum


class Pipe(enum.IntEnum):
    """An in-order instruction queue of an AI core; which pipes a core has is data of its kind
    (``die.cores.<kind>.pipes``: an AIC has SCALAR, CUBE, MTE1, MTE2, FIXP, an AIV SCALAR, VECTOR,
    MTE2, MTE3). The integer value orders trace lanes."""

    SCALAR = 0
    VECTOR = 1
    CUBE = 2
    MTE1 = 3
    MTE2 = 4
    MTE3 = 5
    FIXP = 6

    @classmethod
    def parse(cls, name: str | Pipe) -> Pipe:
        """``'MTE2'``, ``'mte2'``, ``'V'``, ``'S'``, ``'PIPE_MTE2'`` or a Pipe."""
        if isinstance(name, Pipe):
            return name
        key = str(name).upper().removeprefix("PIPE_")
        key = _ALIASES.get(key, key)
        try:
            return cls[key]
        except KeyError:
            raise ValueError(f"unknown pipe {name!r}; pipes are {', '.join(p.name for p in cls)}") from None


PIPE_NAMES = tuple(pipe.name for pipe in Pipe)  # indexed by a pipe: its name without the enum's property (hot when building)
_ALIASES = {"S": "SCALAR", "V": "VECTOR", "M": "CUBE", "FIX": "FIXP", "FIXPIPE": "FIXP"}
