"""An independent numpy reference of PyPTO's compute ops, written from the framework's op docs
(hicann/pypto docs/zh/api: CastMode.md's bit rules, pypto-cast.md, pypto-matmul.md, the reductions'
pages) and the order npusim documents (docs/pypto.md), not from the simulator's code.

Rounding works on exact integers: a value is ``mantissa x 2**exponent`` (Python ints, from
``float.as_integer_ratio``) and is cut to the target's digits by CastMode.md's rules on the
discarded bits. Elementwise results are the exactly rounded results (float64 arithmetic rounded
once: float64 carries more than 2p + 2 bits of every 16- and 32-bit format, so the one rounding
is exact for + - * / and sqrt).
"""

from __future__ import annotations

import math
from fractions import Fraction

import ml_dtypes
import numpy as np

BF16 = np.dtype(ml_dtypes.bfloat16)
FORMATS = {np.dtype(np.float16): (11, -14, 15), BF16: (8, -126, 127), np.dtype(np.float32): (24, -126, 127),
           np.dtype(ml_dtypes.float8_e4m3fn): (4, -6, 8), np.dtype(ml_dtypes.float8_e5m2): (3, -14, 15)}
"""digits (with the implicit bit), smallest normal exponent, largest exponent (OFP8 v1.0 for the two
float8 formats; E4M3's top code at exponent 8 is NaN, so its largest value is 448, not the 480 of
this rule: callers saturate to it)"""


def _round_integer(kept: int, first: int, rest: bool, negative: bool, mode: str) -> int:
    """CastMode.md: whether to carry into ``kept`` given the first discarded bit and whether any
    later discarded bit is set."""
    inexact = first or rest
    if mode == "rint":
        carry = first and (rest or kept & 1)
    elif mode == "round":
        carry = first
    elif mode == "floor":
        carry = negative and inexact
    elif mode == "ceil":
        carry = (not negative) and inexact
    elif mode == "trunc":
        carry = False
    elif mode == "odd":
        carry = inexact and not kept & 1
    else:
        raise ValueError(mode)
    return kept + 1 if carry else kept


def round_value(value: Fraction, dtype, mode: str) -> float:
    """The exact rational ``value`` rounded to the float format ``dtype`` with ``mode``."""
    digits, emin, emax = FORMATS[np.dtype(dtype)]
    if value == 0:
        return 0.0
    negative = value < 0
    magnitude = -value if negative else value
    exponent = magnitude.numerator.bit_length() - magnitude.denominator.bit_length()
    if Fraction(2) ** exponent > magnitude:
        exponent -= 1
    exponent = max(exponent, emin)
    quantum = Fraction(2) ** (exponent - digits + 1)
    scaled = magnitude / quantum  # the digits that stay are the integer part
    kept = scaled.numerator // scaled.denominator
    remainder = scaled - kept
    first = remainder >= Fraction(1, 2)
    rest = remainder != 0 and remainder != Fraction(1, 2)
    kept = _round_integer(kept, first, rest, negative, mode)
    result = kept * quantum
    largest = (2 - Fraction(2) ** (1 - digits)) * Fraction(2) ** emax
    if result > largest:
        overflow_to_inf = mode in ("rint", "round") or (mode == "ceil" and not negative) or (mode == "floor" and negative)
        return float("-inf" if negative else "inf") if overflow_to_inf else float(-largest if negative else largest)
    return float(-result if negative else result)


def cast_float(values: np.ndarray, dtype, mode: str) -> np.ndarray:
    """Float or int values converted to the float format ``dtype`` with ``mode`` (NaN stays NaN)."""
    out = []
    for v in np.asarray(values).ravel():
        if np.issubdtype(np.asarray(v).dtype, np.floating) and not np.isfinite(v):
            out.append(float(v))
        else:
            exact = Fraction(int(v)) if np.issubdtype(np.asarray(v).dtype, np.integer) else Fraction(float(v))
            out.append(math.copysign(round_value(exact, dtype, mode), float(v)))  # a rounded value keeps its sign, zero too
    return np.array(out, np.float64).astype(dtype).reshape(np.shape(values))


def cast_int(values: np.ndarray, dtype, mode: str, saturate: bool = True) -> np.ndarray:
    """Values converted to the integer ``dtype``: floats rounded with ``mode`` and saturated (NaN ->
    0, +-inf -> the limits); integers saturated, or wrapped without ``saturate``."""
    info = np.iinfo(dtype)
    out = []
    for v in np.asarray(values).ravel():
        if np.issubdtype(np.asarray(v).dtype, np.integer):
            n = int(v)
            out.append(min(max(n, info.min), info.max) if saturate else ((n - info.min) % (1 << info.bits)) + info.min)
            continue
        if np.isnan(v):
            out.append(0)
            continue
        if np.isinf(v):
            out.append(info.max if v > 0 else info.min)
            continue
        x = Fraction(float(v))
        negative = x < 0
        magnitude = -x if negative else x
        kept = magnitude.numerator // magnitude.denominator
        remainder = magnitude - kept
        kept = _round_integer(kept, remainder >= Fraction(1, 2), remainder not in (0, Fraction(1, 2)), negative, mode)
        n = -kept if negative else kept
        out.append(min(max(n, info.min), info.max))
    return np.array(out, np.int64).astype(dtype).reshape(np.shape(values))


def elementwise(op: str, a: np.ndarray, b=None, out_dtype=None) -> np.ndarray:
    """An elementwise op, exactly rounded to ``out_dtype`` (default: a's dtype); integers wrap."""
    out_dtype = np.dtype(out_dtype or a.dtype)
    if np.issubdtype(out_dtype, np.integer):
        x, y = a.astype(np.int64), None if b is None else np.asarray(b).astype(np.int64)
        result = {"add": lambda: x + y, "sub": lambda: x - y, "mul": lambda: x * y, "maximum": lambda: np.maximum(x, y),
                  "minimum": lambda: np.minimum(x, y), "abs": lambda: np.abs(x), "neg": lambda: -x}[op]()
        return result.astype(out_dtype)
    x = a.astype(np.float64)
    y = None if b is None else np.asarray(b).astype(np.float64)
    with np.errstate(all="ignore"):
        result = {"add": lambda: x + y, "sub": lambda: x - y, "mul": lambda: x * y, "div": lambda: x / y,
                  "maximum": lambda: np.maximum(x, y), "minimum": lambda: np.minimum(x, y), "abs": lambda: np.abs(x),
                  "neg": lambda: -x, "sqrt": lambda: np.sqrt(x), "exp": lambda: np.exp(x), "rsqrt": lambda: 1 / np.sqrt(x)}[op]()
    return result.astype(out_dtype)


def halving(values: np.ndarray, combine, axis: int) -> np.ndarray:
    """Reduce along ``axis`` in the order docs/pypto.md states: while n > 1, h = ceil(n / 2) and
    element i is combined with element i + h (i < n - h), in the values' dtype."""
    x = np.moveaxis(np.array(values), axis, 0)
    parts = list(x)
    with np.errstate(all="ignore"):
        while len(parts) > 1:
            h = (len(parts) + 1) // 2
            parts = [combine(parts[i], parts[i + h]) if i + h < len(parts) else parts[i] for i in range(h)]
    return np.asarray(parts[0], dtype=x.dtype)


def reduce(op: str, values: np.ndarray, axis: int, keepdim: bool) -> np.ndarray:
    """sum / amax / amin: bf16 in fp32 (rounded back once), sums in the halving order."""
    dtype = values.dtype
    work = values.astype(np.float32) if dtype == BF16 else values
    if op == "sum":
        result = halving(work, np.add, axis)
    else:
        result = (np.max if op == "amax" else np.min)(work, axis=axis)
    result = np.asarray(result).astype(dtype)
    return np.expand_dims(result, axis) if keepdim else result


def cumsum(values: np.ndarray, axis: int) -> np.ndarray:
    """Running sums, element after element: fp16 / bf16 in fp32 then rounded back; integers in int32
    (wrapping) then widened to int64."""
    if np.issubdtype(values.dtype, np.integer):
        out = np.zeros(values.shape, np.int32)
        running = np.zeros(np.delete(values.shape, axis), np.int32)
        for i in range(values.shape[axis]):
            with np.errstate(all="ignore"):
                running = running + np.take(values, i, axis=axis).astype(np.int32)
            np.moveaxis(out, axis, 0)[i] = running
        return out.astype(np.int64)
    work = values.astype(np.float32)
    out = np.zeros(values.shape, np.float32)
    running = np.zeros(np.delete(values.shape, axis), np.float32)
    for i in range(values.shape[axis]):
        running = running + np.take(work, i, axis=axis)
        np.moveaxis(out, axis, 0)[i] = running
    return out.astype(values.dtype)


def _exact(value) -> Fraction:
    return Fraction(float(value))


def matmul(a: np.ndarray, b: np.ndarray, out_dtype) -> np.ndarray:
    """``a @ b`` as the cube computes it (pypto-matmul.md; docs/pypto.md): k in blocks of 32 bytes
    of the input dtype; per block and output the products summed exactly and rounded once to fp32
    (round to nearest even), added to the fp32 accumulator block after block; the result converted
    to ``out_dtype`` by round to nearest even. int8 accumulates exactly in int32 (wrapping)."""
    out_dtype = np.dtype(out_dtype)
    m, k = a.shape
    n = b.shape[1]
    if np.issubdtype(a.dtype, np.integer):
        return (a.astype(np.int64) @ b.astype(np.int64)).astype(np.int32).astype(out_dtype)
    block = 32 // a.dtype.itemsize
    a_exact = [[_exact(v) for v in row] for row in a]
    b_exact = [[_exact(v) for v in row] for row in b]
    out = np.zeros((m, n), np.float32)
    for i in range(m):
        for j in range(n):
            acc = np.float32(0)
            for first in range(0, k, block):
                partial = sum((a_exact[i][q] * b_exact[q][j] for q in range(first, min(first + block, k))), Fraction(0))
                acc = np.float32(acc + np.float32(round_value(partial, np.float32, "rint")))
            out[i, j] = acc
    return out.astype(out_dtype)


def gather(values: np.ndarray, dim: int, index: np.ndarray) -> np.ndarray:
    """pypto-gather.md: ``out[p] = input[p with p[dim] = index[p]]``, of index's shape, element by element."""
    out = np.empty(index.shape, values.dtype)
    for p in np.ndindex(*index.shape):
        q = list(p)
        q[dim] = int(index[p])
        out[p] = values[tuple(q)]
    return out


def scatter(values: np.ndarray, dim: int, index: np.ndarray, src, reduce=None) -> np.ndarray:
    """pypto-scatter_.md: a copy of input with ``out[p with p[dim] = index[p]] = src[p]`` (src a
    tensor, or a number in input's dtype), element by element in row-major order of p (a later write
    wins); with reduce 'add' / 'multiply' accumulated there in that order, fp16 / bf16 in fp32 and
    rounded back to nearest even once at the end (indexing.cpp Scatter's casts)."""
    wide = values.dtype in (np.float16, BF16) and reduce is not None
    out = values.astype(np.float32) if wide else values.copy()
    number = None if isinstance(src, np.ndarray) else np.asarray(float(src)).astype(values.dtype).astype(out.dtype)
    for p in np.ndindex(*index.shape):
        q = list(p)
        q[dim] = int(index[p])
        given = number if number is not None else np.asarray(src[p]).astype(out.dtype)
        q = tuple(q)
        with np.errstate(all="ignore"):
            if reduce is None:
                out[q] = given
            elif reduce == "add":
                out[q] = (out[q] + given).astype(out.dtype)
            else:
                out[q] = (out[q] * given).astype(out.dtype)
    return out.astype(values.dtype) if wide else out


def scatter_update(values: np.ndarray, index: np.ndarray, src: np.ndarray) -> np.ndarray:
    """pypto-scatter_update.md (dim -2): input's rows of d (2-D [N, d], 4-D [blockNum, blockSize, 1, d]
    seen as blockNum * blockSize rows) with row index[i, j] replaced by src's row of (i, j)."""
    out = values.copy()
    rows = out.reshape(-1, values.shape[-1])
    updates = src.reshape(-1, src.shape[-1])
    for k, (i, j) in enumerate(np.ndindex(*index.shape)):
        rows[int(index[i, j])] = updates[k]
    return out


def index_select(values: np.ndarray, dim: int, index: np.ndarray) -> np.ndarray:
    """pypto-index_select.md: ``out[t0.., i.., t..] = input[t0.., index[i..], t..]``, of shape
    input.shape[:dim] + index.shape + input.shape[dim + 1:], element by element."""
    shape = values.shape[:dim] + index.shape + values.shape[dim + 1:]
    out = np.empty(shape, values.dtype)
    m = index.ndim
    for p in np.ndindex(*shape):
        q = p[:dim] + (int(index[p[dim:dim + m]]),) + p[dim + m:]
        out[p] = values[q]
    return out


def index_add(values: np.ndarray, dim: int, index: np.ndarray, source: np.ndarray, alpha=1) -> np.ndarray:
    """pypto-index_add_.md: a copy of input with ``input[..., index[i], ...] += alpha * source[..., i, ...]``
    along dim, element by element in row-major order of source's positions (i ascending for each
    place), in input's dtype: alpha is first the input's dtype (Element(input.dtype, alpha): an fp32
    value, truncated for an integer dtype), each product rounded to the dtype (integers wrap), each
    sum too (the atomic adds of indexadd.h). The tile op multiplies only when |alpha - 1| > 1e-6."""
    dtype = values.dtype
    a32 = np.float32(float(alpha))
    scale = np.asarray(int(a32) if np.issubdtype(dtype, np.integer) else a32).astype(dtype)
    multiply = abs(float(scale) - 1) > 1e-6
    out = values.copy()
    for p in np.ndindex(*source.shape):
        q = list(p)
        q[dim] = int(index[p[dim]])
        given = np.asarray(source[p])
        with np.errstate(all="ignore"):
            if multiply:
                given = (given * scale).astype(dtype)
            out[tuple(q)] = (out[tuple(q)] + given).astype(dtype)
    return out


def index_put(values: np.ndarray, indices, given: np.ndarray, accumulate: bool = False) -> np.ndarray:
    """pypto-index_put_.md: a copy of input with ``input[indices[0][i], ..., indices[k-1][i], ...] =
    given[i, ...]`` (``+=`` with accumulate, in input's dtype, integers wrapping), one i after the
    other: a later write to a place wins (the page calls duplicates undefined)."""
    out = values.copy()
    for i in range(given.shape[0]):
        place = tuple(int(index[i]) for index in indices)
        with np.errstate(all="ignore"):
            out[place] = (out[place] + given[i]).astype(values.dtype) if accumulate else given[i]
    return out
