"""Tests of the vector builder of npusim.isa.program: 0-repeat instructions and repeat strides."""

from __future__ import annotations

import numpy as np
import pytest

import npusim
from npusim import isa
from npusim.errors import UsageError


def run_on_ub(build, arrays, out_count, out_dtype):
    """Load ``arrays`` into UB of aiv0, apply ``build(program, ub_tensors)`` (returns the UB tensor
    to read back), copy it to GM; returns (values, events of the VECTOR lane as (name, duration))."""
    with npusim.session("a2") as session:
        gm = [npusim.tensor(a) for a in arrays]
        out = npusim.zeros(out_count, out_dtype)
        kernel = isa.Kernel("t")
        p = kernel.aiv(0)
        ub = [p.alloc(a.size, a.dtype) for a in arrays]
        for local, tensor in zip(ub, gm):
            p.copy(local, isa.gm(tensor))
        p.set_flag("MTE2", "VECTOR")
        p.wait_flag("MTE2", "VECTOR")
        result = build(p, ub)
        p.set_flag("VECTOR", "MTE3")
        p.wait_flag("VECTOR", "MTE3")
        p.copy(isa.gm(out), result, nbytes=out_count * np.dtype(out_dtype).itemsize)
        kernel.launch()
        values = out.numpy()
    recorder = session.result.recorder
    cols = recorder.columns()
    lanes = [recorder.tracks[t].lane for t in cols["track"]]
    names = [recorder.names[n] for n in cols["name"]]
    durations = cols["end_ps"] - cols["start_ps"]
    vector = [(n, int(d)) for n, lane, d in zip(names, lanes, durations) if lane == "VECTOR" and not n.startswith(("wait", "set_flag"))]
    return values, vector, session.system.timing.vector


def test_a_zero_repeat_instruction_costs_its_issue_and_latency_and_computes_nothing():
    x = np.arange(64, dtype=np.float32)
    values, vector, timing = run_on_ub(lambda p, ub: (p.div(ub[0], ub[0], ub[0], count=0), ub[0])[1], [x], 64, np.float32)
    assert np.array_equal(values, x)
    assert vector == [("div", timing.cost_ps("div", 0))] and timing.cost_ps("div", 0) > 0


def test_repeat_strides_walk_columns_and_broadcast_a_stride_0_operand():
    rows, row = 5, 128
    data = np.arange(rows * row, dtype=np.float32).reshape(rows, row) + 1
    scales = np.linspace(1, 3, row, dtype=np.float32)

    def column_block_1(p, ub):
        d, s = ub
        # 64 columns starting at column 64, over all rows: dst and src advance a row, scales stay.
        p.div(d[64:], d[64:], s[64:], count=rows * 64, repeat_strides=(row, row, 0))
        return d

    values, vector, timing = run_on_ub(column_block_1, [data.reshape(-1), scales], rows * row, np.float32)
    expected = data.copy()
    expected[:, 64:] = data[:, 64:] / scales[64:]
    assert np.array_equal(values.reshape(rows, row), expected)
    assert vector == [("div", timing.cost_ps("div", rows))]  # one instruction of `rows` repeats


def test_strided_instructions_split_at_max_repeats():
    rows = 300
    data = np.ones(rows * 64, dtype=np.float32)
    values, vector, timing = run_on_ub(
        lambda p, ub: (p.adds(ub[0], ub[0], 1.0, count=rows * 64, repeat_strides=(64, 64)), ub[0])[1], [data], rows * 64, np.float32)
    assert np.array_equal(values, np.full(rows * 64, 2, np.float32))
    assert [d for _, d in vector] == [timing.cost_ps("adds", 255), timing.cost_ps("adds", 45)]


@pytest.mark.parametrize(
    "strides, count, match",
    [((64,), 128, r"repeat_strides = \(64,\): give one stride >= 0 \(in elements\) per operand, dst first: 2 values"),
     ((64, -1), 128, "give one stride >= 0"),
     ((64, 64), 100, "count = 100 with repeat_strides: strided operands take whole repeats of 64 elements"),
     ((64, 512), 128, "must be a UB tensor of at least 576 elements")],
)
def test_bad_repeat_strides_are_usage_errors(strides, count, match):
    with npusim.session("a2"):
        p = isa.Kernel("t").aiv(0)
        a = p.alloc(256, np.float32)
        with pytest.raises(UsageError, match=match):
            p.abs(a, a, count=count, repeat_strides=strides)
