"""PyPTO's float math, comparison, selection and bitwise ops (issue 31: the framework's elementwise
list against npusim's): each against a numpy reference of the framework's semantics (16-bit floats
computed in float32, math evaluated in float64 and rounded once, comparisons to DT_BOOL), on the
dtypes the framework takes; the framework's compositions (sigmoid, softmax, rms_norm, clip, round
with decimals, lrelu); Tensor methods and operators; batch broadcasting and a bias in matmul
(examples/01_beginner/compute/matmul_ops.py's cases); what is still not modelled is refused by name."""

from __future__ import annotations

import math

import ml_dtypes
import numpy as np
import pytest

import npusim
from npusim import pypto
from npusim.errors import UsageError

BF16 = ml_dtypes.bfloat16
FLOAT_TYPES = {np.float32: pypto.DT_FP32, np.float16: pypto.DT_FP16, BF16: pypto.DT_BF16}


def _run(body, *arrays, out_shape=None, out_dtype=None, tile=(4, 16)):
    out_shape = out_shape or arrays[0].shape
    out_dtype = out_dtype or arrays[0].dtype

    def kernel(*args):
        pypto.set_vec_tile_shapes(*tile)
        *inputs, out = args
        out[:] = body(*inputs)

    with npusim.session("a2"):
        out = npusim.zeros(out_shape, out_dtype)
        npusim.launch(kernel, 1, args=lambda pe: (*(npusim.tensor(a) for a in arrays), out))
        return out.numpy()


def _fp32_math(function, *arrays, dtype):
    """The framework's float math: inputs to float32, the function in float64, rounded to float32, then to ``dtype``."""
    wide = [np.asarray(a).astype(np.float32).astype(np.float64) for a in arrays]
    with np.errstate(all="ignore"):
        return np.asarray(function(*wide)).astype(np.float32).astype(dtype)


_erf, _erfc = np.vectorize(math.erf), np.vectorize(math.erfc)
UNARY = {
    "sin": np.sin, "cos": np.cos, "tan": np.tan, "sinh": np.sinh, "cosh": np.cosh, "tanh": np.tanh, "atan": np.arctan,
    "asinh": np.arcsinh, "erf": _erf, "erfc": _erfc, "exp2": np.exp2, "expm1": np.expm1, "sign": np.sign, "ceil": np.ceil,
    "floor": np.floor, "trunc": np.trunc, "round": np.rint, "reciprocal": np.reciprocal, "relu": lambda x: np.maximum(x, 0),
}
POSITIVE = {"log": np.log, "log2": np.log2, "log10": np.log10, "log1p": np.log1p, "acosh": np.arccosh}
UNIT = {"asin": np.arcsin, "acos": np.arccos, "atanh": np.arctanh}


@pytest.mark.parametrize("dtype", list(FLOAT_TYPES))
@pytest.mark.parametrize("name", sorted(UNARY) + sorted(POSITIVE) + sorted(UNIT))
def test_unary_float_math_is_float32_rounded_once(name, dtype):
    rng = np.random.default_rng(len(name))
    x = rng.normal(0, 2, (6, 20))
    if name in POSITIVE:
        x = np.abs(x) + 0.01
    if name in UNIT:
        x = np.tanh(x) * 0.99
    x = x.astype(dtype)
    if name == "acosh":
        x = x + 1  # acosh takes x >= 1
    reference = {**UNARY, **POSITIVE, **UNIT, "acosh": np.arccosh}[name]
    got = _run(getattr(pypto, name), x)
    expected = _fp32_math(reference, x, dtype=dtype)
    np.testing.assert_array_equal(got.astype(np.float64), expected.astype(np.float64))


@pytest.mark.parametrize("dtype", [np.int8, np.uint8, np.int16, np.int32])
def test_exp2_of_ints_is_float32(dtype):
    """pypto-exp2.md: DT_INT32 / INT16 / INT8 / UINT8 inputs give DT_FP32 (test_exp2.py's int8 and uint8 cases)."""
    x = np.random.default_rng(3).integers(0 if dtype == np.uint8 else -5, 6, (8, 16)).astype(dtype)
    got = _run(pypto.exp2, x, out_dtype=np.float32)
    assert np.array_equal(got, np.exp2(x.astype(np.float32)))


@pytest.mark.parametrize("dtype", list(FLOAT_TYPES))
def test_comparisons_predicates_and_where(dtype):
    rng = np.random.default_rng(3)
    x = rng.normal(size=(4, 16)).astype(dtype)
    y = rng.normal(size=(4, 16)).astype(dtype)
    x[0, :3] = y[0, :3]
    x[1, 0], x[1, 1] = np.nan, np.inf
    for name, function in (("eq", np.equal), ("ne", np.not_equal), ("lt", np.less), ("le", np.less_equal), ("gt", np.greater),
                           ("ge", np.greater_equal)):
        got = _run(lambda a, b, name=name: getattr(pypto, name)(a, b), x, y, out_dtype=np.bool_)
        with np.errstate(invalid="ignore"):
            np.testing.assert_array_equal(got, function(x.astype(np.float32), y.astype(np.float32)), err_msg=name)
    np.testing.assert_array_equal(_run(pypto.isnan, x, out_dtype=np.bool_), np.isnan(x.astype(np.float32)))
    np.testing.assert_array_equal(_run(pypto.isfinite, x, out_dtype=np.bool_), np.isfinite(x.astype(np.float32)))
    chosen = _run(lambda a, b: pypto.where(pypto.gt(a, 0.0), a, b), x, y)
    np.testing.assert_array_equal(chosen.astype(np.float64), np.where(x.astype(np.float32) > 0, x, y).astype(np.float64))
    picked = _run(lambda a, b: pypto.where(a > b, 1.0, 0.0), x, y, out_dtype=np.float32)  # two floats: a DT_FP32 result
    assert np.array_equal(picked, (x.astype(np.float32) > y.astype(np.float32)).astype(np.float32))


def test_binary_math_and_bitwise():
    rng = np.random.default_rng(4)
    x = rng.normal(size=(4, 16)).astype(np.float32)
    y = rng.normal(size=(4, 16)).astype(np.float32)
    for name, function in (("atan2", np.arctan2), ("hypot", np.hypot), ("fmod", np.fmod), ("copysign", np.copysign)):
        np.testing.assert_array_equal(_run(lambda a, b, name=name: getattr(pypto, name)(a, b), x, y), _fp32_math(function, x, y, dtype=np.float32))
    np.testing.assert_array_equal(_run(lambda a: pypto.pow(pypto.abs(a), 1.5), x), _fp32_math(lambda v: np.abs(v) ** 1.5, x, dtype=np.float32))
    i = rng.integers(-1000, 1000, (4, 16)).astype(np.int32)
    j = rng.integers(-1000, 1000, (4, 16)).astype(np.int32)
    np.testing.assert_array_equal(_run(pypto.bitwise_and, i, j), i & j)
    np.testing.assert_array_equal(_run(pypto.bitwise_xor, i, j), i ^ j)
    np.testing.assert_array_equal(_run(lambda a: pypto.bitwise_or(a, 7), i), i | 7)
    np.testing.assert_array_equal(_run(pypto.bitwise_not, i), ~i)


def test_the_frameworks_compositions():
    rng = np.random.default_rng(5)
    x = rng.normal(size=(4, 16)).astype(np.float32)
    gamma = rng.uniform(0.5, 1.5, 16).astype(np.float32)
    shifted = np.exp(x - x.max(-1, keepdims=True))
    np.testing.assert_allclose(_run(lambda a: pypto.softmax(a, -1), x), shifted / shifted.sum(-1, keepdims=True), rtol=1e-6)
    np.testing.assert_allclose(_run(pypto.sigmoid, x), 1 / (1 + np.exp(-x)), rtol=1e-6)
    np.testing.assert_allclose(_run(lambda a, g: pypto.rms_norm(a, g), x, gamma),
                               x / np.sqrt((x * x).mean(-1, keepdims=True) + 1e-6) * gamma, rtol=1e-5)
    np.testing.assert_array_equal(_run(lambda a: pypto.clip(a, -0.5, 0.5), x), np.clip(x, -0.5, 0.5))
    np.testing.assert_allclose(_run(lambda a: pypto.round(a, 2), x), np.rint(x * 100) / 100, rtol=1e-6)
    np.testing.assert_array_equal(_run(lambda a: pypto.lrelu(a, 0.1), x), np.where(x > 0, x, (x * np.float32(0.1)).astype(np.float32)))


def test_tensor_methods_and_operators():
    rng = np.random.default_rng(6)
    x = rng.uniform(0.5, 2, (4, 16)).astype(np.float32)
    np.testing.assert_array_equal(_run(lambda a: a.sin().cos(), x), _fp32_math(np.cos, _fp32_math(np.sin, x, dtype=np.float32), dtype=np.float32))
    np.testing.assert_array_equal(_run(lambda a: a ** 2.0, x), _fp32_math(lambda v: v ** 2, x, dtype=np.float32))
    np.testing.assert_array_equal(_run(lambda a: a > 1.0, x, out_dtype=np.bool_), x > 1)
    np.testing.assert_array_equal(_run(lambda a: a.amax(-1, True), x, out_shape=(4, 1)), x.max(-1, keepdims=True))


@pypto.frontend.jit
def _matmul_with(a, b, bias, out):
    pypto.set_cube_tile_shapes([16, 16], [16, 16], [16, 16])
    out.move(pypto.matmul(a, b, pypto.DT_FP32, extend_params={"bias_tensor": bias}) if bias is not None else pypto.matmul(a, b, pypto.DT_FP32))


def test_matmul_broadcasts_batches_and_adds_a_bias():
    """matmul_ops.py: [1, 2, 2] x [2, 2, 2] (the batch broadcast) and a [1, 2] fp32 bias."""
    a = np.array([[[1, 2], [3, 4]]], np.float32)
    b = np.array([[[1, 0], [0, 1]], [[2, 0], [0, 2]]], np.float32)
    bias = np.array([[1, 2]], np.float32)
    with npusim.session("a2"):
        out = npusim.zeros((2, 2, 2), np.float32)
        _matmul_with(npusim.tensor(a), npusim.tensor(b), None, out)
        biased = npusim.zeros((2, 2), np.float32)
        _matmul_with(npusim.tensor(a[0]), npusim.tensor(b[0]), npusim.tensor(bias), biased)
        np.testing.assert_array_equal(out.numpy(), a @ b)
        np.testing.assert_array_equal(biased.numpy(), a[0] @ b[0] + bias)


def test_tile_shape_queries_on_the_host_before_any_kernel_are_none(monkeypatch):
    from npusim.frontend.pypto import ops

    monkeypatch.setattr(ops, "LAST_TILES", ops.LastTiles())  # as in a fresh process
    assert pypto.get_vec_tile_shapes() is None and pypto.get_cube_tile_shapes() is None


def test_tile_shape_queries_and_hints():
    def kernel(x, out):
        pypto.set_vec_tile_shapes(2, 8)
        pypto.set_cube_tile_shapes([16, 16], [16, 16], [16, 16])
        assert pypto.get_vec_tile_shapes() == [2, 8] and pypto.get_cube_tile_shapes()[0] == [16, 16]
        pypto.set_matrix_size([4, 8])
        out[:] = pypto.zeros(4, 8) + pypto.ones([4, 8], dtype=pypto.DT_FP32) + x

    with npusim.session("a2") as session:
        out = npusim.zeros((4, 8), np.float32)
        npusim.launch(kernel, 1, args=lambda pe: (npusim.tensor(np.ones((4, 8), np.float32)), out))
        assert np.array_equal(out.numpy(), np.full((4, 8), 2, np.float32))
    assert pypto.get_vec_tile_shapes() == [2, 8]
    assert {"where": "set_matrix_size", "options": {"size": [4, 8]}} in session.pypto_hints


@pytest.mark.parametrize("dtype", list(FLOAT_TYPES))
def test_argmax_argmin_give_the_first_extreme_index_as_int32(dtype):
    """test_argmax_onboard.py / test_argmin_onboard.py: [8, 8] blocks along dim 1, goldens torch.argmax(...).to(int32)."""
    rng = np.random.default_rng(7)
    x = rng.normal(size=(8, 8)).astype(dtype)
    x[0, 2] = x[0, 6] = 50  # a tie: the first index
    x[1, 1] = x[1, 4] = -50
    np.testing.assert_array_equal(_run(lambda a: pypto.argmax(a, 1), x, out_shape=(8,), out_dtype=np.int32),
                                  np.argmax(x.astype(np.float32), 1))
    np.testing.assert_array_equal(_run(lambda a: a.argmin(1, True), x, out_shape=(8, 1), out_dtype=np.int32),
                                  np.argmin(x.astype(np.float32), 1)[:, None])


def test_prod_multiplies_in_the_halving_order():
    rng = np.random.default_rng(8)
    x = rng.uniform(0.5, 1.5, (4, 16)).astype(np.float32)
    i = rng.integers(-3, 4, (4, 16)).astype(np.int32)
    expected = x.copy()
    n = 16
    while n > 1:  # the order of sum (docs/pypto.md): x[i] *= x[i + h], h = ceil(n / 2)
        h = (n + 1) // 2
        expected[:, : n - h] = expected[:, : n - h] * expected[:, h:n]
        n = h
    np.testing.assert_array_equal(_run(lambda a: pypto.prod(a, 1), x, out_shape=(4,)), expected[:, 0])
    np.testing.assert_array_equal(_run(lambda a: pypto.prod(a, -1), i, out_shape=(4,)), np.prod(i, 1, dtype=np.int32))


@pytest.mark.parametrize("name", ["gathermask", "topk", "cumprod", "arange"])
def test_what_is_not_modelled_is_refused_by_name(name):
    with pytest.raises(UsageError, match=rf"pypto.{name} is not modelled by npusim yet"):
        getattr(pypto, name)


def test_a_tensor_method_of_an_op_not_modelled_names_the_op():
    x = np.ones((4, 16), np.float32)
    with pytest.raises(UsageError, match=r"pypto.cumprod is not modelled by npusim yet"):
        _run(lambda a: a.cumprod(0), x)


@pytest.mark.parametrize("shape, target", [((16, 1), (16, 32)), ((1, 32), (16, 32)), ((1, 1), (16, 32))])
def test_expand_clone_broadcasts_dims_of_size_1(shape, target):
    """test_vector_operation_part_one.py's expand: [n, 1] to [n, m]; and the other dims."""
    x = np.random.default_rng(2).normal(size=shape).astype(np.float32)
    got = _run(lambda a: a.expand_clone(list(target)), x, out_shape=target, tile=(8, 8))
    assert np.array_equal(got, np.broadcast_to(x, target))
    with pytest.raises(Exception, match="only dims of size 1 broadcast"):
        _run(lambda a: pypto.expand_clone(a, [32, 32]), np.ones((16, 32), np.float32), out_shape=(32, 32), tile=(8, 8))


def test_var_remainder_and_the_tensor_operators_of_them():
    """test_var_onboard.py's formula, sum((x - mean)^2) / max(0, N - correction), over a dim list or
    one dim with keepdim; ``%`` is remainder and ``//`` floor(div), as the framework's Tensor."""
    rng = np.random.default_rng(9)
    x = rng.normal(size=(4, 8, 16)).astype(np.float32)
    np.testing.assert_allclose(_run(lambda a: pypto.var(a, [1, 2]), x, out_shape=(4,), tile=(4, 8, 16)), x.var(axis=(1, 2), ddof=1), rtol=1e-5)
    np.testing.assert_allclose(_run(lambda a: pypto.var(a, -1, correction=0, keepdim=True), x, out_shape=(4, 8, 1), tile=(4, 8, 16)),
                               x.var(-1, ddof=0, keepdims=True), rtol=1e-5)
    y = x[0]
    np.testing.assert_array_equal(_run(lambda a: a % 0.7, y), np.remainder(y, np.float32(0.7)))
    np.testing.assert_array_equal(_run(lambda a: a // 0.5, y), np.floor(y / np.float32(0.5)))


@pytest.mark.parametrize("dtype", [np.int32, np.int16])
def test_remainder_of_ints_and_of_a_number_by_a_tensor(dtype):
    """pypto-remainder.md: DT_INT32 / DT_INT16 too (other without 0), and input or other a number
    (test_remainder_onboard.py's int16 cases and remainder(3.2, tensor))."""
    rng = np.random.default_rng(10)
    a = rng.integers(-1000, 1000, size=(4, 16)).astype(dtype)
    b = rng.integers(1, 50, size=(4, 16)).astype(dtype) * np.where(rng.random((4, 16)) < 0.5, 1, -1).astype(dtype)
    np.testing.assert_array_equal(_run(pypto.remainder, a, b), np.remainder(a, b))
    np.testing.assert_array_equal(_run(lambda x: pypto.remainder(x, 7), a), np.remainder(a, dtype(7)))
    y = rng.uniform(0.5, 4, size=(4, 16)).astype(np.float32)
    np.testing.assert_array_equal(_run(lambda x: pypto.remainder(3.2, x), y), np.remainder(np.float32(3.2), y))


def test_equality_with_a_number_is_elementwise_and_between_tensors_identity():
    """test_tensor_operators.py: y.move(x == 0.5) and x != 0.5 are pypto.eq / pypto.ne; two tensors
    compare by identity (tensors are dict keys and list members), and stay hashable."""
    x = np.arange(64, dtype=np.float32).reshape(4, 16) / 2
    np.testing.assert_array_equal(_run(lambda a: a == 0.5, x, out_dtype=np.bool_), x == 0.5)
    np.testing.assert_array_equal(_run(lambda a: a != 3, x, out_dtype=np.bool_), x != 3)
    seen = []

    def body(a):
        b = a + 1.0
        seen.extend([a == a, a == b, a != b, len({a, b})])
        return b

    _run(body, x)
    assert seen == [True, False, True, 2]


def test_the_frameworks_error_classes_and_unheld_types():
    """``except pypto.error.FeError`` catches npusim's errors (test_annotation_check.py); the
    annotation check says "does not match the shape / dtype" (test_function_kernel.py); DT_FP8 ... exist as
    names (dtype tables import) and an op refuses them."""
    @pypto.frontend.jit
    def kernel(a: pypto.Tensor([pypto.STATIC, 32], pypto.DT_INT32), out: pypto.Tensor([], pypto.DT_INT32)):
        pypto.set_vec_tile_shapes(16, 16)
        out.move(a + a)

    with npusim.session("a2"):
        for bad, wording in ((np.ones((32, 31), np.int32), "does not match the shape"), (np.ones((32, 32), np.float32), "does not match the dtype")):
            with pytest.raises(pypto.error.FeError, match=wording):
                kernel(npusim.tensor(bad), npusim.zeros((32, 32), np.int32))
        assert {pypto.DT_FP8.name, pypto.DT_HF8.name} == {"DT_FP8", "DT_HF8"}
        with pytest.raises(pypto.error.FeError, match="dtype=.*DT_FP8"):
            npusim.launch(lambda: pypto.full([4, 4], 0.0, pypto.DT_FP8), 1)
