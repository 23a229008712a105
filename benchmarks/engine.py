"""Engine speed: events per second of npusim on a many-core DMA + vector pipeline, against a bare
SimPy loop that runs the same number of timeouts, measured in the same process.

    python benchmarks/engine.py [--cores 48] [--tiles 64] [--repeat 3]

Prints the engine's rate (simulating the built programs) and the end-to-end rate (config, building
the per-core programs, checking them for pipe races and simulating), each against bare SimPy as a
ratio (target: the engine at least 0.5 of bare SimPy), and what the race check costs end to end.
Timing only (``data=False``), as a sweep runs; with data also printed.
"""

from __future__ import annotations

import argparse
import gc
import time

import numpy as np
import simpy
from running_on import running_on

import npusim
from npusim import isa
from npusim.frontend.session import GC_YOUNG_THRESHOLD


def build_pipeline(cores: int, tiles: int, tile_elems: int) -> None:
    """Per core: for each tile, load (MTE2), two vector ops, store (MTE3), double-buffered."""
    x = npusim.empty(cores * tiles * tile_elems, np.float16)
    z = npusim.empty(cores * tiles * tile_elems, np.float16)
    kernel = isa.Kernel("pipeline", die=0)
    for core in range(cores):
        p = kernel.aiv(core)
        buffers = [p.alloc(tile_elems, np.float16) for _ in range(2)]
        for t in range(tiles):
            event, buffer = t % 2, buffers[t % 2]
            offset = (core * tiles + t) * tile_elems
            if t >= 2:
                p.wait_flag("MTE3", "MTE2", event)
            p.copy(buffer, isa.gm(x, offset))
            p.set_flag("MTE2", "VECTOR", event)
            p.wait_flag("MTE2", "VECTOR", event)
            p.muls(buffer, buffer, 2.0)
            p.adds(buffer, buffer, 1.0)
            p.set_flag("VECTOR", "MTE3", event)
            p.wait_flag("VECTOR", "MTE3", event)
            p.copy(isa.gm(z, offset), buffer)
            p.set_flag("MTE3", "MTE2", event)
    kernel.launch()


def run_npusim(cores: int, tiles: int, tile_elems: int, data: bool, races: str = "warn") -> tuple[int, float, float]:
    """Events, seconds simulating, seconds end to end (the pipe-race check runs at launch, when building)."""
    start = time.perf_counter()
    with npusim.session("a3", data=data, races=races) as s:
        build_pipeline(cores, tiles, tile_elems)
        built = time.perf_counter()
        s.synchronize()
        simulated = time.perf_counter()
    return len(s.result.recorder), simulated - built, time.perf_counter() - start


def run_bare_simpy(processes: int, timeouts_per_process: int) -> float:
    """The same number of timeouts in plain SimPy processes (one per pipe of each core), under
    the garbage-collector setting a session runs with, so that both sides get it."""
    env = simpy.Environment()

    def loop(n: int):
        for i in range(n):
            yield env.timeout(1 + (i % 7))

    thresholds = gc.get_threshold()
    gc.set_threshold(max(thresholds[0], GC_YOUNG_THRESHOLD), *thresholds[1:])
    try:
        start = time.perf_counter()
        for _ in range(processes):
            env.process(loop(timeouts_per_process))
        env.run()
        return time.perf_counter() - start
    finally:
        gc.set_threshold(*thresholds)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cores", type=int, default=48)
    parser.add_argument("--tiles", type=int, default=64)
    parser.add_argument("--tile-elems", type=int, default=8192)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    print(running_on())

    best = {"engine": float("inf"), "end_to_end": float("inf"), "end_to_end_unchecked": float("inf"), "engine_data": float("inf"), "bare": float("inf")}
    events = 0
    for _ in range(args.repeat):
        events, engine, total = run_npusim(args.cores, args.tiles, args.tile_elems, data=False)
        best["engine"], best["end_to_end"] = min(best["engine"], engine), min(best["end_to_end"], total)
        processes = args.cores * 3  # MTE2, VECTOR, MTE3 pipes
        best["bare"] = min(best["bare"], run_bare_simpy(processes, events // processes))
        _, engine_data, _ = run_npusim(args.cores, args.tiles, args.tile_elems, data=True)
        best["engine_data"] = min(best["engine_data"], engine_data)
        _, _, unchecked = run_npusim(args.cores, args.tiles, args.tile_elems, data=False, races="off")
        best["end_to_end_unchecked"] = min(best["end_to_end_unchecked"], unchecked)
    rate = {key: events / seconds for key, seconds in best.items()}
    print(f"pipeline: {args.cores} cores x {args.tiles} tiles of {args.tile_elems} fp16, {events} events (best of {args.repeat})")
    print(f"bare SimPy timeouts/s:         {rate['bare']:>12,.0f}")
    print(f"npusim engine events/s:        {rate['engine']:>12,.0f}   ratio {rate['engine'] / rate['bare']:.2f}  (target >= 0.5)")
    print(f"npusim end-to-end events/s:    {rate['end_to_end']:>12,.0f}   ratio {rate['end_to_end'] / rate['bare']:.2f}")
    print(f"npusim engine with data:       {rate['engine_data']:>12,.0f}   ratio {rate['engine_data'] / rate['bare']:.2f}")
    print(f"end-to-end, race check off:    {rate['end_to_end_unchecked']:>12,.0f}   the check costs "
          f"{best['end_to_end'] / best['end_to_end_unchecked'] - 1:.1%} of the end-to-end time")


if __name__ == "__main__":
    main()
