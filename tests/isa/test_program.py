"""The kernel builder: copy paths, repeat splitting and costs, 0-repeat instructions, repeat strides,
buffer bounds, scalar registers."""

import math

import numpy as np
import pytest

import npusim
from npusim import isa
from npusim.errors import UsageError, WorkloadError
from tests.conftest import events_of


def test_vector_instructions_are_split_at_255_repeats_with_their_costs():
    with npusim.session("a2", data=False) as s:
        p = isa.Kernel("k", die=0).aiv(0)
        a = p.alloc(64 * 300, np.float32)
        instructions = p.adds(a, a, 1.0)
    timing = s.system.timing.vector
    assert [i.fixed_ps for i in instructions] == [timing.cost_ps("adds", 255), timing.cost_ps("adds", 45)]


def test_copy_picks_the_engine_of_the_path():
    with npusim.session("a2", data=False):
        x = npusim.empty(1024, np.float16)
        p = isa.Kernel("k", die=0).aiv(0)
        ub = p.alloc(1024, np.float16)
        assert p.copy(ub, isa.gm(x)).pipe is isa.Pipe.MTE2
        assert p.copy(isa.gm(x), ub).pipe is isa.Pipe.MTE3
        with pytest.raises(UsageError, match=r"no engine of an AIV core copies GM -> GM; its engines copy GM->UB, UB->GM \(die.cores.aiv.engines\)"):
            p.copy(isa.gm(x), isa.gm(x), nbytes=64)
        cube = isa.Kernel("c", die=0).aic(0)
        l1 = cube.alloc(1024, np.float16, buffer="L1")
        l0a = cube.alloc(1024, np.float16, buffer="L0A")
        assert cube.copy(l1, isa.gm(x)).pipe is isa.Pipe.MTE2
        assert cube.copy(l0a, l1).pipe is isa.Pipe.MTE1


def test_a_copy_outside_its_tensor_is_refused_when_built():
    with npusim.session("a2", data=False):
        x = npusim.empty(16, np.float16)
        p = isa.Kernel("k", die=0).aiv(0)
        ub = p.alloc(64, np.float16)
        with pytest.raises(UsageError, match=r"copy touches bytes 0..128 of GM tensor .* which has 32 bytes"):
            p.copy(ub, isa.gm(x))


def test_strided_copy_moves_bursts_and_pays_per_burst():
    with npusim.session("a2") as s:
        host = np.arange(64, dtype=np.int32).reshape(8, 8)
        x = npusim.tensor(host)
        out = npusim.zeros((8, 2), np.int32)
        k = isa.Kernel("columns", die=0)
        p = k.aiv(0)
        ub = p.alloc(16, np.int32)
        p.copy(ub, isa.gm(x, 2), burst_count=8, burst_bytes=8, src_gap=24)  # columns 2..3 of each row
        p.set_flag("MTE2", "MTE3", 0)
        p.wait_flag("MTE2", "MTE3", 0)
        p.copy(isa.gm(out), ub)
        k.launch()
        assert out.numpy().tolist() == host[:, 2:4].tolist()
    load = next(e for e in events_of(s.result) if e["lane"] == "MTE2")
    engine = s.system.die(0).core("aiv", 0).dma_timing[isa.Pipe.MTE2]
    fixed = engine.setup_ps + 7 * engine.per_burst_ps + s.system.gm_route(0, 0, to_gm=False).latency_ps
    moved = 8 * 32  # each 8-byte burst still moves a whole 32-byte granule
    assert load["bytes"] == 64
    assert load["end"] - load["start"] == fixed + math.ceil(moved / engine.rate_bytes_per_ps)


def launch_row_scatter(index_value: int):
    """A kernel that reads an index from GM into a scalar register and writes a row of 7s to
    ``table[index]``: the destination address is computed from the register when issued."""
    table = npusim.tensor(np.zeros((4, 8), np.int32))
    index = npusim.tensor(np.array([index_value], np.int32))
    k = isa.Kernel("scatter_row", die=0)
    p = k.aiv(0)
    idx = p.alloc(8, np.int32)
    row = p.alloc(8, np.int32)
    p.copy(idx, isa.gm(index), nbytes=4)
    p.set_flag("MTE2", "SCALAR", 0)
    p.wait_flag("MTE2", "SCALAR", 0)
    r = p.read_scalar(idx, 0)
    p.dup(row, 7)
    p.set_flag("VECTOR", "MTE3", 0)
    p.wait_flag("VECTOR", "MTE3", 0)
    p.copy(isa.gm(table, r * 8), row)
    k.launch()
    return table


def test_scalar_register_addresses_the_destination():
    with npusim.session("a2"):
        table = launch_row_scatter(2)
        assert table.numpy()[2].tolist() == [7] * 8 and table.numpy().sum() == 56


def test_an_address_from_a_bad_index_is_an_error_naming_the_core():
    with pytest.raises(WorkloadError, match="die0 aiv0: copy UB->GM addresses bytes 288..320 .* out of bounds; on hardware this would read or corrupt other memory silently"):
        with npusim.session("a2"):
            launch_row_scatter(9)


def test_unknown_pipe_vector_kind_and_rounding_are_named():
    with npusim.session("a2", data=False):
        p = isa.Kernel("k", die=0).aiv(0)
        a = p.alloc(64, np.float32)
        with pytest.raises(UsageError, match="aiv0 has no CUBE pipe"):
            p.set_flag("CUBE", "VECTOR")
        with pytest.raises(UsageError, match="unknown pipe 'MTE9'"):
            p.set_flag("MTE9", "VECTOR")
        with pytest.raises(UsageError, match="unknown vector instruction 'sqrtx'"):
            p.vector("sqrtx", a, a)
        with pytest.raises(UsageError, match="unknown rounding 'up'"):
            p.cast(a, a, rounding="up")


def test_mmad_on_the_cube_core():
    with npusim.session("a2"):
        a_host = np.arange(16 * 16, dtype=np.float16).reshape(16, 16) / 256
        b_host = np.eye(16, dtype=np.float16)
        a, b = npusim.tensor(a_host), npusim.tensor(b_host)
        c = npusim.zeros((16, 16), np.float32)
        k = isa.Kernel("matmul", die=0)
        p = k.aic(0)
        l0a, l0b = p.alloc(256, np.float16, "L0A"), p.alloc(256, np.float16, "L0B")
        l0c = p.alloc(256, np.float32, "L0C")
        p.copy(l0a, isa.gm(a))
        p.copy(l0b, isa.gm(b))
        p.set_flag("MTE2", "CUBE", 0)
        p.wait_flag("MTE2", "CUBE", 0)
        p.mmad(l0c, l0a, l0b, 16, 16, 16)
        p.set_flag("CUBE", "FIXP", 0)
        p.wait_flag("CUBE", "FIXP", 0)
        p.copy(isa.gm(c), l0c)
        k.launch()
        assert np.array_equal(c.numpy(), a_host.astype(np.float32))


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
