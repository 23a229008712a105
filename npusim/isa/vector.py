"""What each vector instruction computes, on numpy views of UB, and how many repeats it takes.

Arithmetic runs in the instruction's dtype (fp16 / bf16 / fp32 / int32) with IEEE round-to-nearest-
even results, as the vector unit produces them. ``cast`` converts with an explicit rounding mode and
saturates integer results to the target range; NaN converts to 0 (documented choice: the vendor does
not publish its NaN behaviour).
"""

from __future__ import annotations

from typing import Callable

import numpy as np

BINARY = {
    "add": np.add,
    "sub": np.subtract,
    "mul": np.multiply,
    "div": np.divide,
    "max": np.maximum,
    "min": np.minimum,
}
WITH_SCALAR = {"adds": np.add, "muls": np.multiply, "maxs": np.maximum, "mins": np.minimum}
UNARY = {"exp": np.exp, "abs": np.abs, "relu": lambda x: np.maximum(x, 0), "copy": np.copy}

ROUNDING: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "rint": np.rint,  # round half to even (CAST_RINT)
    "round": lambda x: np.sign(x) * np.floor(np.abs(x) + 0.5),  # half away from zero (CAST_ROUND)
    "floor": np.floor,
    "ceil": np.ceil,
    "trunc": np.trunc,
}

KINDS = tuple(BINARY) + tuple(WITH_SCALAR) + tuple(UNARY) + ("dup", "cast")


def elements_per_repeat(repeat_bytes: int, *dtypes: np.dtype) -> int:
    """Elements one repeat covers: the widest dtype involved decides (64 fp32 or 128 fp16 per 256 B)."""
    widest = 0
    for dtype in dtypes:  # a loop, not max(genexpr): every vector instruction built asks
        size = dtype.itemsize if isinstance(dtype, np.dtype) else np.dtype(dtype).itemsize
        if size > widest:
            widest = size
    return repeat_bytes // widest


def cast(values: np.ndarray, dtype: np.dtype, rounding: str) -> np.ndarray:
    """Convert ``values`` to ``dtype``; to an integer type with ``rounding`` and saturation."""
    dtype = np.dtype(dtype)
    if np.issubdtype(dtype, np.integer):
        info = np.iinfo(dtype)
        if np.issubdtype(values.dtype, np.integer):
            wide = values.astype(np.int64)
        else:
            wide = ROUNDING[rounding](values.astype(np.float64))
            wide = np.nan_to_num(wide, nan=0.0, posinf=info.max, neginf=info.min)
        return np.clip(wide, info.min, info.max).astype(dtype)
    return values.astype(dtype)


def _widen(values: np.ndarray) -> np.ndarray:
    """fp16 / bf16 operands are computed in fp32 and rounded back once: for add, sub, mul, div,
    max, min that is the correctly rounded 16-bit result (fp32 carries more than 2p + 2 bits), and
    numpy's own 16-bit loops do the same element by element, only slower."""
    if values.dtype.itemsize == 2 and values.dtype.kind in "fV":  # float16, ml_dtypes.bfloat16
        return values.astype(np.float32)
    return values


def compute(kind: str, dst: np.ndarray, srcs: list[np.ndarray], scalar, rounding: str) -> None:
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
    elif kind == "dup":
        dst[...] = np.asarray(scalar).astype(dst.dtype)
    elif kind == "cast":
        with np.errstate(all="ignore"):
            dst[...] = cast(srcs[0], dst.dtype, rounding)
    else:  # guarded by the builder
        raise ValueError(f"unknown vector instruction {kind!r}")
