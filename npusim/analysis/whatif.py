"""What-if analysis: re-run a workload with each main resource made twice as fast, rank the speedups.

Each factor of :data:`FACTORS` is a set of config overrides derived from the loaded config's own
values (``die.hbm.bandwidth: 1.6 TB/s`` becomes ``die.hbm.bandwidth=3.2 TB/s``, in the unit it is
written in). A factor applies when the config has all its keys (``fabrics.package`` exists only on
A3) and, for a link class, the fabric of that kind. Bandwidths and rates are doubled, times per
unit of work are halved, counts are doubled.

A link factor models "this link class twice as fast" for every transfer that crosses it: besides
its bandwidth it doubles its ``write_credits`` where the config gives them, since posted writes
cross a link at most ``write_credits / (2 x latency)`` (``docs/calibration.md``); doubling the
bandwidth alone would leave a credit-bound write (a put, a remote store) as slow as before. Its
label then says so (``HCCS link bandwidth + write credits``): every label names what its run
changed, and the ``changed`` column lists the overrides.

What "twice the cores" means: twice the AI cores of each die (every kind of ``die.cores``
together, so the cube:vector ratio of a cluster stays), with the same HBM, L2, links and per-core
buffers; the number of dies is not changed (that is another machine, with another world size for
the workload to partition over, not a faster resource). It measures whether the work is limited by
how many cores run it; it is meaningful for workloads that spread a fixed problem over the die's
core count (``examples/vector_add.py`` does); a workload that uses a fixed number of cores reads
1.00x, which is right: more cores would not help it.

The points run like a sweep (in parallel, each in a fresh session); the speedup of a factor is the
baseline's simulated time over the factor's.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from npusim.analysis.grid import Point
from npusim.analysis.sweep import SweepOutcome, plan, require_pandas, run_plan
from npusim.config import load_config
from npusim.errors import WorkloadError
from npusim.units import scale_text

FASTER = 2.0
"""How much faster each factor makes its resource."""

NOTABLE = 1.05
"""Speedups below this are 'everything else' in the reading."""


@dataclass(frozen=True)
class Factor:
    """One resource made :data:`FASTER`: ``keys`` (dotted config keys; ``*`` stands for every entry
    of a list or mapping, e.g. every core kind of ``die.cores``) are multiplied by ``scale``; ``reading`` is how the one-line reading names it;
    ``when`` is a ``(key, value)`` the config must have for the factor to apply; ``also`` are keys
    scaled with them where the config sets them (a link's write credits), skipped where it does not,
    named ``also_label`` in the factor's label and reading when they are scaled (:func:`label`)."""

    name: str
    reading: str
    keys: tuple[str, ...]
    scale: float
    when: tuple[str, str] | None = None
    also: tuple[str, ...] = ()
    also_label: str = ""


FACTORS: tuple[Factor, ...] = (
    Factor("HBM bandwidth", "doubling the HBM bandwidth", ("die.hbm.bandwidth",), FASTER),
    Factor("L2 bandwidth", "doubling the L2 bandwidth", ("die.l2.bandwidth",), FASTER),
    Factor("HCCS link bandwidth", "doubling the HCCS link bandwidth", ("fabrics.node.link.bandwidth",), FASTER,
           ("fabrics.node.kind", "full_mesh"), ("fabrics.node.link.write_credits",), "write credits"),
    Factor("UB link bandwidth", "doubling the UB link bandwidth", ("fabrics.node.link.bandwidth",), FASTER,
           ("fabrics.node.kind", "ub_l1_switch"), ("fabrics.node.link.write_credits",), "write credits"),
    Factor("fabric link bandwidth", "doubling every fabric link's bandwidth", ("fabrics.node.links.*.link.bandwidth",), FASTER,
           ("fabrics.node.kind", "links"), ("fabrics.node.links.*.link.write_credits",), "write credits"),
    Factor("SIO bandwidth", "doubling the SIO (die-to-die) bandwidth", ("fabrics.package.link.bandwidth",), FASTER, None,
           ("fabrics.package.link.write_credits",), "write credits"),
    Factor("NIC bandwidth", "doubling the NIC bandwidth", ("fabrics.scale_out.bandwidth",), FASTER),
    Factor("vector rate", "doubling the vector rate", ("die.vector.per_repeat",), 1 / FASTER),
    Factor("cube rate", "doubling the cube rate", ("die.cube.per_block",), 1 / FASTER),
    Factor("MTE rate", "doubling the DMA engine (MTE) rates", ("die.cores.*.engines.*.rate",), FASTER, None,
           ("die.cores.*.engines.*.rates.*",)),  # and the rates of moves that have their own
    Factor("AICPU polling and scheduling", "halving the AICPU scheduling and polling times",
           ("die.aicpu.schedule", "die.aicpu.dependency", "die.aicpu.completion", "die.aicpu.poll_interval"), 1 / FASTER),
    Factor("AI core count", "doubling the AI cores per die", ("die.cores.*.count",), FASTER),
)

_MISSING = object()


def factor_overrides(factor: Factor, resolved: Mapping[str, Any]) -> list[str] | None:
    """The ``key=value`` overrides of ``factor`` for the resolved config ``resolved``, or None when
    the factor does not apply to it."""
    if factor.when is not None and _value_at(resolved, factor.when[0].split(".")) != factor.when[1]:
        return None
    overrides = []
    for pattern in factor.keys:
        paths = _expand(resolved, pattern.split("."))
        if not paths:
            return None
        for path in paths:
            value = _value_at(resolved, path)
            if value is _MISSING:
                return None
            overrides.append(_scaled(path, value, factor.scale))
    for pattern in factor.also:
        for path in _expand(resolved, pattern.split(".")):
            value = _value_at(resolved, path)
            if value is not None:
                overrides.append(_scaled(path, value, factor.scale))
    return overrides


def label(factor: Factor, changes: Sequence[str]) -> tuple[str, str]:
    """The factor's name and reading for the overrides ``changes`` it made on a config: with its
    ``also_label`` when it scaled any of its ``also`` keys there (``HCCS link bandwidth + write
    credits``), so a label names everything its row changed."""
    also = [pattern.split(".") for pattern in factor.also]
    scaled_also = any(_matches(change.partition("=")[0].split("."), pattern) for change in changes for pattern in also)
    if not scaled_also or not factor.also_label:
        return factor.name, factor.reading
    return f"{factor.name} + {factor.also_label}", f"{factor.reading} and {factor.also_label}"


def _matches(path: Sequence[str], pattern: Sequence[str]) -> bool:
    """Whether the key path ``path`` is one of the pattern's (``*``: any one entry)."""
    return len(path) == len(pattern) and all(p == "*" or p == part for part, p in zip(path, pattern))


def _scaled(path: Sequence[str], value: Any, scale: float) -> str:
    """The override ``key=value`` that sets the config value ``value`` at ``path`` to ``scale`` times it."""
    scaled = round(value * scale) if isinstance(value, int) else scale_text(str(value), scale)
    return f"{'.'.join(path)}={scaled}"


def _expand(data: Any, parts: list[str]) -> list[list[str]]:
    """The concrete key paths of ``parts``, ``*`` replaced by each index of the list there."""
    if not parts:
        return [[]]
    head, rest = parts[0], parts[1:]
    if head == "*":
        entries = data.items() if isinstance(data, dict) else enumerate(data) if isinstance(data, list) else ()
        return [[str(key), *tail] for key, entry in entries for tail in _expand(entry, rest)]
    if isinstance(data, dict) and head in data:
        return [[head, *tail] for tail in _expand(data[head], rest)]
    return []


def _value_at(data: Any, path: Sequence[str]) -> Any:
    for part in path:
        if isinstance(data, list) and part.isdigit() and int(part) < len(data):
            data = data[int(part)]
        elif isinstance(data, dict) and part in data:
            data = data[part]
        else:
            return _MISSING
    return data


BASELINE = "baseline"


def run_whatif(config: str | Path, workload: str | Path, *, overrides: Sequence[str] | None = None,
               params: Mapping[str, Any] | Sequence[str] | None = None, workers: int | None = None, scheduler: str | None = None,
               data: bool = False, seed: int = 0, progress: bool = True) -> tuple[list[dict[str, Any]], str]:
    """Simulate the baseline and every applicable factor; return the rows (baseline first, then the
    factors by speedup, largest first, in :data:`FACTORS` order among equals) and the one-line
    reading. Each row: factor, changed (the overrides), simulated_us, speedup, bottleneck and its
    utilisation, status, error. Raises WorkloadError when the baseline itself fails."""
    base = load_config(config, tuple(overrides or ()))
    applicable: list[tuple[Factor, list[str]]] = []
    for factor in FACTORS:
        changes = factor_overrides(factor, base.resolved)
        if changes is not None:
            applicable.append((factor, changes))
    points = [Point((), {}, {"factor": BASELINE})] + [Point(tuple(changes), {}, {"factor": label(factor, changes)[0]}) for factor, changes in applicable]
    what_if_plan = plan(config, workload, points, ["factor"], overrides=overrides, params=params, data=data, seed=seed, origin="what-if")
    outcome: SweepOutcome = run_plan(what_if_plan, workers=workers, scheduler=scheduler, progress=progress,
                                     title=f"what-if of {what_if_plan.workload.name} on {what_if_plan.base.name}")
    baseline, *measured = outcome.rows
    if baseline["status"] != "ok":
        raise WorkloadError(f"the baseline run of {what_if_plan.workload.name} failed, so nothing can be compared: {baseline['error_type']}: {baseline['error']}")
    ranked = [_row(row, label(factor, changes)[1], changes, baseline) for row, (factor, changes) in zip(measured, applicable)]
    ranked.sort(key=lambda row: math.inf if math.isnan(row["speedup"]) else -row["speedup"])
    return [_row(baseline, "", [], baseline)] + ranked, reading(ranked)


def _row(row: dict[str, Any], reading_text: str, changes: list[str], baseline: dict[str, Any]) -> dict[str, Any]:
    return {
        "factor": row["factor"],
        "reading": reading_text,
        "changed": "; ".join(changes),
        "simulated_us": row["simulated_us"],
        "speedup": speedup(baseline["simulated_us"], row["simulated_us"]) if row["status"] == "ok" else math.nan,
        "bottleneck": row["bottleneck"],
        "bottleneck_share": row["bottleneck_share"],
        "status": row["status"],
        "error": row["error"],
    }


def speedup(baseline_us: float, faster_us: float) -> float:
    """How many times faster ``faster_us`` is than ``baseline_us``; 1 when neither simulated anything."""
    if faster_us > 0:
        return baseline_us / faster_us
    return 1.0 if baseline_us == 0 else math.inf


def reading(ranked: Sequence[dict[str, Any]]) -> str:
    """One line on ``ranked`` (factor rows by speedup, largest first): the factors that give at
    least :data:`NOTABLE`, then everything else."""
    done = [row for row in ranked if row["status"] == "ok"]
    failed = len(ranked) - len(done)
    notable = [row for row in done if row["speedup"] >= NOTABLE]
    if notable:
        first, *more = notable
        text = f"{first['reading']} gives {first['speedup']:.2f}x" + "".join(f", {row['reading']} {row['speedup']:.2f}x" for row in more)
        if len(notable) < len(done):
            text += f"; everything else under {NOTABLE:.2f}x"
    elif done:
        text = f"no resource made twice as fast gives {NOTABLE:.2f}x or more (best: {done[0]['reading']}, {done[0]['speedup']:.2f}x)"
    else:
        text = "every what-if run failed"
    if failed and done:
        text += f"; {failed} factor{'s' if failed > 1 else ''} failed (see the table)"
    return text


def whatif(config: str | Path, workload: str | Path, *, overrides: Sequence[str] | None = None, params: Mapping[str, Any] | None = None,
           workers: int | None = None, scheduler: str | None = None, data: bool = False, seed: int = 0, progress: bool = True):
    """:func:`run_whatif` as a pandas DataFrame (baseline first, then factors by speedup); the
    one-line reading is in ``frame.attrs['reading']``."""
    pandas = require_pandas()
    rows, line = run_whatif(config, workload, overrides=overrides, params=params, workers=workers, scheduler=scheduler, data=data,
                            seed=seed, progress=progress)
    frame = pandas.DataFrame(rows)
    frame.attrs["reading"] = line
    return frame
