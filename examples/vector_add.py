"""Double-buffered vector add, z = x + y in fp16, over every vector core of die 0.

A kernel written in npusim's ISA, as an Ascend C kernel would be: each AIV core streams its share of
x and y from HBM into UB (MTE2), adds them (VECTOR) and writes z back (MTE3), with two UB buffers per
operand (z overwrites x in UB) so that the loads of tile t+1 overlap the add and store of tile t. 48 cores moving 36 MiB
through one HBM show bandwidth sharing: each core's MTE2 could move more than its share alone.

Run: npusim run --config a3 examples/vector_add.py
"""

import numpy as np

import npusim
from npusim import isa

TILE = 16384  # fp16 elements per tile: 32 KiB per buffer, 4 buffers = 128 KiB of the 192 KiB UB
TILES_PER_CORE = 8


def build_vector_add(x, y, z, die: int = 0, cores: int | None = None) -> isa.Kernel:
    """The per-core programs of z = x + y, double-buffered."""
    kernel = isa.Kernel("vector_add", die=die)
    cores = cores or kernel.die.spec.aiv_count
    per_core = x.size // cores
    for core in range(cores):
        p = kernel.aiv(core)
        buffers = [[p.alloc(TILE, np.float16) for _ in range(2)] for _ in range(2)]  # [ping|pong][x (then z), y]
        for t in range(per_core // TILE):
            xb, yb = buffers[t % 2]
            event = t % 2
            offset = core * per_core + t * TILE
            with p.tile(t):
                if t >= 2:
                    p.wait_flag("MTE3", "MTE2", event)  # the store that used these buffers is done
                p.copy(xb, isa.gm(x, offset), name="load x")
                p.copy(yb, isa.gm(y, offset), name="load y")
                p.set_flag("MTE2", "VECTOR", event)
                p.wait_flag("MTE2", "VECTOR", event)
                p.add(xb, xb, yb)
                p.set_flag("VECTOR", "MTE3", event)
                p.wait_flag("VECTOR", "MTE3", event)
                p.copy(isa.gm(z, offset), xb, name="store z")
                p.set_flag("MTE3", "MTE2", event)
    return kernel


def main() -> None:
    session = npusim.current_session()
    cores = session.config.spec.die.aiv_count
    n = cores * TILES_PER_CORE * TILE
    rng = np.random.default_rng(0)
    x_host = rng.standard_normal(n).astype(np.float16)
    y_host = rng.standard_normal(n).astype(np.float16)
    x, y = npusim.tensor(x_host), npusim.tensor(y_host)
    z = npusim.zeros(n, np.float16)

    build_vector_add(x, y, z).launch()
    npusim.synchronize()

    moved = 3 * n * 2
    hbm = session.config.spec.die.hbm.bandwidth.bytes_per_second(session.config.spec.die.clock.hz)
    achieved = moved / (session.now_us * 1e-6)
    print(f"vector_add: {n} fp16 elements on {cores} vector cores in {session.now_us:.2f} us simulated")
    print(f"  HBM traffic {moved / 2**20:.1f} MiB at {achieved / 1e9:.0f} GB/s ({achieved / hbm:.0%} of the {hbm / 1e12:.2f} TB/s peak)")
    if session.with_data:
        expected = (x_host.astype(np.float32) + y_host.astype(np.float32)).astype(np.float16)
        if not np.array_equal(z.numpy(), expected):
            raise AssertionError("vector_add: z differs from numpy's x + y")
        print("  output matches numpy: yes")
