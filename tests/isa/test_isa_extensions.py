"""The ISA pieces the shmem ops use: atomic-add stores (values and serialisation on the same 32-byte
blocks, polls woken by them), scalar writes, control data in timing-only runs, and launches that
share one op id."""

import numpy as np
import pytest

import npusim
from npusim import isa
from npusim.errors import ConfigError, UsageError


def add_from_two_cores(offsets, values=(1.5, 2.25), session_args=()):
    """Cores 0 and 1 of die 0 each atomic-add 8 fp32 values into ``target`` at ``offsets`` at once."""
    with npusim.session("a2", *session_args) as session:
        target = npusim.tensor(np.full(64, 10.0, np.float32))
        kernel = isa.Kernel("adds", die=0)
        for core, (offset, value) in enumerate(zip(offsets, values)):
            p = kernel.aiv(core)
            ub = p.alloc(8, np.float32)
            p.dup(ub, value)
            p.set_flag("VECTOR", "MTE3")
            p.wait_flag("VECTOR", "MTE3")
            p.copy(isa.gm(target, offset), ub, atomic="add", name="atomic add")
        kernel.launch()
        npusim.synchronize()
        result = target.numpy()
    recorder = session.result.recorder
    columns = recorder.columns()
    rows = np.flatnonzero(columns["name"] == recorder.names.index("atomic add"))
    ends = sorted(int(columns["end_ps"][i]) for i in rows)
    rmw = session.config.spec.die.l2.atomic_add.to_ps(session.config.spec.die.clock.hz)
    return result, ends, rmw


def test_atomic_adds_to_the_same_blocks_add_up_one_after_the_other():
    result, ends, rmw = add_from_two_cores([0, 0])
    np.testing.assert_array_equal(result[:8], 10.0 + 1.5 + 2.25)
    np.testing.assert_array_equal(result[8:], 10.0)
    assert ends[1] - ends[0] == rmw


def test_atomic_adds_to_other_blocks_do_not_wait():
    result, ends, _ = add_from_two_cores([0, 16])
    np.testing.assert_array_equal(result[:8], 11.5)
    np.testing.assert_array_equal(result[16:24], 12.25)
    assert ends[0] == ends[1]


def test_atomic_adds_need_the_l2_read_modify_write_time():
    with npusim.session("a2", ["die.l2.atomic_add=null"]):
        target = npusim.zeros(8, np.float32)
        p = isa.Kernel("adds", die=0).aiv(0)
        with pytest.raises(ConfigError, match="an atomic-add store needs die.l2.atomic_add"):
            p.copy(isa.gm(target), p.alloc(8, np.float32), atomic="add")
        with pytest.raises(UsageError, match="copy: atomic='max' is not supported"):
            p.copy(isa.gm(target), p.alloc(8, np.float32), atomic="max")
        with pytest.raises(UsageError, match="an atomic-add copy stores UB -> GM"):
            p.copy(p.alloc(8, np.float32), isa.gm(target), atomic="add")


def test_control_data_moves_in_timing_only_runs_and_other_data_does_not():
    with npusim.session("a2", data=False) as session:
        memory = session.system.die(0).memory
        signals = memory.allocate(64, "signals", control=True)
        ordinary = memory.allocate(64, "data")
        kernel = isa.Kernel("signal", die=0)
        p = kernel.aiv(0)
        word = p.alloc(8, np.int32)
        zeros = p.alloc(8, np.int32)
        p.write_scalar(word, 7, control=True)
        p.dup(zeros, 5, control=True)
        p.set_flag("SCALAR", "MTE3")
        p.wait_flag("SCALAR", "MTE3")
        p.set_flag("VECTOR", "MTE3")
        p.wait_flag("VECTOR", "MTE3")
        p.copy(isa.GmAddress(signals, 0), word[0:1], 4, control=True)
        p.copy(isa.GmAddress(signals, 32), zeros, control=True)
        kernel.launch()
    assert ordinary.data is None
    assert signals.data.view(np.int32)[0] == 7
    np.testing.assert_array_equal(signals.data.view(np.int32)[8:16], 5)


def test_a_poll_wakes_when_atomic_adds_from_other_dies_complete_its_count():
    """Cores on dies 1 and 2 each atomic-add 1 into a counter on die 0 that a core of die 0 polls
    for 2 (a reduce-scatter's ready counter): the poll ends after the second add lands, not never."""
    with npusim.session("a2", data=False) as session:
        counter = npusim.empty(8, np.int32, device=0, control=True)
        for die in (1, 2):
            kernel = isa.Kernel("notify", die=die)
            p = kernel.aiv(0)
            one = p.alloc(8, np.int32)
            p.write_scalar(one, 1, control=True)
            p.set_flag("SCALAR", "MTE3")
            p.wait_flag("SCALAR", "MTE3")
            p.scalar(200 * die)  # the second add lands well after the first
            p.copy(isa.gm(counter), one, 4, atomic="add", control=True, name="add")
            kernel.launch()
        waiter = isa.Kernel("wait", die=0)
        poll = waiter.aiv(0).poll(isa.gm(counter), 1, 2, name="poll counter")
        waiter.launch()
        npusim.synchronize()
    assert counter.host_view()[0] == 2
    recorder = session.result.recorder
    columns = recorder.columns()
    ends = {name: int(columns["end_ps"][np.flatnonzero(columns["name"] == recorder.names.index(name))].max()) for name in ("add", "poll counter")}
    assert ends["add"] < ends["poll counter"] <= ends["add"] + 2 * poll.poll_ps


def test_launches_can_share_one_op_id():
    with npusim.session("a2") as session:
        op = session.system.recorder.op("tile ops", 0)
        for core in range(2):
            kernel = isa.Kernel("tile", die=0, op=op)
            with kernel.aiv(core).tile(core):
                kernel.aiv(core).scalar(3)
            kernel.launch()
    recorder = session.result.recorder
    assert len(recorder.ops) == 1
    assert recorder.columns()["op"].tolist() == [op, op]
    assert sorted(recorder.columns()["tile"].tolist()) == [0, 1]


def stores_span_us(cores: int, atomic: str | None, overrides=()) -> float:
    """``cores`` AIVs of die 0 each store 128 KiB of UB into their own part of die 0's GM at once
    (atomic adds or plain stores), timing only: the launch's span (us)."""
    chunk = 32 * 1024  # float32 elements: 128 KiB
    with npusim.session("a2", list(overrides), data=False):
        target = npusim.empty(cores * chunk, np.float32)
        kernel = isa.Kernel("stores", die=0)
        for core in range(cores):
            p = kernel.aiv(core)
            p.copy(isa.gm(target, core * chunk), p.alloc(chunk, np.float32), atomic=atomic, name="store")
        kernel.launch()
        start = npusim.current_session().now_us
        npusim.synchronize()
        return npusim.current_session().now_us - start


def test_atomic_add_stores_share_the_rate_their_l2_applies_adds_at():
    """``die.l2.atomic_rate`` (a2: 64 GB/s) is one rate for every atomic-add store into the die's
    memory: 8 cores' atomic adds take at least their bytes at that rate, where plain stores stream at
    the cores' own rates; without the limit (``null``) atomic adds are as fast as plain stores but for
    the read-modify-write."""
    atomic_rate = 64e9
    added = 8 * 128 * 1024 / atomic_rate * 1e6
    atomic, plain = stores_span_us(8, "add"), stores_span_us(8, None)
    assert added < atomic < 1.2 * added
    assert plain < 0.7 * atomic
    assert stores_span_us(8, "add", ["die.l2.atomic_rate=null"]) == pytest.approx(plain, abs=0.1)
