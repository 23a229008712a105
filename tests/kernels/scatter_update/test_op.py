"""scatter_update_ / scatter_update: bit-exact against an independent numpy reference written from
the op's documentation (op-plugin torch_npu-scatter_update.md; ops-nn index/scatter golden), and
every check of the aclnn wrapper."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import npusim
from npusim import torch_npu
from npusim.errors import OpArgumentError


def reference(data: np.ndarray, indices: np.ndarray, updates: np.ndarray, axis: int) -> np.ndarray:
    """data[b, ..., idx + k, ...] = updates[b, ..., k, ...] along ``axis`` (2-D indices: (batch, idx))."""
    out = data.copy()
    axis %= data.ndim
    pairs = indices.reshape(-1, 2) if indices.ndim == 2 else np.stack([np.arange(updates.shape[0]), indices.reshape(-1)[:updates.shape[0]]], 1)
    for b, (dest, offset) in enumerate(pairs):
        target = [slice(None)] * data.ndim
        target[0] = int(dest)
        target[axis] = slice(int(offset), int(offset) + updates.shape[axis])
        out[tuple(target)] = updates[b]
    return out

DTYPES = [np.int8, np.float16, np.float32, ml_dtypes.bfloat16, np.int32]

@st.composite
def cases(draw):
    ndim = draw(st.integers(2, 4))
    shape = [draw(st.integers(1, 5)) for _ in range(ndim)]
    shape[-1] = draw(st.integers(1, 40))
    axis = draw(st.integers(1, ndim - 1))
    shape[axis] = draw(st.integers(1, 9))
    rows = draw(st.integers(1, shape[axis]))
    two_d = draw(st.booleans())
    batches = draw(st.integers(1, shape[0]))
    up_shape = list(shape)
    up_shape[0], up_shape[axis] = batches, rows
    rng = np.random.default_rng(draw(st.integers(0, 2**16)))
    if two_d:  # distinct (batch, offset) destinations
        dests = rng.choice(shape[0], batches, replace=batches > shape[0])
        offsets = rng.integers(0, shape[axis] - rows + 1, batches)
        keep = {}
        for b, (d, o) in enumerate(zip(dests, offsets)):
            keep.setdefault(int(d), (b, int(o)))
        batches = len(keep)
        up_shape[0] = batches
        indices = np.array([[d, o] for d, (_, o) in sorted(keep.items())], np.int64)
    else:
        indices = rng.integers(0, shape[axis] - rows + 1, batches)
    dtype = draw(st.sampled_from(DTYPES))
    index_dtype = draw(st.sampled_from([np.int32, np.int64]))
    data = rng.integers(-100, 100, shape).astype(dtype)
    updates = rng.integers(-100, 100, up_shape).astype(dtype)
    return data, indices.astype(index_dtype), updates, axis - ndim if draw(st.booleans()) else axis

@settings(max_examples=40, deadline=None)
@given(cases())
def test_scatter_update_is_bit_exact_in_place_and_out_of_place(case):
    data, indices, updates, axis = case
    expected = reference(data, indices, updates, axis)
    with npusim.session("a2"):
        device = npusim.tensor(data)
        out = torch_npu.scatter_update(device, npusim.tensor(indices), npusim.tensor(updates), axis)
        assert np.array_equal(device.numpy().view(np.uint8), data.view(np.uint8))  # out of place leaves data
        torch_npu.scatter_update_(device, npusim.tensor(indices), npusim.tensor(updates), axis)
        assert out.numpy().tobytes() == expected.tobytes()
        assert device.numpy().tobytes() == expected.tobytes()

def test_a_0d_index_scatters_one_batch():
    data = np.zeros((2, 4, 8), np.float32)
    updates = np.ones((1, 2, 8), np.float32)
    with npusim.session("a2"):
        out = torch_npu.scatter_update(npusim.tensor(data), npusim.tensor(np.array(1, np.int32)), npusim.tensor(updates), -2)
        assert np.array_equal(out.numpy(), reference(data, np.array([1]), updates, -2))

def test_the_batches_are_those_of_updates_with_1d_indices_and_of_the_indices_with_2d():
    """ops-nn's UT l2_inplace_scatter_update_test_err_dim_five expects success for data [4, 3, 9, 4, 2],
    updates [2, 3, 9, 1, 2], 4 indices, axis -2: updates batch b goes to row indices[b] of data batch b,
    the further indices are not used (the ops-nn golden loops over updates.shape[0]); with 2-D
    indices the pairs decide and further updates batches are not used."""
    rng = np.random.default_rng(4)
    data = rng.normal(size=(4, 3, 9, 4, 2)).astype(np.float16)
    updates = rng.normal(size=(2, 3, 9, 1, 2)).astype(np.float16)
    indices = np.array([3, 1, 0, 2], np.int32)
    pairs = np.array([[3, 2]], np.int64)
    with npusim.session("a2"):
        out = torch_npu.scatter_update(npusim.tensor(data), npusim.tensor(indices), npusim.tensor(updates), -2)
        paired = torch_npu.scatter_update(npusim.tensor(data), npusim.tensor(pairs), npusim.tensor(updates), -2)
        assert np.array_equal(out.numpy(), reference(data, indices, updates, -2))
        assert np.array_equal(paired.numpy(), reference(data, pairs, updates[:1], -2))


@pytest.mark.parametrize("change, message", [
    (dict(data=np.zeros((2, 4, 8), np.int64)), "input.dtype = int64: not supported on Atlas A2/A3"),
    (dict(updates=np.zeros((2, 1, 8), np.float16)), "updates.dtype = float16: updates must have input's dtype (float32)"),
    (dict(indices=np.zeros(2, np.int16)), "indices.dtype = int16: indices must be int32 or int64"),
    (dict(axis=0), "axis = 0: axis must be in [1, 2] or [-2, -1]"),
    (dict(axis=3), "axis = 3"),
    (dict(indices=np.zeros((2, 3), np.int32)), "2-D indices must have shape [B, 2]"),
    (dict(updates=np.zeros((3, 1, 8), np.float32), indices=np.zeros(3, np.int32)), "must not exceed input.shape[0]"),
    (dict(updates=np.zeros((2, 1, 4), np.float32)), "updates.shape[2] (4) must equal input.shape[2] (8)"),
    (dict(indices=np.zeros(1, np.int32)), "indices must have at least updates.shape[0] = 2 values"),
    (dict(indices=np.zeros((3, 2), np.int32)), "updates.shape[0] (2) must be at least indices.shape[0] (3)"),
    (dict(data=np.zeros((0, 4, 8), np.float32)), "empty tensors are not supported"),
    (dict(data=np.zeros(8, np.float32), updates=np.zeros(8, np.float32)), "input must have rank 2..8"),
    (dict(indices=np.array([0, 4], np.int32)), "indices[1] = 4: batch 1 would write rows [4, 5)"),
])
def test_bad_calls_are_refused_naming_the_argument(change, message):
    args = dict(data=np.zeros((2, 4, 8), np.float32), indices=np.array([0, 1], np.int32), updates=np.zeros((2, 1, 8), np.float32),
                axis=-2)
    args.update(change)
    with npusim.session("a2"):
        tensors = {k: npusim.tensor(v) for k, v in args.items() if k != "axis"}
        with pytest.raises(OpArgumentError) as error:
            torch_npu.scatter_update_(tensors["data"], tensors["indices"], tensors["updates"], args["axis"])
    assert message in str(error.value)
