"""Measured kernels: simulate each row of ``npusim/calibration/measured_kernels.csv`` and compare.

A row names a published figure (a kernel's time, a rate), the built-in config and the ``--set``
values of its set-up, and a *workload*: a function registered in :data:`KERNEL_WORKLOADS` that runs
the kernel as the source ran it, in a fresh timing-only session, and returns its results by name
(module ``<name>`` of ``npusim.calibration.workloads``, its ``run``, or one registered in
:data:`KERNEL_WORKLOADS`);
the row's ``quantity`` picks one. Rows that run the same workload with the same config and
parameters (a dispatch and a combine measured in one run) share one simulation.

Adding a row of a new kind: a workload module in ``npusim/calibration/workloads/`` whose
``run(**params)`` returns ``{quantity: value}`` in the current session, and rows naming it.
"""

from __future__ import annotations

import csv
import importlib
import io
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from importlib import resources
from typing import Any

from npusim.config import load_config
from npusim.config.registry import Registry
from npusim.errors import UsageError
from npusim.frontend.session import session

DATA_FILE = "calibration/measured_kernels.csv"

WORKLOAD_MODULES = "npusim.calibration.workloads"
"""The package of the built-in workloads: module ``<name>`` of it is workload ``<name>`` (its ``run``)."""

KERNEL_WORKLOADS: Registry[Callable[..., dict[str, float]]] = Registry("measured-kernel workload")
"""Workloads registered by hand: ``f(**params) -> {quantity: value}`` in the current session."""


def workload(name: str) -> Callable[..., dict[str, float]]:
    """The workload ``name``: one registered by hand, else ``run`` of module ``<name>`` of :data:`WORKLOAD_MODULES`."""
    if name in KERNEL_WORKLOADS:
        return KERNEL_WORKLOADS.get(name)
    try:
        module = importlib.import_module(f"{WORKLOAD_MODULES}.{name}")
    except ModuleNotFoundError:
        raise UsageError(f"no measured-kernel workload {name!r}: neither registered (KERNEL_WORKLOADS) nor a module of "
                         f"{WORKLOAD_MODULES}") from None
    return module.run


@dataclass(frozen=True)
class KernelRow:
    """One measured kernel figure (see the module docstring)."""

    name: str
    source: str
    config: str
    overrides: tuple[str, ...]
    workload: str
    params: tuple[tuple[str, Any], ...]
    quantity: str
    measured: float
    unit: str

    @property
    def label(self) -> str:
        return f"{self.name} ({self.config})"


@dataclass(frozen=True)
class KernelResult:
    """A row and what the simulation gives for it; ``error`` is relative (+0.05: 5% above measured)."""

    row: KernelRow
    simulated: float

    @property
    def error(self) -> float:
        return self.simulated / self.row.measured - 1.0


def _value(text: str) -> Any:
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def _pairs(text: str) -> list[str]:
    return [part.strip() for part in text.split(";") if part.strip()]


def load_kernel_rows(systems: Sequence[str] | None = None) -> list[KernelRow]:
    """The rows of the data file, in file order (``systems``: only those configs)."""
    text = resources.files("npusim").joinpath(DATA_FILE).read_text(encoding="utf-8")
    rows = []
    for r in csv.DictReader(io.StringIO("".join(line for line in text.splitlines(keepends=True) if not line.startswith("#")))):
        params = tuple((key.strip(), _value(value.strip())) for key, _, value in (p.partition("=") for p in _pairs(r["params"])))
        rows.append(KernelRow(r["name"], r["source"], r["config"], tuple(_pairs(r["overrides"])), r["workload"], params,
                              r["quantity"], float(r["measured"]), r["unit"]))
    if systems is not None:
        rows = [row for row in rows if row.config in systems]
    return rows


def run_kernel_rows(rows: Sequence[KernelRow], overrides: Sequence[str] = ()) -> list[KernelResult]:
    """Simulate every row (``overrides`` applied after the row's own set-up), one simulation per
    distinct (workload, config, set-up, parameters)."""
    done: dict[tuple, dict[str, float]] = {}
    results = []
    for row in rows:
        key = (row.workload, row.config, row.overrides, row.params)
        if key not in done:
            run = workload(row.workload)
            config = load_config(row.config, [*row.overrides, *overrides])
            with session(config, data=False):
                done[key] = run(**dict(row.params))
        values = done[key]
        if row.quantity not in values:
            raise UsageError(f"measured kernel {row.name!r}: workload {row.workload!r} gives {', '.join(sorted(values))}, not "
                             f"{row.quantity!r}; fix the row's quantity in npusim/{DATA_FILE}")
        results.append(KernelResult(row, values[row.quantity]))
    return results
