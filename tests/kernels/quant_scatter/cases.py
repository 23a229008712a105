"""Inputs of npu_quant_scatter_ for the simulator tests: values with exact .5 ties, saturation at
both ends, inf and NaN; indices without overlaps; device tensors with contiguous, sliced or
transposed layouts. Plain numpy; nothing here computes the op."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import ml_dtypes
import numpy as np

import npusim
from npusim.config import load_config
from npusim.hw.system import System
from npusim.isa.target import VectorTarget

BF16 = ml_dtypes.bfloat16


def vector_target(config: str = "a2", *, ub_bytes: int | None = None) -> VectorTarget:
    """The vector cores of a built-in config, optionally with another UB size (a what-if)."""
    target = VectorTarget.of(System(load_config(config).spec))
    return target if ub_bytes is None else dataclasses.replace(target, ub_bytes=ub_bytes)
LAYOUTS = ("contiguous", "sliced", "transposed")


@dataclass
class Case:
    """Host arrays of one call (logical values) and its non-tensor arguments."""

    input: np.ndarray
    indices: np.ndarray
    updates: np.ndarray
    scales: np.ndarray
    zero_points: np.ndarray | None
    axis: int


def dtypes(bf16: bool) -> tuple:
    """(updates, scales, zero points) dtypes of one allowed row."""
    return (BF16, BF16, BF16) if bf16 else (np.float16, np.float32, np.int32)


def quant_values(rng: np.random.Generator, updates_shape, last: int, *, bf16: bool, zero_points: bool, specials: bool = True):
    """(updates, scales, zero points) with, when ``specials``, exact ties (u / s = n + 0.5 with s a
    power of two), values far beyond int8 at both ends, +-inf and NaN mixed in."""
    updates_dtype, scales_dtype, zp_dtype = dtypes(bf16)
    powers = 2.0 ** rng.integers(-3, 4, last)
    arbitrary = rng.uniform(0.05, 4.0, last)
    scales = np.where(rng.random(last) < 0.5, powers, arbitrary) * rng.choice([-1.0, 1.0], last, p=[0.2, 0.8])
    scales = scales.astype(scales_dtype)
    n = math.prod(updates_shape)
    scale_of = np.resize(scales.astype(np.float64), n)
    values = rng.normal(0, 60, n)
    if specials:
        kind = rng.integers(0, 10, n)
        ties = (rng.integers(-127, 127, n) + 0.5) * scale_of
        values = np.where(kind == 0, ties, values)
        values = np.where(kind == 1, rng.choice([-1, 1], n) * rng.uniform(200, 3000, n) * np.abs(scale_of), values)
        values = np.where(kind == 2, np.array([np.inf, -np.inf, np.nan])[rng.integers(0, 3, n)], values)
    updates = values.astype(updates_dtype).reshape(updates_shape)
    zps = None
    if zero_points:
        zps = rng.integers(-5, 6, last).astype(zp_dtype)
    return updates, scales, zps


def disjoint_indices(rng: np.random.Generator, input_shape, updates_shape, axis: int, index_rank: int) -> np.ndarray:
    """In-range indices whose destinations never overlap (1-D: any row; 2-D: distinct aligned slots)."""
    batches, axis_len, rows = updates_shape[0], input_shape[axis], updates_shape[axis]
    if index_rank == 1:
        return rng.integers(0, axis_len - rows + 1, batches).astype(np.int32)
    slots = [(d, k * rows) for d in range(input_shape[0]) for k in range(axis_len // rows)]
    chosen = rng.permutation(len(slots))[:batches]
    return np.array([slots[i] for i in chosen], dtype=np.int32).reshape(batches, 2)


def device_view(array: np.ndarray, layout: str, rng: np.random.Generator, device: int = 0):
    """``(view, base)``: a device tensor with ``array``'s values in ``layout``, and the device tensor
    that owns the bytes (the same one when contiguous)."""
    if layout == "contiguous":
        base = npusim.tensor(array, device=device)
        return base, base
    if layout == "sliced":
        padded = tuple(s + 1 for s in array.shape[:-1]) + (array.shape[-1] + 32,)
        host = rng.integers(-100, 100, padded).astype(array.dtype)
        where = (slice(1, None),) * (array.ndim - 1) + (slice(0, array.shape[-1]),)
        host[where] = array
        base = npusim.tensor(host, device=device)
        return base[where], base
    a, b = sorted(rng.choice(array.ndim, 2, replace=False).tolist())
    base = npusim.tensor(np.ascontiguousarray(array.swapaxes(a, b)), device=device)
    return base.transpose(a, b), base
