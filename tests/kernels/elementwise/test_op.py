"""cast and fill, the device kernels of torch's .to(dtype) and fill_: bit-exact against numpy
references of torch's conversion rules (float to integer toward zero; float64 to 16-bit floats
through float32)."""

from __future__ import annotations

import ml_dtypes
import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import npusim
from npusim.frontend.aclnn import run_op

BF16 = np.dtype(ml_dtypes.bfloat16)
DTYPES = [np.dtype(d) for d in (np.float64, np.float32, np.float16, np.int32, np.int8, np.uint8)] + [BF16]


def cast_reference(values: np.ndarray, dtype: np.dtype) -> np.ndarray:
    if values.dtype == np.float64 and dtype.itemsize == 2 and dtype.kind in "fV":
        values = values.astype(np.float32)
    if dtype.kind in "iu" and values.dtype.kind in "fV":
        info = np.iinfo(dtype)
        return np.clip(np.trunc(values.astype(np.float64)), info.min, info.max).astype(dtype)
    return values.astype(dtype)


@settings(max_examples=40, deadline=None)
@given(st.sampled_from(DTYPES), st.sampled_from(DTYPES), st.integers(1, 3000), st.integers(0, 2**16))
def test_cast_is_bit_exact(src, dst, n, seed):
    values = np.random.default_rng(seed).normal(0, 50, n).astype(src) if src.kind in "fV" else \
        np.random.default_rng(seed).integers(0, 100, n).astype(src)
    with npusim.session("a2"):
        out = npusim.empty(values.shape, dst)
        run_op("cast", "tensor.to", {"input": npusim.tensor(values), "out": out}, out=out)
        assert out.numpy().tobytes() == cast_reference(values, dst).tobytes()


@settings(max_examples=15, deadline=None)
@given(st.sampled_from(DTYPES), st.integers(1, 5000), st.integers(-3, 7))
def test_fill_writes_every_element(dtype, n, value):
    with npusim.session("a2"):
        out = npusim.tensor(np.full(n, 9, dtype))
        run_op("fill", "tensor.fill_", {"out": out, "value": value}, out=out)
        assert np.array_equal(out.numpy(), np.full(n, value).astype(dtype))
