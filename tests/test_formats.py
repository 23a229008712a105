"""The number formats (npusim.formats) against their definitions: HiFloat8 (arXiv 2409.16626 and the
layout of Huawei's codecs) code by code, the OCP 8-bit floats by brute force over their codes, the
MX block formats (OCP Microscaling v1.0) by their scale rule."""

import math

import ml_dtypes
import numpy as np
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from npusim import formats
from npusim.formats import HIF8_VALUES, HIFLOAT8

FLOAT32 = st.floats(width=32, allow_nan=True, allow_infinity=True)
FINITE32 = st.floats(width=32, allow_nan=False, allow_infinity=False)


def field_value(code: int) -> float:
    """HiFloat8's value of ``code`` read field by field from the paper's definition, written apart
    from the module's decoder: the dot prefix code, then D exponent bits (sign, then the magnitude
    without its leading 1), then the mantissa."""
    bits = f"{code:08b}"
    sign = -1.0 if bits[0] == "1" else 1.0
    rest = bits[1:]
    prefix, d = next((p, d) for p, d in (("11", 4), ("10", 3), ("01", 2), ("001", 1), ("0001", 0), ("0000", None)) if rest.startswith(p))
    body = rest[len(prefix):]
    if d is None:  # denormal: 2^(M - 23), M = 0 is zero (sign 0) or NaN (sign 1)
        m = int(body, 2)
        return (math.nan if sign < 0 else 0.0) if m == 0 else sign * 2.0 ** (m - 23)
    exponent_bits, mantissa = body[:d], body[d:]
    exponent = 0
    if d:
        magnitude = int("1" + exponent_bits[1:], 2)
        exponent = -magnitude if exponent_bits[0] == "1" else magnitude
    if d == 4 and exponent == 15 and mantissa == "1":
        return sign * math.inf
    return sign * 2.0 ** exponent * (1 + int(mantissa, 2) / 2 ** len(mantissa))


def test_every_code_decodes_as_the_definition_says():
    for code in range(256):
        expected = field_value(code)
        assert (math.isnan(expected) and math.isnan(HIF8_VALUES[code])) or HIF8_VALUES[code] == expected, hex(code)


def test_the_format_has_the_papers_binades_and_special_values():
    finite = HIF8_VALUES[np.isfinite(HIF8_VALUES)]
    positive = finite[finite > 0]
    assert len(set(finite.tolist())) == 253 and positive.size == 126  # one zero, NaN 0x80, two infinities
    exponents = np.floor(np.log2(positive)).astype(int)
    per_binade = {e: int((exponents == e).sum()) for e in range(-22, 16)}
    # 7 exponents with a 3-bit mantissa, 8 with 2 bits, 16 with 1 bit; 7 denormal binades (one value each)
    assert [e for e, n in per_binade.items() if n == 8] == list(range(-3, 4))
    assert [e for e, n in per_binade.items() if n == 4] == [-7, -6, -5, -4, 4, 5, 6, 7]
    assert [e for e, n in per_binade.items() if n == 2] == [*range(-15, -7), *range(8, 15)]
    assert [e for e, n in per_binade.items() if n == 1] == [*range(-22, -15), 15]  # 1.5 x 2^15 is the infinity
    assert positive.min() == 2.0 ** -22 and positive.max() == 2.0 ** 15
    assert (formats.HIF8_NAN, formats.HIF8_INF, formats.HIF8_MAX) == (0x80, 0x6F, 0x6E)
    assert HIF8_VALUES[0x6F] == np.inf and HIF8_VALUES[0xEF] == -np.inf and HIF8_VALUES[0x6E] == 2.0 ** 15
    assert HIF8_VALUES[0] == 0 and np.isnan(HIF8_VALUES[0x80])
    for code in range(1, 128):  # the sign bit negates every value but zero
        assert HIF8_VALUES[code | 0x80] == -HIF8_VALUES[code]


def nearest_away(x: float) -> float:
    """The nearest HiFloat8 value to x, ties away from zero, found by brute force over every value
    (the overflow rule apart: to nearest, 1.25 x 2^15 and above is infinity)."""
    if abs(x) >= formats.HIF8_OVERFLOW:
        return math.copysign(math.inf, x)
    values = np.unique(HIF8_VALUES[np.isfinite(HIF8_VALUES)])
    distance = np.abs(values - x)
    best = values[distance == distance.min()]
    return float(best[np.argmax(np.abs(best))])  # a tie: the one away from zero


@given(FLOAT32)
@example(1.75)
@example(2.0 ** -23)
@example(2.0 ** -23 * 0.999)
@example(40959.996)
@example(40960.0)
@example(-0.0)
@example(3 * 2.0 ** -17)
@example(2.0 ** 15 + 4096)
def test_round_is_to_nearest_ties_away_from_zero(x):
    code = int(formats.to_hifloat8(np.float32(x)).view(np.uint8))
    if math.isnan(x):
        assert code == formats.HIF8_NAN
        return
    expected = nearest_away(x)
    assert HIF8_VALUES[code] == expected or (expected == 0 and code == 0)
    if expected == 0:
        assert code == 0  # one zero: -0 and negative values that round to 0 are 0x00


@given(FLOAT32)
def test_saturation_gives_the_largest_finite_value(x):
    code = int(formats.to_hifloat8(np.float32(x), saturate=True).view(np.uint8))
    if math.isnan(x):
        assert code == formats.HIF8_NAN
    elif abs(x) >= formats.HIF8_OVERFLOW:
        assert HIF8_VALUES[code] == math.copysign(2.0 ** 15, x)
    else:
        assert code == int(formats.to_hifloat8(np.float32(x)).view(np.uint8))


def hybrid_reference(x: float) -> float:
    """hybrid, from the float32 bits: TA where |E| < 4; else the value below or the next one above,
    up when the top 14 discarded fraction bits are not below the fraction's low 14 bits (at E = -23,
    between 0 and 2^-22, the value's position there in 14 bits)."""
    m = abs(x)
    if math.isnan(x) or m >= formats.HIF8_OVERFLOW or m == 0:
        return nearest_away(x) if not math.isnan(x) else math.nan
    bits = int(np.float32(m).view(np.uint32))
    biased, fraction = bits >> 23, bits & 0x7FFFFF
    e = biased - 127 if biased else int(math.floor(math.log2(m)))
    if biased == 0:  # a float32 subnormal: its fraction relative to 2^e
        fraction = int(m * 2.0 ** (23 - e)) - 2 ** 23
    if abs(e) < 4:
        return nearest_away(x)
    if e < -23:
        return 0.0
    low = fraction & 0x3FFF
    if e == -23:
        return math.copysign(2.0 ** -22, x) if (fraction >> 10) + 2 ** 13 >= low else 0.0
    mantissa = 3 if abs(e) <= 3 else 2 if abs(e) <= 7 else 1 if abs(e) <= 15 else 0
    shift = 23 - mantissa
    up = (fraction & ((1 << shift) - 1)) >> (shift - 14) >= low
    step = 2.0 ** (e - mantissa)
    value = (math.floor(m / step) + up) * step
    return math.copysign(math.inf if value > 2.0 ** 15 else value, x)


@given(FLOAT32)
@example(17.0)
@example(16.0)
@example(2.0 ** -16 * 1.25)
@example(2.0 ** -23 * 1.5)
@example(2.0 ** 15 + 1)
@example(-9.5)
def test_hybrid_is_nearest_for_small_exponents_and_the_pseudo_random_choice_elsewhere(x):
    code = int(formats.to_hifloat8(np.float32(x), "hybrid").view(np.uint8))
    expected = hybrid_reference(float(np.float32(x)))
    if math.isnan(expected):
        assert code == formats.HIF8_NAN
    else:
        assert HIF8_VALUES[code] == expected or (expected == 0 and code == 0)


@given(FINITE32)
@example(16.0)  # a HiFloat8 value itself: the comparison of two zero fields rounds it up
@example(33586.0546875)  # past the largest finite value (2^15), below the overflow threshold
@example(-32772.10546875)
def test_hybrid_picks_one_of_the_two_neighbours(x):
    """hybrid's result is the value at or below |x| or the next one above it (infinity past 2^15),
    with x's sign. The next one above, even where |x| is a value itself: where the pseudo-random
    comparison applies, both of its 14-bit fields are 0 there and "not smaller" rounds up, as in the
    reference codec of CANN that formats._hybrid_round_up follows."""
    value = float(formats.hifloat8_values(formats.to_hifloat8(np.float32(x), "hybrid")))
    m = abs(x)
    if m >= formats.HIF8_OVERFLOW or m < 2.0 ** -22:
        return
    magnitudes = np.unique(np.abs(HIF8_VALUES[np.isfinite(HIF8_VALUES)]))
    below = magnitudes[magnitudes <= m].max()
    larger = magnitudes[magnitudes > m]
    above = larger.min() if len(larger) else math.inf
    assert abs(value) in (below, above) and (value == 0 or math.copysign(1.0, value) == math.copysign(1.0, x))


def test_hifloat8_is_a_dtype_of_its_own_holding_codes():
    codes = formats.to_hifloat8(np.array([1.0, -2.0], np.float32))
    assert codes.dtype == HIFLOAT8 and codes.dtype != np.uint8 and codes.itemsize == 1
    assert formats.name_of(HIFLOAT8) == "hifloat8" and formats.dtype_named("hifloat8") == HIFLOAT8
    assert formats.hifloat8_values(codes).tolist() == [1.0, -2.0]
    with pytest.raises(ValueError, match="hifloat8 rounds with 'round' or 'hybrid'"):
        formats.to_hifloat8(np.ones(1, np.float32), "rint")


FP8 = [formats.FLOAT8_E4M3FN, formats.FLOAT8_E5M2]


def nearest_even(x: float, dtype) -> float:
    """Round to nearest, ties to the even code, by brute force over the format's finite codes, with
    IEEE overflow (past the largest value by half a step of its binade: infinity, or NaN on e4m3fn)."""
    values = np.arange(256, dtype=np.uint8).view(dtype).astype(np.float64)
    finite = np.isfinite(values)
    codes, values = np.arange(256)[finite], values[finite]
    largest = values.max()
    fmt = formats.FLOAT_FORMATS[np.dtype(dtype)]
    half_step = 2.0 ** (fmt.emax - fmt.digits)
    if abs(x) > largest + half_step or (abs(x) == largest + half_step and int(codes[values == largest][0]) & 1):
        return math.copysign(math.inf, x) if fmt.infinity else math.nan
    distance = np.abs(values - x)
    tied = distance == distance.min()
    even = tied & (codes & 1 == 0)
    return float(values[even][0] if even.any() else values[tied][0])


@pytest.mark.parametrize("dtype", FP8, ids=lambda d: d.name)
@given(x=FLOAT32)
@example(x=464.0)
@example(x=480.0)
@example(x=61440.0)
@example(x=2.0 ** -10)
@example(x=-0.0)
def test_float8_rint_is_round_half_to_even_and_agrees_with_ml_dtypes(dtype, x):
    got = formats.round_to_format(np.float32(x), dtype, "rint")
    assert got.view(np.uint8) == np.float32(x).astype(dtype).view(np.uint8)  # ml_dtypes holds the format
    if math.isnan(x):
        assert np.isnan(got.astype(np.float64))
        return
    expected = 0.0 if x == 0 else nearest_even(float(np.float32(x)), dtype)
    if math.isinf(x):
        expected = x if formats.FLOAT_FORMATS[np.dtype(dtype)].infinity else math.nan
    assert (math.isnan(expected) and np.isnan(float(got))) or float(got) == expected


@pytest.mark.parametrize("dtype", FP8, ids=lambda d: d.name)
@given(x=FLOAT32)
def test_float8_saturation(dtype, x):
    got = float(formats.round_to_format(np.float32(x), dtype, "rint", saturate=True))
    largest = formats.FLOAT_FORMATS[np.dtype(dtype)].largest
    if math.isnan(x):
        assert math.isnan(got)
    else:
        assert abs(got) <= largest and (abs(got) == largest or got == float(np.float32(x).astype(dtype)))


@pytest.mark.parametrize("dtype", FP8, ids=lambda d: d.name)
@pytest.mark.parametrize("rounding", ["floor", "ceil", "trunc", "round"])
@given(x=FINITE32)
def test_float8_directed_roundings_bracket_the_value(dtype, rounding, x):
    got = float(formats.round_to_format(np.float32(x), dtype, rounding, saturate=True))
    largest = formats.FLOAT_FORMATS[np.dtype(dtype)].largest
    if abs(x) > largest:
        return
    below = float(formats.round_to_format(np.float32(x), dtype, "floor", saturate=True))
    above = float(formats.round_to_format(np.float32(x), dtype, "ceil", saturate=True))
    assert below <= x <= above and got in (below, above)
    if rounding == "trunc":
        assert abs(got) <= abs(x)


@pytest.mark.parametrize("fmt", list(formats.MX_ELEMENTS))
@given(values=st.lists(st.floats(-1e6, 1e6, width=32), min_size=32, max_size=32))
@example(values=[0.0] * 32)
def test_mx_blocks_share_the_ocp_scale(fmt, values):
    x = np.array(values, np.float32).reshape(1, 32)
    elements, scales = formats.quantize_mx(x, fmt)
    assert elements.dtype == formats.MX_ELEMENTS[fmt] and scales.dtype == formats.FLOAT8_E8M0FNU and scales.shape == (1, 1)
    amax = float(np.abs(x).max())
    emax = formats.FLOAT_FORMATS[elements.dtype].emax
    expected = 2.0 ** -127 if amax == 0 else 2.0 ** max(-127, min(127, math.floor(math.log2(amax)) - emax))
    assert float(scales[0, 0]) == expected
    back = formats.dequantize_mx(elements, scales)
    assert np.array_equal(back, elements.astype(np.float32) * np.float32(expected))
    assert np.abs(elements.astype(np.float64)).max() <= formats.FLOAT_FORMATS[elements.dtype].largest
    # each element is its value over the scale rounded to nearest even and saturated
    assert np.array_equal(elements.view(np.uint8), formats.round_to_format(x / expected, elements.dtype, "rint", True).view(np.uint8))


def test_mx_refuses_a_ragged_axis_and_non_finite_values():
    with pytest.raises(ValueError, match="not a multiple of the block of 32"):
        formats.quantize_mx(np.ones(48, np.float32), "mxfp8_e4m3")
    with pytest.raises(ValueError, match="NaN or infinity"):
        formats.quantize_mx(np.full(32, np.inf, np.float32), "mxfp4")


def test_conversions_between_formats_go_through_exact_values():
    codes = formats.to_hifloat8(np.array([1.5, -0.75], np.float32))
    as_e5m2 = formats.convert(codes, formats.FLOAT8_E5M2)
    assert as_e5m2.astype(np.float32).tolist() == [1.5, -0.75]
    assert formats.as_float32(codes).dtype == np.float32
    assert np.float32(ml_dtypes.finfo(formats.FLOAT8_E4M3FN).max) == formats.FLOAT_FORMATS[formats.FLOAT8_E4M3FN].largest
