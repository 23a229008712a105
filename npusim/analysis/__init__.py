"""Analyses built on whole simulations: what-if analysis at scale (parameter sweeps :func:`sweep`,
sensitivity ranking :func:`whatif`, the bottleneck of a run :func:`bottleneck_of`), reports and
comparisons of run folders, and calibration against measurements of real machines. (A single run's
critical path and events table live with its recorder, in :mod:`npusim.trace`.) The DataFrame functions need pandas (``pip install 'npusim[analysis]'``); sweeps on a
Dask cluster need ``npusim[cluster]``."""


from npusim.analysis.bottleneck import Bottleneck, bottleneck_of
from npusim.analysis.sweep import run_sweep, sweep
from npusim.analysis.whatif import FACTORS, run_whatif, whatif

__all__ = ["Bottleneck", "FACTORS", "bottleneck_of", "run_sweep", "run_whatif", "sweep", "whatif"]
