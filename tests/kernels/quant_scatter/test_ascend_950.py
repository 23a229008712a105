"""The Ascend 950 build of QuantUpdateScatter (aclnnInplaceQuantScatterV2, configs/ascend-950pr.yaml):
its checks (the V2 document's dtypes and round modes, hicann/ops-nn
index/quant_update_scatter/docs/aclnnInplaceQuantScatterV2.md), its output chains and two buffers in
the plan, and the kernel's outputs bit-exact against a reference written from the formats'
definitions: float8_e4m3fn / float8_e5m2 saturated to their largest finite value then rounded half
to even by ml_dtypes (not by npusim.formats), hifloat8 by npusim.formats.to_hifloat8 (itself tested
against the HiFloat8 paper's fields and a brute-force nearest in tests/test_formats.py)."""

from __future__ import annotations

import warnings

import ml_dtypes
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import npusim
from npusim import formats, torch_npu
from npusim.errors import OpArgumentError
from npusim.kernels.quant_scatter.checks import IgnoredArgumentWarning, ReinterpretedOutputWarning, check_output_mode
from npusim.kernels.quant_scatter.op import aclnn_api
from npusim.kernels.quant_scatter.tiling_arch35 import plan_quant_scatter_950

from .cases import LAYOUTS, device_view, disjoint_indices, quant_values, vector_target
from .reference import quantize_reference
from .test_tiling_inference import shaped

OUTPUTS = [(None, "rint"), ("float8_e4m3fn", "rint"), ("float8_e5m2", "rint"), ("hifloat8", "round"), ("hifloat8", "hybrid")]
"""(dst_type, round_mode) pairs the V2 document allows."""


def quantized_reference(updates, scales, zero_points, dst: str | None, round_mode: str) -> np.ndarray:
    """The bytes the op writes: int8 as on A2/A3 (reference.py), or the 8-bit float of the fp32
    quotient, saturating. Returned as uint8 codes."""
    if dst is None:
        return quantize_reference(updates, scales, zero_points).view(np.uint8)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        value = updates.astype(np.float32) / scales.reshape(-1).astype(np.float32)
        if zero_points is not None:
            value = value + zero_points.reshape(-1).astype(np.float32)
    if dst == "hifloat8":
        return formats.to_hifloat8(value.astype(np.float64), round_mode, saturate=True).view(np.uint8)
    dtype = getattr(ml_dtypes, dst)
    largest = float(ml_dtypes.finfo(dtype).max)
    return np.clip(value, -largest, largest).astype(dtype).view(np.uint8)  # NaN passes the clip and stays NaN


def same_codes(got: np.ndarray, expected: np.ndarray, dst: str | None) -> bool:
    """Equal bytes, a NaN of the format matching any NaN (its sign and payload are not specified)."""
    if dst in (None, "hifloat8"):
        return np.array_equal(got, expected)
    dtype = getattr(ml_dtypes, dst)
    a, b = got.view(dtype).astype(np.float32), expected.view(dtype).astype(np.float32)
    return bool(np.all((got == expected) | (np.isnan(a) & np.isnan(b))))


def held_dtype(dst: str | None) -> np.dtype:
    """The dtype input holds the written format in: its own, uint8 for hifloat8 (as torch_npu)."""
    return np.dtype(np.uint8) if dst == "hifloat8" else formats.dtype_named(dst or "int8")


def run_case(case: dict):
    rng = np.random.default_rng(case["seed"])
    input_shape, updates_shape, axis, dst = case["input_shape"], case["updates_shape"], case["axis"], case["dst"]
    host = rng.integers(0, 256, input_shape).astype(np.uint8)
    updates, scales, zero_points = quant_values(rng, updates_shape, updates_shape[-1], bf16=case["bf16"], zero_points=case["zero_points"])
    indices = disjoint_indices(rng, input_shape, updates_shape, axis % len(input_shape), case["index_rank"])
    overrides = [f"die.cores.aiv.buffers.UB.size={case['ub_kib']} KiB", f"ops.quant_scatter.vector_cores={case['cores']}"]
    with npusim.session("ascend-950pr", overrides=overrides) as session:
        x = npusim.tensor(host.view(held_dtype(dst)))
        u, _ = device_view(updates, case.get("updates_layout", "contiguous"), rng)
        zp = None if zero_points is None else npusim.tensor(zero_points)
        torch_npu.npu_quant_scatter_(x, npusim.tensor(indices), u, npusim.tensor(scales), zp, axis=axis, quant_axis=-1, dst_type=dst,
                                     round_mode=case["round_mode"])
        out = x.numpy().view(np.uint8)
    expected = host.copy()
    quantized = quantized_reference(updates, scales, zero_points, dst, case["round_mode"])
    ax = axis % len(input_shape)
    rows = updates_shape[ax]
    for b in range(updates_shape[0]):
        dest, offset = (b, int(indices[b])) if indices.ndim == 1 else (int(indices[b, 0]), int(indices[b, 1]))
        expected[(dest,) + (slice(None),) * (ax - 1) + (slice(offset, offset + rows),)] = quantized[b]
    return out, expected, session


@pytest.mark.parametrize("dst, round_mode", OUTPUTS)
@pytest.mark.parametrize("mode, ub_kib, cores, input_shape, updates_shape", [
    (100, 248, 72, (3, 8, 128), (3, 4, 128)),
    (102, 12, 3, (2, 40, 64), (1, 40, 64)),  # column-wise divide, chunked over the axis
    (104, 12, 3, (8, 4, 128), (8, 4, 128)),
    (105, 16, 3, (5, 3, 512), (5, 1, 512)),
])
def test_every_output_is_bit_exact_in_each_mode(dst, round_mode, mode, ub_kib, cores, input_shape, updates_shape):
    case = dict(seed=mode, input_shape=input_shape, updates_shape=updates_shape, axis=-2, index_rank=1, bf16=False,
                zero_points=True, ub_kib=ub_kib, cores=cores, dst=dst, round_mode=round_mode)
    out, expected, session = run_case(case)
    assert same_codes(out, expected, dst), f"{int((out != expected).sum())} bytes differ"
    op = session.result.recorder.ops[0]
    assert op.args["mode"] == mode
    assert op.args.get("dst_type") == dst and op.args.get("round_mode", "rint") == round_mode


@st.composite
def calls(draw):
    ndim = draw(st.integers(3, 5))
    axis = draw(st.integers(1, ndim - 2))
    middle = [draw(st.integers(1, 3)) for _ in range(ndim - 2)]
    last = 32 * draw(st.sampled_from([1, 2, 4]))
    d0 = draw(st.integers(1, 4))
    input_shape = (d0, *middle, last)
    axis_len = draw(st.integers(1, 6))
    input_shape = input_shape[:axis] + (axis_len,) + input_shape[axis + 1:]
    rows = draw(st.integers(1, axis_len))
    updates_shape = (draw(st.integers(1, d0)),) + input_shape[1:axis] + (rows,) + input_shape[axis + 1:]
    dst, round_mode = draw(st.sampled_from(OUTPUTS))
    return dict(seed=draw(st.integers(0, 2**32 - 1)), input_shape=input_shape, updates_shape=updates_shape,
                axis=axis - ndim if draw(st.booleans()) else axis, index_rank=draw(st.sampled_from([1, 2])),
                bf16=draw(st.booleans()), zero_points=draw(st.booleans()), ub_kib=draw(st.sampled_from([248, 16, 12])),
                cores=draw(st.sampled_from([72, 3, 1])), updates_layout=draw(st.sampled_from(LAYOUTS)), dst=dst, round_mode=round_mode)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(calls())
def test_outputs_are_bit_exact_against_the_formats(case):
    out, expected, _ = run_case(case)
    assert same_codes(out, expected, case["dst"]), f"{int((out != expected).sum())} bytes differ"


def problem_of(dst, round_mode, input_dtype=np.int8, product="ascend950pr"):
    from npusim.kernels.quant_scatter import check_quant_scatter

    output = check_output_mode(product, dst, round_mode)
    return check_quant_scatter(shaped((8, 4, 128), input_dtype), shaped((8,), np.int32), shaped((8, 4, 128), np.float16),
                               shaped((128,), np.float32), None, -2, -1, "update", product=product, output=output)


@pytest.mark.parametrize("dst, round_mode, chain", [
    (None, "rint", [("float32", "int16", "rint"), ("int16", "float16", ""), ("float16", "int8", "")]),
    ("float8_e5m2", "rint", [("float32", "float8_e5m2", "rint")]),
    ("hifloat8", "hybrid", [("float32", "hifloat8", "hybrid")]),
])
def test_the_950_chain_converts_once_to_a_float8_and_double_buffers(dst, round_mode, chain):
    plan = plan_quant_scatter_950(problem_of(dst, round_mode, held_dtype(dst)), vector_target("ascend-950pr", ub_bytes=12 * 1024), vector_cores=2)
    steps = [(s.dtype_in, s.dtype_out, s.rounding) for s in plan.cores[0].iterations[0].vector if s.kind == "cast"]
    assert steps[-len(chain):] == chain
    assert len(plan.cores[0].iterations) > 1 and plan.double_buffer  # the arch35 kernel's BUFFER_NUM = 2


# The V2 document's round modes: int8 and the OFP8 formats 'rint' only, hifloat8 'round' or 'hybrid'.
@pytest.mark.parametrize("dst, round_mode", [(None, "round"), (None, "hybrid"), ("float8_e4m3fn", "round"),
                                             ("float8_e5m2", "hybrid"), ("hifloat8", "rint")])
def test_a_round_mode_the_output_does_not_take_is_refused(dst, round_mode):
    with pytest.raises(OpArgumentError, match=rf"round_mode = '{round_mode}': .* is written with .* only \(aclnnInplaceQuantScatterV2 on Ascend 950PR"):
        check_output_mode("ascend950pr", dst, round_mode)


@pytest.mark.parametrize("dst, round_mode", OUTPUTS)
def test_every_allowed_output_is_accepted_on_both_950s(dst, round_mode):
    for product in ("ascend950pr", "ascend950dt"):
        mode = check_output_mode(product, dst, round_mode)
        assert (formats.name_of(mode.dtype), mode.round_mode) == (dst or "int8", round_mode)


def test_an_fp8_input_on_a2_is_the_real_ops_error_naming_the_product():
    with pytest.raises(OpArgumentError, match=r"input.dtype = float8_e5m2: not supported on Atlas A2 \(ascend910b\), where input must "
                                              r"be int8 \(.*float8_e5m2.* on Ascend 950"):
        problem_of(None, "rint", input_dtype=ml_dtypes.float8_e5m2, product="ascend910b")


def test_on_a2_the_950_arguments_are_ignored_with_a_warning():
    with pytest.warns(IgnoredArgumentWarning, match=r"dst_type=hifloat8 and round_mode='round' .* on Atlas A2 \(ascend910b\)"):
        assert check_output_mode("ascend910b", "hifloat8", "round").dtype == np.int8


def test_an_input_of_another_format_is_written_as_the_device_writes_it_with_a_warning():
    with pytest.warns(ReinterpretedOutputWarning, match="input is float8_e5m2 but the op writes int8 codes into its bytes"):
        problem_of(None, "rint", input_dtype=ml_dtypes.float8_e5m2)
    with pytest.raises(OpArgumentError, match=r"input.dtype = float16: not supported on Ascend 950PR"):
        problem_of(None, "rint", input_dtype=np.float16)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        problem_of("hifloat8", "round", input_dtype=np.uint8)  # torch_npu's hifloat8 storage: no warning


def test_op_plugin_calls_v2_on_the_950_only():
    assert aclnn_api("ascend950pr") == aclnn_api("ascend950dt") == "aclnnInplaceQuantScatterV2"
    assert aclnn_api("ascend910b") == aclnn_api("ascend910c") == "aclnnInplaceQuantScatter"
