"""The bottleneck of a run, and the per-class utilisations a sweep records for every point.

:func:`bottleneck_of` is the one place the analyses ask "what limited this run?": the largest entry
of the run's critical-path breakdown (:mod:`npusim.trace.critical_path`, in ``summary["bottlenecks"]``).
"""

from __future__ import annotations

from dataclasses import dataclass

from npusim.hw.pipes import Pipe
from npusim.trace.summary import records

SHARED_KINDS = ("hbm", "l2", "link", "nic")
"""The kinds of shared bandwidth resources the hardware model registers (``Resource.kind``)."""


@dataclass(frozen=True)
class Bottleneck:
    """What limited a run: the label of the largest entry of its critical-path breakdown (``MTE2
    waiting on die0 HBM``, ``VECTOR on die0 aiv7``), its kind (``hbm``, ``link``, ``credits``,
    ``pipe``, ``dma fixed`` ...) and its share of the end-to-end time (0..1)."""

    name: str
    kind: str
    share: float


def bottleneck_of(result) -> Bottleneck | None:
    """The largest entry of the critical-path breakdown of ``result`` (a :class:`~npusim.SimResult`);
    None when nothing ran."""
    rows = (result.summary.get("bottlenecks") or {}).get("breakdown") or []
    rows = [row for row in rows if row["kind"] != "other"]
    if not rows:
        return None
    top = max(rows, key=lambda row: row["share"])
    return Bottleneck(top["label"], top["kind"], top["share"])


def utilisation_columns() -> list[str]:
    """The names of the per-class figures :func:`class_utilisations` gives, in a fixed order."""
    return [f"util_{pipe.name}" for pipe in Pipe] + [f"util_{kind}" for kind in SHARED_KINDS] + [f"GBps_{kind}" for kind in SHARED_KINDS]


def class_utilisations(summary: dict) -> dict[str, float]:
    """Per AI-core pipe (``util_MTE2``) and per kind of shared resource (``util_hbm``, ``GBps_hbm``):
    the utilisation and achieved GB/s of the busiest one (over dies, over links); 0 when none was
    used. Other lanes of the summary (e.g. AICPU work) have no column; they still count for
    :func:`bottleneck_of`."""
    figures = dict.fromkeys(utilisation_columns(), 0.0)
    for row in records(summary["pipes"]):
        column = f"util_{row['pipe']}"
        if column in figures:
            figures[column] = max(figures[column], row["utilisation"])
    for row in records(summary["bandwidth"]):
        if row["kind"] in SHARED_KINDS and row["utilisation"] >= figures[f"util_{row['kind']}"]:
            figures[f"util_{row['kind']}"] = row["utilisation"]
            figures[f"GBps_{row['kind']}"] = row["achieved_GBps"]
    return figures
