"""Pipes of an AI core: in-order pipes, concurrency between pipes, flags, barriers, deadlocks."""

import numpy as np
import pytest
import simpy
from hypothesis import given, settings
from hypothesis import strategies as st

import npusim
from npusim import isa
from npusim.engine.loop import Environment
from npusim.errors import DeadlockError, ResourceError, WorkloadError
from npusim.hw.core import CONTROL_EFFECT, DATA_EFFECT, FIXED, NO_EFFECT, SET_FLAG, TRANSFER, WAIT_FLAG, CoreLock, PipeStep, flag_key
from npusim.hw.pipes import Pipe
from tests.conftest import events_of


def vector_ps(session, kind, repeats):
    return session.system.timing.vector.cost_ps(kind, repeats)


def fields(step: PipeStep) -> tuple:
    """A pipe step's fields: step, s_dep, cost_ps, key, effect, label_id, nbytes, watched."""
    return (step.step, step.s_dep, step.cost_ps, step.key, step.effect, step.label_id, step.nbytes, step.watched)


def test_a_pipe_step_holds_what_the_pipe_reads_of_an_instruction():
    with npusim.session("a2", data=False):
        g = npusim.empty(64, np.float16)
        p = isa.Kernel("k", die=0).aiv(0)
        a, signal = p.alloc(64, np.float16), p.alloc(8, np.int32)
        scalar = p.scalar(3)
        vector = p.adds(a, a, 1.0)[0]
        load = p.copy(a, isa.gm(g))
        set_flag, wait_flag = p.set_flag("MTE2", "VECTOR", 1), p.wait_flag("MTE2", "VECTOR", 1)
        write = p.write_scalar(signal, 1, control=True)
        p.by_pipe()  # gives each its s_dep
        key = flag_key(Pipe.MTE2, Pipe.VECTOR, 1)
        assert [fields(PipeStep(i))[:5] for i in (scalar, vector, load, set_flag, wait_flag, write)] == [
            (FIXED, 0, scalar.fixed_ps, 0, NO_EFFECT), (FIXED, 1, vector.fixed_ps, 0, DATA_EFFECT), (TRANSFER, 1, 0, 0, DATA_EFFECT),
            (SET_FLAG, 1, set_flag.cost_ps, key, NO_EFFECT), (WAIT_FLAG, 1, wait_flag.cost_ps, key, NO_EFFECT),
            (FIXED, 1, write.fixed_ps, 0, CONTROL_EFFECT)]
        assert fields(PipeStep(load))[5:] == (load.label_id, 128, True) and load.label_id != vector.label_id
        assert PipeStep(load, watched=False).watched is False


def test_instructions_of_one_pipe_run_in_order_and_pipes_run_concurrently():
    with npusim.session("a2", data=False) as s:
        k = isa.Kernel("k", die=0)
        p = k.aiv(0)
        a = p.alloc(128, np.float16)
        p.adds(a, a, 1.0)  # VECTOR
        p.adds(a, a, 1.0)  # VECTOR, after the first
        p.scalar(10)       # SCALAR: another pipe, it does not wait for VECTOR
        k.launch()
    events = events_of(s.result)
    vec = [e for e in events if e["lane"] == "VECTOR"]
    assert vec[0]["start"] == 0 and vec[1]["start"] == vec[0]["end"]
    scalar = [e for e in events if e["lane"] == "SCALAR"][0]
    assert scalar["start"] == 0  # a different pipe: runs while VECTOR works


def test_an_instruction_waits_for_the_scalar_instructions_before_it():
    with npusim.session("a2", data=False) as s:
        k = isa.Kernel("k", die=0)
        p = k.aiv(0)
        a = p.alloc(128, np.float16)
        p.scalar(100)
        p.adds(a, a, 1.0)  # cannot be issued before the scalar work ends
        k.launch()
    events = events_of(s.result)
    scalar = [e for e in events if e["lane"] == "SCALAR"][0]
    vec = [e for e in events if e["lane"] == "VECTOR"][0]
    assert vec["start"] == scalar["end"] > 0


def test_wait_flag_really_blocks_until_the_set_flag():
    with npusim.session("a2", data=False) as s:
        k = isa.Kernel("k", die=0)
        p = k.aiv(0)
        a = p.alloc(128 * 64, np.float32)
        p.adds(a, a, 1.0)            # VECTOR: long
        p.set_flag("VECTOR", "MTE3", 0)
        p.wait_flag("VECTOR", "MTE3", 0)
        out = npusim.empty(128 * 64, np.float32)
        p.copy(isa.gm(out), a)       # MTE3: must start after the add
        k.launch()
    events = events_of(s.result)
    add = next(e for e in events if e["name"] == "adds")
    store = next(e for e in events if e["lane"] == "MTE3" and e["name"].startswith("copy"))
    flag_cost = s.system.timing.scalar.flag_ps
    assert store["start"] >= add["end"] + flag_cost
    wait = next(e for e in events if e["name"].startswith("wait_flag"))
    assert wait["start"] == 0 and wait["end"] >= add["end"]  # the MTE3 pipe stalled in the wait


def test_without_flags_a_store_races_ahead_of_the_compute():
    from npusim.isa.racecheck import PipeRaceWarning

    with npusim.session("a2"), pytest.warns(PipeRaceWarning, match=r"read after write on UB bytes 0\.\.256: VECTOR `adds`"):
        x = npusim.tensor(np.ones(64, np.float32))
        out = npusim.zeros(64, np.float32)
        k = isa.Kernel("racy", die=0)
        p = k.aiv(0)
        a = p.alloc(64, np.float32)
        p.copy(a, isa.gm(x))
        p.set_flag("MTE2", "VECTOR", 0)
        p.wait_flag("MTE2", "VECTOR", 0)
        p.adds(a, a, 1.0)
        p.copy(isa.gm(out), a)  # no VECTOR -> MTE3 flag: MTE3 starts at once and stores stale UB
        k.launch()
        assert out.numpy().tolist() == [0.0] * 64  # what hardware would do: UB was still empty


def test_pipe_barrier_all_waits_for_every_pipe():
    with npusim.session("a2", data=False) as s:
        k = isa.Kernel("k", die=0)
        p = k.aiv(0)
        a = p.alloc(64 * 255, np.float32)
        p.adds(a, a, 1.0)
        p.pipe_barrier("ALL")
        p.scalar(1, name="after")
        k.launch()
    events = events_of(s.result)
    add = next(e for e in events if e["name"] == "adds")
    after = next(e for e in events if e["name"] == "after")
    assert after["start"] >= add["end"]


def test_ub_overflow_names_kernel_core_and_sizes():
    with npusim.session("a2", data=False):
        p = isa.Kernel("big_tiles", die=0).aiv(3)
        p.alloc(96 * 1024, np.float16)
        with pytest.raises(ResourceError, match=r"kernel 'big_tiles' on die 0 aiv3: allocating 192.00 KiB in UB .* holds 192.00 KiB"):
            p.alloc(96 * 1024, np.float16)


def test_a_wait_that_is_never_set_is_reported_as_a_deadlock():
    with pytest.raises(DeadlockError, match=r"die 0 aiv2 MTE3 \(kernel 'stuck'\) waits in: MTE3 wait_flag VECTOR->MTE3 #1"):
        with npusim.session("a2", data=False):
            p = isa.Kernel("stuck", die=0).aiv(2)
            p.wait_flag("VECTOR", "MTE3", 1)
            p.scalar(1)
            p.kernel.launch()


def test_kernels_on_one_stream_run_one_after_the_other():
    with npusim.session("a2", data=False) as s:
        for name in ("first", "second"):
            k = isa.Kernel(name, die=0)
            p = k.aiv(0)
            a = p.alloc(64, np.float32)
            p.adds(a, a, 1.0)
            k.launch()
    events = events_of(s.result)
    first = [e for e in events if e["op"] == 0]
    second = [e for e in events if e["op"] == 1]
    assert min(e["start"] for e in second) >= max(e["end"] for e in first)


def test_a_core_program_without_instructions_ends_at_once():
    with npusim.session("a2", data=False) as s:
        empty = isa.Kernel("empty", die=0)
        empty.aiv(0)
        empty.launch()
        k = isa.Kernel("after", die=0)
        p = k.aiv(0)
        p.scalar(1)
        k.launch()
    assert [e["start"] for e in events_of(s.result)] == [0]  # the second kernel's one instruction starts at 0


def test_a_pipe_that_fails_fails_its_run_while_the_other_pipes_go_on():
    # the MTE3 store's address (from a register) is out of bounds while the vector pipe is still
    # busy: the run fails with the store's error
    with pytest.raises(WorkloadError, match=r"die0 aiv0: copy UB->GM addresses bytes 288\.\.320 .* out of bounds"):
        with npusim.session("a2"):
            table = npusim.tensor(np.zeros((4, 8), np.int32))
            index = npusim.tensor(np.array([9], np.int32))
            k = isa.Kernel("bad_store", die=0)
            p = k.aiv(0)
            idx, row, busy = p.alloc(8, np.int32), p.alloc(8, np.int32), p.alloc(4096, np.float32)
            for _ in range(64):
                p.adds(busy, busy, 1.0)
            p.copy(idx, isa.gm(index), nbytes=4)
            p.set_flag("MTE2", "SCALAR", 0)
            p.wait_flag("MTE2", "SCALAR", 0)
            r = p.read_scalar(idx, 0)
            p.copy(isa.gm(table, r * 8), row)
            k.launch()


def _grant_order(lock_of, release, users: list[tuple[int, int, int]]) -> list[tuple[int, int, str]]:
    """(time, index, what) of what ``users`` ((arrival ps, zero-time steps, holding ps) each) do on
    a lock made by ``lock_of``, in the order they do it: each arrives, asks after its zero-time
    steps (so that requests, releases and hand-overs meet at one instant in every order), holds the
    lock, releases it and takes one more zero-time step."""
    env = Environment()
    lock = lock_of(env)
    seen: list[tuple[int, int, str]] = []

    def user(i: int, arrival: int, steps: int, hold: int):
        yield env.timeout(arrival)
        for step in range(steps):
            yield env.timeout(0)
            seen.append((env.now, len(seen), f"step {step} of {i}"))
        request = lock.request()
        yield request
        seen.append((env.now, len(seen), f"grant {i}"))
        yield env.timeout(hold)
        release(lock, request)
        yield env.timeout(0)
        seen.append((env.now, len(seen), f"after the release of {i}"))

    for i, (arrival, steps, hold) in enumerate(users):
        env.process(user(i, arrival, steps, hold))
    env.run()
    return seen


@settings(max_examples=500, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 2), st.integers(0, 4), st.integers(0, 1)), min_size=1, max_size=8))
def test_a_core_lock_grants_at_the_moments_simpys_resource_does(users):
    expected = _grant_order(lambda env: simpy.Resource(env, capacity=1), lambda lock, request: lock.release(request), users)
    assert _grant_order(CoreLock, lambda lock, _request: lock.release(), users) == expected


def test_the_cores_of_one_kind_on_a_die_share_their_dma_routes():
    """A die's cores of one kind have the same engines and reach GM the same way: the route one of
    them found is every one's (the same flow class and costs), those of other kinds and dies their own."""
    with npusim.session("a3") as s:
        die0, die1 = s.system.die(0), s.system.die(1)
        key = (Pipe.MTE2, 1, False, ("GM", "UB"), False)
        route = die0.core("aiv", 0).dma_route(key)
        assert die0.core("aiv", 5).dma_routes[key] is route
        assert die0.core("aiv", 7).dma_route(key) is route
        assert key not in die0.core("aic", 0).dma_routes and key not in die1.core("aiv", 0).dma_routes
        assert die0.core("aic", 0).dma_route((Pipe.MTE2, 1, False, ("GM", "L1"), False)) is not route
