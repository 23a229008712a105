"""The QuantUpdateScatter kernel run on the simulator: bit-exact against the independent reference in
every mode, index form, dtype row, rank, axis and layout; its programs match the plan; its trace."""

from __future__ import annotations

import json
import warnings
from types import SimpleNamespace

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import npusim
from npusim import torch_npu
from npusim.kernels.quant_scatter import (
    QuantScatterTensors,
    UncheckedIndexWarning,
    build_quant_scatter,
    check_quant_scatter,
    plan_quant_scatter,
)
from npusim.kernels.quant_scatter.tiling import TILING_ARG_COUNT

from .cases import LAYOUTS, device_view, disjoint_indices, dtypes, quant_values, vector_target
from .reference import quant_scatter_reference


def overrides(ub_kib: int, cores: int) -> list[str]:
    return [f"die.cores.aiv.buffers.UB.size={ub_kib} KiB", f"ops.quant_scatter.vector_cores={cores}"]


def run_case(case: dict, *, data: bool = True):
    """Run one call described by ``case``; returns (output, expected, session)."""
    rng = np.random.default_rng(case["seed"])
    input_shape, updates_shape, axis = case["input_shape"], case["updates_shape"], case["axis"]
    host = rng.integers(-128, 128, input_shape).astype(np.int8)
    updates, scales, zero_points = quant_values(rng, updates_shape, updates_shape[-1], bf16=case["bf16"],
                                                zero_points=case["zero_points"])
    scales = scales.reshape(case.get("scales_shape", scales.shape))
    indices = disjoint_indices(rng, input_shape, updates_shape, axis % len(input_shape), case["index_rank"])
    with npusim.session("a2", overrides=overrides(case["ub_kib"], case["cores"]), data=data) as session:
        x, _ = device_view(host, case.get("input_layout", "contiguous"), rng)
        u, _ = device_view(updates, case.get("updates_layout", "contiguous"), rng)
        s, _ = device_view(scales, case.get("scales_layout", "contiguous"), rng)
        zp = None if zero_points is None else npusim.tensor(zero_points)
        with torch_npu.options(double_buffer=case.get("double_buffer", False)):
            returned = torch_npu.npu_quant_scatter_(x, npusim.tensor(indices), u, s, zp, axis=axis, quant_axis=-1)
        assert returned is x
        out = x.numpy() if data else None
    expected = quant_scatter_reference(host, indices, updates, scales, zero_points, axis=axis)
    return out, expected, session


@st.composite
def calls(draw):
    ndim = draw(st.integers(3, 8))
    axis = draw(st.integers(1, ndim - 2))
    middle = [draw(st.integers(1, 3 if ndim <= 4 else 2)) for _ in range(ndim - 2)]
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
        bf16=draw(st.booleans()), zero_points=draw(st.booleans()),
        ub_kib=draw(st.sampled_from([192, 16, 10])), cores=draw(st.sampled_from([48, 3, 1])),
        double_buffer=draw(st.booleans()),
        input_layout=draw(st.sampled_from(LAYOUTS)), updates_layout=draw(st.sampled_from(LAYOUTS)),
        scales_layout=draw(st.sampled_from(["contiguous", "sliced"])),
        scales_shape=draw(st.sampled_from([(last,), (1, last), (1, 1, last)])),
    )


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(calls())
def test_outputs_are_bit_exact_against_the_reference(case):
    out, expected, _ = run_case(case)
    assert np.array_equal(out, expected), f"{int((out != expected).sum())} elements differ"


def test_ties_round_half_to_even_and_saturation_holds_at_both_ends():
    with npusim.session("a2"):
        updates = np.array([0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 127.5, -128.5, 200, -200, np.inf, -np.inf, np.nan, 126.4]
                           + [0.0] * 18, dtype=np.float16).reshape(1, 1, 32)
        x = npusim.zeros((1, 1, 32), np.int8)
        torch_npu.npu_quant_scatter_(x, npusim.tensor(np.array([0], np.int32)), npusim.tensor(updates),
                                     npusim.tensor(np.ones(32, np.float32)), axis=-2, quant_axis=-1)
        got = x.numpy()[0, 0, :14]
    assert got.tolist() == [0, 2, 2, 0, -2, -2, 127, -128, 127, -128, 127, -128, 0, 126]


# ------------------------------------------------------------------------ every mode, both variants

MODE_CASES = [
    # (mode, double buffered, ub KiB, cores, input shape, updates shape)
    (100, False, 192, 48, (3, 8, 128), (3, 4, 128)),
    (101, False, 12, 3, (24, 3, 64), (24, 3, 64)),
    (101, True, 12, 3, (24, 3, 64), (24, 3, 64)),
    (102, False, 10, 3, (2, 40, 64), (1, 40, 64)),  # column-wise divide
    (102, True, 10, 3, (2, 40, 64), (1, 40, 64)),
    (103, False, 12, 3, (1, 4, 512), (1, 4, 512)),
    (103, True, 16, 3, (1, 4, 512), (1, 4, 512)),
    (104, False, 8, 3, (8, 3, 96), (8, 3, 96)),
    (104, True, 12, 3, (8, 4, 128), (8, 4, 128)),
    (105, False, 12, 3, (4, 2, 512), (4, 1, 512)),
    (105, True, 16, 3, (5, 3, 512), (5, 1, 512)),
]


def events(session, op_name="QuantUpdateScatter"):
    """(core, lane, name, op, tile) of every event of the op named ``op_name``, in record order."""
    recorder = session.result.recorder
    cols = recorder.columns()
    ids = {i for i, op in enumerate(recorder.ops) if op.name == op_name}
    return [(recorder.tracks[t].unit, recorder.tracks[t].lane, recorder.names[n], int(op), int(tile))
            for t, n, op, tile in zip(cols["track"], cols["name"], cols["op"], cols["tile"]) if op in ids]


@pytest.mark.parametrize("mode, double, ub_kib, cores, input_shape, updates_shape", MODE_CASES)
@pytest.mark.parametrize("index_rank, bf16", [(1, True), (2, False)])
def test_every_mode_is_bit_exact_and_runs_its_plan(mode, double, ub_kib, cores, input_shape, updates_shape, index_rank, bf16):
    case = dict(seed=mode, input_shape=input_shape, updates_shape=updates_shape, axis=-2, index_rank=index_rank,
                bf16=bf16, zero_points=True, ub_kib=ub_kib, cores=cores, double_buffer=double)
    out, expected, session = run_case(case)
    assert np.array_equal(out, expected)
    op = session.result.recorder.ops[0]
    assert (op.name, op.args["mode"], op.args["double_buffer"]) == ("QuantUpdateScatter", mode, double)

    # The programs that ran are the plan's: its instructions, index reads and writes.
    plan = plan_of(input_shape, updates_shape, index_rank, bf16, ub_kib, cores, double)
    ran = events(session)
    vector = [e for e in ran if e[1] == "VECTOR" and not e[2].startswith(("wait_flag", "set_flag"))]
    assert len(vector) == sum(step.instructions for it in plan.all_iterations() for step in it.vector)
    stores = [e for e in ran if e[2] == "store block"]
    assert len(stores) == sum(len(it.writes) for it in plan.all_iterations())
    assert len([e for e in ran if e[2] == "read tiling argument"]) == plan.used_cores * TILING_ARG_COUNT
    assert len([e for e in ran if e[2] == "read index"]) == plan.total("index_reads")
    # Each core's events carry its iteration index as the tile, in order.
    for core in plan.cores:
        tiles = [e[4] for e in stores if e[0] == f"aiv{core.core}"]
        assert tiles == sorted(tiles) and set(tiles) == set(range(len(core.iterations)))


def plan_of(input_shape, updates_shape, index_rank, bf16, ub_kib, cores, double):
    u, s, z = dtypes(bf16)
    b, last = updates_shape[0], updates_shape[-1]
    problem = check_quant_scatter(
        shaped(input_shape, np.int8), shaped((b,) if index_rank == 1 else (b, 2), np.int32), shaped(updates_shape, u),
        shaped((last,), s), shaped((last,), z), -2, -1, "update", product="ascend910b")
    return plan_quant_scatter(problem, vector_target(ub_bytes=ub_kib * 1024), vector_cores=cores, double_buffer=double)


def shaped(shape, dtype):
    return SimpleNamespace(shape=tuple(shape), dtype=np.dtype(dtype), ndim=len(shape))


@pytest.mark.parametrize("mode, double, ub_kib, cores, input_shape, updates_shape", MODE_CASES)
def test_each_core_allocates_the_ub_its_plan_budgets(mode, double, ub_kib, cores, input_shape, updates_shape):
    plan = plan_of(input_shape, updates_shape, 1, True, ub_kib, cores, double)
    problem = plan.ub_layout.problem
    with npusim.session("a2", overrides=overrides(ub_kib, cores), data=False):
        b, last = updates_shape[0], updates_shape[-1]
        tensors = QuantScatterTensors(
            input=npusim.empty(input_shape, np.int8), indices=npusim.empty((b,), np.int32),
            updates=npusim.empty(updates_shape, problem.updates_dtype), scales=npusim.empty((last,), problem.scales_dtype),
            zero_points=npusim.empty((last,), problem.zero_points_dtype), tiling=npusim.empty((TILING_ARG_COUNT,), np.int64))
        kernel = build_quant_scatter(problem, plan, tensors)
    assert plan.mode == mode and plan.double_buffer == double
    assert sorted(index for _, index in kernel.programs) == [core.core for core in plan.cores]
    for program in kernel.programs.values():
        allocated = program.allocated_bytes["UB"]
        assert plan.ub_bytes - 32 < allocated <= plan.ub_bytes <= plan.ub_budget_bytes


# ------------------------------------------------------------------------------------------- trace

DOC_EXAMPLE_1 = dict(seed=7, input_shape=(24, 4096, 128), updates_shape=(24, 1, 128), axis=-2, index_rank=1,
                     bf16=True, zero_points=True, ub_kib=192, cores=48, scales_shape=(1, 1, 128))


def test_the_trace_shows_each_core_loading_converting_reading_indices_and_writing(tmp_path):
    out, expected, session = run_case(DOC_EXAMPLE_1)
    assert np.array_equal(out, expected)
    ran = events(session)
    (op_id,) = {e[3] for e in ran}
    cores = sorted({e[0] for e in ran}, key=lambda unit: int(unit[3:]))
    assert cores == [f"aiv{i}" for i in range(24)]  # 24 bs rows: one per core
    for core in cores:
        mine = [e for e in ran if e[0] == core and not e[2].startswith(("set_flag", "wait_flag"))]
        lane = {name: [e[2] for e in mine if e[1] == name] for name in ("MTE2", "VECTOR", "SCALAR", "MTE3")}
        assert lane["MTE2"] == ["load tiling", "load indices", "load updates", "load scales", "load zero points"]
        assert lane["VECTOR"] == ["cast bfloat16->float32", "cast bfloat16->float32", "div", "cast bfloat16->float32", "add",
                                  "cast float32->int16", "cast int16->float16", "cast float16->int8"]
        assert lane["SCALAR"] == ["read tiling argument"] * 36 + ["read index"]
        assert lane["MTE3"] == ["store block"]
        assert {e[4] for e in mine if e[2] != "load tiling" and e[1] != "SCALAR"} == {0}  # all in iteration 0
    # Serialised within the iteration: the vector chain after the loads it needs, the write after it.
    recorder = session.result.recorder
    cols = recorder.columns()
    span = {}
    for t, n, start, end in zip(cols["track"], cols["name"], cols["start_ps"], cols["end_ps"]):
        if recorder.tracks[t].unit == "aiv5":
            span.setdefault(recorder.names[n], []).append((int(start), int(end)))
    assert span["cast bfloat16->float32"][0][0] >= span["load updates"][0][1]
    assert span["div"][0][0] >= span["load scales"][0][1]
    assert span["store block"][0][0] >= span["cast float16->int8"][0][1]

    from npusim.trace.chrome import write_chrome_trace
    trace = json.loads(write_chrome_trace(session.result.record, tmp_path / "trace.json").read_text())["traceEvents"]
    threads = {(e["pid"], e["tid"]): e["args"]["name"] for e in trace if e.get("name") == "thread_name"}
    tagged = {(threads[(e["pid"], e["tid"])], e["name"]) for e in trace
              if e.get("ph") == "X" and e.get("args", {}).get("op") == f"QuantUpdateScatter#{op_id}"}  # release slices have no args
    for expected_event in [("aiv0 MTE2", "load updates"), ("aiv0 VECTOR", "div"), ("aiv0 SCALAR", "read index"),
                           ("aiv23 MTE3", "store block")]:
        assert expected_event in tagged


def test_timing_does_not_depend_on_data():
    case = dict(DOC_EXAMPLE_1, input_shape=(24, 64, 128))
    _, _, with_data = run_case(case)
    _, _, timing_only = run_case(case, data=False)
    assert with_data.result.simulated_ps == timing_only.result.simulated_ps
    assert timed_events(with_data) == timed_events(timing_only)


def timed_events(session):
    """Every event as (core, lane, name, start, end), sorted: the run's timing whatever order the
    events were recorded in (pipes run further ahead of the clock without data)."""
    recorder = session.result.recorder
    c = recorder.columns()
    return sorted((recorder.tracks[t].unit, recorder.tracks[t].lane, recorder.names[n], int(s), int(e))
                  for t, n, s, e in zip(c["track"], c["name"], c["start_ps"], c["end_ps"]))


def test_the_same_call_gives_the_same_trace(tmp_path):
    from npusim.trace.chrome import write_chrome_trace

    case = dict(DOC_EXAMPLE_1, input_shape=(24, 64, 128), double_buffer=True, input_layout="transposed")
    traces = [write_chrome_trace(run_case(case)[2].result.record, tmp_path / f"{i}.json").read_bytes() for i in range(2)]
    assert traces[0] == traces[1]


def test_unchecked_indices_write_where_the_address_arithmetic_lands_and_drop_what_leaves_input():
    rng = np.random.default_rng(3)
    host = rng.integers(-128, 128, (2, 4, 32)).astype(np.int8)
    updates, scales, _ = quant_values(rng, (2, 2, 32), 32, bf16=False, zero_points=False, specials=False)
    from .reference import quantize_reference

    quantized = quantize_reference(updates, scales)
    for indices, dropped in ((np.array([3, 1], np.int32), False), (np.array([1, 3], np.int32), True)):
        with npusim.session("a2"):
            x = npusim.tensor(host)
            with torch_npu.options(out_of_range="unchecked"), warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                torch_npu.npu_quant_scatter_(x, npusim.tensor(indices), npusim.tensor(updates), npusim.tensor(scales), axis=-2, quant_axis=-1)
            out = x.numpy()
        # The kernel's flat arithmetic: block of batch b starts at row b * S + indices[b] of the [8, 32] rows.
        expected = host.reshape(8, 32).copy()
        for b in range(2):
            start = b * 4 + int(indices[b])
            if start + 2 <= 8:
                expected[start:start + 2] = quantized[b]
        assert np.array_equal(out.reshape(8, 32), expected)
        assert any(issubclass(w.category, UncheckedIndexWarning) for w in caught) == dropped
