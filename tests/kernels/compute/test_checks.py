"""The compute ops' rules: broadcasting, the cast pairs and their mode fallback, cube tile shapes."""

import pytest

from npusim.config.products import PRODUCTS
from npusim.errors import OpArgumentError
from npusim.kernels.compute import checks


def test_broadcast_shapes():
    assert checks.broadcast_shape("add", (4, 8), (1, 8)) == (4, 8)
    assert checks.broadcast_shape("add", (4, 1), (8,)) == (4, 8)
    with pytest.raises(OpArgumentError, match=r"dim 0 is 3, not 4 or 1"):
        checks.broadcast_shape("add", (4, 8), (3, 8))


def test_cast_mode_falls_back_to_the_pairs_default():
    a2, a950 = PRODUCTS.get("ascend910b"), PRODUCTS.get("ascend950pr")
    assert checks.cast_mode("DT_FP32", "DT_FP16", "CAST_ODD", a2) == "CAST_ODD"
    assert checks.cast_mode("DT_FP32", "DT_BF16", "CAST_ODD", a2) == "CAST_RINT"  # ODD only for fp32 -> fp16
    assert checks.cast_mode("DT_FP32", "DT_INT32", "CAST_NONE", a2) == "CAST_TRUNC"
    assert checks.cast_mode("DT_FP16", "DT_FP32", "CAST_FLOOR", a2) is None  # a widening: no rounding
    assert checks.cast_mode("DT_FP32", "DT_HF8", "CAST_RINT", a950) == "CAST_ROUND"  # hifloat8: ROUND_A only
    assert checks.cast_mode("DT_INT16", "DT_FP32", "CAST_FLOOR", a950) is None  # a widening on the 950


def test_cube_tile_shapes():
    assert checks.check_cube_tiles([16, 32], [32, 64], [16, 16]) == ((16, 32), (32, 64, 64), (16, 16))
    assert checks.check_cube_tiles([16, 32], [32, 64, 128], [16, 16])[1] == (32, 64, 128)
    with pytest.raises(OpArgumentError, match=r"n=\[32, 16\] breaks nL0 <= nL1"):
        checks.check_cube_tiles([16, 16], [16, 16], [32, 16])
