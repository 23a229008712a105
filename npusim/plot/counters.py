"""Counters over time: the bandwidth through the HBMs, L2s (and their atomic-add units), links and
NICs, in GB/s, one panel per class of resource (HBM, L2, each kind of link: SIO, UB, HCCS, PCIe; NIC)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from npusim.errors import UsageError
from npusim.plot.style import colours, figure

DEFAULT_KINDS = ("hbm", "l2", "atomic", "link", "nic", "credits")
CLASS_ORDER = ("HBM", "L2", "L2 atomic adds", "SIO links", "UB links", "HCCS links", "PCIe links", "links", "NIC", "write credits")
"""Panels top to bottom (a DRAM of another name comes first, with HBM; other classes not listed come last)."""


def resource_class(kind: str, name: str) -> str:
    """The panel a resource goes to: its kind (``L2``, ``L2 atomic adds``, ``NIC``, ``write credits``), the memory named
    in it for a die's DRAM (``die0 HBM``: ``HBM``; ``die0 LPDDR4X``: ``LPDDR4X``) or, for a link, the
    link named in it (``pkg0 SIO die0->die1``: ``SIO links``; ``die3 UB tx``: ``UB links``)."""
    if kind == "hbm":
        return name.split(" ", 1)[1] if " " in name else "HBM"
    if kind == "link":
        words = [w for w in name.split() if "->" not in w and w not in ("tx", "rx") and w.rstrip("0123456789") not in ("die", "pkg", "nic")]
        return f"{words[0]} links" if words else "links"
    return {"l2": "L2", "atomic": "L2 atomic adds", "nic": "NIC", "credits": "write credits"}.get(kind, kind)


def _binned(log: list[tuple[int, float]], edges_us: np.ndarray) -> np.ndarray:
    """A rate log (``(time_ps, bytes/ps)`` at each change) as the mean GB/s over each bin between
    ``edges_us``: the bytes that went through in the bin over its length."""
    change_us = np.array([t for t, _ in log], dtype=float) / 1e6
    rates = np.array([r for _, r in log], dtype=float) * 1e3  # GB/s = bytes/ps * 1e3
    moved = np.concatenate([[0.0], np.cumsum(rates[:-1] * np.diff(change_us))])  # GB/s x us moved by each change
    before = np.searchsorted(change_us, edges_us, side="right") - 1  # the change in force at each edge (-1: before the first)
    at_edges = np.where(before >= 0, moved[np.maximum(before, 0)] + rates[np.maximum(before, 0)] * (edges_us - change_us[np.maximum(before, 0)]), 0.0)
    means: np.ndarray = np.diff(at_edges) / np.diff(edges_us)
    return means


def _waited_on(result) -> dict[str, float]:
    """The resources the critical path waited on, by name: their share of the end-to-end time."""
    waited: dict[str, float] = {}
    for row in (result.summary.get("bottlenecks") or {}).get("breakdown", []):
        if row.get("resource"):
            waited[row["resource"]] = waited.get(row["resource"], 0.0) + row["share"]
    return waited


def bandwidth(result, *, resources: Sequence[str] | None = None, kinds: Sequence[str] = DEFAULT_KINDS,
              window: tuple[float, float] | None = None, top: int = 2, bins: int = 200, width: float = 12.0):
    """GB/s over time through the resources that carried traffic, one panel per class (see
    :func:`resource_class`), its peak dashed: each rate is the mean over ``bins`` equal bins of the
    run (or of ``window=(t0, t1)`` in us), the bytes that went through over the bin's length. A
    panel of at most ``top + 1`` resources draws each as a line; a larger one draws the band from
    the lowest to the highest of them in each bin, their mean, and ``top`` of them: those the
    critical path waited on longest first, then those that moved the most bytes, so a 16-die run
    stays readable and its bottleneck visible. Each panel's legend is beside it. ``resources``
    picks by name (``"die0 HBM"``); otherwise every resource of ``kinds`` (``hbm``, ``l2``,
    ``atomic``: an L2's atomic-add unit where the config gives it a rate, ``link``, ``nic``,
    ``credits``: the write credits of links that have them)."""
    recorded = result.record.resources
    if resources is not None:
        known = {r.name for r in recorded}
        unknown = [name for name in resources if name not in known]
        if unknown:
            raise UsageError(f"bandwidth: no resource {', '.join(map(repr, unknown))}; resources: {', '.join(sorted(known)) or 'none'}")
    chosen = [r for r in recorded if r.rate_log and (r.name in resources if resources is not None else r.kind in kinds)]
    if not chosen:
        raise UsageError(f"bandwidth: no resource of kinds {', '.join(kinds)} carried traffic; pass kinds=('hbm', 'l2', 'link', 'nic')")
    groups: dict[str, list] = {}
    for resource in chosen:
        groups.setdefault(resource_class(resource.kind, resource.name), []).append(resource)
    order = sorted(groups, key=lambda c: (CLASS_ORDER.index(c) if c in CLASS_ORDER else 0 if groups[c][0].kind == "hbm" else len(CLASS_ORDER), c))
    if bins < 1:
        raise UsageError(f"bandwidth: bins={bins!r} must be at least 1")
    low, high = window if window is not None else (0.0, max(result.simulated_us, 1e-6))
    if not high > low:
        raise UsageError(f"bandwidth: window={window!r} must be (start_us, end_us) with end after start")
    edges = np.linspace(low, high, bins + 1)
    middles = (edges[:-1] + edges[1:]) / 2
    waited = _waited_on(result)
    fig = figure(width, 0.9 + 1.8 * len(order))
    axes = fig.subplots(len(order), 1, sharex=True, squeeze=False)[:, 0]
    for ax, name in zip(axes, order):
        members = groups[name]
        rates = np.vstack([_binned(r.rate_log, edges) for r in members])
        if len(members) <= top + 1:
            palette = colours([r.name for r in members])
            for resource, series in zip(members, rates):
                ax.plot(middles, series, color=palette[resource.name], label=resource.name, linewidth=1.2)
        else:
            ax.fill_between(middles, rates.min(axis=0), rates.max(axis=0), color="#4c72b0", alpha=0.25, linewidth=0,
                            label=f"lowest to highest of {len(members)}")
            ax.plot(middles, rates.mean(axis=0), color="#222222", linewidth=1.6, label=f"mean of {len(members)}")
            shown = sorted(range(len(members)), key=lambda i: (-waited.get(members[i].name, 0.0), -members[i].bytes_moved, members[i].name))[:top]
            palette = colours(["(band)", *(members[i].name for i in shown)])  # the band's blue stays the band's
            by_bytes = [i for i in shown if members[i].name not in waited]
            for i in shown:
                name_of = members[i].name
                label = (f"{name_of} (critical path {waited[name_of]:.0%})" if name_of in waited else
                         f"{name_of} (most bytes)" if i == by_bytes[0] else name_of)
                ax.plot(middles, rates[i], color=palette[name_of], linewidth=0.9, label=label)
        peaks = sorted({r.capacity * 1e3 for r in members})
        for peak in peaks:
            ax.axhline(peak, color="#555555", linestyle="--", linewidth=0.8)
        ax.set_ylabel("GB/s")
        ax.set_ylim(0, max(peaks) * 1.12)
        ax.grid(alpha=0.3)
        ax.set_title(f"{name} ({len(members)}; dashed: {'peak' if len(peaks) == 1 else 'their peaks'})", fontsize=9, loc="left")
        ax.legend(loc="upper left", bbox_to_anchor=(1.005, 1.0), fontsize=7, frameon=False)
    axes[-1].set_xlabel(f"simulated time (us); each point the mean over {(high - low) / bins:.3g} us")
    axes[-1].set_xlim(low, high)
    fig.suptitle(f"bandwidth: {result.config.name}, {result.simulated_us:.3f} us simulated", fontsize=10, x=0.01, ha="left")
    return fig
