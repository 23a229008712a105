"""The number formats the simulator holds beyond numpy's own, in one place: bfloat16 and the 8-bit
and 4-bit floating-point formats of the Ascend 950 generation, with bit-exact conversions.

=================  =========================  ==================================================
format             numpy dtype                definition (source)
=================  =========================  ==================================================
bfloat16           ``ml_dtypes.bfloat16``     8 exponent bits, 7 mantissa bits
float8_e4m3fn      ``ml_dtypes.float8_e4m3fn``  OCP 8-bit FP (OFP8) E4M3: bias 7, no infinity, NaN
                                              S.1111.111, largest 448
float8_e5m2        ``ml_dtypes.float8_e5m2``  OFP8 E5M2: IEEE-like, bias 15, infinities, largest
                                              57344
float8_e8m0fnu     ``ml_dtypes.float8_e8m0fnu``  OCP MX v1.0 scale: 2^(code - 127), no sign, no
                                              zero, NaN 0xFF
float4_e2m1fn      ``ml_dtypes.float4_e2m1fn``  OCP MX v1.0 FP4 element: bias 1, largest 6, no
                                              infinity and no NaN (one byte per value here)
hifloat8           :data:`HIFLOAT8` (a record  Huawei's HiFloat8 (Luo et al., "Ascend HiFloat8
                   of one ``uint8`` code)     Format for Deep Learning", arXiv 2409.16626):
                                              tapered precision, see :func:`hifloat8_values`
=================  =========================  ==================================================

ml_dtypes holds the first five and converts to them with round-half-to-even; hifloat8 has no numpy
type, so its codes are held as bytes in a dtype of their own (:data:`HIFLOAT8`, distinct from
uint8, so that a tensor says what its bytes mean) and converted here. The MX formats (MXFP8 and
MXFP4: blocks of 32 elements sharing one float8_e8m0fnu scale, OCP Microscaling Formats v1.0) are
:func:`quantize_mx` / :func:`dequantize_mx`.

Rounding of a value to a float format is :func:`round_to_format` (every mode of the vector unit's
conversions: ``rint`` ... ``odd``), saturating or not; :func:`to_hifloat8` rounds to hifloat8 with
``round`` (ties away from zero, the format's TA) or ``hybrid`` (TA where the exponent's magnitude is
below 4, else the deterministic "stochastic" rounding of the Ascend 950 vector unit).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import ml_dtypes
import numpy as np

BFLOAT16 = np.dtype(ml_dtypes.bfloat16)
FLOAT8_E4M3FN = np.dtype(ml_dtypes.float8_e4m3fn)
FLOAT8_E5M2 = np.dtype(ml_dtypes.float8_e5m2)
FLOAT8_E8M0FNU = np.dtype(ml_dtypes.float8_e8m0fnu)
FLOAT4_E2M1FN = np.dtype(ml_dtypes.float4_e2m1fn)
HIFLOAT8 = np.dtype([("hifloat8", np.uint8)])
"""HiFloat8 codes, one byte each: a record of one uint8 (``array.view(np.uint8)`` gives the codes),
so that no numpy arithmetic takes them for numbers; convert with :func:`to_hifloat8` and
:func:`hifloat8_values`."""

ROUNDING: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "rint": np.rint,  # to nearest, ties to even (CAST_RINT)
    "round": lambda x: np.sign(x) * np.floor(np.abs(x) + 0.5),  # to nearest, ties away from zero (CAST_ROUND; HiFloat8's TA)
    "floor": np.floor,
    "ceil": np.ceil,
    "trunc": np.trunc,
    "odd": lambda x: _round_to_odd(x),  # CAST_ODD: inexact results get an odd last digit (von Neumann)
}
"""The rounding modes of the vector unit's conversions (Ascend C CastMode / RoundMode), applied to
values scaled so that the target's last digit has weight 1."""


def _round_to_odd(x: np.ndarray) -> np.ndarray:
    truncated = np.trunc(x)
    inexact = truncated != x
    odd = np.where(np.fmod(np.abs(truncated), 2) == 0, truncated + np.sign(x), truncated)
    return np.where(inexact, odd, truncated)


@dataclass(frozen=True)
class FloatFormat:
    """A binary floating-point format with a fixed exponent width: ``digits`` significand bits (the
    implicit one included), normal exponents ``emin..emax``, subnormals below, and its largest
    finite value (below the last binade's end when the top codes mean NaN, as on float8_e4m3fn).
    ``infinity``: whether it has infinities (an overflow without saturation gives one, else NaN)."""

    name: str
    dtype: np.dtype
    digits: int
    emin: int
    emax: int
    largest: float
    infinity: bool
    nan: bool


FLOAT_FORMATS: dict[np.dtype, FloatFormat] = {
    f.dtype: f for f in (
        FloatFormat("float32", np.dtype(np.float32), 24, -126, 127, float(np.finfo(np.float32).max), True, True),
        FloatFormat("float16", np.dtype(np.float16), 11, -14, 15, 65504.0, True, True),
        FloatFormat("bfloat16", BFLOAT16, 8, -126, 127, float(ml_dtypes.finfo(BFLOAT16).max), True, True),
        FloatFormat("float8_e4m3fn", FLOAT8_E4M3FN, 4, -6, 8, 448.0, False, True),  # S.1111.111 is NaN: 480 is not a value
        FloatFormat("float8_e5m2", FLOAT8_E5M2, 3, -14, 15, 57344.0, True, True),
        FloatFormat("float4_e2m1fn", FLOAT4_E2M1FN, 2, 0, 2, 6.0, False, False),
    )
}
"""The IEEE-like float formats a value can be rounded to by :func:`round_to_format`."""

FLOAT8_DTYPES = (FLOAT8_E4M3FN, FLOAT8_E5M2, HIFLOAT8)
"""The 8-bit float formats the Ascend 950 writes (quantisation outputs)."""

_NAMES = {HIFLOAT8: "hifloat8"}


def name_of(dtype: np.dtype) -> str:
    """The format's name: numpy's (``float8_e4m3fn``, ``int8``), ``hifloat8`` for :data:`HIFLOAT8`."""
    dtype = np.dtype(dtype)
    return _NAMES.get(dtype, dtype.name)


def dtype_named(name: str) -> np.dtype:
    """The dtype of a format name (``hifloat8``, ``float8_e5m2``, any numpy or ml_dtypes name)."""
    if name == "hifloat8":
        return HIFLOAT8
    if hasattr(ml_dtypes, name):
        return np.dtype(getattr(ml_dtypes, name))
    return np.dtype(name)


def round_to_format(values: np.ndarray, dtype: np.dtype, rounding: str = "rint", saturate: bool = False) -> np.ndarray:
    """``values`` (exactly representable in float64) rounded to the float format ``dtype`` with
    ``rounding``, bit-exactly: scaled so that the format's last significand digit has weight 1
    (subnormals keep the smallest normal exponent's weight), rounded there, scaled back. Past the
    largest finite value: ``saturate`` gives it (±infinity too; NaN stays NaN); otherwise rint /
    round / ceil (upwards) / floor (downwards) overflow to infinity (NaN on a format without
    infinities), trunc / odd / the other directed mode give the largest finite value."""
    fmt = FLOAT_FORMATS[np.dtype(dtype)]
    saturate = saturate or not (fmt.infinity or fmt.nan)  # a format with neither can only saturate
    x = np.asarray(values, np.float64)
    finite = np.isfinite(x) & (x != 0)
    with np.errstate(all="ignore"):
        exponent = np.floor(np.log2(np.abs(np.where(finite, x, 1.0))))
        exponent = np.maximum(exponent, fmt.emin)
        quantum = np.exp2(exponent - (fmt.digits - 1))
        scaled = np.where(finite, x / quantum, 0.0)
        # log2 may be off by one next to a power of two: keep the scaled value inside [2^(p-1), 2^p)
        high = np.abs(scaled) >= 2.0 ** fmt.digits
        quantum = np.where(high, quantum * 2, quantum)
        scaled = np.where(high, scaled / 2, scaled)
        rounded = ROUNDING[rounding](scaled) * quantum
    overflow = np.inf if fmt.infinity else np.nan
    up, down = {"rint": (True, True), "round": (True, True), "ceil": (True, False), "floor": (False, True)}.get(rounding, (False, False))
    large = rounded > fmt.largest
    small = rounded < -fmt.largest
    if saturate:
        rounded = np.where(large, fmt.largest, np.where(small, -fmt.largest, rounded))
        x = np.where(np.isposinf(x), fmt.largest, np.where(np.isneginf(x), -fmt.largest, x))
    else:
        rounded = np.where(large, overflow if up else fmt.largest, rounded)
        rounded = np.where(small, -overflow if down else -fmt.largest, rounded)
        if not fmt.infinity:
            x = np.where(np.isinf(x), np.copysign(np.nan, x), x)
    return np.where(finite, rounded, x).astype(fmt.dtype)


# --- HiFloat8 -----------------------------------------------------------------------------------
#
# The definition (arXiv 2409.16626, section 2; the same layout in Huawei's en_dtypes and CANN's
# codecs): a code is S | dot | exponent | mantissa. The dot field is a prefix code giving D, the
# width of the exponent field, and with it the mantissa's: 11 -> D 4 (1 mantissa bit), 10 -> D 3
# (2 bits), 01 -> D 2 (3 bits), 001 -> D 1 (3 bits), 0001 -> D 0 (3 bits), 0000 -> denormal (3
# bits). The exponent is sign-magnitude with the magnitude's leading 1 implicit (D 1: ±1, D 2: ±2..3,
# D 3: ±4..7, D 4: ±8..15; D 0: 0), a normal value (-1)^S * 2^E * 1.M; a denormal 2^(M - 23) for
# M 1..7. 0x00 is zero (there is no -0), 0x80 NaN, S.11.0111.1 (E +15 with mantissa 1) infinity.
# So 31 normal binades 2^-15 .. 2^15 (largest finite 32768) and 7 denormal ones down to 2^-22.

HIF8_NAN = 0x80
HIF8_INF = 0x6F
HIF8_MAX = 0x6E
HIF8_LARGEST = 2.0 ** 15
HIF8_OVERFLOW = 1.25 * 2.0 ** 15
"""The midpoint between the largest finite value and the next value of its binade's grid (the
infinity code's 1.5 x 2^15): to-nearest rounding overflows at and above it."""
HYBRID_EXPONENT = 4
"""``hybrid`` rounds to nearest (TA) where |E| < 4 (3 mantissa bits), and by the pseudo-random
comparison of :func:`_hybrid_round_up` elsewhere."""


def _mantissa_bits(exponent: np.ndarray) -> np.ndarray:
    """HiFloat8's mantissa bits of a value of binary exponent ``exponent`` (0 in the denormal range)."""
    e = np.abs(exponent)
    return np.select([e <= 3, e <= 7, e <= 15], [3, 2, 1], 0)


def _decode(code: int) -> float:
    sign = -1.0 if code & 0x80 else 1.0
    payload = code & 0x7F
    if payload == HIF8_INF:
        return sign * np.inf
    if payload & 0x78 == 0:  # dot 0000: denormal, zero, NaN
        if payload == 0:
            return np.nan if code & 0x80 else 0.0
        return sign * 2.0 ** (payload - 23)
    if payload & 0x78 == 0x08:  # 0001: D 0
        d, mantissa_bits = 0, 3
    elif payload & 0x70 == 0x10:  # 001: D 1
        d, mantissa_bits = 1, 3
    else:  # 01, 10, 11: D 2, 3, 4
        d = {0x20: 2, 0x40: 3, 0x60: 4}[payload & 0x60]
        mantissa_bits = {2: 3, 3: 2, 4: 1}[d]
    mantissa = payload & ((1 << mantissa_bits) - 1)
    exponent = 0
    if d:
        field = (payload >> mantissa_bits) & ((1 << d) - 1)
        magnitude = (1 << (d - 1)) | (field & ((1 << (d - 1)) - 1))
        exponent = -magnitude if field >> (d - 1) else magnitude
    return sign * 2.0 ** exponent * (1 + mantissa / (1 << mantissa_bits))


HIF8_VALUES = np.array([_decode(code) for code in range(256)], np.float64)
"""The value of every HiFloat8 code (index = code)."""
_POSITIVE = np.array([c for c in range(128) if np.isfinite(HIF8_VALUES[c])], np.int64)
_POSITIVE = _POSITIVE[np.argsort(HIF8_VALUES[_POSITIVE], kind="stable")]
_POSITIVE_VALUES = HIF8_VALUES[_POSITIVE]
"""The finite non-negative codes in increasing value, and their values (every one distinct)."""


def hifloat8_values(codes: np.ndarray) -> np.ndarray:
    """The float32 values of HiFloat8 codes (an array of :data:`HIFLOAT8` or of uint8 codes);
    every HiFloat8 value is exact in float32."""
    codes = np.asarray(codes)
    as_bytes = codes.view(np.uint8) if codes.dtype == HIFLOAT8 else codes.astype(np.uint8)
    return HIF8_VALUES[as_bytes].astype(np.float32)


def _code_of(magnitudes: np.ndarray) -> np.ndarray:
    """The code of each non-negative HiFloat8 value (exactly one of them)."""
    return _POSITIVE[np.searchsorted(_POSITIVE_VALUES, magnitudes)]


def _round_nearest_away(m: np.ndarray) -> np.ndarray:
    """Finite magnitudes ``m`` below :data:`HIF8_OVERFLOW`, to the nearest HiFloat8 value, ties
    away from zero (TA): within a binade 2^e the values are the grid of step 2^(e - mantissa bits),
    both ends included; below 2^-22 the grid is 0, 2^-22."""
    _, e = np.frexp(np.where(m > 0, m, 1.0))
    e = (e - 1).astype(np.int64)
    step = np.where(e < -22, 2.0 ** -22, np.exp2(e - _mantissa_bits(e)))
    rounded = np.floor(m / step + 0.5) * step
    return np.where(m > 0, rounded, 0.0)


def _hybrid_round_up(m: np.ndarray, e: np.ndarray, bits: np.ndarray) -> np.ndarray:
    """Whether the hybrid mode rounds ``m`` (float32 magnitudes of binary exponent ``e``, |e| >= 4)
    up: its discarded fraction bits' top 14 bits compared with the float32 fraction's low 14 bits
    (their "random" number), up when not smaller. At e = -23 (between 0 and 2^-22) the value's
    position between the two, in 14 bits, is compared. A HiFloat8 value itself has both fields 0
    and so goes up to the next value (16 to 20), as in that codec. Source: Huawei's reference
    HiFloat8 codec of CANN (hif8_codec.py, "SSR", which follows the CANN simulator)."""
    fraction = (np.ldexp(m, 23 - e) - 2 ** 23).astype(np.int64)  # the 23 fraction bits of 1.f
    shift = 23 - bits
    remainder = fraction & ((np.int64(1) << shift) - 1)
    top = remainder >> (shift - 14)
    low = fraction & 0x3FFF
    top = np.where(e == -23, (fraction >> 10) + (1 << 13), top)
    return top >= low


def to_hifloat8(values: np.ndarray, rounding: str = "round", saturate: bool = False) -> np.ndarray:
    """``values`` (float32 or narrower: fp16, bf16) as HiFloat8 codes (an array of
    :data:`HIFLOAT8`): ``round`` rounds to nearest with ties away from zero (the format's TA),
    ``hybrid`` as TA where |E| < 4 and by the vector unit's pseudo-random comparison elsewhere
    (:func:`_hybrid_round_up`). At and above :data:`HIF8_OVERFLOW` (to nearest), or past 2^15 when
    hybrid rounds up: infinity, or 2^15 with ``saturate`` (which maps ±infinity there too). NaN is
    0x80, and -0 and values that round to 0 are 0x00 (HiFloat8 has one zero)."""
    if rounding not in ("round", "hybrid"):
        raise ValueError(f"hifloat8 rounds with 'round' or 'hybrid', not {rounding!r}")
    x = np.asarray(values).astype(np.float32).astype(np.float64)
    m = np.abs(x)
    finite = np.isfinite(x)
    inside = finite & (m < HIF8_OVERFLOW)
    mag = np.where(inside, m, 0.0)
    rounded = _round_nearest_away(mag)
    if rounding == "hybrid":
        _, e = np.frexp(np.where(mag > 0, mag, 1.0))
        e = (e - 1).astype(np.int64)
        pseudo = inside & (mag > 0) & (np.abs(e) >= HYBRID_EXPONENT)
        bits = _mantissa_bits(e)
        step = np.exp2(e - bits)
        down = np.floor(mag / step) * step
        up = _hybrid_round_up(np.where(pseudo, mag, 1.0), np.where(pseudo, e, 0), np.where(pseudo, bits, 3))
        chosen = np.where(up, down + step, down)
        chosen = np.where(e == -23, np.where(up, 2.0 ** -22, 0.0), np.where(e < -23, 0.0, chosen))
        rounded = np.where(pseudo, chosen, rounded)
    overflow = ~finite | (m >= HIF8_OVERFLOW) | (rounded > HIF8_LARGEST)
    codes = _code_of(np.where(overflow, 0.0, rounded)).astype(np.uint8)
    big = HIF8_MAX if saturate else HIF8_INF
    codes = np.where(overflow & ~np.isnan(x), big, codes).astype(np.uint8)
    negative = (x < 0) & (codes != 0)
    codes = np.where(negative, codes | 0x80, codes)
    codes = np.where(np.isnan(x), HIF8_NAN, codes).astype(np.uint8)
    return codes.view(HIFLOAT8)


# --- conversions by dtype, and the MX block formats ------------------------------------------------


def convert(values: np.ndarray, dtype: np.dtype, rounding: str = "rint", saturate: bool = False) -> np.ndarray:
    """``values`` converted to the float format ``dtype`` (a :data:`FLOAT_FORMATS` key or
    :data:`HIFLOAT8`) with ``rounding``; from a format this module holds, through its exact
    float32 or float64 values."""
    source = np.asarray(values)
    wide = hifloat8_values(source) if source.dtype == HIFLOAT8 else source
    dtype = np.dtype(dtype)
    if dtype == HIFLOAT8:
        return to_hifloat8(wide, rounding, saturate)
    return round_to_format(wide.astype(np.float64), dtype, rounding, saturate)


def as_float32(values: np.ndarray) -> np.ndarray:
    """The float32 values of an array of any format here (all exact in float32)."""
    values = np.asarray(values)
    return hifloat8_values(values) if values.dtype == HIFLOAT8 else values.astype(np.float32)


MX_BLOCK = 32
"""Elements per shared scale (OCP Microscaling Formats v1.0, section 5: k = 32)."""
MX_ELEMENTS = {"mxfp8_e4m3": FLOAT8_E4M3FN, "mxfp8_e5m2": FLOAT8_E5M2, "mxfp4": FLOAT4_E2M1FN}
"""The MX formats the Ascend 950 computes on (its platform file's cube types: float8_e4m3fn,
float4_e2m1), each with its element format."""


def quantize_mx(values: np.ndarray, fmt: str, axis: int = -1) -> tuple[np.ndarray, np.ndarray]:
    """``values`` (float32, bf16 or fp16) in the MX format ``fmt``: per block of :data:`MX_BLOCK`
    consecutive elements along ``axis`` (whose length must be a multiple of it), the shared scale
    X = 2^(floor(log2(max |v|)) - emax of the element format), clamped to the float8_e8m0fnu range
    (2^-127 for a block of zeros), and each element v / X rounded to nearest even and saturated to
    the element format (OCP MX v1.0, section 6.3). Returns (elements, scales), the scales an array of
    float8_e8m0fnu with the axis shrunk 32 times. Non-finite values are refused (ValueError): the
    specification leaves a block holding one to the implementation."""
    element = MX_ELEMENTS[fmt]
    x = np.moveaxis(np.asarray(values).astype(np.float32), axis, -1)
    if x.shape[-1] % MX_BLOCK:
        raise ValueError(f"{fmt}: the axis has {x.shape[-1]} elements, not a multiple of the block of {MX_BLOCK}")
    if not np.isfinite(x).all():
        raise ValueError(f"{fmt}: the values hold NaN or infinity, which an MX block does not define here")
    blocks = x.reshape(*x.shape[:-1], -1, MX_BLOCK).astype(np.float64)
    amax = np.abs(blocks).max(axis=-1)
    _, e = np.frexp(np.where(amax > 0, amax, 1.0))
    exponent = np.where(amax > 0, e - 1 - FLOAT_FORMATS[element].emax, -127)
    exponent = np.clip(exponent, -127, 127)
    elements = round_to_format(blocks / np.exp2(exponent)[..., None], element, "rint", saturate=True)
    scales = np.exp2(exponent).astype(FLOAT8_E8M0FNU)
    return (np.moveaxis(elements.reshape(x.shape), -1, axis), np.moveaxis(scales, -1, axis))


def dequantize_mx(elements: np.ndarray, scales: np.ndarray, axis: int = -1) -> np.ndarray:
    """The float32 values of MX ``elements`` with their block ``scales`` (:func:`quantize_mx`'s
    layout): element x 2^(scale's code - 127), exact in float32 over the scale range used."""
    x = np.moveaxis(np.asarray(elements).astype(np.float64), axis, -1)
    s = np.moveaxis(np.asarray(scales).astype(np.float64), axis, -1)
    blocks = x.reshape(*x.shape[:-1], -1, MX_BLOCK) * s[..., None]
    return np.moveaxis(blocks.reshape(x.shape).astype(np.float32), -1, axis)
