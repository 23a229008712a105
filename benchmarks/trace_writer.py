"""Trace writer: size, speed and extra memory of writing a run's Chrome trace (trace.json).

    python benchmarks/trace_writer.py [--workload pipeline|allgather] [--tiles 2100] [--nodes 1] [--n-pes N]
                                      [--repeat 3] [--against OTHER/.venv/bin/python]

``pipeline`` (the default) simulates the engine benchmark's pipeline (48 vector cores, each tile:
MTE2 load, two vector ops, MTE3 store, double-buffered with flags; timing only) long enough for
about a million events; ``allgather`` the README's main job (``examples/shmem_allgather.py`` on
a3, timing only; ``--nodes 2 --n-pes 32`` for the two-node run), whose trace is mostly counters.
The run is simulated once, here; its record (``RunRecord``, pickled) is written by a fresh process
per measurement. Prints, min and median of ``--repeat`` processes (each the best of two writes),
the writer's CPU seconds and events written per second, the trace's bytes per event and the
writer's peak extra memory (tracemalloc, during a write) as a ratio to the recorder's own columns.
With ``--against``, the same writes by a baseline checkout's interpreter interleaved with these
(the machine is shared: CPU time, interleaved), the ratios baseline / this, and whether both wrote
the same bytes.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import io
import json
import pickle
import statistics
import subprocess
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

from running_on import running_on

HERE = Path(__file__).resolve().parent
EXAMPLE = HERE.parent / "examples" / "shmem_allgather.py"


def simulate(args: argparse.Namespace) -> object:
    """The finished run's record of the chosen workload."""
    import npusim

    if args.workload == "pipeline":
        sys.path.insert(0, str(HERE))
        from engine import build_pipeline  # the engine benchmark's workload

        with npusim.session("a3", data=False) as session:
            build_pipeline(args.cores, args.tiles, args.tile_elems)
    else:
        from npusim.frontend.workload import run_workload_file

        params = {} if args.n_pes is None else {"n_pes": args.n_pes}
        with contextlib.redirect_stdout(io.StringIO()), npusim.session("a3", overrides=[f"shape.nodes={args.nodes}"], data=False, params=params) as session:
            run_workload_file(EXAMPLE)
    return session.result.record


def measure(record_path: Path) -> dict:
    """Write the pickled record's trace twice (the best CPU time counts), then once under tracemalloc."""
    from npusim.trace.chrome import write_chrome_trace

    record = pickle.loads(record_path.read_bytes())
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "trace.json"
        best = float("inf")
        for _ in range(2):
            start = time.process_time()
            write_chrome_trace(record, path)
            best = min(best, time.process_time() - start)
        tracemalloc.start()
        tracemalloc.reset_peak()
        write_chrome_trace(record, path)
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        written = path.read_bytes()
    recorder = record.recorder
    return {"cpu_s": best, "events": len(recorder), "flows": recorder.flow_count, "bytes": len(written), "sha256": hashlib.sha256(written).hexdigest(),
            "peak_mib": peak / 2**20, "columns_mib": recorder.nbytes / 2**20}


def in_subprocess(python: str, record_path: Path) -> dict:
    """One measurement in a fresh process of ``python`` (its checkout's writer)."""
    done = subprocess.run([python, __file__, "--point", str(record_path)], capture_output=True, text=True, check=False)
    if done.returncode:
        raise SystemExit(f"{python} failed:\n{done.stderr}")
    result: dict = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workload", choices=("pipeline", "allgather"), default="pipeline")
    parser.add_argument("--cores", type=int, default=48)
    parser.add_argument("--tiles", type=int, default=2100)
    parser.add_argument("--tile-elems", type=int, default=8192)
    parser.add_argument("--nodes", type=int, default=1)
    parser.add_argument("--n-pes", type=int, default=None)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--against", default=None, help="the interpreter of a baseline checkout, run interleaved with this one")
    parser.add_argument("--point", type=Path, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    print(running_on())
    if args.point is not None:
        print(json.dumps(measure(args.point)))
        return
    pythons = {"this": sys.executable} | ({"baseline": args.against} if args.against else {})
    runs: dict[str, list[dict]] = {name: [] for name in pythons}
    with tempfile.TemporaryDirectory() as folder:
        record_path = Path(folder) / "record.pickle"
        record_path.write_bytes(pickle.dumps(simulate(args), protocol=pickle.HIGHEST_PROTOCOL))
        for _ in range(args.repeat):
            for name, python in pythons.items():
                runs[name].append(in_subprocess(python, record_path))
    first = runs["this"][0]
    print(f"trace of {first['events']:,} events ({first['flows']:,} recorded flows), recorder columns {first['columns_mib']:.1f} MiB; "
          f"{first['bytes'] / 2**20:.1f} MiB, {first['bytes'] / first['events']:.1f} bytes per event")
    for name, points in runs.items():
        cpu = sorted(point["cpu_s"] for point in points)
        peak = max(point["peak_mib"] for point in points)
        print(f"{name}: writer CPU s min {cpu[0]:.3f} median {statistics.median(cpu):.3f} = {first['events'] / cpu[0]:,.0f} events/s (best); "
              f"peak extra memory {peak:.1f} MiB = {peak / first['columns_mib']:.2f} x the recorder's columns")
    if args.against:
        ratios = sorted(b["cpu_s"] / t["cpu_s"] for t, b in zip(runs["this"], runs["baseline"]))
        same = {point["sha256"] for points in runs.values() for point in points}
        print(f"baseline / this, writer CPU: min {ratios[0]:.2f} median {statistics.median(ratios):.2f}; same bytes: {'yes' if len(same) == 1 else 'NO'}")


if __name__ == "__main__":
    main()
