"""Counters over time: the bandwidth through each HBM, L2, link and NIC, in GB/s."""

from __future__ import annotations

from collections.abc import Sequence

from npusim.errors import UsageError
from npusim.plot.style import colours, figure

DEFAULT_KINDS = ("hbm", "link", "nic")


def bandwidth(result, *, resources: Sequence[str] | None = None, kinds: Sequence[str] = DEFAULT_KINDS,
              window: tuple[float, float] | None = None, width: float = 12.0):
    """GB/s over time through each resource that carried traffic (step lines), with its peak
    dashed. ``resources`` picks by name (``"die0 HBM"``); otherwise every resource of ``kinds``
    (``hbm``, ``l2``, ``link``, ``nic``). ``window=(t0, t1)`` in us."""
    recorded = result.record.resources
    chosen = [r for r in recorded if r.rate_log and (r.name in resources if resources is not None else r.kind in kinds)]
    if resources is not None:
        known = {r.name for r in recorded}
        unknown = [name for name in resources if name not in known]
        if unknown:
            raise UsageError(f"bandwidth: no resource {', '.join(map(repr, unknown))}; resources: {', '.join(sorted(known)) or 'none'}")
    if not chosen:
        raise UsageError(f"bandwidth: no resource of kinds {', '.join(kinds)} carried traffic; pass kinds=('hbm', 'l2', 'link', 'nic')")
    end_us = max(result.simulated_us, 1e-6)
    palette = colours([r.name for r in chosen])
    fig = figure(width, 4.5)
    ax = fig.add_subplot()
    for resource in chosen:
        times = [t / 1e6 for t, _ in resource.rate_log] + [end_us]
        rates = [rate * 1e3 for _, rate in resource.rate_log]
        rates.append(rates[-1])
        colour = palette[resource.name]
        ax.step(times, rates, where="post", color=colour, label=resource.name, linewidth=1.2)
        ax.axhline(resource.capacity * 1e3, color=colour, linestyle="--", linewidth=0.8, alpha=0.7)
    ax.set_xlabel("simulated time (us)")
    ax.set_ylabel("GB/s (dashed: peak)")
    ax.set_xlim(*(window if window is not None else (0, end_us)))
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)
    ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=8, frameon=False)
    ax.set_title(f"bandwidth: {result.config.name}", fontsize=10, loc="left")
    return fig
