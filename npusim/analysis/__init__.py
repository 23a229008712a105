"""Analyses built on simulations: the critical path and bottleneck breakdown of a run, reports and
comparisons of runs, a run's events as a table (:func:`npusim.analysis.events.events_frame`), and
calibration against measurements of real machines."""
