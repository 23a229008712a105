"""Analyses built on whole simulations: what-if analysis at scale (parameter sweeps :func:`sweep`,
the config values the time is most sensitive to :func:`sensitivity`, each main resource made twice as
fast :func:`whatif`, the bottleneck of a run :func:`bottleneck_of`), reports and
comparisons of run folders, and calibration against measurements of real machines. (A single run's
critical path and events table live with its recorder, in :mod:`npusim.trace`.) The DataFrame functions need pandas (``pip install 'npusim[analysis]'``); sweeps on a
Dask cluster need ``npusim[cluster]``.

The public names are imported on first use, so that a module of the package (``npusim run`` needs
:mod:`npusim.analysis.report`) does not pull in the sweep machinery with it."""

import importlib
import sys
import types

_PUBLIC = {
    "Bottleneck": "npusim.analysis.bottleneck",
    "bottleneck_of": "npusim.analysis.bottleneck",
    "run_sweep": "npusim.analysis.sweep",
    "sweep": "npusim.analysis.sweep",
    "run_sensitivity": "npusim.analysis.sensitivity",
    "sensitivity": "npusim.analysis.sensitivity",
    "FACTORS": "npusim.analysis.whatif",
    "run_whatif": "npusim.analysis.whatif",
    "whatif": "npusim.analysis.whatif",
}
"""Public name -> the module that defines it."""

__all__ = ["Bottleneck", "FACTORS", "bottleneck_of", "run_sensitivity", "run_sweep", "run_whatif", "sensitivity", "sweep", "whatif"]


class _Package(types.ModuleType):
    """The package module: a public function named as its module (``sweep``, ``whatif``) keeps the
    name when the import system, on importing that module, sets the module on the package (the
    module stays in ``sys.modules``)."""

    def __setattr__(self, name: str, value: object) -> None:
        if not (name in _PUBLIC and isinstance(value, types.ModuleType)):
            super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package


def __getattr__(name: str):
    if name not in _PUBLIC:
        raise AttributeError(f"module 'npusim.analysis' has no attribute {name!r}")
    value = getattr(importlib.import_module(_PUBLIC[name]), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
