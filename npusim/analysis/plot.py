"""The plot of a sweep: simulated time against the values of the first axis, one line per value of
the other axes (per combination when there are more than two). Values are placed in the order the
grid gives them, evenly spaced (they may be any text, ``1.6TB/s``); failed points leave gaps."""

from __future__ import annotations

import io
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from npusim.analysis.grid import Axis, value_text
from npusim.files import write_bytes_atomically


def plot_simulated_time(path: Path, axes: Sequence[Axis], rows: Sequence[dict[str, Any]], *, title: str) -> None:
    """Save the plot of ``rows`` (one per point of ``axes``, in grid order, with text values and a
    float ``simulated_us``) as a PNG at ``path``."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg  # imported here: it costs every command half a second
    from matplotlib.figure import Figure

    first, others = axes[0], axes[1:]
    positions = {value_text(value): index for index, value in enumerate(first.values)}
    lines: dict[str, list[float]] = {}
    for row in rows:
        label = ", ".join(f"{axis.key}={row[axis.key]}" for axis in others)
        series = lines.setdefault(label, [math.nan] * len(positions))
        series[positions[row[first.key]]] = row["simulated_us"]
    figure = Figure(figsize=(7, 4.5), layout="constrained")
    plot = figure.add_subplot()
    for label, series in lines.items():
        plot.plot(range(len(series)), series, marker="o", label=label or None)
    plot.set_xticks(range(len(positions)), list(positions), rotation=30 if len(positions) > 6 else 0)
    plot.set_xlabel(first.key)
    plot.set_ylabel("simulated time (us)")
    plot.set_ylim(bottom=0)
    plot.set_title(title)
    plot.grid(alpha=0.3)
    if others:
        plot.legend(fontsize="small")
    image = io.BytesIO()
    FigureCanvasAgg(figure).print_png(image)
    write_bytes_atomically(path, image.getvalue())
