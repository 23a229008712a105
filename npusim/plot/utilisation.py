"""Bar charts of a run's summary: utilisation of pipes and resources, the bottleneck breakdown."""

from __future__ import annotations

from npusim.errors import UsageError
from npusim.plot.counters import resource_class
from npusim.plot.style import figure
from npusim.trace.summary import records


def _bar_label(ax, row: int, share: float, end: float | None = None) -> None:
    """The share as text at the end of its bar, or of its range line ``end`` (inside the bar when
    it is nearly full)."""
    text = f"{share:.0%}" if share >= 0.1 else f"{share:.1%}"
    at = share if end is None else end
    if at > 0.85:
        ax.text(share * 100 - 1, row, text, va="center", ha="right", fontsize=7, color="white")
    else:
        ax.text(at * 100 + 1, row, text, va="center", fontsize=7)


def _grouped(rows: list[dict], label, group) -> list[tuple[str, float, float, float]]:
    """(label, value, lowest, highest) per row, or, per ``group`` of rows, their mean, lowest and
    highest utilisation under the group's name and size; highest value first."""
    if group is None:
        bars = [(label(r), r["utilisation"], r["utilisation"], r["utilisation"]) for r in rows]
    else:
        groups: dict[str, list[float]] = {}
        for r in rows:
            groups.setdefault(group(r), []).append(r["utilisation"])
        bars = [(f"{name} ({len(values)})", sum(values) / len(values), min(values), max(values)) for name, values in groups.items()]
    return sorted(bars, key=lambda bar: (-bar[1], bar[0]))


def utilisation(result, *, max_rows: int = 16, width: float = 12.0):
    """Left: each die's pipes, busy share of the cores that used them; right: each HBM / L2 /
    link's achieved share of its peak over the run; each side ordered by value, highest first.
    A side with more than ``max_rows`` rows (a multi-die run) shows one bar per pipe, or per class
    of resource (HBM, L2, SIO links ...), at the mean over its members, with a line from the
    lowest to the highest of them; it keeps its ``max_rows`` highest bars (its title says how many
    more there are)."""
    summary = result.summary
    pipes, links = records(summary["pipes"]), records(summary["bandwidth"])
    if not pipes and not links:
        raise UsageError("utilisation: the run recorded no pipe work and no traffic")
    if max_rows < 1:
        raise UsageError(f"utilisation: max_rows={max_rows!r} must be at least 1")
    sides = []
    for rows, label, group, title in (
        (pipes, lambda r: f"die{r['die']} {r['pipe']} ({r['cores']} cores)", lambda r: r["pipe"], "pipes: busy share"),
        (links, lambda r: r["resource"], lambda r: resource_class(r["kind"], r["resource"]), "memory and links: share of peak"),
    ):
        bars = _grouped(rows, label, group if len(rows) > max_rows else None)
        if len(rows) > max_rows:
            title += f"\nper {'pipe' if rows is pipes else 'class'} over its {len(rows)} rows: bar the mean, line lowest to highest"
        if len(bars) > max_rows:
            title += f" ({len(bars) - max_rows} more, up to {bars[max_rows][1]:.1%})"
        sides.append((bars[:max_rows], title))
    fig = figure(width, 1.4 + 0.3 * max(len(sides[0][0]), len(sides[1][0]), 1))
    for ax, (bars, title) in zip(fig.subplots(1, 2), sides):
        values = [bar[1] for bar in bars]
        ax.barh(range(len(bars)), [v * 100 for v in values], color="#4c72b0")
        spread = [i for i, bar in enumerate(bars) if bar[3] > bar[2]]
        if spread:
            ax.hlines(spread, [bars[i][2] * 100 for i in spread], [bars[i][3] * 100 for i in spread], color="#222222", linewidth=1.2)
        ax.set_yticks(range(len(bars)), [bar[0] for bar in bars], fontsize=8)
        ax.set_ylim(max(len(bars), 1) - 0.5, -0.5)
        ax.set_xlim(0, 100)
        ax.set_xlabel("%")
        ax.grid(axis="x", alpha=0.3)
        ax.set_title(title, fontsize=9, loc="left")
        for i, bar in enumerate(bars):
            _bar_label(ax, i, bar[1], bar[3])
    return fig


def bottlenecks(result, *, width: float = 12.0):
    """The critical path's breakdown: share of the end-to-end time per resource (largest first)."""
    found = result.summary.get("bottlenecks")
    if not found or not found["breakdown"]:
        raise UsageError("bottlenecks: the run recorded no events, so it has no critical path")
    rows = found["breakdown"]
    fig = figure(width, 1.2 + 0.32 * len(rows))
    ax = fig.add_subplot()
    ax.barh(range(len(rows)), [r["share"] * 100 for r in rows], color="#dd8452")
    ax.set_yticks(range(len(rows)), [r["label"] for r in rows], fontsize=8)
    ax.set_ylim(len(rows) - 0.5, -0.5)
    ax.set_xlim(0, 100)
    ax.set_xlabel(f"% of the end-to-end time ({found['end_to_end_us']:.3f} us)")
    ax.grid(axis="x", alpha=0.3)
    for i, r in enumerate(rows):
        _bar_label(ax, i, r["share"])
    ax.set_title("bottlenecks (critical path)", fontsize=10, loc="left")
    return fig
