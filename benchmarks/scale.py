"""How the simulator scales with dies: the SuperPoD collectives of ``examples/`` at 16 to 768 dies.

    python benchmarks/scale.py [--dies 16,32,128,768] [--only moe_dispatch,hierarchical_allgather,hccl_allreduce]
                               [--network-quantum 10ns] [--repeat 1]

Each point is a fresh process (so its peak memory is its own) running, timing only, the a3 config
with ``shape.nodes = dies / 16``:

- ``moe_dispatch``: ``examples/moe_dispatch.py``, EP groups of 16 PEs (one node each), 4 tokens x
  4096 fp16 (32 KiB) per destination;
- ``hierarchical_allgather``: ``examples/hierarchical_allgather.py``, 4 x 1024 fp16 (8 KiB) per PE,
  within each node then across nodes (with a 2 MiB signal window, which 768 PEs need);
- ``moe_decode_layer``: ``examples/moe_decode_layer.py``, one DeepSeek-V3 MoE layer on every die
  (128 tokens a rank, 7168 hidden, top-8, 2048 per expert; 16 experts a die at 16 dies, one past
  256), with a 3 GiB HCCL window (what 768 ranks need). Not in the default ``--only``: it takes
  tens of minutes past 128 dies (docs/moe.md, "Limits").
- ``hccl_allreduce``: ``examples/hccl_allreduce.py``, HCCL's all-reduce of 256 MiB of fp16 over
  every die, with the algorithms HCCL picks (docs/collectives.md; on 768 dies: double ring in each
  node, then NHR across the 48 nodes); bound 120 s and 8 GB at 768 dies (issue 30).

For each: simulated us, recorded events, the session's wall seconds (building the programs and
simulating; best of ``--repeat``) and CPU seconds (the same and the summary), events per wall second, a bare SimPy loop of as many timeouts in the
same process, their ratio, the peak resident memory and the bytes per event above an empty session
of the same config; then, per collective, the exponent ``b`` of wall ~ dies^b fitted over the points.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import math
import resource
import subprocess
import sys
import time
from pathlib import Path

from running_on import running_on

HERE = Path(__file__).resolve().parent
EXAMPLES = HERE.parent / "examples"
DIES_PER_NODE = 16  # an a3 node
WORKLOADS = {
    "moe_dispatch": {"ep": 16, "tokens": 4, "hidden": 4096, "tile_tokens": 4},
    "hierarchical_allgather": {"rows": 4, "cols": 1024},
    "moe_decode_layer": {},
    "hccl_allreduce": {"op": "allreduce", "mib": 256.0},
}
OVERRIDES = {"moe_dispatch": [], "hierarchical_allgather": ["shmem.signal_window=2MiB"],  # 48 nodes x 768 PEs of signal slots
             "moe_decode_layer": ["hccl.buffer=3GiB"], "hccl_allreduce": []}
DEFAULT = ("moe_dispatch", "hierarchical_allgather")
BARE_PROCESSES = 64  # the bare loop's timeouts are spread over this many SimPy processes


def point(workload: str, dies: int, quantum: str | None) -> dict:
    """One run in this process: the figures of the module doc."""
    from engine import run_bare_simpy

    import npusim
    from npusim.frontend.workload import run_workload_file

    overrides = [f"shape.nodes={dies // DIES_PER_NODE}", *OVERRIDES[workload]]
    with npusim.session("a3", overrides=overrides, data=False):  # an empty session: the memory every run starts from
        pass
    empty_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    cpu = time.process_time()
    with contextlib.redirect_stdout(io.StringIO()):
        with npusim.session("a3", overrides=overrides, data=False, params=WORKLOADS[workload], network_quantum=quantum) as s:
            run_workload_file(EXAMPLES / f"{workload}.py")
    cpu = time.process_time() - cpu
    result = s.result
    events = len(result.recorder)
    peak_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    bare = run_bare_simpy(BARE_PROCESSES, max(1, events // BARE_PROCESSES))
    return {"workload": workload, "dies": dies, "simulated_us": result.simulated_us, "events": events,
            "wall_s": result.wall_seconds, "cpu_s": cpu, "bare_s": bare, "recomputations": s.system.network.recomputations,
            "peak_mb": peak_kb / 1024, "bytes_per_event": (peak_kb - empty_kb) * 1024 / max(events, 1)}


def in_subprocess(workload: str, dies: int, quantum: str | None) -> dict:
    command = [sys.executable, __file__, "--point", workload, str(dies)] + (["--network-quantum", quantum] if quantum else [])
    done = subprocess.run(command, capture_output=True, text=True, cwd=HERE)
    if done.returncode:
        raise SystemExit(f"{workload} on {dies} dies failed:\n{done.stderr}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def exponent(rows: list[dict]) -> float:
    """The least-squares slope of log(wall) against log(dies)."""
    xs = [math.log(r["dies"]) for r in rows]
    ys = [math.log(r["wall_s"]) for r in rows]
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dies", default="16,32,128,768", help="comma-separated die counts (multiples of 16, at most 768)")
    parser.add_argument("--only", default=",".join(DEFAULT), help=f"comma-separated workloads to run, of {', '.join(WORKLOADS)}")
    parser.add_argument("--network-quantum", help="run the network with this time quantum (e.g. 10ns); default exact")
    parser.add_argument("--repeat", type=int, default=1, help="runs of each point; the fastest is kept")
    parser.add_argument("--point", nargs=2, metavar=("WORKLOAD", "DIES"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    print(running_on())
    if args.point:
        sys.path.insert(0, str(HERE))
        print(json.dumps(point(args.point[0], int(args.point[1]), args.network_quantum)))
        return
    dies = [int(d) for d in args.dies.split(",")]
    if any(d % DIES_PER_NODE or not 16 <= d <= 768 for d in dies):
        parser.error(f"--dies {args.dies}: each must be a multiple of {DIES_PER_NODE} from 16 to 768")
    names = [n.strip() for n in args.only.split(",") if n.strip()]
    unknown = [n for n in names if n not in WORKLOADS]
    if unknown:
        parser.error(f"unknown collective {', '.join(unknown)}; choose from {', '.join(WORKLOADS)}")
    print(f"network: {'quantum ' + args.network_quantum if args.network_quantum else 'exact'}")
    print(f"{'collective':<24} {'dies':>5} {'sim us':>8} {'events':>9} {'recomp':>8} {'wall s':>8} {'cpu s':>8} {'events/s':>9} "
          f"{'bare/s':>10} {'ratio':>6} {'peak MB':>8} {'B/event':>8}")
    for name in names:
        rows = []
        for count in dies:
            best = min((in_subprocess(name, count, args.network_quantum) for _ in range(args.repeat)), key=lambda r: r["wall_s"])
            rows.append(best)
            rate, bare_rate = best["events"] / best["wall_s"], best["events"] / best["bare_s"]
            print(f"{name:<24} {count:>5} {best['simulated_us']:>8.2f} {best['events']:>9,} {best['recomputations']:>8,} "
                  f"{best['wall_s']:>8.2f} {best['cpu_s']:>8.2f} {rate:>9,.0f} {bare_rate:>10,.0f} {rate / bare_rate:>6.3f} {best['peak_mb']:>8.0f} "
                  f"{best['bytes_per_event']:>8.0f}", flush=True)
        if len(rows) > 1:
            print(f"{name}: wall grows as dies^{exponent(rows):.2f} over {dies[0]}-{dies[-1]} dies")


if __name__ == "__main__":
    main()
