"""Signal slot numbering, area sizes and the per-group window accounting."""

import re

import pytest

from npusim.errors import OpArgumentError, UsageError
from npusim.kernels.shmem.dtypes import DataType
from npusim.kernels.shmem.layout import (
    DATA_WINDOW_BYTES,
    MAX_SIGNAL_TILES,
    SIGNAL_SLOT_BYTES,
    SIGNAL_WINDOW_BYTES,
    ShmemGroupRegistry,
    SignalGrid,
    align_up,
    data_area_bytes,
    signal_area_bytes,
    signal_clear_bytes,
)
from npusim.kernels.shmem.tiling import expand_tiles


def refused(pattern: str):
    return pytest.raises(OpArgumentError, match=re.escape(pattern))


def test_area_sizes_are_aligned_to_512_bytes():
    assert align_up(1) == 512 and align_up(512) == 512 and align_up(513) == 1024
    assert data_area_bytes([64, 1536], DataType.DT_BF16) == 64 * 1536 * 2
    assert data_area_bytes([3, 5], DataType.DT_FP32) == 512
    assert SIGNAL_SLOT_BYTES == 32
    assert signal_area_bytes(8, 1) == 512  # 8 slots of 32 B = 256 B, aligned up
    assert signal_area_bytes(8, 4) == 4 * 8 * 8 * 4 == 1024
    assert signal_area_bytes(3, 7) == align_up(4 * 3 * 8 * 7)


def test_clear_signal_zeroes_whole_512_byte_stores_of_n_pes_times_max_tiles_words():
    assert signal_clear_bytes(8, 8) == 0  # 64 words: less than one 128-word store
    assert signal_clear_bytes(8, 16) == 512
    assert signal_clear_bytes(8, 40) == 1024  # 320 words: two whole stores, the rest dropped


def test_slots_of_a_whole_tensor_view_number_the_first_dim_fastest():
    grid = SignalGrid.of("shmem_signal", [128, 512], [128, 512], [64, 256])
    assert grid.view_tile_num == grid.total_tiles == 4
    tiles = expand_tiles([128, 512], [64, 256])
    assert [grid.slot_index(t.offset) for t in tiles] == [0, 2, 1, 3]
    assert grid.slot_byte_offset(0, (64, 0)) == 32
    assert grid.slot_byte_offset(2, (64, 256)) == (2 * 4 + 3) * 32


def test_slots_of_row_views_follow_the_view_index():
    # all-gather: PE p signals rows [p*8, p*8+8) of a [64, 1536] tensor with view [8, 1536]
    grid = SignalGrid.of("shmem_wait_until", [64, 1536], [8, 1536], [8, 1536])
    assert grid.view_tile_num == 1 and grid.total_tiles == 8
    assert [grid.slot_index((8 * p, 0)) for p in range(8)] == list(range(8))
    assert grid.slot_byte_offset(3, (16, 0)) == (3 * 8 + 2) * 32


def test_slots_in_a_grid_of_views_with_several_tiles():
    grid = SignalGrid.of("shmem_signal", [4, 6], [2, 3], [1, 2])
    assert grid.view_tile_num == 4  # 2 x ceil(3/2)
    assert grid.total_tiles == 16  # 4 tiles x (2 x 2) views
    # view (1, 1) has view index 1 + 2 * 1 = 3; its tile (1, 1) sits at offset (3, 5)
    assert grid.slot_index((3, 5)) == 3 * 4 + (1 + 2 * 1)


def test_signal_grid_needs_a_view_that_divides_the_tensor():
    with refused("shmem_signal: shape=[3, 8] does not divide the shmem tensor [8, 8]"):
        SignalGrid.of("shmem_signal", [8, 8], [3, 8], [1, 8])
    SignalGrid.of("shmem_signal", [8, 8], [4, 8], [1, 8])  # a good grid of these shapes is kept: the bad view is still refused
    with refused("shmem_wait_until: shape=[3, 8] does not divide the shmem tensor [8, 8]"):
        SignalGrid.of("shmem_wait_until", [8, 8], [3, 8], [1, 8])


def test_ops_of_the_same_shapes_share_one_grid():
    grid = SignalGrid.of("shmem_signal", [4, 6], [2, 3], [1, 2])
    assert SignalGrid.of("shmem_wait_until", (4, 6), (2, 3), (1, 2)) is grid
    assert grid == SignalGrid((4, 6), (2, 3), (1, 2))


def test_registry_allocates_in_creation_order():
    registry = ShmemGroupRegistry()
    a = registry.create_tensor("tp", 8, DataType.DT_BF16, [64, 1536])
    b = registry.create_tensor("tp", 8, DataType.DT_FP32, [3, 5])
    barrier = registry.create_signal("tp", 8)
    assert a.signal_shape == (8, 64, 1536) and barrier.signal_shape == (8, 1, 8)
    assert (a.data_bytes, b.data_bytes, barrier.data_bytes) == (64 * 1536 * 2, 512, 0)
    group = registry.group("tp")
    assert group.index == 0 and group.n_pes == 8 and group.allocations == [a, b, barrier]
    assert [group.data_offset_bytes(x) for x in (a, b, barrier)] == [0, 64 * 1536 * 2, None]
    assert [group.signal_offset_bytes(x) for x in (a, b, barrier)] == [0, 512, 1024]


def test_signal_areas_grow_with_the_tile_count_of_signal_ops():
    registry = ShmemGroupRegistry()
    a = registry.create_tensor("tp", 8, DataType.DT_BF16, [64, 1536])
    barrier = registry.create_signal("tp", 8)
    registry.record_signal_tiles(a, 8)
    registry.record_signal_tiles(a, 2)  # never shrinks
    assert a.signal_max_tiles == 8 and a.signal_bytes == 8 * 8 * 32
    assert registry.group("tp").signal_offset_bytes(barrier) == 2048  # sizes are final when the program runs
    with refused(f"shmem_signal: total_tiles=4096 slots per PE exceed the {MAX_SIGNAL_TILES} a signal area can number"):
        registry.record_signal_tiles(a, 4096)


def test_a_signal_area_must_fit_the_signal_window():
    registry = ShmemGroupRegistry()
    a = registry.create_tensor("tp", 8, DataType.DT_BF16, [64, 1536])
    registry.record_signal_tiles(a, 4095)  # 8 x 4095 x 32 B = 1048320 B, inside 1 MiB
    assert a.signal_bytes == 1048576 == SIGNAL_WINDOW_BYTES
    small = ShmemGroupRegistry(signal_window_bytes=4096)
    c = small.create_tensor("ep", 16, DataType.DT_FP32, [8, 8])
    with refused("shmem_signal: total_tiles=9 needs a signal area of 4608 bytes (n_pes=16 x 9 slots x 32 B), more "
                 "than the 4096-byte signal window of group 'ep'"):
        small.record_signal_tiles(c, 9)
    assert c.signal_max_tiles == 1
    with refused("create_shmem_signal: n_pes=200 needs a signal area of 6656 bytes, more than the 4096-byte signal "
                 "window of group 'ep'"):
        ShmemGroupRegistry(signal_window_bytes=4096).create_signal("ep", 200)


def test_a_tensor_must_fit_the_200_mib_data_window():
    assert DATA_WINDOW_BYTES == 200 * 1024 * 1024
    registry = ShmemGroupRegistry()
    registry.create_tensor("tp", 2, DataType.DT_FP32, [1024, 50 * 1024])  # exactly 200 MiB
    registry.create_tensor("tp", 2, DataType.DT_FP32, [1024, 50 * 1024])  # wraps to offset 0
    with refused("create_shmem_tensor: shape=[1025, 51200] of DT_FP32 needs 209920000 bytes, more than the "
                 "209715200-byte data window each PE has for group 'tp'"):
        registry.create_tensor("tp", 2, DataType.DT_FP32, [1025, 51200])


def test_allocation_wraps_to_the_window_start_as_the_framework_does():
    # a create inside a loop allocates every iteration; past the window's end it starts over at 0
    registry = ShmemGroupRegistry(data_window_bytes=4096, signal_window_bytes=2048)
    blocks = [registry.create_tensor("tp", 8, DataType.DT_FP32, [8, 32]) for _ in range(5)]  # 1024 B each
    group = registry.group("tp")
    assert [group.data_offset_bytes(b) for b in blocks] == [0, 1024, 2048, 3072, 0]
    assert [group.signal_offset_bytes(b) for b in blocks] == [0, 512, 1024, 1536, 0]
    registry.record_signal_tiles(blocks[1], 3)  # 768 B aligned to 1024: areas 512, 1024, 512 ...
    assert [group.signal_offset_bytes(b) for b in blocks] == [0, 512, 1536, 0, 512]
    with pytest.raises(UsageError, match="the allocation is not in group 'tp'"):
        group.signal_offset_bytes(ShmemGroupRegistry().create_signal("tp", 8))


def test_n_pes_is_the_same_for_a_group():
    registry = ShmemGroupRegistry()
    registry.create_tensor("tp", 8, DataType.DT_FP16, [8, 8])
    with refused("create_shmem_signal: n_pes=4 differs from n_pes=8 of the earlier shmem tensors of group 'tp'"):
        registry.create_signal("tp", 4)


def test_groups_are_numbered_in_creation_order():
    registry = ShmemGroupRegistry()  # the limit of 2 groups is per PE: the launch checks it (test_shmem_errors)
    registry.create_signal("tp", 8)
    registry.create_signal("ep", 4)
    registry.create_signal("dp", 2)
    assert [(g.name, g.index) for g in registry.groups] == [("tp", 0), ("ep", 1), ("dp", 2)]


def test_a_frozen_group_keeps_its_offsets_and_places_later_areas_after_them():
    registry = ShmemGroupRegistry(signal_window_bytes=4096)
    a = registry.create_tensor("tp", 2, DataType.DT_FP16, [8, 8])
    b = registry.create_signal("tp", 2)
    group = registry.group("tp")
    group.freeze()
    c = registry.create_tensor("tp", 2, DataType.DT_FP32, [4, 8])
    assert [group.signal_offset_bytes(x) for x in (a, b, c)] == [0, 512, 1024]
    assert [group.data_offset_bytes(x) for x in (a, b, c)] == [0, None, 512]
    registry.record_signal_tiles(a, 8)  # grows: an unused area moves to the end of the signal window
    assert group.signal_offset_bytes(a) == 1536 and group.signal_offset_bytes(b) == 512
    b.signal_used = True
    with refused("shmem_signal: numbers 16 signal slots per PE in shmem tensor of group 'tp', more than the signal, wait "
                 "and clear ops built on it before"):
        registry.record_signal_tiles(b, 16)


def test_a_refused_first_tensor_creates_no_group():
    registry = ShmemGroupRegistry()
    with refused("create_shmem_tensor: shape=[8] has 1 dims"):
        registry.create_tensor("tp", 8, DataType.DT_FP16, [8])
    with refused("needs 512 bytes, more than the 256-byte data window"):
        ShmemGroupRegistry(data_window_bytes=256).create_tensor("tp", 8, DataType.DT_FP16, [8, 8])
    registry.create_tensor("ep", 8, DataType.DT_FP16, [8, 8])
    assert [g.name for g in registry.groups] == ["ep"]


def test_create_checks_its_arguments():
    registry = ShmemGroupRegistry()
    with refused("create_shmem_tensor: group_name='' must be a string of 1 to 127 characters"):
        registry.create_tensor("", 8, DataType.DT_FP16, [8, 8])
    with refused("create_shmem_tensor: n_pes=0 must be a positive int"):
        registry.create_tensor("tp", 0, DataType.DT_FP16, [8, 8])
    with refused("create_shmem_tensor: dtype=DataType.DT_INT8 is not supported"):
        registry.create_tensor("tp", 8, DataType.DT_INT8, [8, 8])
