"""The view-copy kernel: any strided view into any other of the same shape, on the device."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import npusim
from npusim.errors import UsageError
from npusim.kernels.view_copy import build_view_copy, gm_copies


@st.composite
def layouts(draw, ndim):
    """How to view a base array: a start and a step per dim (slices), and a permutation of the dims."""
    starts = tuple(draw(st.integers(0, 2)) for _ in range(ndim))
    steps = tuple(draw(st.sampled_from([1, 1, 2])) for _ in range(ndim))
    return starts, steps, tuple(draw(st.permutations(range(ndim))))


def make_view(shape, layout, dtype, rng):
    """A device view with ``shape`` over a larger base laid out as ``layout``; returns (view, its values)."""
    starts, steps, permutation = layout
    base_shape = tuple(starts[i] + shape[i] * steps[i] for i in permutation)
    host = rng.integers(-1000, 1000, base_shape).astype(dtype)
    where = tuple(slice(starts[i], None, steps[i]) for i in permutation)
    view = npusim.tensor(host)[where].permute(*np.argsort(permutation).tolist())
    assert view.shape == shape
    return view, host[where].transpose(np.argsort(permutation))


@settings(max_examples=40, deadline=None)
@given(st.data(), st.sampled_from([np.int8, np.float16, np.int32]))
def test_any_view_is_copied_into_any_other_of_the_same_shape(data, dtype):
    shape = tuple(data.draw(st.lists(st.integers(1, 5), min_size=1, max_size=4)))
    rng = np.random.default_rng(0)
    with npusim.session("a2"):
        src, values = make_view(shape, data.draw(layouts(len(shape))), dtype, rng)
        dst, _ = make_view(shape, data.draw(layouts(len(shape))), dtype, rng)
        build_view_copy(dst, src, name="copy").launch()
        assert np.array_equal(dst.numpy(), values)


def test_contiguous_runs_merge_and_evenly_spaced_runs_become_one_strided_copy():
    with npusim.session("a2", data=False):
        contiguous = npusim.empty((4, 8, 32), np.int8)
        (whole,) = gm_copies(contiguous, 0, 4 * 8 * 32)
        assert (whole.burst_count, whole.burst_bytes) == (1, 1024)
        sliced = npusim.empty((4, 8, 64), np.int8)[:, :, :32]  # rows of 32 bytes, 64 apart: one strided copy
        (strided,) = gm_copies(sliced, 0, 4 * 8 * 32)
        assert (strided.burst_count, strided.burst_bytes, strided.gap_bytes) == (32, 32, 32)
        every_other = npusim.empty((4, 15, 32), np.int8)[:, ::2]  # rows 64 apart within a batch, batches 480 apart
        copies = gm_copies(every_other, 0, 4 * 8 * 32)
        assert [(c.burst_count, c.burst_bytes, c.gap_bytes, c.offset_bytes) for c in copies] == [
            (8, 32, 32, 480 * b) for b in range(4)]
        partial = gm_copies(sliced, 16, 80)  # half a row, a whole row, half a row
        assert [(c.burst_count, c.burst_bytes, c.first) for c in partial] == [(1, 16, 16), (1, 32, 32), (1, 16, 64)]


def test_views_of_other_shapes_or_dtypes_are_refused():
    with npusim.session("a2", data=False):
        with pytest.raises(UsageError, match=r"Clone: cannot copy a \[4, 8\] int8 view into a \[8, 4\] int8 one"):
            build_view_copy(npusim.empty((8, 4), np.int8), npusim.empty((4, 8), np.int8), name="Clone")
        with pytest.raises(UsageError, match="shapes and dtypes must match"):
            build_view_copy(npusim.empty((4, 8), np.int16), npusim.empty((4, 8), np.int8), name="Clone")
