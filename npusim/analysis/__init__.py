"""Analysis of a run: its critical path and bottleneck breakdown, reports and comparisons of runs,
and its events as a table (:func:`npusim.analysis.events.events_frame`)."""
