"""The network's time quantum against the exact network on every bundled workload: error of the
simulated time and speed-up of the wall time.

    python benchmarks/network_quantum.py [--quanta 1ns,10ns,100ns] [--only NAME,...]

Every example of ``examples/`` runs timing only on the config its docstring runs it on (the
all-gather also on two a3 nodes, 32 PEs), once exact and once per quantum, in this process. For
each: the simulated time, its error against the exact run (in %), the network's recomputations and
the CPU seconds of the session (CPU, not wall: the machine is shared), with the speed-up against
the exact run.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import time
from pathlib import Path

from running_on import running_on

import npusim
from npusim.frontend.workload import run_workload_file

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
# name -> (example, config, config overrides, workload parameters)
WORKLOADS = {
    "vector_add-a3": ("vector_add.py", "a3", [], {}),
    "kv_cache_quant_scatter-a2": ("kv_cache_quant_scatter.py", "a2", [], {}),
    "quant_scatter_doc_example2-a2": ("quant_scatter_doc_example2.py", "a2", [], {}),
    "shmem_allreduce-a2": ("shmem_allreduce.py", "a2", [], {}),
    "shmem_allgather-a2": ("shmem_allgather.py", "a2", [], {}),
    "shmem_allgather-a3": ("shmem_allgather.py", "a3", [], {}),
    "shmem_allgather-a3x2": ("shmem_allgather.py", "a3", ["shape.nodes=2"], {"n_pes": 32}),
    "moe_dispatch-a3": ("moe_dispatch.py", "a3", [], {}),
    "hierarchical_allgather-a3x2": ("hierarchical_allgather.py", "a3", ["shape.nodes=2"], {}),
}


def run(name: str, quantum: str | None) -> tuple[int, int, float]:
    """(simulated ps, recomputations, CPU seconds) of workload ``name``."""
    example, config, overrides, params = WORKLOADS[name]
    start = time.process_time()
    with contextlib.redirect_stdout(io.StringIO()):
        with npusim.session(config, overrides=overrides, data=False, params=params, network_quantum=quantum) as s:
            run_workload_file(EXAMPLES / example)
    return s.result.simulated_ps, s.system.network.recomputations, time.process_time() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quanta", default="1ns,10ns,100ns", help="comma-separated quanta to compare with the exact network")
    parser.add_argument("--only", default=",".join(WORKLOADS), help="comma-separated workloads")
    args = parser.parse_args()
    print(running_on())
    names = [n.strip() for n in args.only.split(",") if n.strip()]
    unknown = [n for n in names if n not in WORKLOADS]
    if unknown:
        parser.error(f"unknown workload {', '.join(unknown)}; choose from {', '.join(WORKLOADS)}")
    quanta = [q.strip() for q in args.quanta.split(",") if q.strip()]
    print(f"{'workload':<30} {'quantum':>8} {'sim us':>10} {'error %':>8} {'recomp':>8} {'cpu s':>7} {'speed-up':>8}")
    for name in names:
        exact_ps, recomputations, exact_cpu = run(name, None)
        print(f"{name:<30} {'exact':>8} {exact_ps / 1e6:>10.3f} {'':>8} {recomputations:>8,} {exact_cpu:>7.2f}", flush=True)
        for quantum in quanta:
            ps, recomputations, cpu = run(name, quantum)
            error = (ps - exact_ps) / exact_ps * 100
            print(f"{name:<30} {quantum:>8} {ps / 1e6:>10.3f} {error:>+8.3f} {recomputations:>8,} {cpu:>7.2f} {exact_cpu / cpu:>8.2f}",
                  flush=True)


if __name__ == "__main__":
    main()
