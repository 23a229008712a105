"""Tile expansion and pred splitting, against the tables of PyPTO's tiling guide."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from npusim.errors import OpArgumentError
from npusim.kernels.shmem.tiling import MAX_TILES_PER_OP, Region, Tile, expand_tiles, split_pred, tile_grid


def test_guide_example_128x512_by_64x256():
    tiles = expand_tiles([128, 512], [64, 256])
    assert [(t.index, t.offset, t.shape) for t in tiles] == [
        (0, (0, 0), (64, 256)),
        (1, (0, 256), (64, 256)),
        (2, (64, 0), (64, 256)),
        (3, (64, 256), (64, 256)),
    ]
    assert all(t.valid_shape == t.shape and t.moves_data for t in tiles)


def test_tail_tiles_are_clipped_and_row_major():
    tiles = expand_tiles([10, 7], [4, 5])
    assert tile_grid([10, 7], [4, 5]) == (3, 2)
    assert [(t.offset, t.shape) for t in tiles] == [
        ((0, 0), (4, 5)), ((0, 5), (4, 2)),
        ((4, 0), (4, 5)), ((4, 5), (4, 2)),
        ((8, 0), (2, 5)), ((8, 5), (2, 2)),
    ]


def test_valid_shape_clips_each_tile_and_outside_tiles_move_nothing():
    tiles = expand_tiles([128, 128], [64, 64], valid_shape=[100, 64])
    assert [t.valid_shape for t in tiles] == [(64, 64), (64, 0), (36, 64), (36, 0)]
    assert [t.moves_data for t in tiles] == [True, False, True, False]
    # tiles still cover the whole view shape: a tile op exists for every tile
    assert len(tiles) == 4


def test_three_and_four_dims():
    tiles = expand_tiles([2, 3, 4, 5], [1, 2, 4, 3])
    assert tile_grid([2, 3, 4, 5], [1, 2, 4, 3]) == (2, 2, 1, 2)
    assert len(tiles) == 8
    assert tiles[1] == Tile(1, (0, 0, 0, 3), (1, 2, 4, 2), (1, 2, 4, 2))


def test_each_call_gets_its_own_list_of_the_kept_tiles():
    """Tiles and pred pieces are kept per arguments (frozen, shared): a caller that changes its list
    changes no other caller's."""
    first = expand_tiles([10, 7], (4, 5), op="shmem_put")
    first.clear()
    assert expand_tiles((10, 7), [4, 5], op="shmem_put") == expand_tiles([10, 7], [4, 5])
    assert len(expand_tiles([10, 7], [4, 5], op="shmem_put")) == 6
    pieces = split_pred([10, 7], (3, 2))
    pieces.pop()
    assert len(split_pred((10, 7), [3, 2])) == 6


def test_at_most_1023_tiles():
    assert len(expand_tiles([1023, 8], [1, 8])) == MAX_TILES_PER_OP == 1023
    with pytest.raises(OpArgumentError) as error:
        expand_tiles([1024, 8], [1, 8], op="shmem_load")
    message = str(error.value)
    assert message.startswith("shmem_load: ")
    for part in ("[1, 8]", "[1024, 8]", "1024 tiles", "1024 x 1", "1023", "set_vec_tile_shapes"):
        assert part in message


def test_tile_shape_must_match_the_data_dims():
    with pytest.raises(OpArgumentError, match=r"shmem_get: tile_shape=\[64\] has 1 dims; it must have 2"):
        expand_tiles([128, 512], [64], op="shmem_get")
    with pytest.raises(OpArgumentError, match=r"tile_shape=\[\] is not set; call pypto.set_vec_tile_shapes"):
        expand_tiles([128, 512], [], op="shmem_get")


def test_guide_pred_split_10x7_into_3x2():
    pieces = split_pred([10, 7], (3, 2))
    assert [(p.shape, p.offset) for p in pieces] == [
        ((4, 4), (0, 0)),
        ((4, 3), (0, 4)),
        ((3, 4), (4, 0)),
        ((3, 3), (4, 4)),
        ((3, 4), (7, 0)),
        ((3, 3), (7, 4)),
    ]


def test_guide_pred_too_small_to_split():
    assert split_pred([2, 4], (3, 2)) is None


def test_pred_with_other_dims_or_default_token_is_not_split():
    assert split_pred([10, 7, 1], (3, 2)) is None
    assert split_pred([1, 1], (2, 1)) is None  # the [1, 1] token of pred=None
    assert split_pred([1, 1], (1, 1)) == [Region((0, 0), (1, 1))]


def test_put_token_splits_like_the_put_tiles():
    # shmem_put's token has the source's shape, so the next op with the same tiling depends tile by tile
    grid = tile_grid([64, 64], [16, 64])
    assert split_pred([64, 64], grid) == [Region((16 * i, 0), (16, 64)) for i in range(4)]


shapes = st.lists(st.integers(1, 40), min_size=2, max_size=4)


@st.composite
def shape_and_tile(draw):
    shape = draw(shapes)
    tile = [draw(st.integers(1, s + 5)) for s in shape]
    valid = [draw(st.integers(0, s)) for s in shape]
    return shape, tile, valid


def _coverage(shape, regions):
    """How many of ``regions`` (offset, shape pairs) cover each cell of an array of ``shape``."""
    counts = np.zeros(shape, dtype=int)
    for offset, box in regions:
        counts[tuple(slice(o, o + b) for o, b in zip(offset, box))] += 1
    return counts


deterministic = settings(derandomize=True, deadline=None, max_examples=200)


@deterministic
@given(shape_and_tile())
def test_tiles_cover_the_shape_exactly_once(case):
    shape, tile, valid = case
    count = math.prod(tile_grid(shape, tile))
    if count > MAX_TILES_PER_OP:
        with pytest.raises(OpArgumentError):
            expand_tiles(shape, tile)
        return
    tiles = expand_tiles(shape, tile, valid)
    assert [t.index for t in tiles] == list(range(count))
    assert (_coverage(shape, [(t.offset, t.shape) for t in tiles]) == 1).all()
    valid_coverage = _coverage(shape, [(t.offset, t.valid_shape) for t in tiles])
    expected = np.zeros(shape, dtype=int)
    expected[tuple(slice(0, v) for v in valid)] = 1
    assert (valid_coverage == expected).all()
    assert all(0 < s <= t for tl in tiles for s, t in zip(tl.shape, tile))


@deterministic
@given(st.lists(st.tuples(st.integers(1, 12), st.integers(1, 6)), min_size=1, max_size=4))
def test_pred_pieces_cover_the_pred_exactly_once(dims):
    pred_shape = [max(p, n) for p, n in dims]
    grid = [n for _, n in dims]
    pieces = split_pred(pred_shape, grid)
    assert len(pieces) == math.prod(grid)
    assert (_coverage(pred_shape, [(p.offset, p.shape) for p in pieces]) == 1).all()
    for d, (p, n) in enumerate(zip(pred_shape, grid)):
        sizes = sorted({piece.shape[d] for piece in pieces}, reverse=True)
        assert sizes in ([p // n], [p // n + 1, p // n])
