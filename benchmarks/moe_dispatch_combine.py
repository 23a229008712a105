"""Speed and memory of the MoE dispatch + combine with data: ``examples/moe_dispatch_combine.py``
(the framework's case: 8 tokens x 5120 bf16 per rank, 160 experts, top-8) run as a user runs it,
``npusim run --config a3 [--set shape.nodes=N]`` with its timeline and bottleneck report.

    python benchmarks/moe_dispatch_combine.py [--nodes 1,2] [--repeat 3]

Each run is a fresh ``npusim run`` process (its wall, its CPU seconds and its peak resident memory
are its own, the CPU and memory from the process's rusage); its recorded events come from the run's summary. The baseline, measured
in the same run: a bare SimPy loop of as many timeouts in this process (``benchmarks/engine.py``),
so ``ratio`` = wall / bare says how far the run is from the engine's floor. Targets (issue 16): under
30 s wall and 2 GB peak on 16 dies.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from running_on import running_on

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
BARE_PROCESSES = 64  # the bare loop's timeouts are spread over this many SimPy processes


def one_run(nodes: int) -> dict:
    """One ``npusim run`` of the example: wall s, peak MB, events, simulated us, whether its outputs matched."""
    with tempfile.TemporaryDirectory() as out:
        command = [sys.executable, "-m", "npusim", "run", "--config", "a3", "--set", f"shape.nodes={nodes}",
                   str(ROOT / "examples" / "moe_dispatch_combine.py"), "--out", out]
        log = Path(out) / "stdout.txt"
        with log.open("w") as stdout:
            start = time.perf_counter()
            child = subprocess.Popen(command, cwd=ROOT, stdout=stdout, stderr=subprocess.STDOUT)
            _, status, usage = os.wait4(child.pid, 0)
            wall = time.perf_counter() - start
        printed = log.read_text()
        if os.waitstatus_to_exitcode(status):
            raise SystemExit(f"npusim run on {nodes} node(s) failed:\n{printed}")
        summary = json.loads((Path(out) / "summary.json").read_text())
    return {"wall_s": wall, "cpu_s": usage.ru_utime + usage.ru_stime, "peak_mb": usage.ru_maxrss / 1024, "events": summary["events"], "simulated_us": summary["simulated_time_us"],
            "checked": "outputs match the expected dispatch and combine: yes" in printed}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", default="1,2", help="comma-separated a3 node counts (16 dies each)")
    parser.add_argument("--repeat", type=int, default=3, help="runs of each point (min and median are printed)")
    args = parser.parse_args()
    print(running_on())
    sys.path.insert(0, str(HERE))
    from engine import run_bare_simpy

    print(f"{'dies':>5} {'sim us':>8} {'events':>9} {'checked':>8} {'wall s min':>10} {'median':>7} {'cpu s min':>9} {'bare s':>7} {'ratio':>6} {'peak MB':>8}")
    for nodes in (int(n) for n in args.nodes.split(",")):
        runs = [one_run(nodes) for _ in range(args.repeat)]
        first = runs[0]
        bare = run_bare_simpy(BARE_PROCESSES, max(1, first["events"] // BARE_PROCESSES))
        walls = [r["wall_s"] for r in runs]
        checked = "yes" if all(r["checked"] for r in runs) else "NO"
        print(f"{16 * nodes:>5} {first['simulated_us']:>8.2f} {first['events']:>9,} {checked:>8} {min(walls):>10.2f} "
              f"{statistics.median(walls):>7.2f} {min(r['cpu_s'] for r in runs):>9.2f} {bare:>7.2f} {min(walls) / bare:>6.1f} {max(r['peak_mb'] for r in runs):>8.0f}", flush=True)


if __name__ == "__main__":
    main()
