"""Sweep speed: points per minute with 1 worker process and with all of them, on the same grid in
the same run, and their ratio (near-linear scaling: the ratio close to the number of workers).

    python benchmarks/sweep.py [--config a3] [--repeat 1]

The grid is ``examples/vector_add.py`` (timing only) over tile size x cores x double buffering, 24
points. Each measurement includes starting the worker processes, sending the points and collecting
the rows, as a user's sweep does; a one-point sweep first starts the fork server (once per process),
so neither measurement pays for it. With ``--repeat``, the two are measured in turn and the best
of each is kept.
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

from running_on import running_on

from npusim.analysis.executors import default_workers
from npusim.analysis.sweep import run_sweep

WORKLOAD = Path(__file__).resolve().parents[1] / "examples" / "vector_add.py"
GRID = {"param.tile": [4096, 8192, 16384], "param.cores": [24, 32, 40, 48], "param.double_buffer": [True, False]}


def points_per_minute(config: str, workers: int) -> tuple[float, int]:
    """Points per minute of the whole grid on ``workers`` processes, and how many points failed."""
    start = time.perf_counter()
    outcome = run_sweep(config, WORKLOAD, GRID, data=False, workers=workers, progress=False)
    elapsed = time.perf_counter() - start
    return len(outcome.rows) / elapsed * 60, outcome.failed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default="a3")
    parser.add_argument("--repeat", type=int, default=1, help="measure each this many times and keep the best")
    args = parser.parse_args()
    print(running_on())
    run_sweep(args.config, WORKLOAD, {"param.tile": [16384]}, data=False, workers=1, progress=False)  # starts the fork server
    everyone = default_workers()
    points = len(GRID["param.tile"]) * len(GRID["param.cores"]) * len(GRID["param.double_buffer"])
    print(f"load average before: {os.getloadavg()[0]:.2f} (other work on the machine slows the measurements)")
    rates: dict[int, list[float]] = {1: [], everyone: []}
    for _ in range(args.repeat):  # interleaved, so that a change of load affects both alike
        for workers in rates:
            rate, failed = points_per_minute(args.config, workers)
            rates[workers].append(rate)
            if failed:
                raise SystemExit(f"{failed} points of the benchmark grid failed; run one with npusim run to see why")
    for workers, measured in rates.items():
        print(f"{workers} worker{'s' if workers > 1 else ''}: {max(measured):.0f} points/min (best of {args.repeat}, {points} points each)")
    print(f"ratio {everyone} workers / 1 worker: {max(rates[everyone]) / max(rates[1]):.2f} (linear: {everyone})")


if __name__ == "__main__":
    main()
