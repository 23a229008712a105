"""What vector instructions compute: IEEE arithmetic in the instruction's dtype, casts with rounding
modes and saturation."""

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from npusim.isa.vector import cast, compute, elements_per_repeat


def test_elements_per_repeat_follow_the_widest_dtype():
    assert elements_per_repeat(256, np.float32) == 64
    assert elements_per_repeat(256, np.float16) == 128
    assert elements_per_repeat(256, np.float16, np.int8) == 128
    assert elements_per_repeat(256, np.float32, np.int16) == 64


@pytest.mark.parametrize("mode,expected", [
    ("rint", [0, 2, -0, -2, 2, 3]),
    ("round", [1, 2, -1, -2, 3, 3]),
    ("floor", [0, 1, -1, -2, 2, 2]),
    ("ceil", [1, 2, -0, -1, 3, 3]),
    ("trunc", [0, 1, -0, -1, 2, 2]),
])
def test_cast_rounding_modes(mode, expected):
    values = np.array([0.5, 1.5, -0.5, -1.5, 2.5, 2.75], np.float32)
    assert cast(values, np.int16, mode).tolist() == expected


def test_cast_saturates_and_maps_nan_to_zero():
    values = np.array([300.0, -300.0, np.inf, -np.inf, np.nan], np.float32)
    assert cast(values, np.int8, "rint").tolist() == [127, -128, 127, -128, 0]


@given(st.lists(st.floats(-1e4, 1e4, width=32), min_size=1, max_size=64))
def test_fp32_to_int16_to_fp16_to_int8_equals_rint_and_saturate(values):
    x = np.array(values, np.float32)
    chain = cast(cast(cast(x, np.int16, "rint"), np.float16, "rint"), np.int8, "rint")
    assert chain.tolist() == np.clip(np.rint(x.astype(np.float64)), -128, 127).astype(np.int8).tolist()


def test_binary_ops_round_in_the_instruction_dtype():
    a = np.array([1.0, 2048.0], np.float16)
    b = np.array([1e-4, 1.0], np.float16)
    out = np.empty(2, np.float16)
    compute("add", out, [a, b], None, "rint")
    assert out.tolist() == [1.0, 2048.0]  # both sums round back in fp16
    bf = np.array([1.0], ml_dtypes.bfloat16)
    out_bf = np.empty(1, ml_dtypes.bfloat16)
    compute("muls", out_bf, [bf], 3.0, "rint")
    assert float(out_bf[0]) == 3.0


def test_div_is_ieee_float32():
    a = np.array([1.0, 7.0], np.float32)
    b = np.array([3.0, 0.1], np.float32)
    out = np.empty(2, np.float32)
    compute("div", out, [a, b], None, "rint")
    assert out.tolist() == (a / b).tolist()
