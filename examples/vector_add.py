"""Double-buffered vector add, z = x + y in fp16, over the vector cores of die 0.

A kernel written in npusim's ISA, as an Ascend C kernel would be: each AIV core streams its share of
x and y from HBM into UB (MTE2), adds them (VECTOR) and writes z back (MTE3), with two UB buffers per
operand (z overwrites x in UB) so that the loads of tile t+1 overlap the add and store of tile t. 48 cores moving 36 MiB
through one HBM show bandwidth sharing: each core's MTE2 could move more than its share alone.

Parameters (``--param NAME=VALUE``; the defaults are the demo): ``elements`` (the problem size, fixed
whatever the core count, so more cores share the same work), ``tile`` (elements per tile),
``cores`` (vector cores used; default all of the die's), ``double_buffer`` (off: one buffer per
operand, so load, add and store of a core run one after the other).

Run: npusim run --config a3 examples/vector_add.py
     npusim sweep --config a3 examples/vector_add.py --grid param.tile=4096,8192,16384 --grid param.double_buffer=true,false
"""

import numpy as np

import npusim
from npusim import isa
from npusim.errors import UsageError

TILE = 16384  # fp16 elements per tile: 32 KiB per buffer, 4 buffers = 128 KiB of the 192 KiB UB
ELEMENTS = 48 * 8 * TILE  # 8 tiles for each of the 48 vector cores of a 910B / 910C die


def build_vector_add(x, y, z, die: int = 0, cores: int | None = None, tile: int = TILE, double_buffer: bool = True) -> isa.Kernel:
    """The per-core programs of z = x + y: the tiles of ``tile`` elements are shared out evenly over
    ``cores`` cores (default: all of the die's), each core's in turn double-buffered (or not)."""
    if tile < 1 or x.size % tile:
        raise UsageError(f"vector_add: {x.size} elements do not split into tiles of {tile!r} elements; choose a tile that divides the size")
    kernel = isa.Kernel("vector_add", die=die)
    cores = cores or kernel.die.core_count("aiv")
    tiles = x.size // tile
    depth = 2 if double_buffer else 1
    for core in range(cores):
        p = kernel.aiv(core)
        buffers = [[p.alloc(tile, np.float16) for _ in range(2)] for _ in range(depth)]  # [ping|pong][x (then z), y]
        first, last = core * tiles // cores, (core + 1) * tiles // cores
        for t in range(last - first):
            xb, yb = buffers[t % depth]
            event = t % depth
            offset = (first + t) * tile
            with p.tile(t):
                if t >= depth:
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
    n = npusim.param("elements", ELEMENTS, "fp16 elements of x, y and z")
    tile = npusim.param("tile", TILE, "fp16 elements per tile and UB buffer")
    cores = npusim.param("cores", session.config.spec.die.cores["aiv"].count, "vector cores used")
    double_buffer = npusim.param("double_buffer", True, "two buffers per operand, so loads overlap the add and store")
    rng = np.random.default_rng(0)
    x_host = rng.standard_normal(n).astype(np.float16)
    y_host = rng.standard_normal(n).astype(np.float16)
    x, y = npusim.tensor(x_host), npusim.tensor(y_host)
    z = npusim.zeros(n, np.float16)

    build_vector_add(x, y, z, cores=cores, tile=tile, double_buffer=double_buffer).launch()
    npusim.synchronize()

    moved = 3 * n * 2
    hbm = session.config.spec.die.hbm.bandwidth.bytes_per_second(session.config.spec.die.clock.hz)
    seconds = session.now_us * 1e-6
    carried = sum(r.bytes_moved for r in session.system.record().resources if r.kind == "hbm")  # z's lines stay in L2 (write-back)
    print(f"vector_add: {n} fp16 elements on {cores} vector cores in {session.now_us:.2f} us simulated")
    print(f"  x, y read and z written: {moved / 2**20:.1f} MiB at {moved / seconds / 1e9:.0f} GB/s; the HBM carried {carried / 2**20:.1f} MiB "
          f"at {carried / seconds / 1e9:.0f} GB/s ({carried / seconds / hbm:.0%} of its {hbm / 1e12:.2f} TB/s peak; z stays in L2)")
    if session.with_data:
        expected = (x_host.astype(np.float32) + y_host.astype(np.float32)).astype(np.float16)
        if not np.array_equal(z.numpy(), expected):
            raise AssertionError("vector_add: z differs from numpy's x + y")
        print("  output matches numpy: yes")
