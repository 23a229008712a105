"""Small workloads of the analysis tests, written to files as a user would write them."""

from pathlib import Path

# Every vector core of die 0 copies its share of a fixed-size tensor through UB (GM -> UB -> GM).
# 48 MTE2 engines ask for about 8.5 TB/s; one HBM gives 1.6 TB/s: HBM-bound, whatever the core count.
HBM_BOUND_COPY = '''
import numpy as np
import npusim
from npusim import isa

elements = npusim.param("elements", 48 * 4 * 32768, "fp16 elements copied")
tile = npusim.param("tile", 32768, "elements per tile")
fail_tile = npusim.param("fail_tile", 0, "a tile size for which the workload raises (0: never)")
if tile == fail_tile:
    raise ValueError(f"tile {tile} is the failing value")
cores = npusim.current_session().config.spec.die.cores["aiv"].count
x = npusim.empty(elements, np.float16)
y = npusim.empty(elements, np.float16)
kernel = isa.Kernel("copy", die=0)
tiles = elements // tile
for core in range(cores):
    p = kernel.aiv(core)
    ub = p.alloc(tile, np.float16)
    for t in range(core * tiles // cores, (core + 1) * tiles // cores):
        p.copy(ub, isa.gm(x, t * tile))
        p.set_flag("MTE2", "MTE3", 0)
        p.wait_flag("MTE2", "MTE3", 0)
        p.copy(isa.gm(y, t * tile), ub)
        p.set_flag("MTE3", "MTE2", 0)
        p.wait_flag("MTE3", "MTE2", 0)
kernel.launch()
'''

# Eight vector cores of die 0 load a tensor that lives in die 1's HBM: every byte crosses the one
# HCCS link from die 1 to die 0 (about 26 GB/s), far below HBM and the engines.
LINK_BOUND_REMOTE_LOAD = '''
import numpy as np
import npusim
from npusim import isa

cores = npusim.param("cores", 8, "vector cores loading")
tiles = npusim.param("tiles", 4, "tiles per core")
tile = 8192
remote = npusim.empty(cores * tiles * tile, np.float16, device=1)
kernel = isa.Kernel("remote_load", die=0)
for core in range(cores):
    p = kernel.aiv(core)
    ub = p.alloc(tile, np.float16)
    for t in range(tiles):
        p.copy(ub, isa.gm(remote, (core * tiles + t) * tile))
kernel.launch()
'''

# Eight vector cores of die 0 store UB tiles into die 1's HBM: posted writes over the one HCCS link
# from die 0 to die 1, which its write credits cap (a2: 6.1 KiB / 300 ns, about 21 GB/s) below its
# bandwidth (about 28 GB/s): credit-bound.
CREDIT_BOUND_REMOTE_STORE = '''
import numpy as np
import npusim
from npusim import isa

cores = npusim.param("cores", 8, "vector cores storing")
tiles = npusim.param("tiles", 4, "tiles per core")
tile = 8192
remote = npusim.empty(cores * tiles * tile, np.float16, device=1)
kernel = isa.Kernel("remote_store", die=0)
for core in range(cores):
    p = kernel.aiv(core)
    ub = p.alloc(tile, np.float16)
    for t in range(tiles):
        p.copy(isa.gm(remote, (core * tiles + t) * tile), ub)
kernel.launch()
'''


def write(folder: Path, name: str, source: str) -> Path:
    """``source`` as the workload file ``folder/name``."""
    path = folder / name
    path.write_text(source)
    return path
