"""How PyPTO expands a shmem op into tile ops, and how it splits the op's pred tokens.

The framework (``shmem_expand_function.cpp``: DfsTiling, CalcTileCounts, CheckAllTileDims,
ViewNDTile; tutorial ``distributed_operation_tiling_guide.md``) tiles the op's data view by the current
vector tile shape ``[t1..tN]``: ``n_i = ceil(s_i / t_i)`` tiles per dim, visited row-major, tile offset
``idx_i * t_i``, tile shape ``min(s_i - offset_i, t_i)``. Tiles cover the whole view shape; a view with
a smaller valid shape gives each tile the valid part ``min(max(valid_i - offset_i, 0), shape_i)``, so a
tile outside the valid region is still a tile op but moves nothing.

A pred ("dummy") tensor is split into one piece per tile only if it has N dims and every
``p_i >= n_i``; each dim is then split evenly, the first ``p_i mod n_i`` pieces one larger. Otherwise
every tile op depends on the whole pred, i.e. on every tile op of the op that produced it.
"""

from __future__ import annotations

import functools
import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass

from npusim.errors import OpArgumentError
from npusim.kernels.shmem.checks import check_tile_shape

MAX_TENSOR_DIMS = 5
"""The most dims a tensor, a view of one or a vector tile shape may have: the framework's code
generator pads every shape to MAX_DIM = 5 dims (framework/src/codegen/codegen_common.h). Most
compute ops take fewer (kernels.compute.checks.MAX_DIMS)."""
MAX_TILES_PER_OP = 1023
"""At most 1023 tile ops per shmem op: the AICPU keeps shmem_wait_until tile ops in 1024-entry arrays
(one entry reserved), per the tiling guide."""


@dataclass(frozen=True)
class Region:
    """A box in a tensor: its offset and shape per dim."""

    offset: tuple[int, ...]
    shape: tuple[int, ...]


@dataclass(frozen=True)
class Tile:
    """One tile op's part of a view: its row-major ``index``, box within the view, and the part of
    the box inside the view's valid region (a dim of 0 means the tile moves nothing)."""

    index: int
    offset: tuple[int, ...]
    shape: tuple[int, ...]
    valid_shape: tuple[int, ...]

    @property
    def moves_data(self) -> bool:
        """True if some element of the tile is inside the valid region."""
        return all(v > 0 for v in self.valid_shape)


def tile_grid(shape: Sequence[int], tile_shape: Sequence[int]) -> tuple[int, ...]:
    """Tiles per dim: ``ceil(s_i / t_i)``."""
    return tuple(-(-s // t) for s, t in zip(shape, tile_shape))


def expand_tiles(
    shape: Sequence[int],
    tile_shape: Sequence[int] | None,
    valid_shape: Sequence[int] | None = None,
    *,
    op: str = "shmem op",
) -> list[Tile]:
    """The tiles of a view of ``shape`` (valid part ``valid_shape``, default all) in row-major order."""
    return list(_tiles_of(tuple(shape), tile_shape if tile_shape is None else tuple(tile_shape),
                          valid_shape if valid_shape is None else tuple(valid_shape), op))


@functools.lru_cache(maxsize=1024)
def _tiles_of(shape: tuple[int, ...], tile_shape: tuple[int, ...] | None, valid_shape: tuple[int, ...] | None,
              op: str) -> tuple[Tile, ...]:
    """:func:`expand_tiles`, kept per arguments (every tile op of a program asks for the tiles of
    the same few shapes; tiles are frozen, so the calls share them)."""
    check_tile_shape(op, tile_shape, len(shape))
    assert tile_shape is not None  # check_tile_shape refuses None
    grid = tile_grid(shape, tile_shape)
    count = math.prod(grid)
    if count > MAX_TILES_PER_OP:
        raise OpArgumentError(
            f"{op}: the tile shape {list(tile_shape)} splits the shape {list(shape)} into {count} tiles "
            f"({' x '.join(map(str, grid))}), more than the {MAX_TILES_PER_OP} tile ops a shmem op may have; "
            "set a larger tile shape with pypto.set_vec_tile_shapes(...)"
        )
    valid = shape if valid_shape is None else valid_shape
    tiles = []
    for index, position in enumerate(itertools.product(*(range(n) for n in grid))):
        offset = tuple(i * t for i, t in zip(position, tile_shape))
        box = tuple(min(s - o, t) for s, o, t in zip(shape, offset, tile_shape))
        inside = tuple(min(max(v - o, 0), b) for v, o, b in zip(valid, offset, box))
        tiles.append(Tile(index, offset, box, inside))
    return tuple(tiles)


def split_pred(pred_shape: Sequence[int], grid: Sequence[int]) -> list[Region] | None:
    """The piece of the pred each tile depends on (row-major, as the tiles), or None if the pred cannot
    be split (other number of dims, or a dim smaller than its tile count): then every tile depends on
    the whole pred."""
    pieces = _pred_pieces(tuple(pred_shape), tuple(grid))
    return None if pieces is None else list(pieces)


@functools.lru_cache(maxsize=1024)
def _pred_pieces(pred_shape: tuple[int, ...], grid: tuple[int, ...]) -> tuple[Region, ...] | None:
    """:func:`split_pred`, kept per arguments (regions are frozen, so the calls share them)."""
    if len(pred_shape) != len(grid) or any(p < n for p, n in zip(pred_shape, grid)):
        return None
    per_dim = [_even_split(p, n) for p, n in zip(pred_shape, grid)]
    return tuple(
        Region(tuple(offset for offset, _ in pieces), tuple(size for _, size in pieces))
        for pieces in itertools.product(*per_dim)
    )


def _even_split(size: int, parts: int) -> list[tuple[int, int]]:
    """``size`` cut into ``parts`` (offset, size) pieces, the first ``size % parts`` one larger."""
    base, larger = divmod(size, parts)
    pieces, offset = [], 0
    for i in range(parts):
        piece = base + 1 if i < larger else base
        pieces.append((offset, piece))
        offset += piece
    return pieces
