"""The bottleneck of a run, and the per-class utilisations a sweep records for every point.

:func:`bottleneck_of` is the one place the analyses ask "what limited this run?". Until the
critical-path analysis exists it answers from the summary: the busiest pipe or shared resource by
utilisation. A pipe's utilisation is its busy time over (cores that used it x simulated time); a
resource's is its achieved bandwidth over its peak. Caveat of this simple rule: a DMA pipe (MTE2,
MTE3, ...) counts as busy while its copy is slowed by a shared bandwidth, so a run limited by HBM can
show its MTE2 pipe as the busiest; the what-if analysis (:mod:`npusim.analysis.whatif`) measures
instead of inferring.
"""

from __future__ import annotations

from dataclasses import dataclass

from npusim.hw.pipes import Pipe

SHARED_KINDS = ("hbm", "l2", "link", "nic")
"""The kinds of shared bandwidth resources the hardware model registers (``Resource.kind``)."""


@dataclass(frozen=True)
class Bottleneck:
    """The resource that limited a run: its name (``die0 HBM``, ``die0 MTE2``), its kind (``pipe``
    or a resource kind of :data:`SHARED_KINDS`) and its utilisation (0..1)."""

    name: str
    kind: str
    utilisation: float


def bottleneck_of(result) -> Bottleneck | None:
    """The busiest pipe or shared resource of ``result`` (a :class:`~npusim.SimResult`) by
    utilisation; the first listed wins a tie (shared resources before pipes). None when nothing ran."""
    summary = result.summary
    candidates = [Bottleneck(row["resource"], row["kind"], row["utilisation"]) for row in summary["bandwidth"]]
    candidates += [Bottleneck(f"die{row['die']} {row['pipe']}", "pipe", row["utilisation"]) for row in summary["pipes"]]
    if not candidates:
        return None
    return max(candidates, key=lambda candidate: candidate.utilisation)


def utilisation_columns() -> list[str]:
    """The names of the per-class figures :func:`class_utilisations` gives, in a fixed order."""
    return [f"util_{pipe.name}" for pipe in Pipe] + [f"util_{kind}" for kind in SHARED_KINDS] + [f"GBps_{kind}" for kind in SHARED_KINDS]


def class_utilisations(summary: dict) -> dict[str, float]:
    """Per AI-core pipe (``util_MTE2``) and per kind of shared resource (``util_hbm``, ``GBps_hbm``):
    the utilisation and achieved GB/s of the busiest one (over dies, over links); 0 when none was
    used. Other lanes of the summary (e.g. AICPU work) have no column; they still count for
    :func:`bottleneck_of`."""
    figures = dict.fromkeys(utilisation_columns(), 0.0)
    for row in summary["pipes"]:
        column = f"util_{row['pipe']}"
        if column in figures:
            figures[column] = max(figures[column], row["utilisation"])
    for row in summary["bandwidth"]:
        if row["kind"] in SHARED_KINDS and row["utilisation"] >= figures[f"util_{row['kind']}"]:
            figures[f"util_{row['kind']}"] = row["utilisation"]
            figures[f"GBps_{row['kind']}"] = row["achieved_GBps"]
    return figures
