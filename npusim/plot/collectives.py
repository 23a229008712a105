"""The curve of a collectives benchmark (``npusim bench collectives``): bus bandwidth and time against
the size, one line per algorithm of a sweep."""

from __future__ import annotations

from collections.abc import Sequence

from matplotlib.figure import Figure

from npusim.plot.style import colours, figure


def plot_collectives(points: Sequence, *, title: str) -> Figure:
    """``points``: the benchmark's Points (npusim.analysis.collectives), grouped into lines by the
    algorithm they were forced to (``auto``: HCCL's own choice)."""
    lines: dict[str, list] = {}
    for point in points:
        lines.setdefault(point.forced, []).append(point)
    palette = colours(list(lines))
    fig = figure(8, 6.5)
    busbw, time = fig.subplots(2, 1, sharex=True)
    styles = ["-", "--", "-.", ":"]
    for index, (forced, group) in enumerate(lines.items()):
        group = sorted(group, key=lambda p: p.size)
        label = "HCCL's choice" if forced == "auto" else forced
        sizes = [p.size for p in group]
        style = {"marker": "o", "markersize": 3, "color": palette[forced], "linestyle": styles[index % len(styles)], "label": label}
        busbw.plot(sizes, [p.busbw for p in group], **style)  # equal lines stay apart by their dashes
        time.plot(sizes, [p.time_us for p in group], **style)
    for axes in (busbw, time):
        axes.set_xscale("log", base=2)
        axes.grid(True, which="both", alpha=0.3)
    time.set_yscale("log")
    busbw.set_ylabel("bus bandwidth (GB/s)")
    time.set_ylabel("time (us, simulated)")
    time.set_xlabel("size (bytes)")
    busbw.set_title(title)
    busbw.legend(fontsize="small")
    return fig
