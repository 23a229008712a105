"""What-if analysis at scale: parameter sweeps (:func:`sweep`), sensitivity ranking (:func:`whatif`)
and the bottleneck of a run (:func:`bottleneck_of`). The DataFrame functions need pandas
(``pip install 'npusim[analysis]'``); sweeps on a Dask cluster need ``npusim[cluster]``."""

from npusim.analysis.bottleneck import Bottleneck, bottleneck_of
from npusim.analysis.sweep import run_sweep, sweep
from npusim.analysis.whatif import FACTORS, run_whatif, whatif

__all__ = ["Bottleneck", "FACTORS", "bottleneck_of", "run_sweep", "run_whatif", "sweep", "whatif"]
