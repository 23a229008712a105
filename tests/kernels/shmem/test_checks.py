"""Argument checks of the shmem ops: every rule accepts what the framework accepts and names the
op, argument, value and rule when it refuses."""

import re

import pytest

from npusim.errors import OpArgumentError
from npusim.kernels.shmem import checks
from npusim.kernels.shmem.dtypes import AtomicType, DataType, OpType


def refused(pattern: str):
    return pytest.raises(OpArgumentError, match=re.escape(pattern))


def test_group_name_has_1_to_127_characters():
    checks.check_group_name("create_shmem_tensor", "t")
    checks.check_group_name("create_shmem_tensor", "g" * 127)
    for bad in ("", "g" * 128, None):
        with refused(f"create_shmem_tensor: group_name={bad!r} must be a string of 1 to 127 characters"):
            checks.check_group_name("create_shmem_tensor", bad)


def test_n_pes_is_positive():
    checks.check_n_pes("create_shmem_signal", 1)
    with refused("create_shmem_signal: n_pes=0 must be a positive int"):
        checks.check_n_pes("create_shmem_signal", 0)


def test_pe_is_inside_the_group():
    checks.check_pe("shmem_load", "src_pe", 0, 8)
    checks.check_pe("shmem_load", "src_pe", 7, 8)
    with refused("shmem_load: src_pe=8 is not a PE of the group: it must satisfy 0 <= src_pe < n_pes=8"):
        checks.check_pe("shmem_load", "src_pe", 8, 8)
    with refused("shmem_put: dst_pe=-1 is not a PE of the group"):
        checks.check_pe("shmem_put", "dst_pe", -1, 8)


def test_signal_target_may_be_minus_one_for_all():
    checks.check_pe("shmem_signal", "target_pe", -1, 4, allow_all=True)
    with refused("shmem_signal: target_pe=-2 is not a PE of the group: it must satisfy 0 <= target_pe < n_pes=4, "
                 "or be -1 to signal every PE"):
        checks.check_pe("shmem_signal", "target_pe", -2, 4, allow_all=True)


def test_data_shape_has_2_to_4_positive_dims():
    for shape in ([1, 1], [2, 3, 4], [1, 2, 3, 4]):
        checks.check_data_shape("create_shmem_tensor", "shape", shape)
    with refused("create_shmem_tensor: shape=[8] has 1 dims; it must have 2 to 4"):
        checks.check_data_shape("create_shmem_tensor", "shape", [8])
    with refused("shape=[1, 2, 3, 4, 5] has 5 dims; it must have 2 to 4"):
        checks.check_data_shape("create_shmem_tensor", "shape", [1, 2, 3, 4, 5])
    with refused("shmem_put: src.shape=[8, 0] has a dim that is not positive"):
        checks.check_data_shape("shmem_put", "src.shape", [8, 0])


def test_source_holds_at_most_int32_max_elements():
    checks.check_element_count("shmem_put", "src.shape", [2**31 - 1, 1])
    with refused("shmem_put: src.shape=[65536, 32768] has 2147483648 elements, more than INT32_MAX"):
        checks.check_element_count("shmem_put", "src.shape", [65536, 32768])


def test_dtypes():
    for dtype in (DataType.DT_INT32, DataType.DT_FP16, DataType.DT_FP32, DataType.DT_BF16):
        checks.check_dtype("shmem_load", "src.dtype", dtype)
    with refused("shmem_load: src.dtype=DataType.DT_INT8 is not supported; "
                 "the dtype must be one of DT_INT32, DT_FP16, DT_FP32, DT_BF16"):
        checks.check_dtype("shmem_load", "src.dtype", DataType.DT_INT8)


def test_put_add_may_accumulate_fp16_and_bf16_into_fp32():
    for src in (DataType.DT_FP16, DataType.DT_BF16):
        checks.check_put_dtypes("shmem_put", src, DataType.DT_FP32, AtomicType.ADD)
        with refused(f"shmem_put: dst.dtype=DataType.DT_FP32 does not match the source's {src.name}"):
            checks.check_put_dtypes("shmem_put", src, DataType.DT_FP32, AtomicType.SET)
    with refused("dst.dtype=DataType.DT_FP32 does not match the source's DT_INT32"):
        checks.check_put_dtypes("shmem_put", DataType.DT_INT32, DataType.DT_FP32, AtomicType.ADD)
    with refused("dst.dtype=DataType.DT_FP16 does not match the source's DT_FP32"):
        checks.check_put_dtypes("shmem_put", DataType.DT_FP32, DataType.DT_FP16, AtomicType.ADD)


def test_store_from_ub_needs_the_same_dtype():
    checks.check_put_dtypes("shmem_store", DataType.DT_BF16, DataType.DT_BF16, AtomicType.ADD, from_ub=True)
    with pytest.raises(OpArgumentError) as error:
        checks.check_put_dtypes("shmem_store", DataType.DT_BF16, DataType.DT_FP32, AtomicType.ADD, from_ub=True)
    assert "shmem_store: dst.dtype=DataType.DT_FP32 does not match the source's DT_BF16" in str(error.value)
    assert "AtomicType.ADD" not in str(error.value)


def test_view_inside_the_tensor():
    checks.check_view("shmem_load", [128, 256], [128, 128], [0, 128], [128, 64])
    checks.check_view("shmem_load", [128, 256], [128, 256], [0, 0])
    with refused("shmem_load: shape=[128] has 1 dims; the shmem tensor [128, 256] has 2"):
        checks.check_view("shmem_load", [128, 256], [128], [0, 0])
    with refused("shmem_load: offsets=[0] has 1 values; the shmem tensor [128, 256] has 2 dims"):
        checks.check_view("shmem_load", [128, 256], [128, 256], [0])
    with refused("shmem_get: offsets=[0, 256] has offsets[1]=256; it must satisfy 0 <= offset < 256, "
                 "the size of dim 1"):
        checks.check_view("shmem_get", [128, 256], [1, 1], [0, 256])
    with refused("offsets=[-1, 0] has offsets[0]=-1"):
        checks.check_view("shmem_get", [128, 256], [1, 1], [-1, 0])
    with refused("shmem_put: offsets=[64, 0] puts the view [128, 256] outside the shmem tensor [128, 256] in dim 0 "
                 "(64 + 128 > 128)"):
        checks.check_view("shmem_put", [128, 256], [128, 256], [64, 0], shape_arg="src.shape")
    with refused("shmem_put: src.shape=[64, 0] must be positive ints"):
        checks.check_view("shmem_put", [128, 256], [64, 0], [0, 0], shape_arg="src.shape")


def test_valid_shape_within_the_view():
    checks.check_view("shmem_load", [128, 256], [128, 128], [0, 0], [0, 128])
    with refused("shmem_load: valid_shape=[128, 129] has valid_shape[1]=129; it must satisfy 0 <= valid <= 128"):
        checks.check_view("shmem_load", [128, 256], [128, 128], [0, 0], [128, 129])
    with refused("shmem_load: valid_shape=[128] has 1 dims; the view [128, 128] has 2"):
        checks.check_view("shmem_load", [128, 256], [128, 128], [0, 0], [128])


def test_tile_shape():
    checks.check_tile_shape("shmem_load", [4, 8], 2)
    with refused("shmem_load: tile_shape=None is not set; call pypto.set_vec_tile_shapes(...) before the op"):
        checks.check_tile_shape("shmem_load", None, 2)
    with refused("shmem_load: tile_shape=[4, 0] must be positive ints"):
        checks.check_tile_shape("shmem_load", [4, 0], 2)
    with refused("shmem_load: tile_shape=[4, 8] has 2 dims; it must have 3, as the data it tiles"):
        checks.check_tile_shape("shmem_load", [4, 8], 3)


def test_preds():
    checks.check_preds("shmem_load", None)
    checks.check_preds("shmem_load", [[1, 1], [128, 256, 2]])
    with refused("shmem_load: pred=[] lists no tensor; pass None or at least one tensor"):
        checks.check_preds("shmem_load", [])
    with refused("shmem_load: pred[1].shape=[8] has 1 dims; a pred tensor must have 2 to 4"):
        checks.check_preds("shmem_load", [[1, 1], [8]])
    with refused("shmem_wait_until: pred[0].shape=[0, 4] is empty; a pred tensor must have every dim > 0"):
        checks.check_preds("shmem_wait_until", [[0, 4]])


def test_cmp_only_eq():
    checks.check_cmp("shmem_wait_until", OpType.EQ)
    with refused("shmem_wait_until: cmp=OpType.GE is not supported; only OpType.EQ is"):
        checks.check_cmp("shmem_wait_until", OpType.GE)


def test_atomic_set_or_add():
    checks.check_atomic("shmem_signal", "sig_op", AtomicType.ADD)
    with refused("shmem_signal: sig_op='ADD' must be AtomicType.SET or AtomicType.ADD"):
        checks.check_atomic("shmem_signal", "sig_op", "ADD")


def test_signal_values_are_int32():
    checks.check_int32("shmem_signal", "signal", -(2**31))
    with refused("shmem_wait_until: cmp_value=2147483648 must be an int in [-2147483648, 2147483647]"):
        checks.check_int32("shmem_wait_until", "cmp_value", 2**31)


def test_signal_view_divides_the_tensor():
    checks.check_signal_view("shmem_signal", [64, 1536], [8, 1536])
    with refused("shmem_signal: shape=[24, 1536] does not divide the shmem tensor [64, 1536]: "
                 "dim 0 is 64, not a multiple of 24"):
        checks.check_signal_view("shmem_signal", [64, 1536], [24, 1536])
