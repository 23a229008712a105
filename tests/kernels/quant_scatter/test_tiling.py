"""Tests of npusim.kernels.quant_scatter.tiling: core split, mode choice, instruction chunking, byte totals."""

from __future__ import annotations

from types import SimpleNamespace

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from npusim.errors import ResourceError, UsageError
from npusim.kernels.quant_scatter import (
    TilingMode,
    VectorIssue,
    check_quant_scatter,
    plan_quant_scatter,
)

from .cases import vector_target

BF16 = ml_dtypes.bfloat16
UB = 192 * 1024
CORES = 48


def spec(shape, dtype):
    return SimpleNamespace(shape=tuple(shape), dtype=np.dtype(dtype), ndim=len(shape))


def problem(input_shape, updates_shape, *, axis=-2, index_rank=1, bf16=False, zero_points=True, product="ascend910b"):
    updates, scales, zp = (BF16, BF16, BF16) if bf16 else (np.float16, np.float32, np.int32)
    b, last = updates_shape[0], updates_shape[-1]
    return check_quant_scatter(
        spec(input_shape, np.int8), spec((b,) if index_rank == 1 else (b, 2), np.int32),
        spec(updates_shape, updates), spec((last,), scales), spec((last,), zp) if zero_points else None,
        axis, -1, "update", product=product,
    )


def plan(p, cores=CORES, ub=UB, double_buffer=False):
    return plan_quant_scatter(p, vector_target(ub_bytes=ub), vector_cores=cores, double_buffer=double_buffer)


def step(iteration, kind, dtype_in="float32", dtype_out="float32", operand="updates"):
    """The one vector step of this kind, dtypes and first operand in an iteration."""
    (found,) = [s for s in iteration.vector
                if (s.kind, s.dtype_in, s.dtype_out, s.operands[0]) == (kind, dtype_in, dtype_out, operand)]
    return found


# ----------------------------------------------------------------------------------- core split


@pytest.mark.parametrize(
    "bs, cores, each, used, last",
    [(24, 48, 1, 24, 1), (100, 48, 3, 34, 1), (96, 48, 2, 48, 2), (1, 48, 1, 1, 1), (97, 48, 3, 33, 1), (50, 1, 50, 1, 50)],
)
def test_core_split_is_ceil_division_with_the_remainder_on_the_last_core(bs, cores, each, used, last):
    pl = plan(problem((bs, 8, 64), (bs, 1, 64)), cores=cores)
    assert (pl.each_core_units, pl.used_cores, pl.last_core_units) == (each, used, last)
    assert [c.units for c in pl.cores] == [each] * (used - 1) + [last]
    assert sum(c.units for c in pl.cores) == bs


# ------------------------------------------------------------------------------------ mode choice


def test_doc_example_1_fits_whole_cores():
    pl = plan(problem((24, 4096, 128), (24, 1, 128), bf16=True))
    assert pl.mode == TilingMode.WHOLE_CORE == 100 and pl.used_cores == 24
    (it,) = pl.cores[5].iterations
    assert (it.indices_bytes, it.updates_bytes, it.scales_bytes, it.zero_point_bytes) == (96, 256, 256, 256)
    assert [(w.bs_row, w.column, w.nbytes, w.index_reads) for w in it.writes] == [(5, 0, 128, 1)]
    assert vector_target().blocks(it.writes[0].nbytes) == 4


def test_doc_example_2_two_d_indices_read_two_scalars_per_write():
    pl = plan(problem((1, 11, 1, 32), (1, 11, 1, 32), index_rank=2, bf16=True))
    assert pl.mode == 100 and pl.used_cores == 11
    (it,) = pl.cores[0].iterations
    assert it.index_reads == 2 and it.indices_bytes == 8
    # 32-element rows: the divide issues its full-repeat instruction with 0 repeats, then a 32-lane tail.
    div = step(it, "div")
    assert div.issues == (VectorIssue(64, 0), VectorIssue(32, 1)) and div.times == 1


def test_whole_core_mode_loads_once_and_writes_each_bs_row():
    pl = plan(problem((300, 4, 256), (300, 4, 256)))
    assert pl.mode == 100 and (pl.each_core_units, pl.used_cores, pl.last_core_units) == (7, 43, 6)
    (it,) = pl.cores[0].iterations
    assert it.updates_elements == 7 * 4 * 256 and len(it.writes) == 7
    assert step(it, "div").times == 7 * 4  # one divide per last-dim row


def test_large_batch_mode_when_a_core_share_does_not_fit():
    p = problem((4096, 16, 1024), (4096, 16, 1024))
    pl = plan(p)
    assert pl.mode == TilingMode.LARGE_BATCH
    assert len(pl.cores[0].iterations) == pl.each_core_units == 86
    # Scales (and zero points) are reloaded for every bs row.
    assert all(it.scales_bytes == 1024 * 4 and it.zero_point_bytes == 1024 * 4 for it in pl.cores[0].iterations)
    assert p.bs == 4096 and pl.total("scales_bytes") == 4096 * 1024 * 4


def test_double_buffering_keeps_the_tiling_when_its_buffers_fit_twice():
    p = problem((512, 16, 1024), (512, 16, 1024))
    single, double = plan(p), plan(p, double_buffer=True)
    assert (single.mode, single.chunk_elements) == (double.mode, double.chunk_elements) == (101, 16 * 1024)
    assert not single.double_buffer and double.double_buffer
    # Only the buffers MTE2 fills or MTE3 drains are held twice; the fp32 work buffers once.
    staged = sum(-(-n * d.itemsize // 32) * 32 for _, n, d, is_staged in double.ub_layout.buffers() if is_staged)
    assert double.ub_bytes == single.ub_bytes + staged <= double.ub_budget_bytes


def test_double_buffering_chooses_smaller_chunks_when_the_tiling_does_not_fit_twice():
    p = problem((4096, 16, 1024), (4096, 16, 1024))  # 16 KiB of indices in every UB
    single, double = plan(p), plan(p, double_buffer=True)
    assert single.mode == 101 and double.mode == TilingMode.LARGE_BATCH_LITTLE_QUANT
    assert double.double_buffer and double.ub_bytes <= double.ub_budget_bytes
    assert single.chunk_elements == 16 * 1024 and double.chunk_elements == 14 * 1024


def test_double_buffering_a_single_iteration_is_the_real_kernel():
    p = problem((24, 4096, 128), (24, 1, 128), bf16=True)
    assert plan(p, double_buffer=True) == plan(p)


def test_axis_split_little_quant_when_bs_is_smaller_than_the_axis():
    pl = plan(problem((1, 100000, 64), (1, 100000, 64)))
    assert pl.mode == TilingMode.LARGE_AXIS_LITTLE_QUANT and pl.split == "axis"
    assert (pl.each_core_units, pl.used_cores, pl.last_core_units) == (2084, 48, 2052)
    assert pl.chunk_elements == 255 * 64  # capped so a chunk's divide stays within 255 repeats
    first, second = pl.cores[1].iterations[:2]
    assert first.scales_bytes == 64 * 4 and second.scales_bytes == 0  # scales loaded once per core
    assert first.writes[0].column == 2084 * 64 and second.writes[0].column == 2084 * 64 + 255 * 64
    # 64-element rows, 255 rows per chunk: the divide runs column-wise, 255 repeats over all rows.
    div = step(second, "div")
    assert div.times == 1 and div.issues == (VectorIssue(64, 255),)
    assert step(first, "cast", "int32", "float32", "zero_points").elements == 64  # once per core
    assert not [s for s in second.vector if s.operands == ("zero_points",)]


def test_row_wise_divide_in_little_quant_when_the_last_dim_is_not_a_multiple_of_64():
    pl = plan(problem((2, 8000, 96), (2, 8000, 96)))
    assert pl.mode == 102
    it = pl.cores[0].iterations[1]
    rows = it.updates_elements // 96
    assert step(it, "div").times == rows and step(it, "div").issues == (VectorIssue(64, 1), VectorIssue(32, 1))


def test_large_quant_modes_chunk_each_last_dim_row_and_reload_scale_chunks():
    last = 40000 * 32
    pl = plan(problem((64, 1, last), (64, 1, last)))
    assert pl.mode == TilingMode.LARGE_BATCH_LARGE_QUANT and pl.split == "bs"
    chunk = pl.chunk_elements
    assert chunk % 128 == 0 and chunk <= 255 * 64
    its = pl.cores[0].iterations
    per_row = -(-last // chunk)
    assert len(its) == 2 * per_row
    assert [it.scales_offset for it in its[:3]] == [0, chunk, 2 * chunk]
    assert all(it.scales_bytes == it.updates_elements * 4 for it in its)
    assert [w.index_reads for it in its[:per_row + 1] for w in it.writes] == [1] + [0] * (per_row - 1) + [1]
    axis_split = plan(problem((1, 4, last), (1, 4, last)))
    assert axis_split.mode == TilingMode.LARGE_AXIS_LARGE_QUANT and axis_split.used_cores == 4


def test_a_last_dim_too_long_for_one_divide_takes_the_large_quant_path_even_if_it_fits():
    fits = plan(problem((1, 1, 16352), (1, 1, 16352), zero_points=False))  # 255 repeats + a 32-lane tail
    assert fits.mode == 100 and fits.ub_bytes <= fits.ub_budget_bytes
    too_long = plan(problem((1, 1, 16384), (1, 1, 16384), zero_points=False))  # 256 repeats: not one vdiv
    assert too_long.mode == 105
    assert plan(problem((1, 1, 16352), (1, 1, 16352))).mode == 105  # with zero points it does not fit


def test_indices_that_do_not_fit_the_ub_are_a_resource_error():
    p = problem((60000, 1, 32), (60000, 1, 32))
    with pytest.raises(ResourceError, match="stages all 60000 indices in UB"):
        plan(p)


def test_empty_problem_launches_nothing_and_a_core_count_below_one_is_refused():
    empty = problem((0, 4, 32), (0, 4, 32))
    pl = plan(empty)
    assert pl.mode is None and pl.cores == () and pl.used_cores == 0
    with pytest.raises(UsageError, match="vector_cores"):
        plan(problem((4, 4, 32), (4, 4, 32)), cores=0)


# ------------------------------------------------------------------------------- vector chunking


def test_long_casts_are_chunked_at_255_repeats_with_a_masked_tail():
    # U = 777 rows of 32: 24864 elements on one core (bs = 1 < U, but one bs row fits: mode 100).
    pl = plan(problem((1, 800, 32), (1, 777, 32)))
    assert pl.mode == 100
    (it,) = pl.cores[0].iterations
    assert step(it, "cast", "float16", "float32").issues == (
        VectorIssue(64, 255), VectorIssue(64, 133), VectorIssue(32, 1))  # 24864 = 388.5 * 64
    assert step(it, "cast", "float32", "int16").rounding == "rint"
    assert step(it, "cast", "int16", "float16").issues == (VectorIssue(128, 194), VectorIssue(32, 1))
    to_int8 = step(it, "cast", "float16", "int8")
    assert to_int8.issues == (VectorIssue(128, 194), VectorIssue(32, 1)) and to_int8.repeats == 195
    assert step(it, "cast", "int32", "float32", "zero_points").elements == 32  # int32 zero points, once
    div = step(it, "div")
    assert div.times == 777 and div.instructions == 2 * 777


def test_per_row_divide_repeats_are_ceil_of_the_row_over_64():
    pl = plan(problem((8, 4, 128), (8, 2, 128), bf16=True))
    it = pl.cores[0].iterations[0]
    assert step(it, "div").issues == (VectorIssue(64, 2),) and step(it, "div").times == 2
    assert step(it, "add").issues == (VectorIssue(64, 2),)
    assert step(it, "cast", "bfloat16", "float32").elements == 256
    assert step(it, "cast", "bfloat16", "float32", "scales").elements == 128
    target = vector_target()
    assert target.blocks(1) == 1 and target.blocks(32) == 1 and target.blocks(33) == 2


# ------------------------------------------------------------------------------------- invariants


def assert_plan_is_consistent(p, pl):
    bs, block = p.bs, p.rows * p.row_elements
    elements = bs * block
    assert pl.ub_bytes <= pl.ub_budget_bytes
    assert pl.total("updates_bytes") == elements * p.update_itemsize
    assert pl.total("updates_elements") == elements
    assert pl.total("written_bytes") == elements
    assert pl.total("indices_bytes") == pl.used_cores * p.index_count * p.index_itemsize
    assert sum(len(it.writes) for it in pl.all_iterations()) >= 1
    # Every element of every bs row is quantised and written exactly once, from the updates it loaded.
    covered = np.zeros(elements, np.int32)
    for it in pl.all_iterations():
        assert it.updates_bytes <= pl.chunk_elements * p.update_itemsize
        loaded = range(it.updates_offset, it.updates_offset + it.updates_elements)
        for w in it.writes:
            start = w.bs_row * block + w.column
            assert start in loaded and start + w.nbytes <= loaded.stop
            covered[start: start + w.nbytes] += 1
        for s in it.vector:
            assert all(0 <= issue.repeats <= 255 and 0 < issue.lanes <= 128 for issue in s.issues)
            if s.kind == "cast" and s.operands == ("updates",):
                assert s.elements == it.updates_elements
                assert sum(i.lanes * i.repeats for i in s.issues) == s.elements
            if s.kind in ("div", "add"):
                assert s.times * s.elements == it.updates_elements
    assert (covered == 1).all()
    quant_bytes = p.scale_itemsize + p.zero_point_itemsize
    expected_quant = {
        100: pl.used_cores * p.last_dim, 101: bs * p.last_dim,
        102: pl.used_cores * p.last_dim, 104: pl.used_cores * p.last_dim, 103: elements, 105: elements,
    }[pl.mode]
    assert pl.total("scales_bytes") + pl.total("zero_point_bytes") == expected_quant * quant_bytes
    reads_per_write = p.index_rank
    if pl.mode in (100, 101, 102, 104):
        assert pl.total("index_reads") == reads_per_write * sum(len(it.writes) for it in pl.all_iterations())
    else:
        assert pl.total("index_reads") == reads_per_write * bs * p.quant_rows_per_block


@st.composite
def tiling_cases(draw):
    last = 32 * draw(st.sampled_from([1, 2, 3, 4, 8, 40, 300, 600]))
    mid = draw(st.integers(1, 3))
    axis_len = draw(st.integers(1, 3000))
    rows = draw(st.integers(1, axis_len))
    batches = draw(st.integers(1, 300))
    inner = draw(st.sampled_from([(), (2,)]))
    if last * rows * batches * mid * (2 if inner else 1) > 3_000_000:
        rows = 1
    input_shape = (batches, mid, axis_len, *inner, last)
    updates_shape = (batches, mid, rows, *inner, last)
    return dict(
        p=problem(input_shape, updates_shape, axis=2, index_rank=draw(st.sampled_from([1, 2])),
                  bf16=draw(st.booleans()), zero_points=draw(st.booleans())),
        cores=draw(st.sampled_from([1, 7, 40, 48])),
        ub=draw(st.sampled_from([UB, 64 * 1024])),
        double_buffer=draw(st.booleans()),
    )


@settings(max_examples=120, deadline=None)
@given(tiling_cases())
def test_every_plan_covers_the_work_once_and_its_bytes_sum_to_the_totals(case):
    p = case.pop("p")
    pl = plan(p, **case)
    assert_plan_is_consistent(p, pl)


@pytest.mark.parametrize(
    "input_shape, updates_shape, mode, double_buffer",
    [
        ((24, 4096, 128), (24, 1, 128), 100, False),
        ((4096, 16, 1024), (4096, 16, 1024), 101, False),
        ((2, 8000, 96), (2, 8000, 96), 102, False),
        ((1, 4, 40000 * 32), (1, 4, 40000 * 32), 103, False),
        ((4096, 16, 1024), (4096, 16, 1024), 104, True),
        ((3, 1, 16384), (3, 1, 16384), 105, False),
    ],
)
def test_every_mode_is_consistent(input_shape, updates_shape, mode, double_buffer):
    for index_rank in (1, 2):
        p = problem(input_shape, updates_shape, index_rank=index_rank)
        pl = plan(p, double_buffer=double_buffer)
        assert pl.mode == mode
        assert_plan_is_consistent(p, pl)
