"""Calibration against real machines: simulate every measured transfer and compare.

Each row of ``npusim/calibration/hixl_point_to_point.csv`` is one measurement by HIXL's benchmark
(see the README beside it): one ``TransferSync`` moving :data:`BATCH_BYTES` as descriptors of
``block_bytes`` between two NPUs, reported as ``BATCH_BYTES / 2^30 / seconds`` (GiB/s). Here each row
is run as the same transfer (``npusim.transfer``, the same op, protocol, blocks and pair of dies) in a
fresh timing-only session of the built-in config the row names, with ``shape.nodes`` of the row, and
the simulated time gives the simulated GiB/s. Nothing depends on the block size, direction or config
name except through the simulation itself.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import resources

import numpy as np

from npusim.config import LoadedConfig, SystemSpec, load_config
from npusim.errors import UsageError
from npusim.frontend.session import session
from npusim.frontend.tensor import empty
from npusim.frontend.transfer import transfer
from npusim.units import PS_PER_SECOND

DATA_FILE = "calibration/hixl_point_to_point.csv"
BATCH_BYTES = 128 * 2**20  # HIXL benchmarks/benchmark.cpp kTransferMemSize: bytes moved by one measured TransferSync
GIB = 2**30


@dataclass(frozen=True)
class CalibrationCase:
    """One measured transfer: system (built-in config), nodes it spans, protocol (hccs / rdma),
    direction (write / read), block size in bytes and the measured bandwidth in GiB/s."""

    system: str
    nodes: int
    protocol: str
    direction: str
    block_bytes: int
    measured_GiBps: float

    @property
    def label(self) -> str:
        return f"{self.system} {self.nodes}-node {self.protocol} {self.direction} {block_label(self.block_bytes)}"


@dataclass(frozen=True)
class CalibrationResult:
    """A case and the bandwidth the simulation gives for it (GiB/s); ``error`` is the relative
    error of the simulation (+0.05: 5% faster than measured)."""

    case: CalibrationCase
    simulated_GiBps: float

    @property
    def error(self) -> float:
        return self.simulated_GiBps / self.case.measured_GiBps - 1.0


@dataclass(frozen=True)
class ErrorSummary:
    """Cases, mean absolute relative error and the worst result of a group of results."""

    cases: int
    mean_abs_error: float
    worst: CalibrationResult


def block_label(block_bytes: int) -> str:
    """``1 MiB``, ``512 KiB`` or bytes."""
    for unit, scale in (("MiB", 2**20), ("KiB", 2**10)):
        if block_bytes % scale == 0:
            return f"{block_bytes // scale} {unit}"
    return f"{block_bytes} B"


def load_cases(systems: Sequence[str] | None = None) -> list[CalibrationCase]:
    """The measured cases of the data file, in file order; ``systems`` keeps only those systems
    (UsageError naming the known systems if one has no data)."""
    text = resources.files("npusim").joinpath(DATA_FILE).read_text(encoding="utf-8")
    rows = csv.DictReader(io.StringIO("".join(line for line in text.splitlines(keepends=True) if not line.startswith("#"))))
    cases = [CalibrationCase(r["system"], int(r["nodes"]), r["protocol"], r["direction"], int(r["block_bytes"]), float(r["measured_GiBps"]))
             for r in rows]
    if systems is None:
        return cases
    known = sorted({case.system for case in cases})
    for name in systems:
        if name not in known:
            raise UsageError(f"no calibration data for config {name!r}: npusim/{DATA_FILE} has measurements of {', '.join(known)}; pick one of them")
    return [case for case in cases if case.system in systems]


def check_tolerance(tolerance: float) -> float:
    """``tolerance`` as a fraction in (0, 1), or a UsageError saying how to write it."""
    if not 0.0 < tolerance < 1.0:
        raise UsageError(f"tolerance {tolerance!r} is not a fraction between 0 and 1 (exclusive): 0.10 allows a 10% error on every case")
    return tolerance


def endpoints(spec: SystemSpec, nodes: int) -> tuple[int, int]:
    """The initiator and the peer die of a measurement: die 0 and the first die of the next
    package (one node) or of the next node (two nodes)."""
    return 0, (spec.shape.dies_per_node if nodes > 1 else spec.shape.dies_per_package)


def simulate(case: CalibrationCase, config: LoadedConfig) -> float:
    """The simulated GiB/s of ``case`` on ``config`` (which must have the case's nodes)."""
    initiator, peer = endpoints(config.spec, case.nodes)
    blocks = BATCH_BYTES // case.block_bytes
    with session(config, data=False) as run:
        local = empty(BATCH_BYTES, np.uint8, device=initiator)
        remote = empty(BATCH_BYTES, np.uint8, device=peer)
        spans = [slice(i * case.block_bytes, (i + 1) * case.block_bytes) for i in range(blocks)]
        transfer(case.direction, [local[s] for s in spans], [remote[s] for s in spans], protocol=case.protocol)
    return BATCH_BYTES / GIB / (run.result.simulated_ps / PS_PER_SECOND)


def run_calibration(systems: Sequence[str] | None = None, overrides: Sequence[str] = ()) -> list[CalibrationResult]:
    """Simulate every case (of ``systems``), each on its built-in config with ``overrides``
    (``key.path=value``) applied before the case's ``shape.nodes``."""
    configs: dict[tuple[str, int], LoadedConfig] = {}
    results = []
    for case in load_cases(systems):
        key = (case.system, case.nodes)
        if key not in configs:
            configs[key] = load_config(case.system, [*overrides, f"shape.nodes={case.nodes}"])
        results.append(CalibrationResult(case, simulate(case, configs[key])))
    return results


def summarize_errors(results: Sequence[CalibrationResult]) -> ErrorSummary:
    """Mean absolute error and worst case of ``results`` (at least one)."""
    errors = [abs(r.error) for r in results]
    return ErrorSummary(len(results), sum(errors) / len(errors), max(results, key=lambda r: abs(r.error)))
