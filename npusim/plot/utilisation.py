"""Bar charts of a run's summary: utilisation of pipes and resources, the bottleneck breakdown."""

from __future__ import annotations

from npusim.errors import UsageError
from npusim.plot.style import figure


def _bar_label(ax, row: int, share: float) -> None:
    """The share as text at the end of its bar (inside it when the bar is nearly full)."""
    text = f"{share:.0%}" if share >= 0.1 else f"{share:.1%}"
    if share > 0.85:
        ax.text(share * 100 - 1, row, text, va="center", ha="right", fontsize=7, color="white")
    else:
        ax.text(share * 100 + 1, row, text, va="center", fontsize=7)


def utilisation(result, *, width: float = 12.0):
    """Left: each die's pipes, busy share of the cores that used them; right: each HBM / L2 /
    link's achieved share of its peak over the run."""
    summary = result.summary
    pipes, links = summary["pipes"], summary["bandwidth"]
    if not pipes and not links:
        raise UsageError("utilisation: the run recorded no pipe work and no traffic")
    rows = max(len(pipes), len(links), 1)
    fig = figure(width, 1.2 + 0.3 * rows)
    left, right = fig.subplots(1, 2)
    for ax, labels, values, title in (
        (left, [f"die{r['die']} {r['pipe']} ({r['cores']} cores)" for r in pipes], [r["utilisation"] for r in pipes], "pipes: busy share"),
        (right, [r["resource"] for r in links], [r["utilisation"] for r in links], "memory and links: share of peak bandwidth"),
    ):
        ax.barh(range(len(values)), [v * 100 for v in values], color="#4c72b0")
        ax.set_yticks(range(len(values)), labels, fontsize=8)
        ax.set_ylim(len(values) - 0.5, -0.5)
        ax.set_xlim(0, 100)
        ax.set_xlabel("%")
        ax.grid(axis="x", alpha=0.3)
        ax.set_title(title, fontsize=10, loc="left")
        for i, v in enumerate(values):
            _bar_label(ax, i, v)
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
