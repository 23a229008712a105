"""What the figures share: colours per category and the figure factory."""

from __future__ import annotations

from matplotlib import colormaps
from matplotlib.figure import Figure

WAIT_COLOUR = "#c8c8c8"  # spans where a pipe only waits (wait_flag stalls, barriers)


def colours(keys: list[str]) -> dict[str, tuple]:
    """A distinct colour per key, in the order given (tab10, then tab20 for more than ten)."""
    palette = colormaps["tab10" if len(keys) <= 10 else "tab20"]
    return {key: palette(i % palette.N) for i, key in enumerate(keys)}


def figure(width: float, height: float) -> Figure:
    """A new figure, not attached to pyplot (headless-safe; shows once in a notebook)."""
    return Figure(figsize=(width, height), layout="constrained")
