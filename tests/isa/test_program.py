"""The kernel builder: copy paths, repeat splitting and costs, 0-repeat instructions, repeat strides,
buffer bounds, scalar registers; templates (a program made again on other GM bytes, with its race verdict)."""

import math
import warnings

import numpy as np
import pytest

import npusim
from npusim import isa
from npusim.engine.loop import queued_events
from npusim.errors import UsageError, WorkloadError
from npusim.hw.core import PipeStep
from npusim.isa.fractal import nz_count, nz_unpack
from npusim.isa.instructions import on_recorded
from npusim.isa.racecheck import PipeRaceWarning
from tests.conftest import events_of
from tests.hw.test_core import fields


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
    fixed = engine.setup_ps + 8 * engine.per_burst_ps + s.system.gm_route(0, 0, to_gm=False).latency_ps  # a cold L2: the read misses
    moved = 8 * 32  # each 8-byte burst still moves a whole 32-byte granule
    assert load["bytes"] == 64
    assert load["end"] - load["start"] == fixed + math.ceil(moved / engine.rate_bytes_per_ps(("GM", "UB"), remote=False))


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


# -- templates: a program made again on other GM bytes ------------------------------------------------


def describe_program(instructions):
    """Every instruction as its class and the values of its fields (GM addresses as allocation and
    offset, buffers as their range), without ``recorded``: what a replay must reproduce."""
    def value(v):
        if isinstance(v, isa.GmAddress):
            return ("GM", id(v.allocation), v.offset)
        if isinstance(v, isa.LocalTensor):
            return (v.buffer, v.offset, v.count, str(v.dtype))
        if isinstance(v, list):
            return [value(x) for x in v]
        return v

    slots = lambda cls: [s for k in cls.__mro__ for s in getattr(k, "__slots__", ()) if s != "recorded"]  # noqa: E731
    return [(type(i).__name__, [(s, value(getattr(i, s))) for s in slots(type(i))]) for i in instructions]


def _staged_copy(p, src, dst, chunks=4, nbytes=1024, atomic=None):
    """A put-like program: ``chunks`` GM -> UB -> GM copies through two buffers, flags between."""
    ub = [p.alloc(nbytes // 2, np.float16) for _ in range(2)]
    p.scalar(4, name="address")
    for k in range(chunks):
        half = k % 2
        if k >= 2:
            p.wait_flag("MTE3", "MTE2", half)
        p.copy(ub[half], src + k * nbytes)
        p.set_flag("MTE2", "MTE3", half)
        p.wait_flag("MTE2", "MTE3", half)
        p.copy(dst + k * nbytes, ub[half], atomic=atomic)
        p.set_flag("MTE3", "MTE2", half)
    p.set_flag("MTE3", "SCALAR", 0)
    p.wait_flag("MTE3", "SCALAR", 0)


def _program(kernel_name="put", core=0, tile=0):
    p = isa.Kernel(kernel_name, die=0).aiv(core)
    p._tile = tile
    return p


def test_a_replay_is_the_program_built_on_its_bases_in_its_tile():
    with npusim.session("a3", data=False):
        a, b, c, d = (npusim.empty(8192, np.float16, device=die) for die in (0, 1, 2, 3))
        first = _program()
        _staged_copy(first, isa.gm(a, 512), isa.gm(b, 1024))
        first.by_pipe()
        template = first.template([(a.allocation, 1024), (b.allocation, 2048)])
        built = _program(tile=3)
        _staged_copy(built, isa.gm(c, 256), isa.gm(d))
        built.by_pipe()
        for own in (None, {0, 5}):
            replayed = _program(tile=3)
            assert replayed.replay(first.template([(a.allocation, 1024), (b.allocation, 2048)], own=own), [(c.allocation, 512), (d.allocation, 0)])
            assert describe_program(replayed.instructions) == describe_program(built.instructions)
            assert replayed.allocated_bytes == built.allocated_bytes
            assert [i.path_key for i in replayed.instructions if hasattr(i, "path_key")] == [i.path_key for i in built.instructions if hasattr(i, "path_key")]
            assert {pipe: describe_program(ins) for pipe, ins in replayed.by_pipe().items()} == {pipe: describe_program(ins) for pipe, ins in built.by_pipe().items()}
        assert template is not None and template.race_free is None  # not launched: not checked


def test_replayed_copies_take_the_path_keys_their_twins_would():
    """A replay's copies to or from other dies have the path keys a twin on the same sides gets
    (:meth:`~npusim.isa.instructions.DmaCopy.moved`), the same tuple in each replay."""
    with npusim.session("a3", data=False):
        a, b, c, d = (npusim.empty(8192, np.float16, device=die) for die in (0, 1, 2, 3))
        first = _program()
        _staged_copy(first, isa.gm(a), isa.gm(b))
        first.by_pipe()
        template = first.template([(a.allocation, 0), (b.allocation, 0)])
        for bases in ([(c.allocation, 0), (d.allocation, 0)], [(a.allocation, 0), (d.allocation, 64)], [(d.allocation, 0), (c.allocation, 0)]):
            replays = [_program(core=core, tile=1) for core in range(2)]
            for p in replays:
                assert p.replay(template, bases)
            for x, y, model in zip(*(p.instructions for p in replays), first.instructions):
                if hasattr(model, "path_key"):
                    assert x.path_key is y.path_key is model.moved(x.dst, x.src).path_key
                    assert x.path_key[1] == (x.dst if x.path_key[2] else x.src).allocation.die


def test_replays_in_one_tile_share_only_what_nobody_watches():
    with npusim.session("a3", data=False):
        a, b = npusim.empty(8192, np.float16, device=0), npusim.empty(8192, np.float16, device=1)
        first = _program()
        _staged_copy(first, isa.gm(a), isa.gm(b))
        first.kernel.launch()
        template = first.template([(a.allocation, 0), (b.allocation, 0)], own={0, len(first.instructions) - 1})
        assert template.race_free is True
        one, two, other_tile = _program(), _program(core=1), _program(tile=1)
        for p in (one, two, other_tile):
            assert p.replay(template, [(a.allocation, 0), (b.allocation, 0)])
        pairs = list(zip(one.instructions, two.instructions, other_tile.instructions))
        for position, (x, y, z) in enumerate(pairs):
            owned = position in (0, len(pairs) - 1) or hasattr(x, "path_key")
            assert (x is y) is not owned, position
            assert x is not z  # another tile: its own label ids
        assert one.shares and not first.shares
        shared = next(x for position, (x, y, _) in enumerate(pairs) if x is y)
        with pytest.raises(UsageError, match="replays of a template in its tile share it.*own="):
            on_recorded(shared, lambda event: None)  # its event would be every replay's: refused, not silently never called
        on_recorded(one.instructions[0], lambda event: None)  # an owned one takes a callback
        kernel = isa.Kernel("two", die=0)
        kernel.programs[("aiv", 0)], kernel.programs[("aiv", 1)] = one, two
        with pytest.raises(UsageError, match="replayed with shared instructions .* is launched alone"):
            kernel.launch()


def test_the_replays_in_a_tile_share_the_pipe_steps_of_their_instructions():
    """The pipes read a replay's fixed fields from records made at its tile's first replay: they
    are those of every later replay's own instructions, and those of the program built in the tile."""
    with npusim.session("a3", data=False):
        a, b, c, d = (npusim.empty(8192, np.float16, device=die) for die in (0, 1, 2, 3))
        first = _program()
        _staged_copy(first, isa.gm(a), isa.gm(b), atomic="add")
        first.by_pipe()
        template = first.template([(a.allocation, 0), (b.allocation, 0)], own={0})
        built = _program(tile=2)
        _staged_copy(built, isa.gm(c, 512), isa.gm(d, 256), atomic="add")
        built_steps = built.pipe_steps(built.by_pipe())
        replays = [_program(core=core, tile=2) for core in range(3)]
        for p, bases in zip(replays, ([(c.allocation, 512), (d.allocation, 256)], [(a.allocation, 0), (b.allocation, 0)],
                                      [(d.allocation, 64), (c.allocation, 0)])):
            assert p.replay(template, bases)
            by_pipe = p.by_pipe()
            steps = p.pipe_steps(by_pipe)
            fixed = {pipe: [fields(step)[:7] for step in of_pipe] for pipe, of_pipe in steps.items()}
            assert fixed == {pipe: [fields(PipeStep(i))[:7] for i in instructions] for pipe, instructions in by_pipe.items()}
            assert fixed == {pipe: [fields(step)[:7] for step in of_pipe] for pipe, of_pipe in built_steps.items()}
        assert replays[1].pipe_steps(replays[1].by_pipe()) is replays[2].pipe_steps(replays[2].by_pipe())  # made once in the tile
        for pipe, of_pipe in replays[1].pipe_steps(replays[1].by_pipe()).items():  # watched: the instructions each replay has its own of
            assert [step.watched for step in of_pipe] == [x is not y for x, y in zip(replays[1].by_pipe()[pipe], replays[2].by_pipe()[pipe])]
        assert all(step.watched for of_pipe in built_steps.values() for step in of_pipe)  # not a replay: every one
        other_tile = _program(tile=5)
        assert other_tile.replay(template, [(c.allocation, 0), (d.allocation, 0)])
        other = [fields(step) for steps in other_tile.pipe_steps(other_tile.by_pipe()).values() for step in steps]
        mine = [fields(step) for steps in built_steps.values() for step in steps]
        assert [s[:5] + s[6:] for s in other] == [s[:5] + s[6:] for s in mine]  # the same but for the label ids (tile 5's)
        assert all(x[5] != y[5] for x, y in zip(other, mine))


def test_no_template_where_a_replay_could_differ_and_no_replay_where_it_would():
    with npusim.session("a3", data=False):
        a, b, c = (npusim.empty(8192, np.float16, device=die) for die in (0, 1, 2))
        p = _program()
        _staged_copy(p, isa.gm(a), isa.gm(b))
        assert p.template([(a.allocation, 0), (a.allocation, 64)]) is None  # two bases in one allocation
        assert p.template([(a.allocation, 0)]) is None  # GM bytes of no base
        dynamic = _program()
        reg = dynamic.read_scalar(dynamic.alloc(16, np.int32))
        dynamic.copy(dynamic.alloc(16, np.float16), isa.gm(a, reg), nbytes=32)
        assert dynamic.template([(a.allocation, 0)]) is None  # an address from a register
        template = p.template([(a.allocation, 0), (b.allocation, 0)])
        for bases in ([(c.allocation, 0), (c.allocation, 4096)],  # bases in one allocation
                      [(c.allocation, 8192 * 2 - 1024), (b.allocation, 0)]):  # the last copies would pass the end
            fresh = _program()
            assert not fresh.replay(template, bases)
            assert fresh.instructions == [] and not any(fresh.allocated_bytes.values())
        used = _program()
        used.alloc(16, np.float16)
        assert not used.replay(template, [(c.allocation, 0), (b.allocation, 0)])  # not an empty program


def test_a_clean_template_does_not_vouch_for_a_racy_program_of_its_shape():
    """A template built race-free on two allocations is not replayed where src and dst share one:
    built again, the overlap of one copy's read with the other's write is reported."""
    with npusim.session("a3", data=False) as s:
        a, b = npusim.empty(8192, np.float16, device=0), npusim.empty(8192, np.float16, device=0)
        clean = _program()
        _staged_copy(clean, isa.gm(a), isa.gm(b))
        clean.kernel.launch()
        template = clean.template([(a.allocation, 0), (b.allocation, 0)], own={0})
        assert template.race_free is True
        racy = _program()
        assert not racy.replay(template, [(a.allocation, 0), (a.allocation, 1024)])
        _staged_copy(racy, isa.gm(a), isa.gm(a, 512))  # each store writes what the next load reads
        racy.kernel.launch()
        with pytest.warns(PipeRaceWarning, match="pipe race in kernel 'put'"):
            s.synchronize()
        assert racy.race_free is False


def test_a_replay_of_a_racy_template_is_checked_and_reported_again():
    with npusim.session("a3", data=False) as s:
        a, b, c, d = (npusim.empty(8192, np.float16, device=die) for die in (0, 1, 2, 3))

        def racy(p, src, dst):
            ub = p.alloc(512, np.float16)
            p.copy(ub, src)
            p.copy(dst, ub)  # no MTE2 -> MTE3 flag: a read after write on UB

        first = _program()
        racy(first, isa.gm(a), isa.gm(b))
        first.kernel.launch()
        template = first.template([(a.allocation, 0), (b.allocation, 0)], own={0})
        assert template.race_free is False
        again = _program(core=1)
        assert again.replay(template, [(c.allocation, 0), (d.allocation, 0)]) and not again.shares
        again.kernel.launch()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            s.synchronize()
        reports = [str(w.message) for w in caught if issubclass(w.category, PipeRaceWarning)]
        assert len(reports) == 2 and all("read after write on UB" in r for r in reports)
        assert "aiv1" in reports[1]


def _dispatched_kernels(inline: bool):
    """Kernels of one program launched as an AICPU thread dispatches tile ops (each by a timer's
    callback, a NORMAL event, as the last thing it schedules), ``inline`` or not: two on one core
    from two streams, one queued behind another on its stream, one failing in a pipe (an address
    out of bounds). What the run records, how each stream task ends, and the SimPy steps taken."""
    from npusim.hw.stream import Stream

    with npusim.session("a2") as s:
        env = s.system.env
        x = npusim.tensor(np.arange(256, dtype=np.float16))
        table = npusim.tensor(np.zeros((4, 8), np.int32))
        index = npusim.tensor(np.array([9], np.int32))
        kernels = []
        for name, core in (("k0", 0), ("k1", 0), ("k2", 1)):
            k = isa.Kernel(name, die=0)
            p = k.aiv(core)
            ub = p.alloc(256, np.float16)
            p.copy(ub, isa.gm(x))
            p.set_flag("MTE2", "VECTOR", 0)
            p.wait_flag("MTE2", "VECTOR", 0)
            p.adds(ub, ub, 1.0)
            p.set_flag("VECTOR", "MTE3", 0)
            p.wait_flag("VECTOR", "MTE3", 0)
            p.copy(isa.gm(x), ub)
            kernels.append(k)
        bad = isa.Kernel("bad", die=0)
        p = bad.aiv(2)
        idx, row = p.alloc(8, np.int32), p.alloc(8, np.int32)
        p.copy(idx, isa.gm(index), nbytes=4)
        p.set_flag("MTE2", "SCALAR", 0)
        p.wait_flag("MTE2", "SCALAR", 0)
        r = p.read_scalar(idx, 0)
        p.set_flag("SCALAR", "MTE3", 0)
        p.wait_flag("SCALAR", "MTE3", 0)
        p.copy(isa.gm(table, r * 8), row)
        kernels.append(bad)
        a, b, c = Stream(env, 0, "a"), Stream(env, 0, "b"), Stream(env, 0, "c")
        ends = []

        def ended(name, process):
            failure = process.value if not process.ok else None
            if failure is not None:
                process.defused = True
                failure = (type(failure).__name__, failure.args, type(failure.__cause__).__name__, str(failure.__cause__.__cause__))
            ends.append((name, process.ok, failure, env.now))

        def dispatch(kernel, stream, _event):
            kernel.launch(stream=stream, inline=inline).callbacks.append(lambda process: ended(kernel.name, process))

        for kernel, stream, at in zip(kernels, (a, b, a, c), (0, 0, 5, 0)):
            env.timeout(at).callbacks.append(lambda event, kernel=kernel, stream=stream: dispatch(kernel, stream, event))
        steps = 0
        while queued_events(env):
            env.step()
            steps += 1
    return events_of(s.result), ends, steps


def test_a_kernel_launched_inline_runs_and_fails_as_in_a_process_of_its_own():
    """Kernel.launch(inline=True) runs the one program in the stream task's process: every event
    at the same place, every stream task ending at the same moment with the same outcome (a
    failure: a copy of the run's, the failure the pipe raised behind it), with one initialisation
    event fewer per kernel."""
    rows, ends, steps = _dispatched_kernels(inline=False)
    inline_rows, inline_ends, inline_steps = _dispatched_kernels(inline=True)
    assert inline_rows == rows and inline_ends == ends
    assert inline_steps == steps - 4
    assert [name for name, *_ in ends] == ["bad", "k0", "k1", "k2"] and ends[2][3] == ends[3][3]  # k1 and k2 end at one instant
    assert ends[0][2][0] == "WorkloadError" and "out of bounds" in ends[0][2][1][0]


def test_a_piece_extends_a_program_as_building_it_there_would():
    """A template of a program's later instructions (``template(start=)``) appended to another
    program with the same reservations (``extend``) gives the instructions building it there
    gives, a barrier's counts included (it waits for every instruction before it in the program it
    lands in); where the reservations differ, or a copy would leave its allocation, nothing."""

    def piece(p, ub, src, dst):
        for k in range(2):
            p.copy(ub[k], src + k * 1024)
            p.set_flag("MTE2", "MTE3", k)
            p.wait_flag("MTE2", "MTE3", k)
            p.copy(dst + k * 1024, ub[k])
        p.pipe_barrier("ALL")

    def program(prefix_chunks, tile=0):
        p = _program(tile=tile)
        ub = [p.alloc(512, np.float16) for _ in range(2)]
        for k in range(prefix_chunks):
            p.copy(ub[k % 2], isa.gm(c, 256 * k))
        p.set_flag("MTE2", "MTE3", 3)
        p.wait_flag("MTE2", "MTE3", 3)
        return p, ub

    with npusim.session("a3", data=False):
        a, b, c, d = (npusim.empty(8192, np.float16) for _ in range(4))
        first, ub = program(1)
        start = len(first.instructions)
        piece(first, ub, isa.gm(a, 64), isa.gm(b))
        template = first.template([(a.allocation, 128), (b.allocation, 0)], start=start)
        assert template is not None and len(template.instructions) == len(first.instructions) - start
        built, ub = program(3, tile=2)
        piece(built, ub, isa.gm(c, 256), isa.gm(d, 512))
        extended, _ = program(3, tile=2)
        assert extended.extend(template, [(c.allocation, 512), (d.allocation, 1024)])  # isa.gm offsets are elements: 256 and 512 fp16
        assert describe_program(extended.instructions) == describe_program(built.instructions)
        assert extended.instructions[-1].targets == built.instructions[-1].targets != template.instructions[-1].targets
        assert not extended.extend(template, [(c.allocation, 8190 * 2), (d.allocation, 0)])  # a copy past the allocation's end
        other = _program()
        other.alloc(64, np.float16)
        assert not other.extend(template, [(c.allocation, 0), (d.allocation, 0)])  # other reservations than where it was made


def test_nd2nz_loads_and_fractal_extracts_move_the_values_they_say():
    rng = np.random.default_rng(0)
    matrix = rng.standard_normal((40, 96)).astype(np.float16)
    with npusim.session("a2") as s:
        source = npusim.tensor(matrix)
        out = npusim.zeros((48, 32), np.float16)
        kernel = isa.Kernel("nz", die=0)
        p = kernel.aic(0)
        l1 = p.alloc(nz_count(48, 96, 16), np.float16, "L1")
        l0a = p.alloc(nz_count(32, 48, 16), np.float16, "L0A")
        p.load_nd2nz(l1[:], isa.gm(source, 8 * 96), 32, 96, 96 * 2)  # rows 8..39 of the matrix
        p.set_flag("MTE2", "MTE1")
        p.wait_flag("MTE2", "MTE1")
        p.extract_nz(l0a, l1, 32, 16, 32, 16, 32, transpose=True)  # rows 16..31, columns 32..63 of what L1 holds, transposed
        kernel.launch()
        npusim.synchronize()
        got = nz_unpack(l0a.values(kernel.die.core("aic", 0)), 32, 16, 16)
    assert np.array_equal(got, matrix[8 + 16:8 + 32, 32:64].T)
    assert s.result is not None and out is not None


def test_a_kernel_made_when_it_starts_reads_the_values_written_before_it():
    with npusim.session("a2") as s:
        flag = npusim.zeros(1, np.int32)
        seen = []

        def build():
            seen.append((int(flag.host_view()[0]), s.env.now))
            return isa.Kernel("late", die=0)

        writer = isa.Kernel("write", die=0)
        p = writer.aiv(0)
        ub = p.alloc(8, np.int32)
        p.dup(ub, 7)
        p.set_flag("VECTOR", "MTE3")
        p.wait_flag("VECTOR", "MTE3")
        p.copy(isa.gm(flag), ub[:1])
        writer.launch()
        late = isa.program.KernelAtStart("late", 0, build)
        built = []
        late.when_built(built.append)
        late.launch()
        assert seen == []  # not made yet: the stream has not reached it
        npusim.synchronize()
    assert seen[0][0] == 7 and seen[0][1] > 0 and len(built) == 1
