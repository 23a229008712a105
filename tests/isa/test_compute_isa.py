"""The ISA pieces of the compute ops: the NZ fractal layout, bit-exact casts between float formats
against the bit rules of CastMode.md (the independent reference of tests/frontend/pypto), the
pairwise-halving reduction order, and the cube's block accumulation."""

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from npusim.isa.fractal import nz_count, nz_pack, nz_unpack
from npusim.isa.instructions import fractal_matmul
from npusim.isa.vector import cast, halving_reduce
from tests.frontend.pypto import reference


@given(st.integers(1, 40), st.integers(1, 70), st.sampled_from([8, 16, 32]))
def test_nz_pack_and_unpack_round_trip(rows, cols, fc):
    matrix = np.arange(rows * cols, dtype=np.int32).reshape(rows, cols)
    flat = nz_pack(matrix, fc)
    assert flat.size == nz_count(rows, cols, fc)
    assert np.array_equal(nz_unpack(flat, rows, cols, fc), matrix)


def test_nz_layout_is_columns_of_fractals_rows_inside():
    matrix = np.arange(32 * 32).reshape(32, 32)
    flat = nz_pack(matrix, 16)
    assert flat[:16].tolist() == list(range(16))  # fractal (0, 0), row 0
    assert flat[16:32].tolist() == list(range(32, 48))  # fractal (0, 0), row 1
    assert flat[16 * 16] == 16 * 32  # row 16 of column block 0 follows the first fractal


@settings(max_examples=300)
@given(st.integers(0, 2**32 - 1), st.sampled_from(["rint", "round", "floor", "ceil", "trunc", "odd"]),
       st.sampled_from([np.float16, ml_dtypes.bfloat16]))
def test_fp32_narrowing_matches_the_bit_rules(bits, mode, dtype):
    x = np.array([bits], np.uint32).view(np.float32)
    if not np.isfinite(x[0]):
        return
    got = cast(x, dtype, mode)
    want = reference.cast_float(x, dtype, mode)
    assert got.view(np.uint16)[0] == want.view(np.uint16)[0]


@given(st.lists(st.floats(-1e6, 1e6, width=32), min_size=1, max_size=80))
def test_halving_reduce_order(values):
    x = np.array(values, np.float32)
    assert halving_reduce(x, np.add).tobytes() == reference.halving(x, np.add, 0).tobytes()


def test_fractal_matmul_rounds_each_block_once():
    a = np.zeros((1, 32), np.float16)
    b = np.zeros((32, 1), np.float16)
    a[0, :3], b[:3, 0] = [4096, 4096, 1], [2048, 2048, 1]
    a[0, 16], b[16, 0] = 1, 1
    assert fractal_matmul(a, b, 16, None, np.float32)[0, 0] == np.float32(2**24)
    assert fractal_matmul(a, b, 32, None, np.float32)[0, 0] == np.float32(2**24 + 2)  # one 32-wide block: one rounding


@pytest.mark.parametrize("src,dst,values,expected", [
    (np.int32, np.int16, [70000, -70000, 5], [32767, -32768, 5]),
    (np.float32, np.int8, [300.0, -300.0, np.nan], [127, -128, 0]),
])
def test_saturating_casts(src, dst, values, expected):
    assert cast(np.array(values, src), dst, "rint").tolist() == expected


def test_wrapping_integer_narrowing():
    assert cast(np.array([70000, -70000], np.int32), np.int16, "rint", saturate=False).tolist() == [4464, -4464]
