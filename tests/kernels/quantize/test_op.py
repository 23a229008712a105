"""npu_quantize: bit-exact against independent numpy references written from the op's
documentation (op-plugin torch_npu-npu_quantize.md: div_mode=True, result = input / scales +
zero_points, aclnnQuantize: rounded, saturated to the output dtype; div_mode=False,
aclnnAscendQuantV3: round(input * scale + offset) to int8, ops-nn
quant/ascend_quant_v2/docs/aclnnAscendQuantV3.md and tests/assets/golden.py), and the aclnn
wrappers' checks. The div_mode=False cases of op-plugin's test_npu_quantize.py (16 x 128 fp16,
per channel / per head / per tensor) are among them."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import npusim
from npusim import torch_npu
from npusim.errors import OpArgumentError

BF16 = ml_dtypes.bfloat16
OUT = {"qint8": np.int8, "quint8": np.uint8, "int32": np.int32}


def reference(x, scales, zero_points, dtype: str, axis: int) -> np.ndarray:
    """In float32: rint(x / scales + zero_points), saturated to the output dtype, NaN -> 0."""
    shape = [1] * x.ndim
    if scales.size > 1:
        shape[axis] = scales.size
    value = x.astype(np.float32) / scales.astype(np.float32).reshape(shape)
    if zero_points is not None:
        value = value + zero_points.astype(np.float32).reshape(shape)
    info = np.iinfo(OUT[dtype])
    rounded = np.nan_to_num(np.rint(value.astype(np.float64)), nan=0.0, posinf=info.max, neginf=info.min)
    return np.clip(rounded, info.min, info.max).astype(OUT[dtype])


ROWS = [(np.float16, np.float32, np.int32), (np.float32, np.float32, np.int8), (BF16, BF16, BF16), (np.float32, np.float16, np.uint8),
        (BF16, np.float32, None)]


@st.composite
def cases(draw):
    ndim = draw(st.integers(1, 4))
    shape = [draw(st.integers(1, 6)) for _ in range(ndim)]
    shape[-1] = draw(st.integers(1, 130))
    axis = draw(st.integers(-ndim, ndim - 1))
    per_tensor = draw(st.booleans())
    x_dtype, s_dtype, z_dtype = draw(st.sampled_from(ROWS))
    rng = np.random.default_rng(draw(st.integers(0, 2**16)))
    channels = 1 if per_tensor else shape[axis]
    x = (rng.normal(0, 60, shape)).astype(x_dtype)
    x.reshape(-1)[: draw(st.integers(0, 2))] = np.array([0.5, -2.5])[:1].astype(x_dtype)  # exact ties
    scales = rng.uniform(0.25, 3, channels).astype(s_dtype)
    zero_points = None if z_dtype is None or draw(st.booleans()) else rng.integers(-4, 5, channels).astype(z_dtype)
    return x, scales, zero_points, draw(st.sampled_from(sorted(OUT))), axis


@settings(max_examples=50, deadline=None)
@given(cases())
def test_quantize_is_bit_exact(case):
    x, scales, zero_points, dtype, axis = case
    with npusim.session("a2"):
        out = torch_npu.npu_quantize(npusim.tensor(x), npusim.tensor(scales), None if zero_points is None else npusim.tensor(zero_points),
                                     dtype, axis)
        got = out.numpy()
    assert got.dtype == OUT[dtype]
    assert np.array_equal(got, reference(x, scales, zero_points, dtype, axis % x.ndim))


def test_ties_round_half_to_even_and_results_saturate():
    x = np.array([0.5, 1.5, 2.5, -0.5, -1.5, 300.0, -300.0, np.nan], np.float32)
    with npusim.session("a2"):
        out = torch_npu.npu_quantize(npusim.tensor(x), npusim.tensor(np.ones(1, np.float32)), None, "qint8", -1)
        assert out.numpy().tolist() == [0, 2, 2, 0, -2, 127, -128, 0]


@pytest.mark.parametrize("change, message", [
    (dict(x=np.zeros((2, 8), np.int32)), "input.dtype = int32: not supported on Atlas A2/A3"),
    (dict(scales=np.ones(8, BF16)), "with bfloat16 scales or zero points, input, scales and zero points must all be bfloat16"),
    (dict(zero_points=np.zeros(8, np.float32)), "zero_points.dtype = float32: not supported"),
    (dict(scales=np.ones((1, 8), np.float32)), "scales must be 1-D"),
    (dict(scales=np.ones(4, np.float32), zero_points=np.zeros(4, np.int32)), "scales must have 1 element or input.shape[1] = 8"),
    (dict(zero_points=np.zeros(4, np.int32)), "zero_points must have as many elements as scales (8)"),
    (dict(axis=2), "axis = 2: axis must be in [-2, 1]"),
    (dict(dtype="float8_e5m2"), "Ascend 950 feature"),
    (dict(dtype="float16"), "dtype = float16: must be Int8, UInt8 or Int32"),
    (dict(div_mode=1), "div_mode = 1: must be True"),
])
def test_bad_calls_are_refused_naming_the_argument(change, message):
    args = dict(x=np.zeros((2, 8), np.float32), scales=np.ones(8, np.float32), zero_points=np.zeros(8, np.int32), dtype="qint8",
                axis=-1, div_mode=True)
    args.update(change)
    with npusim.session("a2"):
        with pytest.raises(OpArgumentError) as error:
            torch_npu.npu_quantize(npusim.tensor(args["x"]), npusim.tensor(args["scales"]), npusim.tensor(args["zero_points"]),
                                   args["dtype"], args["axis"], args["div_mode"])
    assert message in str(error.value)


def multiply_reference(x, scales, offsets, axis: int) -> np.ndarray:
    """ops-nn's golden of AscendQuantV2 (round mode "round", int8): in float32, round half to even of
    x * scale + offset, clipped to int8; NaN -> 0 (npusim's convention)."""
    shape = [1] * x.ndim
    if scales.size > 1:
        shape[axis] = scales.size
    value = x.astype(np.float32) * scales.astype(np.float32).reshape(shape)
    if offsets is not None:
        value = value + offsets.astype(np.float32).reshape(shape)
    rounded = np.nan_to_num(np.round(value.astype(np.float64)), nan=0.0, posinf=127, neginf=-128)
    return np.clip(rounded, -128, 127).astype(np.int8)


@pytest.mark.parametrize("scale_shape, axis", [((128,), 1), ((16, 1), -2), ((1,), -1)])
def test_div_mode_false_matches_op_plugins_cases(scale_shape, axis):
    """op-plugin test_npu_quantize.py, test_npu_quantize_ascend_quant_v2_{perchannel, perhead, pertensor}:
    fp16 x of [16, 128], fp16 scales and zero points uniform in [-1, 1], torch.qint8."""
    rng = np.random.default_rng(5)
    x = rng.uniform(-1, 1, (16, 128)).astype(np.float16)
    scales = rng.uniform(-1, 1, scale_shape).astype(np.float16)
    offsets = rng.uniform(-1, 1, scale_shape).astype(np.float16)
    with npusim.session("a2"):
        out = torch_npu.npu_quantize(npusim.tensor(x), npusim.tensor(scales), npusim.tensor(offsets), "qint8", axis, div_mode=False)
        got = out.numpy()
    expected = multiply_reference(x, scales.reshape(-1), offsets.reshape(-1), 0 if axis == -2 else -1)
    assert got.dtype == np.int8 and np.array_equal(got, expected)


@st.composite
def multiply_cases(draw):
    ndim = draw(st.integers(1, 4))
    shape = [draw(st.integers(1, 5)) for _ in range(ndim)]
    shape[-1] = draw(st.integers(1, 70))
    axis = draw(st.sampled_from([-1, -2] if ndim > 1 else [-1]))
    x_dtype = draw(st.sampled_from([np.float32, np.float16, BF16]))
    s_dtype = draw(st.sampled_from([np.float32, np.float16, BF16])) if x_dtype is np.float32 else x_dtype
    rng = np.random.default_rng(draw(st.integers(0, 2**16)))
    channels = 1 if draw(st.booleans()) else shape[axis]
    x = rng.normal(0, 60, shape).astype(x_dtype)
    scales = rng.uniform(-3, 3, channels).astype(s_dtype)
    offsets = None if draw(st.booleans()) else rng.uniform(-4, 4, channels).astype(s_dtype)
    return x, scales, offsets, axis


@settings(max_examples=40, deadline=None)
@given(multiply_cases())
def test_div_mode_false_is_bit_exact(case):
    x, scales, offsets, axis = case
    with npusim.session("a2") as session:
        out = torch_npu.npu_quantize(npusim.tensor(x), npusim.tensor(scales), None if offsets is None else npusim.tensor(offsets),
                                     "qint8", axis, div_mode=False)
        got = out.numpy()
    assert np.array_equal(got, multiply_reference(x, scales, offsets, axis % x.ndim))
    assert {op.name for op in session.system.recorder.ops} >= {"AscendQuantV2"}


@pytest.mark.parametrize("change, message", [
    (dict(dtype="quint8"), "output must be torch.qint8"),
    (dict(dtype="quint4x2"), "packs int4 results into int32"),
    (dict(x=np.zeros((2, 8), np.float16)), "float16 input takes float16 scales"),
    (dict(zero_points=np.zeros(8, np.float16)), "zero_points.dtype = float16: with div_mode=False it must be the scales' dtype"),
    (dict(x=np.zeros((2, 3, 8), np.float32), scales=np.ones(2, np.float32), axis=-3), "axis = -3: must be one of input's last two dims"),
    (dict(scales=np.ones(4, np.float32), zero_points=None), "scales must have 1 or input.shape[1] = 8 elements"),
    (dict(scales=np.ones((2, 8), np.float32), zero_points=None), "scales must have 1 or input.shape[1] = 8 elements along dim 1 and 1"),
])
def test_div_mode_false_checks_are_aclnn_ascend_quant_v3s(change, message):
    args = dict(x=np.zeros((2, 8), np.float32), scales=np.ones(8, np.float32), zero_points=np.zeros(8, np.float32), dtype="qint8", axis=-1)
    args.update(change)
    with npusim.session("a2"):
        with pytest.raises(OpArgumentError) as error:
            torch_npu.npu_quantize(npusim.tensor(args["x"]), npusim.tensor(args["scales"]),
                                   None if args["zero_points"] is None else npusim.tensor(args["zero_points"]), args["dtype"], args["axis"],
                                   div_mode=False)
    assert message in str(error.value)
