"""PyPTO's distributed shared-memory (shmem) ops: the parts that need no simulated hardware.

- :mod:`.dtypes`: PyPTO's ``DataType``, ``AtomicType`` and ``OpType`` (the ``pypto`` facade re-exports them);
- :mod:`.checks`: each op's argument checks, raising OpArgumentError;
- :mod:`.tiling`: the expansion of an op into tile ops and the split of its pred tokens;
- :mod:`.layout`: signal slot numbering, data/signal area sizes, and the per-group window accounting.

See ``docs/shmem.md`` for the ops' signatures and semantics and where each fact comes from.
"""

from npusim.kernels.shmem.layout import ShmemAllocation, ShmemGroup, ShmemGroupRegistry, SignalGrid
from npusim.kernels.shmem.tiling import MAX_TILES_PER_OP, Region, Tile, expand_tiles, split_pred, tile_grid

__all__ = [
    "MAX_TILES_PER_OP",
    "Region",
    "ShmemAllocation",
    "ShmemGroup",
    "ShmemGroupRegistry",
    "SignalGrid",
    "Tile",
    "expand_tiles",
    "split_pred",
    "tile_grid",
]
