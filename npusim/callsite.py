"""Where in the user's program something came from: the innermost frame in the user's own code
(the workload, a test, a module of theirs), not in npusim, the standard library or an installed
package (torch, numpy ...). Warnings and errors name that line (a host fallback, the two accesses
of a race, an op's launch in the trace), so a person finds the line of their program to look at.
"""

from __future__ import annotations

import functools
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from types import CodeType, FrameType
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import traceback


@functools.cache
def not_user_code() -> tuple[str, ...]:
    """Folders whose frames are not the user's: npusim itself, the standard library, installed
    packages (found when first asked: ~10 ms a run that never asks saves)."""
    import sysconfig

    import npusim

    return tuple({str(Path(npusim.__file__).resolve().parent), *(str(Path(sysconfig.get_paths()[key]).resolve())
                                                                 for key in ("stdlib", "platstdlib", "purelib", "platlib"))})


@functools.lru_cache(maxsize=4096)
def is_user_file(filename: str) -> bool:
    """Whether code of ``filename`` (a code object's ``co_filename``) is the user's. ``npusim/...``,
    relative, is npusim's compiled code: mypyc names its frames by the module's path in the build."""
    if filename.startswith(("<", f"npusim{os.sep}")):
        return False
    return not str(Path(filename).resolve()).startswith(not_user_code())


def shown(filename: str) -> str:
    """A path relative to the working folder when it is inside it."""
    return shown_from(filename, os.getcwd())


@functools.lru_cache(maxsize=4096)
def shown_from(filename: str, folder: str) -> str:
    """``filename`` relative to ``folder`` when it is inside it (cached: the trace names the
    launching line of every op, a few files many times)."""
    relative = os.path.relpath(filename, folder)
    return filename if relative.startswith("..") else relative


@dataclass(frozen=True)
class Callsite:
    """A line of the user's program: its file, line number and function."""

    filename: str
    lineno: int
    function: str

    def __str__(self) -> str:
        return f"{shown(self.filename)}:{self.lineno}"

    def code(self) -> str:
        """The line's text (stripped), or "" when the file cannot be read."""
        import linecache

        return linecache.getline(self.filename, self.lineno).strip()


def callsite(frame: FrameType | None = None) -> Callsite | None:
    """The innermost frame of the user's code on the calling thread's stack (from ``frame``, else
    the caller's), or None when there is none (npusim's own code called it)."""
    frame = frame if frame is not None else sys._getframe(1)
    while frame is not None:
        code = frame.f_code
        if is_user_file(code.co_filename):
            return _instruction_site(frame, code)
        frame = frame.f_back
    return None


MAX_SITES = 4096
"""Instructions whose Callsite :func:`callsite` keeps (past that it forgets them all and starts again)."""
_SITES: dict[tuple[int, int], tuple[CodeType, Callsite]] = {}
"""(id of a code object, offset of an instruction in it) -> the code object (kept: its id stays its
own while the entry lives) and the Callsite of that instruction."""


def _instruction_site(frame: FrameType, code: CodeType) -> Callsite:
    """The Callsite of the instruction ``frame`` runs, made once per instruction: a PyPTO kernel
    names the line of each of its ops, the same few lines by the hundred thousand, and a frame's
    line number is a walk through its code's line table."""
    key = (id(code), frame.f_lasti)
    known = _SITES.get(key)
    if known is None:
        if len(_SITES) >= MAX_SITES:
            _SITES.clear()
        known = _SITES[key] = (code, Callsite(code.co_filename, frame.f_lineno, code.co_name))
    return known[1]


def user_frame(error: BaseException) -> traceback.FrameSummary | None:
    """The innermost frame of ``error``'s traceback in the user's own code, if any."""
    import traceback

    for frame in reversed(traceback.extract_tb(error.__traceback__)):
        if is_user_file(frame.filename):
            return frame
    return None


def blamed(error: BaseException) -> Callsite | None:
    """The program line an error is about when not where it surfaced (a RaceError's racing access:
    its ``blame``), found on the error or the errors it was raised from (the simulation loop raises
    a copy of a failure, SimPy's way, with the original as its cause)."""
    seen: BaseException | None = error
    while seen is not None:
        line = getattr(seen, "blame", None)
        if isinstance(line, Callsite):
            return line
        seen = seen.__cause__
    return None
