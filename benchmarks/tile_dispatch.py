"""What starting a PyPTO tile op costs: the all-gather of ``examples/shmem_allgather.py`` on a3, timing only.

    python benchmarks/tile_dispatch.py [--nodes 1] [--n-pes 16] [--repeat 3] [--against OTHER/.venv/bin/python]

Each run is a fresh process (no cache carries over from one to the next) running the workload as
``npusim run --config a3 examples/shmem_allgather.py --no-data`` does, without writing the run
folder; it prints, min and median of ``--repeat`` runs: the session's CPU seconds (building and
simulating) and the CPU us of starting one tile op (``CoreTask.start``: access records, building
the program, the race check, the launch). With ``--against``, the same runs of a baseline
checkout's interpreter interleaved with these (the machine is shared: CPU time, interleaved), and
the ratios baseline / this.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

from running_on import running_on

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "shmem_allgather.py"


def measure(nodes: int, n_pes: int | None) -> dict:
    """One session: its CPU seconds, the tile ops started and the CPU seconds their starts took."""
    import npusim
    from npusim.frontend.workload import run_workload_file
    from npusim.runtime import tasks

    spent = [0.0, 0]
    start = tasks.CoreTask.start

    def timed(self, core):
        began = time.process_time()
        try:
            return start(self, core)
        finally:
            spent[0] += time.process_time() - began
            spent[1] += 1

    tasks.CoreTask.start = timed
    params = {} if n_pes is None else {"n_pes": n_pes}
    try:
        cpu = time.process_time()
        with contextlib.redirect_stdout(io.StringIO()):
            with npusim.session("a3", overrides=[f"shape.nodes={nodes}"], data=False, params=params):
                run_workload_file(EXAMPLE)
        cpu = time.process_time() - cpu
    finally:
        tasks.CoreTask.start = start
    return {"session_cpu_s": cpu, "tile_ops": spent[1], "start_cpu_s": spent[0], "per_tile_op_us": spent[0] / max(spent[1], 1) * 1e6}


def in_subprocess(python: str, nodes: int, n_pes: int | None) -> dict:
    """One measurement in a fresh process of ``python`` (its checkout's npusim): no cache carries over."""
    command = [python, __file__, "--point", "--nodes", str(nodes)] + ([] if n_pes is None else ["--n-pes", str(n_pes)])
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode:
        raise SystemExit(f"{python} failed:\n{done.stderr}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=1)
    parser.add_argument("--n-pes", type=int, default=None)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--against", default=None, help="the interpreter of a baseline checkout, run interleaved with this one")
    parser.add_argument("--point", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    print(running_on())
    if args.point:
        print(json.dumps(measure(args.nodes, args.n_pes)))
        return
    pythons = {"this": sys.executable} | ({"baseline": args.against} if args.against else {})
    runs: dict[str, list[dict]] = {name: [] for name in pythons}
    for _ in range(args.repeat):
        for name, python in pythons.items():
            runs[name].append(in_subprocess(python, args.nodes, args.n_pes))
    for name, points in runs.items():
        session = sorted(r["session_cpu_s"] for r in points)
        per_op = sorted(r["per_tile_op_us"] for r in points)
        print(f"{name}: {points[0]['tile_ops']} tile ops; session CPU s min {session[0]:.3f} median {statistics.median(session):.3f}; "
              f"per tile op us min {per_op[0]:.1f} median {statistics.median(per_op):.1f}")
    if args.against:
        for key, what in (("session_cpu_s", "session CPU"), ("per_tile_op_us", "per tile op")):
            ratios = sorted(b[key] / t[key] for t, b in zip(runs["this"], runs["baseline"]))
            print(f"baseline / this, {what}: min {ratios[0]:.2f} median {statistics.median(ratios):.2f}")


if __name__ == "__main__":
    main()
