"""Strided copy plans, the UB layout of tiles, and the put/get staging chunk (the framework's
GetCopyBufferShape)."""

import pytest

from npusim.hw.memory import Allocation
from npusim.kernels.shmem.tile_ops import Burst, GmView, copy_plan, staging_chunk, ub_strides, ub_tile_bytes


def test_a_full_width_box_is_one_burst():
    assert copy_plan([4, 64], 2, (128, 2), (128, 2)) == [Burst(0, 0, 1, 512, 0, 0)]


def test_a_narrow_box_is_one_strided_copy_with_a_burst_per_row():
    # 4 rows of 16 fp16 out of rows of 64: gaps of 96 bytes in GM; UB rows padded to 32 bytes (none here)
    assert copy_plan([4, 16], 2, (128, 2), (32, 2)) == [Burst(0, 0, 4, 32, 96, 0)]


def test_unaligned_ub_rows_keep_full_width_gm_rows_apart():
    # 7 fp16 = 14 bytes per row: contiguous in GM, padded to 32 bytes in UB
    assert copy_plan([3, 7], 2, (14, 2), ub_strides([3, 7], 2)) == [Burst(0, 0, 3, 14, 0, 18)]


def test_contiguous_middle_dims_merge_and_outer_dims_give_one_copy_each():
    # [2, 3, 8] fp32 out of [*, 6, 8]: each 3 x 8 block is contiguous on both sides -> 2 bursts of 96 B
    assert copy_plan([2, 3, 8], 4, (192, 32, 4), ub_strides([2, 3, 8], 4)) == [Burst(0, 0, 2, 96, 96, 0)]
    # [2, 3, 8] fp32 out of [*, 6, 16]: rows are apart in GM -> one strided copy of 3 rows per outer index
    assert copy_plan([2, 3, 8], 4, (384, 64, 4), ub_strides([2, 3, 8], 4)) == [Burst(0, 0, 3, 32, 32, 0), Burst(384, 96, 3, 32, 32, 0)]


def test_empty_boxes_move_nothing_and_the_last_dim_must_be_contiguous():
    assert copy_plan([0, 8], 2, (16, 2), (16, 2)) == []
    with pytest.raises(ValueError, match="innermost dim must be contiguous"):
        copy_plan([2, 8], 2, (32, 4), (16, 2))


def test_ub_tiles_pad_rows_to_32_bytes():
    assert ub_strides([4, 7], 2) == (32, 2)
    assert ub_strides([2, 3, 16], 4) == (192, 64, 4)
    assert ub_tile_bytes([16, 4096], 2) == 128 * 1024
    assert ub_tile_bytes([3, 7], 2) == 96


def test_gm_view_intervals_and_shift():
    view = GmView(allocation=Allocation(0, 0, 4096, "x", None), offset_bytes=100, strides=(64, 2))
    assert view.shifted([1, 4]).offset_bytes == 172
    assert view.intervals([2, 8], 2) == [(100, 116), (164, 180)]
    assert view.intervals([2, 32], 2) == [(100, 228)]


@pytest.mark.parametrize("rows, cols, itemsize, converts, chunk", [
    (16, 256, 2, False, (16, 256)),     # the whole tile fits 16 KiB (4096 elements of fp16)
    (64, 256, 2, False, (32, 256)),     # 8192 elements: 32 full rows fit (8192 / 256)
    (64, 300, 2, False, (27, 300)),     # rows padded to 304: ceil(8192 / 304) = 27 (the framework rounds up)
    (4, 10000, 2, False, (1, 8192)),    # a row wider than the buffer: one piece of a row
    (8, 100, 2, True, (1, 100)),        # converting, 200-byte rows not 32-byte aligned: a row at a time
    (8, 2048, 2, True, (4, 2048)),      # converting, aligned rows: as without conversion
])
def test_staging_chunk_follows_get_copy_buffer_shape(rows, cols, itemsize, converts, chunk):
    assert staging_chunk(rows, cols, itemsize, converts, 16 * 1024) == chunk
