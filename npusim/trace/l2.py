"""msprof's L2 cache metrics, as npusim computes them from a run's L2 counters (``hw.cache``): the
names of the summary's ``l2`` rows, of op_summary.csv's L2 columns and of the report's L2 tables.
Plain Python, so the report command imports nothing else for them.
"""

from __future__ import annotations

L2_METRICS = ("write_cache_hit", "write_cache_miss_allocate", "r0_read_cache_hit", "r0_read_cache_miss_allocate", "write_hit_rate(%)",
              "read_hit_rate(%)", "total_hit_rate(%)")
"""msprof's L2 cache metrics (its ``L2Cache`` aic-metrics group: op_summary's ``aic_...`` / ``aiv_...``
columns of these names), as npusim counts them (docs/analysis.md): requests are lines of
``die.l2.line``; the chip's two read channels are one, reported as ``r0`` (msprof's ``r1`` columns
are not written); a write that misses allocates its line (``miss_allocate``), as does a read."""


def l2_metrics(counts: list[float]) -> list[int | float | str]:
    """The values of :data:`L2_METRICS` for one tally's counts (``trace.record.L2_COUNTS``): lines as
    whole numbers (a warm start's first accesses count as hits in part, rounded), rates in percent
    (empty without an access of that kind)."""
    read_hit, read_miss, write_hit, write_miss = counts[:4]
    return [round(write_hit), round(write_miss), round(read_hit), round(read_miss), _percent(write_hit, write_hit + write_miss),
            _percent(read_hit, read_hit + read_miss), _percent(read_hit + write_hit, read_hit + read_miss + write_hit + write_miss)]


def _percent(hit: float, lines: float) -> float | str:
    """A hit rate in percent, to three decimals; empty without lines."""
    return round(100 * hit / lines, 3) if lines > 0 else ""
