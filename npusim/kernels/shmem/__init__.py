"""PyPTO's distributed shared-memory (shmem) ops: the parts that need no simulated hardware.

- :mod:`.dtypes`: PyPTO's ``DataType``, ``AtomicType`` and ``OpType`` (the ``pypto`` facade re-exports them);
- :mod:`.checks`: each op's argument checks, raising OpArgumentError;
- :mod:`.tiling`: the expansion of an op into tile ops and the split of its pred tokens;
- :mod:`.layout`: signal slot numbering, data/signal area sizes, and the per-group window accounting;
- :mod:`.tile_ops`: the ISA programs of the tile ops; :mod:`.races`: the data races between them.

Every PyPTO op's build checks, tiles and lays out its arguments here, and every tile op's program
and race record is made here while the launch runs, so :mod:`.checks`, :mod:`.tiling`, :mod:`.layout`,
:mod:`.tile_ops` and :mod:`.races` are typed to mypy's strict level and run compiled with the engine (setup.py: mypyc), or as Python with it: :mod:`npusim.engine`
chooses for all, and where it chose the compiled modules this package finds them in the build's
``kernels/shmem/`` folder before the sources.

See ``docs/shmem.md`` for the ops' signatures and semantics and where each fact comes from.
"""

from npusim.engine import compiled_first

compiled_first(__name__, __path__)

from npusim.kernels.shmem.layout import ShmemAllocation, ShmemGroup, ShmemGroupRegistry, SignalGrid  # noqa: E402  (after the choice: it sets where they are found)
from npusim.kernels.shmem.tiling import MAX_TILES_PER_OP, Region, Tile, expand_tiles, split_pred, tile_grid  # noqa: E402

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
