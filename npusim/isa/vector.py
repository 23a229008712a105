"""What each vector instruction computes, on numpy views of UB, and how many repeats it takes.

Arithmetic runs in the instruction's dtype (fp16 / bf16 / fp32 / int32) with IEEE round-to-nearest-
even results, as the vector unit produces them. ``cast`` converts with an explicit rounding mode
(:data:`ROUNDING`, CastMode's RINT ROUND FLOOR CEIL TRUNC ODD), bit-exactly also between float formats
(fp32 -> fp16 / bf16, int32 -> fp32), and saturates integer results to the target range (or wraps,
``saturate=False``, SaturationMode.OFF of an int -> int narrowing); NaN converts to 0 (documented choice:
the vendor does not publish its NaN behaviour). ``exp``, ``sqrt``, ``rsqrt`` are numpy's correctly
rounded (sqrt) or faithful (exp) results: the chip's are not published to the bit (``docs/pypto.md``).
The reductions (``reduce_sum`` ...) reduce each row of a 2-D operand by the pairwise halving of
:func:`halving_reduce`.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from npusim import formats
from npusim.errors import OpArgumentError

BINARY = {
    "add": np.add,
    "sub": np.subtract,
    "mul": np.multiply,
    "div": np.divide,
    "max": np.maximum,
    "min": np.minimum,
}
WITH_SCALAR = {"adds": np.add, "muls": np.multiply, "maxs": np.maximum, "mins": np.minimum}
UNARY: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "exp": np.exp, "abs": np.abs, "relu": lambda x: np.maximum(x, 0), "copy": np.copy, "neg": np.negative,
    "sqrt": np.sqrt, "rsqrt": lambda x: 1 / np.sqrt(x), "invert": np.invert,
}

def _elementwise_math(function: Callable[[float], float]) -> Callable[[np.ndarray], np.ndarray]:
    """A scalar ``math`` function over an array (float64 in and out)."""
    vectorized = np.frompyfunc(function, 1, 1)
    return lambda x: vectorized(x).astype(np.float64)


MATH: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "exp2": np.exp2, "expm1": np.expm1, "ln": np.log, "log2": np.log2, "log10": np.log10, "log1p": np.log1p,
    "sin": np.sin, "cos": np.cos, "tan": np.tan, "sinh": np.sinh, "cosh": np.cosh, "tanh": np.tanh,
    "asin": np.arcsin, "acos": np.arccos, "atan": np.arctan, "asinh": np.arcsinh, "acosh": np.arccosh, "atanh": np.arctanh,
    "erf": _elementwise_math(math.erf), "erfc": _elementwise_math(math.erfc), "sign": np.sign, "reciprocal": np.reciprocal,
    "floor": np.floor, "ceil": np.ceil, "trunc": np.trunc, "rint": np.rint,
}
"""Float functions of one operand, evaluated in float64 on the operand's values and rounded once to
the destination dtype: the correctly rounded result (nearly always; floor / ceil / trunc / rint /
sign / reciprocal exactly). The chip's algorithms for the transcendental ones are not published:
its results may differ in the last bits (docs/pypto.md)."""
MATH_BINARY: dict[str, Callable[[np.ndarray, np.ndarray], np.ndarray]] = {"pow": np.power, "atan2": np.arctan2, "hypot": np.hypot, "fmod": np.fmod, "copysign": np.copysign,
    "remainder": np.remainder,
}
"""Float functions of two operands, as :data:`MATH`."""
BITWISE = {"and": np.bitwise_and, "or": np.bitwise_or, "xor": np.bitwise_xor}
"""Integer bitwise operations, in the operands' dtype."""
PREDICATE = {"isnan": np.isnan, "isfinite": np.isfinite, "signbit": np.signbit, "not": np.logical_not}
"""Tests of one operand: 1 where true, else 0, in the destination dtype (bool)."""
COMPARE = {"eq": np.equal, "ne": np.not_equal, "lt": np.less, "le": np.less_equal, "gt": np.greater, "ge": np.greater_equal}
"""Comparisons of two operands (16-bit floats compared exactly, in float32): 1 where true, else 0 (bool)."""
REDUCE = {"reduce_sum": np.add, "reduce_max": np.maximum, "reduce_min": np.minimum, "reduce_prod": np.multiply}
"""Row reductions: ``dst[r] = reduce(src[r, :])`` by :func:`halving_reduce` (the vcadd / vcmax family)."""
ARG_REDUCE = {"reduce_argmax": np.argmax, "reduce_argmin": np.argmin}
"""Row reductions to an index: ``dst[r]`` = the first position of the row's largest (smallest)
value, a NaN counting as the largest (torch's and numpy's rule), written in ``dst``'s dtype."""

ROUNDING = formats.ROUNDING
"""The conversions' rounding modes (:data:`npusim.formats.ROUNDING`)."""
HIFLOAT8_ROUNDING = ("round", "hybrid")
"""The modes a conversion to hifloat8 takes (Ascend C: CAST_ROUND, CAST_HYBRID)."""
ROUNDING_NAMES = (*ROUNDING, "hybrid")
"""Every rounding an instruction may name (``hybrid`` only on a conversion to hifloat8)."""

KINDS = (tuple(BINARY) + tuple(WITH_SCALAR) + tuple(UNARY) + tuple(MATH) + tuple(MATH_BINARY) + tuple(BITWISE) + tuple(PREDICATE)
         + tuple(COMPARE) + tuple(REDUCE) + tuple(ARG_REDUCE) + ("dup", "cast", "transpose", "cumsum", "one_hot", "select"))


def elements_per_repeat(repeat_bytes: int, *dtypes: np.dtype) -> int:
    """Elements one repeat covers: the widest dtype involved decides (64 fp32 or 128 fp16 per 256 B)."""
    widest = 0
    for dtype in dtypes:  # a loop, not max(genexpr): every vector instruction built asks
        size = dtype.itemsize if isinstance(dtype, np.dtype) else np.dtype(dtype).itemsize
        if size > widest:
            widest = size
    return repeat_bytes // widest


def cast(values: np.ndarray, dtype: np.dtype, rounding: str, saturate: bool = True) -> np.ndarray:
    """Convert ``values`` to ``dtype``: to an integer type with ``rounding`` and saturation (an
    integer source narrower-cast with ``saturate=False`` wraps instead); to a narrower float format
    (or an integer to a float) with ``rounding`` (:func:`npusim.formats.round_to_format`); to an
    8-bit float (float8_e4m3fn, float8_e5m2, hifloat8) with ``rounding`` and saturation to its
    largest finite value (the Ascend 950's SatMode::SAT with the overflow mode set to saturate, as
    its quantising kernels run it; ``saturate=False``: overflow to infinity or NaN); from hifloat8
    through its exact values; widening is exact."""
    dtype = np.dtype(dtype)
    if values.dtype == formats.HIFLOAT8:
        values = formats.hifloat8_values(values)
    if np.issubdtype(dtype, np.integer):
        info = np.iinfo(dtype)
        if np.issubdtype(values.dtype, np.integer):
            wide = values.astype(np.int64)
            if not saturate:
                return wide.astype(dtype)  # two's complement: the low bits
        else:
            wide = ROUNDING[rounding](values.astype(np.float64))
            wide = np.nan_to_num(wide, nan=0.0, posinf=info.max, neginf=info.min)
        return np.clip(wide, info.min, info.max).astype(dtype)
    if dtype in formats.FLOAT8_DTYPES:
        return formats.convert(values, dtype, rounding, saturate)
    table = formats.FLOAT_FORMATS
    if dtype in table and values.dtype != dtype and not (values.dtype in table and table[values.dtype].digits <= table[dtype].digits
                                                         and table[values.dtype].emin >= table[dtype].emin):
        return formats.round_to_format(values.astype(np.float64), dtype, rounding)
    return values.astype(dtype)


def halving_reduce(values: np.ndarray, ufunc: np.ufunc, axis: int = -1) -> np.ndarray:
    """Reduce ``values`` along ``axis`` by pairwise halving, in its dtype: while n > 1 elements
    remain, h = ceil(n / 2) and element i += element i + h for i < n - h; then n = h. The chip's
    in-repeat order (vcadd) is not published; this is the order npusim defines (``docs/pypto.md``)."""
    x = np.moveaxis(np.array(values), axis, -1).copy()
    n = x.shape[-1]
    with np.errstate(all="ignore"):
        while n > 1:
            h = (n + 1) // 2
            x[..., : n - h] = ufunc(x[..., : n - h], x[..., h:n])
            n = h
    return x[..., 0]


def _widen(values: np.ndarray) -> np.ndarray:
    """fp16 / bf16 operands are computed in fp32 and rounded back once: for add, sub, mul, div,
    max, min that is the correctly rounded 16-bit result (fp32 carries more than 2p + 2 bits), and
    numpy's own 16-bit loops do the same element by element, only slower."""
    if values.dtype.itemsize == 2 and values.dtype.kind in "fV":  # float16, ml_dtypes.bfloat16
        return values.astype(np.float32)
    return values


def compute(kind: str, dst: np.ndarray, srcs: list[np.ndarray], scalar: object, rounding: str) -> None:
    """Apply vector instruction ``kind`` writing into ``dst`` (a view of UB)."""
    if kind in BINARY or kind in WITH_SCALAR or kind in UNARY:
        srcs = [_widen(s) for s in srcs]
    if kind in BINARY:
        with np.errstate(all="ignore"):
            dst[...] = BINARY[kind](srcs[0], srcs[1]).astype(dst.dtype)
    elif kind in WITH_SCALAR:
        with np.errstate(all="ignore"):
            dst[...] = WITH_SCALAR[kind](srcs[0], np.asarray(scalar, dtype=dst.dtype).astype(srcs[0].dtype)).astype(dst.dtype)
    elif kind in UNARY:
        with np.errstate(all="ignore"):
            dst[...] = UNARY[kind](srcs[0]).astype(dst.dtype)
    elif kind in MATH:
        with np.errstate(all="ignore"):
            dst[...] = MATH[kind](srcs[0].astype(np.float64)).astype(dst.dtype)
    elif kind in MATH_BINARY:
        with np.errstate(all="ignore"):
            dst[...] = MATH_BINARY[kind](srcs[0].astype(np.float64), srcs[1].astype(np.float64)).astype(dst.dtype)
    elif kind in BITWISE:
        dst[...] = BITWISE[kind](srcs[0], srcs[1]).astype(dst.dtype)
    elif kind in PREDICATE:
        dst[...] = PREDICATE[kind](_widen(srcs[0])).astype(dst.dtype)
    elif kind in COMPARE:
        dst[...] = COMPARE[kind](_widen(srcs[0]), _widen(srcs[1])).astype(dst.dtype)
    elif kind == "select":  # dst = srcs[1] where srcs[0] is not 0, else srcs[2]
        dst[...] = np.where(srcs[0] != 0, srcs[1], srcs[2]).astype(dst.dtype)
    elif kind in REDUCE:  # dst has the shape of srcs[0] without its last axis
        dst[...] = halving_reduce(srcs[0], REDUCE[kind]).astype(dst.dtype)
    elif kind in ARG_REDUCE:
        dst[...] = ARG_REDUCE[kind](srcs[0], axis=-1).astype(dst.dtype)
    elif kind == "cumsum":  # running sum along the last axis, one element after the other, in dst's dtype
        dst[...] = np.cumsum(srcs[0], axis=-1, dtype=dst.dtype)
    elif kind == "one_hot":  # dst[..., c] = 1 where srcs[0][...] == c
        dst[...] = (srcs[0][..., None] == np.arange(dst.shape[-1])).astype(dst.dtype)
    elif kind == "transpose":  # srcs[0] is (rows, cols), dst (cols, rows)
        dst[...] = srcs[0].T
    elif kind == "dup":
        dst[...] = np.asarray(scalar).astype(dst.dtype)
    elif kind == "cast":  # scalar "wrap": an integer narrowing without saturation
        with np.errstate(all="ignore"):
            dst[...] = cast(srcs[0], dst.dtype, rounding, saturate=scalar != "wrap")
    else:  # guarded by the builder
        raise ValueError(f"unknown vector instruction {kind!r}")


def indexed_move(dst: np.ndarray, src: np.ndarray | None, index: np.ndarray, value: object,
                 layout: tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...], tuple[int, ...], int, int],
                 scatter: bool, reduce: str, label: str) -> None:
    """A gather or scatter along one axis (:class:`~npusim.isa.instructions.IndexedMove`), on flat
    views of UB: for every position ``p`` of ``shape`` in row-major order, with ``q`` = ``p`` whose
    ``axis`` coordinate is the index's value at ``p``, a gather writes ``dst[p] = src[q]``; a scatter
    ``dst[q] = src[p]`` (or ``value``), or with ``reduce`` ``add`` / ``multiply`` ``dst[q] = dst[q] op
    src[p]`` one element after the other in that order, in ``dst``'s dtype (the framework's scalar
    loops, tileop/vector/scatter.h: a later write to the same place wins, the reductions accumulate
    in order). An index value outside ``[0, limit)`` raises OpArgumentError naming it."""
    shape, dst_strides, src_strides, index_strides, axis, limit = layout
    if not shape or 0 in shape:
        return
    positions = np.indices(shape).reshape(len(shape), -1).astype(np.int64)
    where = np.asarray(index_strides, dtype=np.int64) @ positions
    values_at = index[where].astype(np.int64)
    bad = (values_at < 0) | (values_at >= limit)
    if bad.any():
        raise OpArgumentError(f"pypto.{label}: index={int(values_at[int(np.argmax(bad))])} (a value of the index on the device) is outside "
                              f"[0, {limit}) along dim {axis}: index values must be >= 0 and < input.shape[dim]")
    moved = positions.copy()
    moved[axis] = values_at
    if not scatter:
        assert src is not None  # a gather reads a tile
        dst[np.asarray(dst_strides, dtype=np.int64) @ positions] = src[np.asarray(src_strides, dtype=np.int64) @ moved]
        return
    targets = np.asarray(dst_strides, dtype=np.int64) @ moved
    if src is not None:
        given = src[np.asarray(src_strides, dtype=np.int64) @ positions].astype(dst.dtype)
    else:
        given = np.full(targets.shape, np.asarray(value).astype(dst.dtype), dtype=dst.dtype)
    if reduce == "none":  # the last write of a place wins: keep each place's last position
        order = targets[::-1]
        _, last = np.unique(order, return_index=True)
        keep = len(targets) - 1 - last
        dst[targets[keep]] = given[keep]
        return
    with np.errstate(all="ignore"):
        (np.add if reduce == "add" else np.multiply).at(dst, targets, given)
