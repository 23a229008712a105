"""The matmul tiling: output tiles n outer, m inner (tails included), and the documented capacity formula."""

from npusim.kernels.compute.matmul import CubeTiles, capacity_needs, matmul_tiles


def test_tiles_in_the_frameworks_order_with_tails():
    tiles = matmul_tiles(40, 20, 64, CubeTiles(16, 16, 16, 32, 32, 16, 16))
    assert [(t.m_offset, t.n_offset, t.m, t.n) for t in tiles] == [
        (0, 0, 16, 16), (16, 0, 16, 16), (32, 0, 8, 16), (0, 16, 16, 4), (16, 16, 16, 4), (32, 16, 8, 4)]


def test_capacity_formula():
    needs = capacity_needs(CubeTiles(128, 128, 64, 256, 256, 256, 256), 2)
    assert needs == {"L0A": 128 * 64 * 2, "L0B": 256 * 64 * 2, "L0C": 128 * 256 * 4, "L1": 128 * 256 * 2 + 256 * 256 * 2}
    int8 = capacity_needs(CubeTiles(16, 16, 16, 16, 16, 16, 16), 1)
    assert int8["L0A"] == 32 * 32  # int8 aligns to 32
