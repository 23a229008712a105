"""What a run's trace file holds, for runs too large to write whole (``npusim run --trace ...``).

A :class:`TraceSelection` names a level (``all``: every event, flow and counter; ``ops``: one slice
per op and core, from its first instruction's start to its last one's end; ``none``: no trace file),
the dies to keep (None: all) and a window of simulated time (None: the whole run). An event is kept
when its die is kept and it overlaps the window; a flow when both its ends are kept; a counter
keeps its points inside the window, with its value at the window's start. The summary and the
critical path are computed from the whole run whatever is written.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from npusim.errors import UsageError
from npusim.units import Dimension, parse_quantity

LEVELS = ("all", "ops", "none")


@dataclass(frozen=True)
class TraceSelection:
    """What to write: ``level`` (one of LEVELS), ``dies`` (a sorted tuple of die indices, None: all)
    and ``window_ps`` ((start, end) in ps, None: the whole run)."""

    level: str = "all"
    dies: tuple[int, ...] | None = None
    window_ps: tuple[int, int] | None = None

    @property
    def everything(self) -> bool:
        """Whether the selection keeps the whole trace (the writer's default output)."""
        return self.level == "all" and self.dies is None and self.window_ps is None

    def die_mask(self, dies: int) -> np.ndarray:
        """A boolean per die index 0..dies-1 (and -1, the last entry, for lanes of no die): kept."""
        mask = np.ones(dies + 1, dtype=bool)
        if self.dies is not None:
            mask[:] = False
            mask[[d for d in self.dies if d < dies]] = True
        return mask

    def keeps_die(self, die: int) -> bool:
        return self.dies is None or die in self.dies

    def keeps_time(self, start_ps: Any, end_ps: Any) -> Any:
        """Whether ``[start_ps, end_ps]`` overlaps the window (elementwise for arrays)."""
        if self.window_ps is None:
            return np.ones(np.shape(start_ps), dtype=bool) if np.ndim(start_ps) else True
        low, high = self.window_ps
        return (np.asarray(start_ps) <= high) & (np.asarray(end_ps) >= low) if np.ndim(start_ps) else start_ps <= high and end_ps >= low

    def describe(self) -> dict[str, Any]:
        """The selection as recorded in the trace's ``otherData.trace_selection``."""
        return {"level": self.level, "dies": list(self.dies) if self.dies is not None else None,
                "window_us": [t / 1e6 for t in self.window_ps] if self.window_ps is not None else None}


def parse_trace_dies(text: str | None, dies: int) -> tuple[int, ...] | None:
    """``'0-15'``, ``'0,2,8-11'`` -> the sorted die indices (each below ``dies``); None stays None."""
    if text is None:
        return None
    chosen: set[int] = set()
    for part in text.split(","):
        low, dash, high = part.strip().partition("-")
        try:
            first, last = int(low), int(high) if dash else int(low)
        except ValueError:
            raise UsageError(f"--trace-dies {text!r}: {part.strip()!r} is not a die index or a range; write e.g. 0-15 or 0,2,8-11") from None
        if first > last:
            raise UsageError(f"--trace-dies {text!r}: the range {part.strip()!r} is written high to low; write it low-high")
        if first < 0 or last >= dies:
            raise UsageError(f"--trace-dies {text!r}: {part.strip()!r} is outside the dies of the config, 0-{dies - 1}")
        chosen.update(range(first, last + 1))
    return tuple(sorted(chosen))


def parse_trace_window(text: str | None) -> tuple[int, int] | None:
    """``'10us:50us'`` -> (10_000_000, 50_000_000) ps; an empty side is the run's start or end
    (``':50us'``, ``'10us:'``); None stays None."""
    if text is None:
        return None
    low, colon, high = text.partition(":")
    if not colon:
        raise UsageError(f"--trace-window {text!r}: write START:END with units, e.g. 10us:50us (an empty side: the run's start or end)")
    try:
        start = _ps(low) if low.strip() else 0
        end = _ps(high) if high.strip() else np.iinfo(np.int64).max
    except ValueError as error:
        raise UsageError(f"--trace-window {text!r}: {error}") from None
    if start > end:
        raise UsageError(f"--trace-window {text!r}: the start is after the end")
    return start, end


def _ps(text: str) -> int:
    """A time of the window in ps: a time with a unit (``0`` alone is the run's start); never
    cycles, whose length depends on the die."""
    text = text.strip()
    if text.rstrip("psnumt ") in ("0", "0.0"):
        return 0
    quantity = parse_quantity(text, Dimension.TIME)
    if quantity.per_cycle:
        raise ValueError(f"{text!r} is in cycles; give the window in time units (ns, us, ms)")
    problem = quantity.engine_problem(1.0)
    if problem is not None:
        raise ValueError(problem)
    return quantity.to_ps(1.0)


def trace_selection(level: str = "all", dies: str | None = None, window: str | None = None, *, die_count: int) -> TraceSelection:
    """The selection the ``--trace``, ``--trace-dies`` and ``--trace-window`` options give."""
    if level not in LEVELS:
        raise UsageError(f"--trace {level!r}: choose one of {', '.join(LEVELS)}")
    return TraceSelection(level, parse_trace_dies(dies, die_count), parse_trace_window(window))
