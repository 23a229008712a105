"""Tests of npusim.kernels.quant_scatter.checks, and of the numpy reference they are compared with."""

from __future__ import annotations

import itertools
import time
import warnings
from types import SimpleNamespace

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from npusim.errors import OpArgumentError, UsageError
from npusim.kernels.quant_scatter import (
    UncheckedIndexWarning,
    check_indices,
    check_quant_scatter,
    find_overlaps,
)

from .reference import quant_scatter_reference, quantize_reference

BF16 = ml_dtypes.bfloat16


def spec(shape, dtype):
    """A tensor stand-in: only shape, dtype and ndim, so huge shapes cost nothing."""
    return SimpleNamespace(shape=tuple(shape), dtype=np.dtype(dtype), ndim=len(shape))


def args(input_shape=(4, 8, 32), indices_shape=(4,), updates_shape=(4, 2, 32), scales_shape=(32,),
         zero_points_shape=(32,), *, input_dtype=np.int8, indices_dtype=np.int32, updates_dtype=np.float16,
         scales_dtype=np.float32, zero_points_dtype=np.int32, axis=-2, quant_axis=-1, reduce="update",
         product="ascend910b"):
    zp = None if zero_points_shape is None else spec(zero_points_shape, zero_points_dtype)
    return dict(
        input=spec(input_shape, input_dtype), indices=spec(indices_shape, indices_dtype),
        updates=spec(updates_shape, updates_dtype), quant_scales=spec(scales_shape, scales_dtype),
        quant_zero_points=zp, axis=axis, quant_axis=quant_axis, reduce=reduce, product=product,
    )


def check(**overrides):
    return check_quant_scatter(**args(**overrides))


# ------------------------------------------------------------------------------ accepted problems


def test_doc_example_1_kv_cache_row_per_batch():
    p = check(input_shape=(24, 4096, 128), indices_shape=(24,), updates_shape=(24, 1, 128),
              scales_shape=(1, 1, 128), zero_points_shape=(1, 1, 128), updates_dtype=BF16,
              scales_dtype=BF16, zero_points_dtype=BF16)
    assert p.input_view == (24, 1, 4096, 128)
    assert p.updates_view == (24, 1, 1, 128)
    assert (p.axis, p.rows, p.bs, p.index_rank, p.last_dim) == (1, 1, 24, 1, 128)
    assert (p.index_itemsize, p.update_itemsize, p.scale_itemsize, p.zero_point_itemsize) == (4, 2, 2, 2)
    assert p.block_bytes == 128 and p.quant_rows_per_block == 1 and not p.empty


def test_doc_example_2_two_d_indices():
    p = check(input_shape=(1, 11, 1, 32), indices_shape=(1, 2), updates_shape=(1, 11, 1, 32),
              scales_shape=(1, 1, 1, 32), zero_points_shape=(1, 1, 1, 32), updates_dtype=BF16,
              scales_dtype=BF16, zero_points_dtype=BF16)
    assert p.input_view == (1, 11, 1, 32)
    assert (p.axis, p.rows, p.bs, p.index_rank, p.row_elements) == (2, 1, 11, 2, 32)


def test_negative_and_positive_axis_are_the_same_problem():
    assert check(axis=1) == check(axis=-2)


def test_inner_axis_merges_the_dims_around_it():
    p = check(input_shape=(3, 2, 5, 4, 32), indices_shape=(3,), updates_shape=(3, 2, 1, 4, 32), axis=2)
    assert p.input_view == (3, 2, 5, 128) and p.updates_view == (3, 2, 1, 128)
    assert p.quant_rows_per_block == 4 and p.bs == 6


@pytest.mark.parametrize("product", ["ascend910b", "ascend910c", "ascend310p"])
def test_fp16_row_with_int64_indices_and_no_zero_points_on_every_product(product):
    p = check(product=product, indices_dtype=np.int64, zero_points_shape=None)
    assert not p.has_zero_points and p.zero_point_itemsize == 0 and p.index_itemsize == 8


@pytest.mark.parametrize("which", ["input_shape", "indices_shape", "updates_shape", "scales_shape"])
def test_empty_tensors_are_a_no_op_even_with_an_invalid_axis(which):
    empty = {"input_shape": (0, 8, 32), "indices_shape": (0,), "updates_shape": (4, 0, 32), "scales_shape": (0,)}
    p = check(**{which: empty[which]}, axis=0)
    assert p.empty and p.input_view == (0, 0, 0, 0)


# ---------------------------------------------------------------------------------------- errors


def rejected(match_fragments, **overrides):
    with pytest.raises(OpArgumentError) as info:
        check(**overrides)
    message = str(info.value)
    assert message.startswith("npu_quant_scatter_: ")
    for fragment in match_fragments:
        assert fragment in message, f"{fragment!r} not in {message!r}"
    return message


def test_unknown_product_is_a_usage_error():
    with pytest.raises(UsageError, match="unknown product 'ascend910'"):
        check(product="ascend910")


@pytest.mark.parametrize(
    "overrides, fragments",
    [
        (dict(reduce="add"), ["reduce = 'add'", "only 'update'"]),
        (dict(input_dtype=np.float16), ["input.dtype = float16", "must be int8"]),
        (dict(indices_dtype=np.int16), ["indices.dtype = int16", "int32 or int64"]),
        (dict(updates_dtype=np.float32), ["updates.dtype = float32", "not a supported dtype", "bfloat16, float16"]),
        (dict(updates_dtype=BF16, scales_dtype=BF16, zero_points_dtype=BF16, product="ascend310p"),
         ["updates.dtype = bfloat16", "not supported on Atlas inference series (ascend310p)", "allowed: float16"]),
        (dict(scales_dtype=BF16, product="ascend310p"), ["quant_scales.dtype = bfloat16", "not supported on"]),
        (dict(zero_points_dtype=np.float16), ["quant_zero_points.dtype = float16", "not a supported dtype"]),
        (dict(scales_dtype=BF16, zero_points_dtype=BF16),
         ["(float16, bfloat16, bfloat16)", "not an allowed combination on Atlas A2 (ascend910b)",
          "(bfloat16, bfloat16, bfloat16 or None); (float16, float32, int32 or None)"]),
        (dict(updates_dtype=BF16, scales_dtype=np.float32, zero_points_shape=None, product="ascend910c"),
         ["(bfloat16, float32, None)", "Atlas A3 (ascend910c)"]),
        (dict(updates_dtype=BF16, scales_dtype=BF16, zero_points_dtype=np.int32), ["(bfloat16, bfloat16, int32)"]),
        (dict(updates_shape=(4, 2, 1, 32)), ["updates.shape = (4, 2, 1, 32)", "rank of input (3"]),
        (dict(input_shape=(4, 32), updates_shape=(4, 32)), ["input.shape = (4, 32)", "rank 3..8, not 2"]),
        (dict(input_shape=(1,) * 8 + (32,), updates_shape=(1,) * 8 + (32,), indices_shape=(1,)),
         ["rank 3..8, not 9"]),
        (dict(axis=0), ["axis = 0", "[1, 1] or [-2, -2] for rank-3", "never the first or the last", "defaults of the documented signature"]),
        (dict(axis=-1), ["axis = -1"]),
        (dict(axis=2), ["axis = 2"]),
        (dict(axis=-3), ["axis = -3"]),
        (dict(quant_axis=-2), ["quant_axis = -2", "-1 or 2"]),
        (dict(quant_axis=1), ["quant_axis = 1"]),
        (dict(scales_shape=(1,) * 8 + (32,)), ["quant_scales.shape = (1, 1, 1, 1, 1, 1, 1, 1, 32)", "rank 1..8, not 9"]),  # aclnn page: 1-8 dims
        (dict(zero_points_shape=(1,) * 8 + (32,)), ["quant_zero_points.shape = (1, 1, 1, 1, 1, 1, 1, 1, 32)", "rank 1..8, not 9"]),
        (dict(scales_shape=()), ["quant_scales.shape = ()", "rank 1..8, not 0"]),
        (dict(scales_shape=(1, 64)), ["quant_scales.shape = (1, 64)", "last dim of updates (32), not 64"]),
        (dict(zero_points_shape=(2, 32)), ["quant_zero_points.shape = (2, 32)", "(32), not 64"]),
        (dict(indices_shape=(4, 2, 1)), ["indices.shape = (4, 2, 1)", "1-D [B] or 2-D [B, 2]"]),
        (dict(indices_shape=(4, 3)), ["indices.shape = (4, 3)", "[B, 2]"]),
        (dict(indices_shape=(3,)), ["updates.shape = (4, 2, 32)", "must equal indices.shape[0] (3)"]),
        (dict(input_shape=(3, 8, 32), indices_shape=(4,)), ["must not exceed input.shape[0] (3)"]),
        (dict(updates_shape=(4, 9, 32)), ["updates.shape[1] (9) along axis must not exceed input.shape[1] (8)"]),
        (dict(input_shape=(4, 3, 8, 64), updates_shape=(4, 2, 2, 64), scales_shape=(64,), zero_points_shape=(64,)),
         ["updates.shape = (4, 2, 2, 64)", "updates.shape[1] (2) must equal input.shape[1] (3)"]),
        (dict(input_shape=(4, 8, 48), updates_shape=(4, 2, 48), scales_shape=(48,), zero_points_shape=(48,)),
         ["input.shape = (4, 8, 48)", "48 int8 = 48 bytes", "multiple of 32 bytes"]),
    ],
)
def test_each_rule_is_refused_with_op_argument_value_and_rule(overrides, fragments):
    rejected(fragments, **overrides)


# ------------------------------------------------------------------------------------ indices


def problem_for(input_shape, updates_shape, index_rank=1, axis=-2):
    b = updates_shape[0]
    return check(input_shape=input_shape, updates_shape=updates_shape, axis=axis,
                 indices_shape=(b,) if index_rank == 1 else (b, 2),
                 scales_shape=(updates_shape[-1],), zero_points_shape=None)


def test_in_range_indices_give_one_full_segment_per_batch():
    p = problem_for((3, 2, 10, 32), (3, 2, 4, 32), axis=2)
    segments = check_indices(p, np.array([0, 6, 3], np.int32))
    assert [(s.batch, s.dest_batch, s.offset, s.rows, s.heads) for s in segments] == [
        (0, 0, 0, 4, range(2)), (1, 1, 6, 4, range(2)), (2, 2, 3, 4, range(2))]
    assert segments[1].block_start_rows().tolist() == [(1 * 2 + 0) * 10 + 6, (1 * 2 + 1) * 10 + 6]


def test_out_of_range_index_is_an_error_naming_batch_index_and_the_danger():
    p = problem_for((3, 2, 10, 32), (3, 2, 4, 32), axis=2)
    with pytest.raises(OpArgumentError) as info:
        check_indices(p, np.array([0, 7, -1], np.int32))
    message = str(info.value)
    for fragment in ["npu_quant_scatter_", "indices[1] = 7", "batch 1", "rows [7, 11)", "offset in [0, 6]",
                     "does not check indices", "silently corrupt memory", "1 more batches", "torch_npu.options(out_of_range='unchecked')"]:
        assert fragment in message


def test_two_d_destination_batch_out_of_range_is_an_error():
    p = problem_for((3, 10, 32), (2, 1, 32), index_rank=2)
    with pytest.raises(OpArgumentError, match=r"indices\[1\] = \[3, 0\].*input batch 3"):
        check_indices(p, np.array([[0, 0], [3, 0]], np.int64))


def test_indices_data_must_match_the_checked_problem():
    p = problem_for((3, 10, 32), (2, 1, 32))
    with pytest.raises(UsageError, match="does not match"):
        check_indices(p, np.array([0, 1, 2], np.int32))


def test_empty_problem_has_no_segments():
    assert check_indices(check(indices_shape=(0,), updates_shape=(0, 2, 32)), np.zeros(0, np.int32)) == []


def test_unchecked_emulation_keeps_blocks_inside_input_and_drops_the_rest():
    # H = 2 heads, S = 10 rows; offset 8 with U = 4 spills from head h into head h + 1.
    p = problem_for((2, 2, 10, 32), (2, 2, 4, 32), axis=2)
    with pytest.warns(UncheckedIndexWarning, match="2 batches .*0, 1"):
        segments = check_indices(p, np.array([-3, 8], np.int32), allow_out_of_range=True)
    # batch 0 head 0 starts at row -3 (before input): dropped; head 1 starts at row 7: kept.
    # batch 1 head 0 starts at row 28, kept (spills into batch 1 head 1); head 1 at 38 ends at 42 > 40.
    assert [(s.batch, s.heads) for s in segments] == [(0, range(1, 2)), (1, range(0, 1))]
    assert segments[0].block_start_rows().tolist() == [7] and segments[1].block_start_rows().tolist() == [28]


def test_unchecked_emulation_omits_a_batch_with_nothing_inside():
    p = problem_for((2, 10, 32), (2, 1, 32), index_rank=2)
    with pytest.warns(UncheckedIndexWarning):
        segments = check_indices(p, np.array([[0, 1], [5, 0]], np.int32), allow_out_of_range=True)
    assert [s.batch for s in segments] == [0]


# ----------------------------------------------------------------------------------- overlaps


def test_overlaps_name_colliding_batches_only():
    p = problem_for((4, 10, 32), (4, 2, 32), index_rank=2)
    # batch 0 [0,2) and 1 [1,3) collide in input batch 0; 2 [2,4) collides with 1 but only touches 0; batch 3 elsewhere.
    segments = check_indices(p, np.array([[0, 0], [0, 1], [0, 2], [1, 0]], np.int32))
    assert find_overlaps(segments) == [(0, 1), (1, 2)]


def test_adjacent_and_other_batch_segments_do_not_overlap():
    p = problem_for((4, 10, 32), (3, 2, 32), index_rank=2)
    segments = check_indices(p, np.array([[0, 0], [0, 2], [1, 0]], np.int32))
    assert find_overlaps(segments) == []
    assert find_overlaps([]) == []


def test_a_pile_up_reports_every_pair():
    p = problem_for((4, 10, 32), (3, 1, 32), index_rank=2)
    segments = check_indices(p, np.array([[2, 5]] * 3, np.int32))
    assert find_overlaps(segments) == [(0, 1), (0, 2), (1, 2)]


def test_unchecked_spill_into_another_head_is_an_overlap():
    p = problem_for((2, 2, 10, 32), (2, 2, 4, 32), index_rank=2, axis=2)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # every block stays inside input: nothing dropped, no warning
        segments = check_indices(p, np.array([[0, 8], [0, 0]], np.int32), allow_out_of_range=True)
    # batch 0 head 0 writes rows 8..11: into head 1 rows 0..1, where batch 1 head 1 writes rows 0..3.
    assert [s.heads for s in segments] == [range(2), range(2)]
    assert find_overlaps(segments) == [(0, 1)]


def test_overlap_search_scales_to_many_batches():
    batches = 20000
    p = check(input_shape=(batches, 3, 2, 32), updates_shape=(batches, 3, 1, 32), indices_shape=(batches, 2),
              scales_shape=(32,), zero_points_shape=None)
    slots = np.random.default_rng(0).permutation(batches * 2)[:batches]  # distinct (batch, offset) pairs
    slots[123] = slots[17456]
    indices = np.stack([slots // 2, slots % 2], axis=1)
    start = time.process_time()  # this process's CPU time: not the wall time, which other work on the machine (the suite on every core) stretches
    pairs = find_overlaps(check_indices(p, indices))
    assert pairs == [(123, 17456)]
    assert time.process_time() - start < 2.0  # a pairwise search of 20,000 batches would take minutes


# ----------------------------------------------------------------- properties against the reference


@st.composite
def scatter_cases(draw):
    """A valid problem (rank 3..5) with in-range indices of either form, and its arrays."""
    ndim = draw(st.integers(3, 5))
    axis = draw(st.integers(1, ndim - 2))
    inner = [draw(st.integers(1, 3)) for _ in range(ndim - 2)]
    last = 32 * draw(st.integers(1, 2))
    input_shape = [draw(st.integers(1, 4))] + inner + [last]
    input_shape[axis] = draw(st.integers(1, 5))
    updates_shape = list(input_shape)
    updates_shape[0] = draw(st.integers(1, input_shape[0]))
    updates_shape[axis] = draw(st.integers(1, input_shape[axis]))
    b, u, s = updates_shape[0], updates_shape[axis], input_shape[axis]
    offsets = draw(st.lists(st.integers(0, s - u), min_size=b, max_size=b))
    if draw(st.booleans()):
        dests = draw(st.lists(st.integers(0, input_shape[0] - 1), min_size=b, max_size=b))
        indices = np.array(list(zip(dests, offsets)), np.int32)
    else:
        indices = np.array(offsets, np.int32)
    return tuple(input_shape), tuple(updates_shape), axis, indices


def written_mask_from_segments(problem, segments):
    flat = np.zeros(int(np.prod(problem.input_shape)), bool)
    block = problem.rows * problem.row_elements
    for segment in segments:
        for row in segment.block_start_rows():
            flat[row * problem.row_elements: row * problem.row_elements + block] = True
    return flat.reshape(problem.input_shape)


@settings(max_examples=150, deadline=None)
@given(scatter_cases())
def test_merged_view_and_segments_agree_with_the_reference(case):
    input_shape, updates_shape, axis, indices = case
    p = check(input_shape=input_shape, updates_shape=updates_shape, axis=axis - len(input_shape) if axis % 2 else axis,
              indices_shape=indices.shape, scales_shape=(updates_shape[-1],), zero_points_shape=None)
    # The 4-D view: position s of view dim 2 is position s of the scatter axis, dims before/after merged.
    x = np.arange(int(np.prod(input_shape))).reshape(input_shape)
    for s in range(input_shape[axis]):
        assert np.array_equal(x.reshape(p.input_view)[:, :, s, :].ravel(), np.take(x, s, axis=axis).ravel())
    # Segment mapping: where the reference writes ones is where the segments' blocks are.
    zeros = np.zeros(input_shape, np.int8)
    ones = np.ones(updates_shape, np.float16)
    written = quant_scatter_reference(zeros, indices, ones, np.ones(updates_shape[-1], np.float32), axis=axis) != 0
    segments = check_indices(p, indices)
    assert np.array_equal(written_mask_from_segments(p, segments), written)
    # Overlaps: exactly the batch pairs whose reference writes intersect.
    masks = []
    for b in range(updates_shape[0]):
        single = quant_scatter_reference(zeros, indices[b: b + 1], ones[b: b + 1], np.ones(updates_shape[-1]), axis=axis)
        masks.append(single != 0)
    if indices.ndim == 1:  # 1-D: batch b writes input batch b, not batch 0
        masks = [np.roll(m, b, axis=0) for b, m in enumerate(masks)]
    expected = [(a, c) for a, c in itertools.combinations(range(len(masks)), 2) if (masks[a] & masks[c]).any()]
    assert find_overlaps(segments) == expected


# ------------------------------------------------------------------------------- the reference


def test_reference_rounds_ties_to_even():
    updates = np.array([0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 3.5, 0.49, 0.51], np.float16)
    assert quantize_reference(updates, np.ones(9, np.float32)).tolist() == [0, 2, 2, 0, -2, -2, 4, 0, 1]
    # Ties produced by the float32 divide, and by adding a zero point.
    assert quantize_reference(np.array([1, 3, 5, -3], np.float16), np.full(4, 2, np.float32)).tolist() == [0, 2, 2, -2]
    assert quantize_reference(np.array([1, 1], np.float16), np.full(2, 2, np.float32),
                              np.array([1, -2], np.int32)).tolist() == [2, -2]
    bf16 = np.array([0.5, 2.5], BF16)
    assert quantize_reference(bf16, np.ones(2, BF16), np.array([0, 1], BF16)).tolist() == [0, 4]


def test_reference_saturates_at_both_ends():
    updates = np.array([127.4, 127.5, 128, 1000, 65504, -128.4, -128.5, -129, -1000, -65504], np.float16)
    got = quantize_reference(updates, np.ones(10, np.float32))
    assert got.tolist() == [127, 127, 127, 127, 127, -128, -128, -128, -128, -128]
    with np.errstate(divide="ignore"):
        special = quantize_reference(np.array([1, -1, 0], np.float16), np.zeros(3, np.float32))
    assert special.tolist() == [127, -128, 0]  # +inf, -inf saturate; NaN (0/0) -> 0 (assumed)


def test_reference_divides_in_float32():
    # Exact quotients -70.5000032 and -19.4999998 round (in float32) to the ties -70.5 and -19.5,
    # which go to even: a float64 divide would give -71 and -19 instead.
    updates = np.array([-94.25, -39.53125], np.float16)
    scales = np.array([1.3368793725967407, 2.0272436141967773], np.float32)
    assert quantize_reference(updates, scales).tolist() == [-70, -20]


def test_reference_scatters_both_index_forms():
    input = np.zeros((2, 3, 4, 32), np.int8)
    updates = np.full((2, 3, 2, 32), 5, np.float16)
    scales = np.ones(32, np.float32)
    out = quant_scatter_reference(input, np.array([2, 0], np.int32), updates, scales, axis=2)
    assert (out[0, :, 2:4] == 5).all() and (out[1, :, 0:2] == 5).all() and out.sum() == 5 * 2 * 3 * 2 * 32
    out = quant_scatter_reference(input, np.array([[1, 1], [1, 2]], np.int32), updates[:, :, :1], scales, axis=2)
    assert (out[1, :, 1:3] == 5).all() and (out[0] == 0).all()


def test_doc_example_2_outputs_stay_in_minus_one_to_two():
    rng = np.random.default_rng(1)
    input = rng.uniform(1, 2, (1, 11, 1, 32)).astype(np.int8)
    updates = rng.uniform(-1, 1, (1, 11, 1, 32)).astype(BF16)
    scales = rng.uniform(1, 2, (1, 1, 1, 32)).astype(BF16)
    zero_points = rng.uniform(0, 1, (1, 1, 1, 32)).astype(BF16)
    indices = np.zeros((1, 2), np.int32)
    out = quant_scatter_reference(input, indices, updates, scales, zero_points, axis=-2)
    assert set(np.unique(out)) <= {-1, 0, 1, 2}
    p = check(input_shape=input.shape, indices_shape=indices.shape, updates_shape=updates.shape,
              scales_shape=scales.shape, zero_points_shape=zero_points.shape, updates_dtype=BF16,
              scales_dtype=BF16, zero_points_dtype=BF16)
    assert np.array_equal(written_mask_from_segments(p, check_indices(p, indices)), np.ones(input.shape, bool))
