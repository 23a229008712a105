"""pypto.cast to and from the Ascend 950's 8-bit floats (pypto-cast.md's Ascend 950PR/950DT table)
on configs/ascend-950pr.yaml, bit-exact against the formats' definitions: float8_e4m3fn (OFP8 E4M3:
4 significant digits, smallest normal exponent -6, largest 448) and float8_e5m2 (E5M2: 3 digits, -14,
largest 57344) rounded by the tests' exact-rational reference (reference.round_value, CastMode.md's
rules) and saturated, hifloat8 by npusim.formats.to_hifloat8 with ROUND (ties away), itself tested
against the HiFloat8 paper in tests/test_formats.py. A pair the product does not convert is the
framework's error naming the product."""

from fractions import Fraction

import ml_dtypes
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from npusim import formats, pypto
from npusim.errors import OpArgumentError

from . import reference
from .compute_helpers import run

FP8 = {pypto.DT_FP8E4M3: (np.dtype(ml_dtypes.float8_e4m3fn), (4, -6, 448.0)),
       pypto.DT_FP8E5M2: (np.dtype(ml_dtypes.float8_e5m2), (3, -14, 57344.0))}
"""PyPTO's OFP8 types: the numpy dtype and (digits with the implicit bit, smallest normal exponent, largest finite)."""


def fp8_reference(values: np.ndarray, dtype: np.dtype, fmt: tuple, mode: str) -> np.ndarray:
    """Each value rounded with ``mode`` at the format's digits (reference.round_value's rules), then
    saturated to the largest finite value (the 950's conversions saturate); NaN stays NaN."""
    digits, emin, largest = fmt
    out = []
    for v in values.ravel().astype(np.float64):
        if np.isnan(v):
            out.append(np.nan)
            continue
        if np.isinf(v):
            out.append(np.copysign(largest, v))
            continue
        assert reference.FORMATS[dtype][:2] == (digits, emin)
        rounded = reference.round_value(Fraction(float(v)), dtype, mode)
        out.append(float(np.clip(rounded, -largest, largest)) if rounded != 0 else np.copysign(0.0, v))
    return np.array(out).astype(dtype).reshape(values.shape)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(list(FP8)), st.sampled_from(["CAST_RINT", "CAST_ROUND", "CAST_FLOOR", "CAST_CEIL", "CAST_TRUNC"]),
       st.integers(0, 2**31), st.sampled_from([1e-3, 1.0, 100.0, 1e5]))
def test_fp32_to_fp8_in_every_mode_is_the_rounded_and_saturated_value(target, mode, seed, scale):
    rng = np.random.default_rng(seed)
    a = (rng.standard_normal((4, 32)) * scale).astype(np.float32)
    a[0, :4] = [np.inf, -np.inf, np.nan, 0.0]
    got, _ = run(lambda x: pypto.cast(x, target, pypto.CastMode[mode]), a, tile=(4, 32), config="ascend-950pr")
    dtype, fmt = FP8[target]
    expected = fp8_reference(a, dtype, fmt, mode.removeprefix("CAST_").lower())
    both_nan = np.isnan(got.astype(np.float32)) & np.isnan(expected.astype(np.float32))
    assert got.dtype == dtype and bool(np.all(both_nan | (got.view(np.uint8) == expected.view(np.uint8))))


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, 2**31), st.sampled_from([np.float32, np.float16]))
def test_to_hifloat8_rounds_ties_away_and_back_to_fp32_is_exact(seed, source):
    rng = np.random.default_rng(seed)
    a = (rng.standard_normal((2, 64)) * 10.0 ** rng.integers(-6, 5, (2, 64))).astype(source)
    dt = pypto.DT_FP32 if source == np.float32 else pypto.DT_FP16
    got, _ = run(lambda x: pypto.cast(x, pypto.DT_HF8), a, tile=(2, 64), config="ascend-950pr")
    assert dt is not None and got.dtype == formats.HIFLOAT8
    assert np.array_equal(got.view(np.uint8), formats.to_hifloat8(a.astype(np.float64), "round", saturate=True).view(np.uint8))
    back, _ = run(lambda x: pypto.cast(pypto.cast(x, pypto.DT_HF8), pypto.DT_FP32), a, tile=(2, 64), config="ascend-950pr")
    assert np.array_equal(back, formats.hifloat8_values(got.view(np.uint8)).astype(np.float32))


def test_hifloat8_takes_round_only_and_other_modes_fall_back_to_it():
    codes = np.arange(1, 127, dtype=np.uint8)
    decoded = formats.hifloat8_values(codes)
    finite = np.sort(decoded[np.isfinite(decoded)])
    below, above = finite[20:52], finite[21:53]  # 32 neighbouring pairs of positive values
    ties = ((below + above) / 2).astype(np.float32)  # each a tie between two neighbours (exact in fp32)
    a = np.concatenate([ties, -ties]).reshape(2, 32)
    got, session = run(lambda x: pypto.cast(x, pypto.DT_HF8, pypto.CastMode.CAST_RINT), a, tile=(2, 32), config="ascend-950pr")
    values = formats.hifloat8_values(got.view(np.uint8))
    assert values[0].tolist() == above.tolist() and values[1].tolist() == (-above).tolist()  # ties away from zero: ROUND_A
    assert session.result.recorder.ops[-1].args["mode"] == "CAST_ROUND"


@pytest.mark.parametrize("config, target", [("a2", pypto.DT_FP8E4M3), ("a3", pypto.DT_HF8)])
def test_a_950_conversion_on_a2_or_a3_is_refused_naming_the_product(config, target):
    a = np.ones((1, 32), np.float32)
    with pytest.raises(OpArgumentError, match=r"from DT_FP32 is not a conversion of Atlas A[23] \(ascend910[bc]\) \(it is one on Ascend 950"):
        run(lambda x: pypto.cast(x, target), a, tile=(1, 32), config=config)
