"""Speed of the fluid bandwidth network when many flow classes are busy, against a bare SimPy loop
of the same number of timeouts measured in the same process.

    python benchmarks/flow_network.py [--repeat 1] [--only a3-allgather,a3-allgather-32,a2-allgather,pipeline]

Workloads, timing only (``data=False``), as a sweep runs them:

- ``a3-allgather``: ``examples/shmem_allgather.py`` on a3 (16 PEs on 16 dies, every die putting to
  15 peers in 16 KiB chunks through the UB switch ports and their write credits: ~240 paths, one
  connected component, ~30k recomputations of the max-min rates);
- ``a3-allgather-32``: the same with 32 PEs on two a3 nodes (``shape.nodes=2``: ~1,000 flow classes,
  ~120k recomputations);
- ``a2-allgather``: the same on a2 (8 dies, HCCS full mesh: one link per pair of dies);
- ``pipeline``: ``benchmarks/engine.py``'s 48-core DMA + vector pipeline on one die (few classes).

For each: wall seconds simulating (best of ``--repeat``), recorded events per second, the bare SimPy
loop's timeouts per second, their ratio, and the network's recomputation count.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import time
from pathlib import Path

from engine import build_pipeline, run_bare_simpy
from running_on import running_on

import npusim
from npusim.frontend.workload import run_workload_file

ALLGATHER = Path(__file__).resolve().parents[1] / "examples" / "shmem_allgather.py"
BARE_PROCESSES = 64  # the bare loop's timeouts are spread over this many SimPy processes


def run_allgather(config: str, overrides: tuple[str, ...] = (), n_pes: int | None = None) -> tuple[int, float, int]:
    """The all-gather example on ``config`` (with ``overrides``, on ``n_pes`` PEs: default every
    die): (events recorded, wall seconds, recomputations)."""
    start = time.perf_counter()
    params = {} if n_pes is None else {"n_pes": n_pes}
    with contextlib.redirect_stdout(io.StringIO()):  # the example prints its own report
        with npusim.session(config, overrides, data=False, params=params) as s:
            run_workload_file(ALLGATHER)
    return len(s.result.recorder), time.perf_counter() - start, s.system.network.recomputations


def run_pipeline(cores: int = 48, tiles: int = 64, tile_elems: int = 8192) -> tuple[int, float, int]:
    """``benchmarks/engine.py``'s pipeline, simulating only: (events, wall seconds, recomputations)."""
    with npusim.session("a3", data=False) as s:
        build_pipeline(cores, tiles, tile_elems)
        start = time.perf_counter()
        s.synchronize()
        seconds = time.perf_counter() - start
    return len(s.result.recorder), seconds, s.system.network.recomputations


WORKLOADS = {
    "a3-allgather": lambda: run_allgather("a3"),
    "a3-allgather-32": lambda: run_allgather("a3", ("shape.nodes=2",), 32),
    "a2-allgather": lambda: run_allgather("a2"),
    "pipeline": run_pipeline,
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=1, help="runs of each workload; the best is kept")
    parser.add_argument("--only", default="a3-allgather,a2-allgather,pipeline", help=f"comma-separated workloads to run, of {', '.join(WORKLOADS)}")
    args = parser.parse_args()
    print(running_on())
    names = [name.strip() for name in args.only.split(",") if name.strip()]
    unknown = [name for name in names if name not in WORKLOADS]
    if unknown:
        parser.error(f"unknown workload {', '.join(unknown)}; choose from {', '.join(WORKLOADS)}")

    print(f"{'workload':<16} {'events':>8} {'recomputations':>14} {'wall s':>8} {'events/s':>10} {'bare SimPy/s':>13} {'ratio':>6}")
    for name in names:
        best = bare = float("inf")
        events = recomputations = 0
        for _ in range(args.repeat):
            events, seconds, recomputations = WORKLOADS[name]()
            best = min(best, seconds)
            bare = min(bare, run_bare_simpy(BARE_PROCESSES, events // BARE_PROCESSES))
        rate, bare_rate = events / best, events / bare
        print(f"{name:<16} {events:>8} {recomputations:>14} {best:>8.2f} {rate:>10,.0f} {bare_rate:>13,.0f} {rate / bare_rate:>6.3f}")


if __name__ == "__main__":
    main()
