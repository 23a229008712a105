"""The cube tiling's laws: the capacity formula with its double buffers (TCubeTiling's rules),
the errors that name the buffer and the fields, MatMulV3's documented default (hicann/ops-nn
matmul_v3_base_tiling.cpp: 128 x 256 x 128 bytes, stepKa = stepKb = 4 for fp16), and the spread of
output blocks over the cores (gemm_ar_config.h's balanced contiguous runs; round robin)."""

import pytest

import npusim
from npusim.errors import OpArgumentError, ResourceError
from npusim.isa.target import CubeTarget
from npusim.kernels.cube.tiling import CubeSchedule, CubeTiling, assign, default_tiling, tiling_choice


@pytest.fixture(scope="module")
def target():
    with npusim.session("a2", data=False) as s:
        return CubeTarget.of(s.system)


def test_the_target_is_the_configs_aic_core(target):
    assert (target.core_kind, target.cores, target.l1_bytes, target.l0a_bytes, target.l0b_bytes, target.l0c_bytes) == \
        ("aic", 24, 512 * 1024, 64 * 1024, 64 * 1024, 128 * 1024)


def test_needs_count_every_buffer_of_the_double_buffers():
    tiling = CubeTiling(128, 256, 64, 4, 4, l1_buffers=2, l0_buffers=2, l0c_buffers=1)
    assert tiling.needs(2) == {"L1": 2 * (128 * 4 + 256 * 4) * 64 * 2, "L0A": 2 * 128 * 64 * 2, "L0B": 2 * 256 * 64 * 2, "L0C": 128 * 256 * 4}
    single = CubeTiling(128, 256, 64, 4, 4, 1, 1, 1)
    assert {k: 2 * v for k, v in single.needs(2).items() if k != "L0C"} == {k: v for k, v in tiling.needs(2).items() if k != "L0C"}
    # fractal alignment: outer sizes to 16 (32 for int8), k to 32 bytes; L0C to 16 x 16
    assert CubeTiling(100, 152, 128, 1, 1, 1, 1, 1).needs(1) == {"L1": (128 + 160) * 128, "L0A": 128 * 128, "L0B": 160 * 128,
                                                                  "L0C": 112 * 160 * 4}


def test_the_gemm_ar_tiling_fits_and_a_double_l0c_does_not(target):
    CubeTiling(128, 256, 64, 4, 4).check(target, 2, "gemm_ar")
    with pytest.raises(ResourceError, match=r"262144 bytes of L0C \(l0c_buffers x base_m x base_n x 4.*more than its 131072"):
        CubeTiling(128, 256, 64, 4, 4, l0c_buffers=2).check(target, 2, "t")
    with pytest.raises(ResourceError, match="of L1 .*more than its 524288"):
        CubeTiling(128, 256, 64, 8, 8).check(target, 2, "t")
    with pytest.raises(ResourceError, match="of L0B"):
        CubeTiling(128, 512, 64, 1, 1).check(target, 2, "t")


@pytest.mark.parametrize("field,value,rule", [  # each field's own rule, named
    ("base_k", 24, "must be a multiple of 16 elements and of 32 bytes"),
    ("step_ka", 0, "must be a positive int"),
    ("l0_buffers", 3, "must be 1 or 2"),
    ("base_m", True, "must be a positive int"),
])
def test_bad_fields_are_named(target, field, value, rule):
    import dataclasses

    tiling = dataclasses.replace(CubeTiling(128, 128, 64, 2, 2), **{field: value})
    with pytest.raises(OpArgumentError, match=f"tiling {field} = {value!r}: {rule}"):
        tiling.check(target, 2, "t")


def test_matmulv3_default_for_a_large_fp16_product(target):
    """ResetBase 128 x 256 x (128 bytes); CalL1Tiling: depth A 16, B 8 -> steps 8 / 4 -> 4 / 4 (OptimizeBasicKernelStepK)."""
    assert default_tiling(5504, 1536, 6144, 2, target) == CubeTiling(128, 256, 64, 4, 4, 2, 2, 1)


def test_matmulv3_default_for_int8_and_small_products(target):
    assert default_tiling(4096, 4096, 4096, 1, target) == CubeTiling(128, 256, 128, 8, 4, 2, 2, 1)
    small = default_tiling(64, 512, 1024, 2, target)  # 2 blocks of n: base_m shrinks to spread rows over the cores (CalBaseSize)
    assert (small.base_m, small.base_n) == (16, 256)
    assert default_tiling(40, 40, 40, 4, target).base_k == 32  # at most k's whole fractals


def test_the_default_fits_its_target_for_every_dtype(target):
    for itemsize in (1, 2, 4):
        for m, n, k in ((1, 1, 1), (7000, 5000, 9000), (128, 256, 64)):
            default_tiling(m, n, k, itemsize, target).check(target, itemsize, "t")


def test_gemm_ar_blocks_are_balanced_contiguous_runs_in_zigzag_order():
    schedule = CubeSchedule(24, "zigzag", "contiguous")
    per_core = schedule.blocks_of_cores(43, 6)
    assert [len(blocks) for blocks in per_core] == [11] * 18 + [10] * 6  # 258 = 18 x 11 + 6 x 10 (GEMM_AR_BLOCK_TILE_COUNT)
    assert per_core[0][:8] == [(0, 0), (0, 1), (0, 2), (0, 3), (0, 4), (0, 5), (1, 5), (1, 4)]  # odd rows backwards
    assert sorted(b for blocks in per_core for b in blocks) == [(r, c) for r in range(43) for c in range(6)]


def test_round_robin_deals_the_blocks_in_turn():
    assert assign(list(range(7)), 3, "round_robin") == [[0, 3, 6], [1, 4], [2, 5]]
    assert CubeSchedule(2).blocks_of_cores(2, 2) == [[(0, 0), (1, 0)], [(0, 1), (1, 1)]]


def test_a_tiling_choice_replaces_the_fields_given_and_refuses_others():
    tiling, schedule = tiling_choice({"base_n": 152, "cores": 8, "tile_barrier": True}, CubeTiling(128, 256, 64, 4, 4), CubeSchedule(24), "op")
    assert (tiling.base_n, tiling.base_m, schedule.cores, schedule.tile_barrier) == (152, 128, 8, True)
    with pytest.raises(OpArgumentError, match="matmul_tiling has no field 'block_m'"):
        tiling_choice({"block_m": 1}, CubeTiling(128, 256, 64, 4, 4), CubeSchedule(24), "op")


@pytest.mark.parametrize("field,value", [("cores", 25), ("order", "diagonal"), ("assignment", "random"), ("tile_barrier", 1)])
def test_bad_schedules_are_named(target, field, value):
    import dataclasses

    with pytest.raises(OpArgumentError, match=f"tiling {field} = {value!r}"):
        dataclasses.replace(CubeSchedule(24), **{field: value}).check(target, "t")
