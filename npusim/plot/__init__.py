"""Matplotlib figures of a run, for notebooks and ``npusim run --plot``.

Each function takes a :class:`~npusim.SimResult` (from ``npusim.simulate`` or a session) and returns
a ``matplotlib.figure.Figure`` built without pyplot, so it works headless (Agg) and shows once in a
notebook; save it with ``fig.savefig("timeline.png")``.

- :func:`timeline`: a Gantt chart, one row per core pipe, bars coloured by op (or instruction);
- :func:`bandwidth`: GB/s over time through each HBM and link, with its peak;
- :func:`utilisation`: busy share of each pipe and achieved share of each HBM / link's peak;
- :func:`bottlenecks`: the critical path's breakdown of the end-to-end time.
"""

from npusim.plot.counters import bandwidth
from npusim.plot.timeline import timeline
from npusim.plot.utilisation import bottlenecks, utilisation

__all__ = ["bandwidth", "bottlenecks", "timeline", "utilisation"]
