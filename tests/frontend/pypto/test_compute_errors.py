"""What each bad input to a compute op gets: a clear error naming the op, the argument and the rule,
raised while the kernel is built, before anything runs (no event is recorded)."""

import numpy as np
import pytest

from npusim import pypto
from npusim.errors import OpArgumentError, ResourceError, UsageError

from .compute_helpers import run

F16 = np.zeros((32, 64), np.float16)
F32 = np.zeros((32, 64), np.float32)
CUBE = ([16, 16], [16, 32], [16, 16])


def fails(error, match, build, *arrays, tile=(16, 64), cube=None):
    with pytest.raises(error, match=match):
        run(build, *arrays, tile=tile, cube=cube)


@pytest.mark.parametrize("build,arrays,match", [
    (lambda x, y: pypto.add(x, y), (F16, np.zeros((32, 63), np.float16)),
     r"pypto.add: other.shape=\[32, 63\] does not broadcast with input.shape=\[32, 64\]: dim 1 is 63, not 64 or 1"),
    (lambda x, y: pypto.mul(x, y), (F16, F32), r"pypto.mul: other.dtype='DT_FP32' differs from input.dtype=DT_FP16"),
    (lambda x: pypto.add(x, 1.5), (np.zeros((4, 8), np.int32),), r"pypto.add: other=1.5 is a float, but input is DT_INT32"),
    (lambda x: pypto.add(x, "1"), (F16,), r"pypto.add: other='1' must be a pypto.Tensor, an int or a float"),
    (lambda x: pypto.exp(x), (np.zeros((4, 8), np.int32),), r"pypto.exp: input.dtype='DT_INT32' is not supported on Atlas A2 / A3"),
    (lambda x: pypto.sum(x, 0), (F16,), r"pypto.sum: input.dtype='DT_FP16' is not supported .* sum takes DT_FP32, DT_BF16"),
    (lambda x: pypto.sum(x, 2), (F32,), r"pypto.sum: dim=2 must be an int with -2 <= dim < 2"),
    (lambda x: pypto.cast(x, pypto.DT_INT8), (F32,), r"pypto.cast: dtype='DT_INT8' from DT_FP32 is not a conversion of Atlas A2 / A3"),
    (lambda x: pypto.cast(x, pypto.DT_FP16, "rint"), (F32,), r"pypto.cast: mode='rint' must be a pypto.CastMode"),
    (lambda x: pypto.full([4, 4], 1.5, pypto.DT_INT32), (F32,), r"pypto.full: fill_value=1.5 is a float, but dtype=DT_INT32 is an integer type"),
    (lambda x: pypto.full([4, 4], -1, pypto.DT_UINT8), (F32,), r"pypto.full: fill_value=-1 is negative"),
    (lambda x: pypto.transpose(pypto.reshape(x, [2, 2, 8, 64]), 0, 3), (F32,), r"pypto.transpose: dim0, dim1=\(0, 3\) swap dims 0 and 3"),
    (lambda x: pypto.reshape(x, [3, -1]), (F32,), r"pypto.reshape: shape=\[3, -1\] does not hold the 2048 elements"),
    (lambda x: pypto.one_hot(x, 4), (np.zeros((4, 8), np.int32),), r"pypto.one_hot: tile_shape=\[16, 64\] has 2 dims; the output has 3"),
])
def test_bad_arguments_name_op_argument_and_rule(build, arrays, match):
    fails(OpArgumentError, match, build, *arrays)


def test_a_missing_or_wrong_rank_tile_shape():
    fails(OpArgumentError, r"pypto.add: tile_shape=None is not set; call pypto.set_vec_tile_shapes", lambda x: pypto.add(x, x), F16, tile=None)
    fails(OpArgumentError, r"pypto.add: tile_shape=\[16\] has 1 dims; the output has 2", lambda x: pypto.add(x, x), F16, tile=(16,))


def test_a_vector_tile_too_large_for_ub_names_op_tile_and_sizes():
    big = np.zeros((64, 4096), np.float32)
    fails(ResourceError, r"pypto.add: a tile of shape \[64, 4096\] does not fit one AIV core: .*allocating 1.00 MiB in UB .* holds 192.00 KiB",
          lambda x: pypto.add(x, x), big, tile=(64, 4096))


@pytest.mark.parametrize("build,arrays,cube,error,match", [
    (lambda a, b: pypto.matmul(a, b, pypto.DT_FP16), (np.zeros((32, 48), np.float16), np.zeros((40, 16), np.float16)), CUBE,
     OpArgumentError, r"pypto.matmul: mat2.shape=\[40, 16\] has k=40, input has k=48"),
    (lambda a, b: pypto.matmul(a, b, pypto.DT_INT32), (np.zeros((32, 48), np.float16), np.zeros((48, 16), np.float16)), CUBE,
     OpArgumentError, r"pypto.matmul: out_dtype=DataType.DT_INT32 is not an output of DT_FP16 inputs; those are DT_FP16, DT_FP32"),
    (lambda a, b: pypto.matmul(a, b, pypto.DT_FP16), (np.zeros((32, 48), np.float16), np.zeros((48, 16), np.float16)), None,
     OpArgumentError, r"pypto.matmul: cube_tile_shapes=None are not set; call pypto.set_cube_tile_shapes"),
    (lambda a, b: pypto.matmul(a, b, pypto.DT_FP32), (np.zeros((32, 48), np.float16), np.zeros((48, 16), np.float16)),
     ([256, 256], [256, 256], [256, 256]), ResourceError,
     r"pypto.matmul: cube_tile_shapes m=\[256, 256\] k=\[256, 256\] n=\[256, 256\] need 131072 bytes of L0A for DT_FP16 inputs, "
     r"more than its 65536 bytes"),
    (lambda a, b: pypto.matmul(a, b, pypto.DT_FP32), (np.zeros((32, 48), np.float16), np.zeros((48, 16), np.float16)),
     ([16, 16], [24, 24], [16, 16]), OpArgumentError, r"pypto.matmul: cube_tile_shapes=.* break the alignment rule"),
    (lambda a, b: pypto.matmul(a, b, pypto.DT_FP32), (np.zeros((2, 32, 48), np.float16), np.zeros((3, 48, 16), np.float16)), CUBE,
     OpArgumentError, r"pypto.matmul: other.shape=\[3\] does not broadcast with input.shape=\[2\]"),
])
def test_bad_matmuls(build, arrays, cube, error, match):
    fails(error, match, build, *arrays, cube=cube)


def test_bad_cube_tile_shapes():
    fails(OpArgumentError, r"pypto.set_cube_tile_shapes: m=\[32, 48\] breaks mL0 <= mL1 and mL1 % mL0 == 0",
          lambda x: x, F16, cube=([32, 48], [16, 32], [16, 16]))
    fails(OpArgumentError, r"pypto.set_cube_tile_shapes: k=\[16\] must be a list of 2 or 3 positive ints",
          lambda x: x, F16, cube=([16, 16], [16], [16, 16]))


def test_ops_outside_a_kernel_are_refused():
    with pytest.raises(UsageError, match=r"pypto.add is called outside a kernel"):
        pypto.add(None, None)


def test_an_op_not_modelled_yet_is_named():
    with pytest.raises(UsageError, match=r"pypto.topk is not modelled by npusim yet"):
        _ = pypto.topk
    with pytest.raises(AttributeError, match="no attribute 'nonsense'"):
        _ = pypto.nonsense
