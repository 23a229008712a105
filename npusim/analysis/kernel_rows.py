"""Measured kernels: simulate each row of ``npusim/calibration/measured_kernels.csv`` and compare.

A row names a published figure (a kernel's time, a rate), the built-in config and the ``--set``
values of its set-up, and a *workload*: a function registered in :data:`KERNEL_WORKLOADS` that runs
the kernel as the source ran it, in a fresh timing-only session, and returns its results by name;
the row's ``quantity`` picks one. Rows that run the same workload with the same config and
parameters (a dispatch and a combine measured in one run) share one simulation.

Adding a row of a new kind: register a workload (``@KERNEL_WORKLOADS.register("name")``, a function
of the session and the row's parameters returning ``{quantity: value}``) and add rows to the file.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from importlib import resources
from typing import Any

import numpy as np

from npusim.config import load_config
from npusim.config.registry import Registry
from npusim.errors import UsageError
from npusim.frontend.session import Session, session

DATA_FILE = "calibration/measured_kernels.csv"

KERNEL_WORKLOADS: Registry[Callable[..., dict[str, float]]] = Registry("measured-kernel workload")
"""Workloads of measured-kernel rows by name: ``f(session, **params) -> {quantity: value}``."""


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
            workload = KERNEL_WORKLOADS.get(row.workload)
            config = load_config(row.config, [*row.overrides, *overrides])
            with session(config, data=False) as run:
                done[key] = workload(run, **dict(row.params))
        values = done[key]
        if row.quantity not in values:
            raise UsageError(f"measured kernel {row.name!r}: workload {row.workload!r} gives {', '.join(sorted(values))}, not "
                             f"{row.quantity!r}; fix the row's quantity in npusim/{DATA_FILE}")
        results.append(KernelResult(row, values[row.quantity]))
    return results


@KERNEL_WORKLOADS.register("moe_dispatch_combine")
def moe_dispatch_combine(run: Session, *, ep: int, tokens: int, hidden: int, topk: int, experts: int, quant_mode: int = 2,
                         comm_alg: str = "") -> dict[str, float]:
    """torch_npu's MoE dispatch then combine (v2) on ``ep`` ranks (dies 0 .. ep-1), every rank
    starting each op at once: ``tokens`` tokens of ``hidden`` bf16 values per rank, ``topk`` of
    ``experts`` experts each (uniform routing: the timing-only ids). ``dispatch_us`` / ``combine_us``:
    from the op's start to the end of the last rank's, as a benchmark that starts the ranks
    together and times the op measures it."""
    import ml_dtypes

    from npusim import torch_npu
    from npusim.frontend.tensor import empty

    bf16 = np.dtype(ml_dtypes.bfloat16)
    ids = [empty((tokens, topk), np.int32, device=rank) for rank in range(ep)]
    outs = [torch_npu.npu_moe_distribute_dispatch_v2(empty((tokens, hidden), bf16, device=rank), ids[rank], "ep", ep, rank, experts,
                                                     quant_mode=quant_mode, comm_alg=comm_alg) for rank in range(ep)]
    start = run.env.now
    run.synchronize()
    dispatched = run.env.now
    for rank, (expand_x, _, assist, _, counts, _, _) in enumerate(outs):
        rows = empty(expand_x.shape, bf16, device=rank)
        weights = empty((tokens, topk), np.float32, device=rank)
        torch_npu.npu_moe_distribute_combine_v2(rows, ids[rank], assist, counts, weights, "ep", ep, rank, experts, comm_alg=comm_alg)
    run.synchronize()
    return {"dispatch_us": (dispatched - start) / 1e6, "combine_us": (run.env.now - dispatched) / 1e6}
