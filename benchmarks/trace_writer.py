"""Trace writer: size, speed and extra memory of writing a 1 M-event trace.

    python benchmarks/trace_writer.py [--tiles 2100] [--repeat 2]

Simulates the engine benchmark's pipeline (48 vector cores, each tile: MTE2 load, two vector ops,
MTE3 store, double-buffered with flags; timing only) long enough for about a million events, then
writes its Chrome trace. Prints the trace's bytes per event, the events written per second (best
of ``--repeat``), and the writer's peak extra memory (tracemalloc, during the write only) as a
ratio to the memory of the recorder's own columns.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

import npusim
from npusim.trace.chrome import write_chrome_trace

sys.path.insert(0, str(Path(__file__).resolve().parent))
from engine import build_pipeline  # noqa: E402  (the engine benchmark's workload)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cores", type=int, default=48)
    parser.add_argument("--tiles", type=int, default=2100)
    parser.add_argument("--tile-elems", type=int, default=8192)
    parser.add_argument("--repeat", type=int, default=2)
    args = parser.parse_args()

    with npusim.session("a3", data=False) as session:
        build_pipeline(args.cores, args.tiles, args.tile_elems)
    record = session.result.record
    recorder = record.recorder
    events = len(recorder)

    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "trace.json"
        best = float("inf")
        for _ in range(args.repeat):
            start = time.perf_counter()
            write_chrome_trace(record, path)
            best = min(best, time.perf_counter() - start)
        size = os.path.getsize(path)
        tracemalloc.start()
        tracemalloc.reset_peak()
        write_chrome_trace(record, path)
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()

    print(f"trace of {events:,} events ({recorder.flow_count:,} recorded flows), recorder columns {recorder.nbytes / 2**20:.1f} MiB")
    print(f"size:   {size / 2**20:9.1f} MiB   {size / events:6.1f} bytes per event")
    print(f"speed:  {events / best:>12,.0f} events/s   ({best:.2f} s, best of {args.repeat})")
    print(f"memory: {peak / 2**20:9.1f} MiB peak extra while writing = {peak / recorder.nbytes:.2f} x the recorder's columns")


if __name__ == "__main__":
    main()
