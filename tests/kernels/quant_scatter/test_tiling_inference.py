"""The Ascend 310P build of QuantUpdateScatter (configs/atlas-300i-duo.yaml): its output chain
through int32 and its widened updates buffer in the plan, and the kernel run on the card's AI cores
bit-exact against the independent reference in every mode, index form, rank, axis and layout."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import npusim
from npusim import torch_npu
from npusim.errors import ResourceError
from npusim.kernels.quant_scatter import check_quant_scatter, plan_quant_scatter
from npusim.kernels.quant_scatter.tiling_inference import plan_quant_scatter_310p

from .cases import LAYOUTS, device_view, disjoint_indices, dtypes, quant_values, vector_target
from .reference import quant_scatter_reference

FP16, FP32, INT32 = dtypes(bf16=False)


def shaped(shape, dtype):
    return SimpleNamespace(shape=tuple(shape), dtype=np.dtype(dtype), ndim=len(shape))


def problem_of(input_shape, updates_shape, index_rank=1, product="ascend310p"):
    b, last = updates_shape[0], updates_shape[-1]
    return check_quant_scatter(shaped(input_shape, np.int8), shaped((b,) if index_rank == 1 else (b, 2), np.int32),
                               shaped(updates_shape, FP16), shaped((last,), FP32), shaped((last,), INT32), -2, -1, "update",
                               product=product)


def test_the_310p_chain_goes_through_int32_and_its_updates_buffer_holds_it():
    problem = problem_of((3, 8, 128), (3, 4, 128))
    plan = plan_quant_scatter_310p(problem, vector_target("atlas-300i-duo"), vector_cores=8)
    a2 = plan_quant_scatter(problem_of((3, 8, 128), (3, 4, 128), product="ascend910b"), vector_target("a2"), vector_cores=48)
    chain = [(step.dtype_in, step.dtype_out, step.rounding) for step in plan.cores[0].iterations[0].vector if step.kind == "cast"]
    assert chain[-3:] == [("float32", "int32", "rint"), ("int32", "float16", ""), ("float16", "int8", "")]
    a2_chain = [(step.dtype_in, step.dtype_out) for step in a2.cores[0].iterations[0].vector if step.kind == "cast"]
    assert a2_chain[-3:] == [("float32", "int16"), ("int16", "float16"), ("float16", "int8")]
    # int32 -> fp16 takes 64 lanes a repeat (int32 is the widest side), twice the repeats of the A2's int16 -> fp16
    to_fp16 = next(step for step in plan.cores[0].iterations[0].vector if (step.dtype_in, step.dtype_out) == ("int32", "float16"))
    a2_to_fp16 = next(step for step in a2.cores[0].iterations[0].vector if step.dtype_in == "int16")
    assert to_fp16.elements == a2_to_fp16.elements and to_fp16.repeats == 2 * a2_to_fp16.repeats
    buffers = {name: n for name, n, _, _ in plan.ub_layout.buffers()}
    assert buffers["updates"] == 2 * buffers["int8"]  # 4 bytes per fp16 update: room for its int32
    assert {name: n for name, n, _, _ in a2.ub_layout.buffers()}["updates"] == buffers["int8"]


def run_case(case: dict):
    """Run one fp16-row call on the card's chip 0; returns (output, expected, session)."""
    rng = np.random.default_rng(case["seed"])
    input_shape, updates_shape, axis = case["input_shape"], case["updates_shape"], case["axis"]
    host = rng.integers(-128, 128, input_shape).astype(np.int8)
    updates, scales, zero_points = quant_values(rng, updates_shape, updates_shape[-1], bf16=False, zero_points=case["zero_points"])
    indices = disjoint_indices(rng, input_shape, updates_shape, axis % len(input_shape), case["index_rank"])
    overrides = [f"die.cores.aicore.buffers.UB.size={case['ub_kib']} KiB", f"ops.quant_scatter.vector_cores={case['cores']}"]
    with npusim.session("atlas-300i-duo", overrides=overrides) as session:
        x, _ = device_view(host, case.get("input_layout", "contiguous"), rng)
        u, _ = device_view(updates, case.get("updates_layout", "contiguous"), rng)
        zp = None if zero_points is None else npusim.tensor(zero_points)
        with torch_npu.options(double_buffer=case.get("double_buffer", False)):
            torch_npu.npu_quant_scatter_(x, npusim.tensor(indices), u, npusim.tensor(scales), zp, axis=axis, quant_axis=-1)
        out = x.numpy()
    return out, quant_scatter_reference(host, indices, updates, scales, zero_points, axis=axis), session


MODE_CASES_310P = [
    # (mode, double buffered, UB KiB, AI cores, input shape, updates shape): the A2 cases of test_kernel.py,
    # with a UB that gives the same mode under the 310P's wider updates buffer
    (100, False, 256, 8, (3, 8, 128), (3, 4, 128)),
    (101, False, 12, 3, (24, 3, 64), (24, 3, 64)),
    (101, True, 12, 3, (24, 3, 64), (24, 3, 64)),
    (102, False, 10, 3, (2, 40, 64), (1, 40, 64)),  # column-wise divide
    (102, True, 10, 3, (2, 40, 64), (1, 40, 64)),
    (103, False, 12, 3, (1, 4, 512), (1, 4, 512)),
    (103, True, 16, 3, (1, 4, 512), (1, 4, 512)),
    (104, False, 9, 3, (8, 3, 96), (8, 3, 96)),
    (104, True, 12, 3, (8, 4, 128), (8, 4, 128)),
    (105, False, 12, 3, (4, 2, 512), (4, 1, 512)),
    (105, True, 16, 3, (5, 3, 512), (5, 1, 512)),
]


@pytest.mark.parametrize("mode, double, ub_kib, cores, input_shape, updates_shape", MODE_CASES_310P)
@pytest.mark.parametrize("index_rank", [1, 2])
def test_every_mode_is_bit_exact_on_the_ai_cores(mode, double, ub_kib, cores, input_shape, updates_shape, index_rank):
    case = dict(seed=mode, input_shape=input_shape, updates_shape=updates_shape, axis=-2, index_rank=index_rank,
                zero_points=True, ub_kib=ub_kib, cores=cores, double_buffer=double)
    out, expected, session = run_case(case)
    assert np.array_equal(out, expected), f"{int((out != expected).sum())} elements differ"
    op = session.result.recorder.ops[0]
    assert (op.name, op.args["mode"], op.args["double_buffer"]) == ("QuantUpdateScatter", mode, double)
    lanes = {track.label for track in session.result.recorder.tracks}
    assert "aicore0 VECTOR" in lanes and not any(label.startswith("vectorcore") for label in lanes)


@st.composite
def calls(draw):
    ndim = draw(st.integers(3, 6))
    axis = draw(st.integers(1, ndim - 2))
    middle = [draw(st.integers(1, 3)) for _ in range(ndim - 2)]
    last = 32 * draw(st.sampled_from([1, 2, 3, 4]))
    d0 = draw(st.integers(1, 4))
    input_shape = (d0, *middle, last)
    axis_len = draw(st.integers(1, 6))
    input_shape = input_shape[:axis] + (axis_len,) + input_shape[axis + 1:]
    rows = draw(st.integers(1, axis_len))
    updates_shape = (draw(st.integers(1, d0)),) + input_shape[1:axis] + (rows,) + input_shape[axis + 1:]
    return dict(
        seed=draw(st.integers(0, 2**32 - 1)), input_shape=input_shape, updates_shape=updates_shape,
        axis=axis - ndim if draw(st.booleans()) else axis, index_rank=draw(st.sampled_from([1, 2])),
        zero_points=draw(st.booleans()), ub_kib=draw(st.sampled_from([256, 16, 12])), cores=draw(st.sampled_from([8, 3, 1])),
        double_buffer=draw(st.booleans()),
        input_layout=draw(st.sampled_from(LAYOUTS)), updates_layout=draw(st.sampled_from(LAYOUTS)),
    )


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(calls())
def test_outputs_are_bit_exact_against_the_reference(case):
    out, expected, _ = run_case(case)
    assert np.array_equal(out, expected), f"{int((out != expected).sum())} elements differ"


def test_ties_round_half_to_even_and_saturation_holds_through_int32():
    with npusim.session("atlas-300i-duo"):
        updates = np.array([0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 127.5, -128.5, 200, -200, np.inf, -np.inf, np.nan, 126.4, 60000, -60000]
                           + [0.0] * 16, dtype=np.float16).reshape(1, 1, 32)
        x = npusim.zeros((1, 1, 32), np.int8)
        torch_npu.npu_quant_scatter_(x, npusim.tensor(np.array([0], np.int32)), npusim.tensor(updates),
                                     npusim.tensor(np.ones(32, np.float32)), axis=-2, quant_axis=-1)
        got = x.numpy()[0, 0, :16]
    assert got.tolist() == [0, 2, 2, 0, -2, -2, 127, -128, 127, -128, 127, -128, 0, 126, 127, -128]


def test_a_call_too_big_for_the_ub_is_a_resource_error_naming_it():
    problem = problem_of((1, 1, 1 << 15), (1, 1, 1 << 15))
    with pytest.raises(ResourceError, match="not even 128 elements of a row fit the 4096 usable bytes of UB"):
        plan_quant_scatter_310p(problem, vector_target("atlas-300i-duo", ub_bytes=8 * 1024), vector_cores=1)
