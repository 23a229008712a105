"""DMA engines with requests in flight (npusim.hw.queue.EngineQueue on a core's pipes): the set-up of
a copy overlaps the streaming of earlier ones, copies stream one after another and complete in
order, a set_flag after copies is raised once they have completed, depth 1 is one copy at a time."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import npusim
from npusim import isa
from tests.conftest import events_of

CHUNK = 16 * 1024  # bytes of one copy: whole L2 lines, so no line is fetched twice


def copies(overrides=(), count=3, flag=False, data=False):
    """``count`` copies GM -> UB of distinct chunks on one AIV (a cold L2: every one misses), then a
    set_flag to VECTOR and the wait for it if ``flag``; the session and the MTE2 lane's events."""
    with npusim.session("a2", overrides=list(overrides), data=data) as s:
        src = npusim.tensor(np.arange(count * CHUNK // 2, dtype=np.float16))
        k = isa.Kernel("copies", die=0)
        p = k.aiv(0)
        ub = p.alloc(count * CHUNK // 2, np.float16)
        for i in range(count):
            p.copy(ub[i * CHUNK // 2:(i + 1) * CHUNK // 2], isa.gm(src, i * CHUNK // 2))
        if flag:
            p.set_flag("MTE2", "VECTOR", 0)
            p.wait_flag("MTE2", "VECTOR", 0)
        k.launch()
    return s, [e for e in events_of(s.result) if e["unit"] == "aiv0"]


def costs(session):
    """The hand-computed parts of one copy: its fixed part before its bytes (set-up and the route
    latency of a miss) and its streaming (its one burst's engine work and its bytes at the engine's
    rate), in ps."""
    core = session.system.die(0).core("aiv", 0)
    engine = core.dma_timing[isa.Pipe.MTE2]
    fixed = engine.setup_ps + session.system.gm_route(0, 0, to_gm=False).latency_ps
    return fixed, engine.per_burst_ps + math.ceil(CHUNK / engine.rate_bytes_per_ps(("GM", "UB"), remote=False))


def test_the_set_up_of_a_copy_overlaps_the_streaming_of_the_ones_before():
    """Three copies issued together (depth 4): each one's set-up runs from its issue; the bytes
    stream one copy after another, so copy k ends at fixed + k x stream; each slice starts where the
    one before it ended."""
    s, events = copies()
    fixed, stream = costs(s)
    loads = [e for e in events if e["lane"] == "MTE2"]
    assert [e["end"] for e in loads] == [fixed + stream, fixed + 2 * stream, fixed + 3 * stream]
    assert [e["start"] for e in loads] == [0, fixed + stream, fixed + 2 * stream]


def test_depth_one_pays_each_copys_set_up_after_the_one_before():
    """With one request in flight, each copy is issued once the one before has completed: the
    serial engine npusim had before (copy k ends at k x (fixed + stream))."""
    s, events = copies(["die.cores.aiv.engines.MTE2.queue_depth=1"])
    fixed, stream = costs(s)
    loads = [e for e in events if e["lane"] == "MTE2"]
    assert [(e["start"], e["end"]) for e in loads] == [(k * (fixed + stream), (k + 1) * (fixed + stream)) for k in range(3)]
    assert not any(e["lane"] == "MTE2 wait" for e in events_of(s.result))


def test_a_full_queue_holds_the_next_copy_until_the_oldest_completes():
    """Depth 2, three copies: the third is issued when the first completes, so its own set-up
    starts then."""
    s, events = copies(["die.cores.aiv.engines.MTE2.queue_depth=2"])
    fixed, stream = costs(s)
    loads = [e for e in events if e["lane"] == "MTE2"]
    first_end = fixed + stream
    assert [e["end"] for e in loads] == [first_end, first_end + stream, first_end + fixed + stream]
    assert loads[2]["start"] == first_end + stream  # its slice starts when the second one ends


def test_a_set_flag_after_copies_in_flight_is_raised_once_they_have_completed():
    s, events = copies(flag=True)
    fixed, stream = costs(s)
    flag_cost = s.system.timing.scalar.flag_ps
    set_flag = next(e for e in events if e["name"].startswith("set_flag"))
    wait = next(e for e in events if e["name"].startswith("wait_flag"))
    assert set_flag["lane"] == "MTE2" and (set_flag["start"], set_flag["end"]) == (fixed + 3 * stream, fixed + 3 * stream + flag_cost)
    assert wait["lane"] == "VECTOR" and wait["end"] == set_flag["end"] + flag_cost


def test_wait_flags_of_a_pipe_with_copies_in_flight_have_a_lane_of_their_own():
    """MTE2 waits for VECTOR while its copies stream: the wait is on ``MTE2 wait``, and no two
    slices of one lane overlap."""
    with npusim.session("a2", data=False) as s:
        src = npusim.tensor(np.zeros(2 * CHUNK // 2, np.float16))
        k = isa.Kernel("k", die=0)
        p = k.aiv(0)
        ub = p.alloc(2 * CHUNK // 2, np.float16)
        p.copy(ub[: CHUNK // 2], isa.gm(src))
        p.set_flag("MTE2", "VECTOR", 0)
        p.wait_flag("MTE2", "VECTOR", 0)
        p.adds(ub[: CHUNK // 2], ub[: CHUNK // 2], 1.0)
        p.set_flag("VECTOR", "MTE2", 1)
        p.copy(ub[CHUNK // 2:], isa.gm(src, CHUNK // 2))  # issued at once: its set-up overlaps the first copy
        p.wait_flag("VECTOR", "MTE2", 1)
        p.copy(ub[: CHUNK // 2], isa.gm(src))  # after the wait: its set-up starts once VECTOR is done
        k.launch()
    events = events_of(s.result)
    lanes = {e["lane"] for e in events}
    assert {"MTE2", "MTE2 wait", "VECTOR"} <= lanes
    wait = next(e for e in events if e["lane"] == "MTE2 wait")
    vector_done = next(e for e in events if e["name"].startswith("set_flag VECTOR"))["end"]
    assert wait["end"] == vector_done + s.system.timing.scalar.flag_ps
    loads = [e for e in events if e["lane"] == "MTE2" and e["name"].startswith("copy")]
    set_flag = next(e for e in events if e["name"].startswith("set_flag MTE2"))
    _, stream = costs(s)
    assert set_flag["start"] == loads[0]["end"]  # its turn in the queue, after the copy before it
    assert loads[1]["end"] == set_flag["end"] + stream  # the second copy's set-up was hidden: it streams right after
    # the third, issued after the wait, re-reads the first chunk: an L2 hit, its set-up and the L2's latency, then its bytes
    hit_fixed = s.system.die(0).core("aiv", 0).dma_timing[isa.Pipe.MTE2].setup_ps + s.system.gm_route(0, 0, False, hit=True).latency_ps
    assert loads[2]["end"] == wait["end"] + hit_fixed + stream
    for lane in lanes:
        spans = sorted((e["start"], e["end"]) for e in events if e["lane"] == lane)
        assert all(a[1] <= b[0] for a, b in zip(spans, spans[1:])), lane


def test_a_barrier_of_all_pipes_waits_for_copies_in_flight():
    with npusim.session("a2", data=False) as s:
        src = npusim.tensor(np.zeros(CHUNK // 2, np.float16))
        k = isa.Kernel("k", die=0)
        p = k.aiv(0)
        ub = p.alloc(CHUNK // 2, np.float16)
        p.copy(ub, isa.gm(src))
        p.pipe_barrier("ALL")
        p.scalar(1)
        k.launch()
    events = events_of(s.result)
    load = next(e for e in events if e["lane"] == "MTE2")
    barrier = next(e for e in events if e["name"] == "pipe_barrier ALL")
    assert barrier["end"] >= load["end"]


@pytest.mark.parametrize("depth", [1, 4])
def test_copies_in_flight_land_their_bytes_in_order(depth):
    """Two copies into the same UB bytes, then one out: the later copy's bytes are what leaves
    (copies complete in issue order), whatever the depth."""
    with npusim.session("a2", overrides=[f"die.cores.aiv.engines.MTE2.queue_depth={depth}"]):
        first, second = npusim.tensor(np.full(64, 1, np.int32)), npusim.tensor(np.full(64, 2, np.int32))
        out = npusim.zeros(64, np.int32)
        k = isa.Kernel("k", die=0)
        p = k.aiv(0)
        ub = p.alloc(64, np.int32)
        p.copy(ub, isa.gm(first))
        p.copy(ub, isa.gm(second))
        p.set_flag("MTE2", "MTE3", 0)
        p.wait_flag("MTE2", "MTE3", 0)
        p.copy(isa.gm(out), ub)
        k.launch()
        assert out.numpy().tolist() == [2] * 64


@settings(max_examples=25, deadline=None)
@given(st.lists(st.sampled_from(["load", "add", "store"]), min_size=1, max_size=8), st.integers(0, 3))
def test_race_free_programs_give_the_same_bytes_at_any_depth(steps, seed):
    """A double-buffered program (loads, adds, stores between MTE2, VECTOR and MTE3, each hand-over
    flagged) has no race, and its results are the same bytes with one copy in flight or several:
    the queue keeps every ordering the flags and the race checker rely on."""
    rng = np.random.default_rng(seed)
    host = rng.integers(-100, 100, size=(len(steps) + 1, 64)).astype(np.int32)

    def run(depth: int) -> list[int]:
        engines = [f"die.cores.aiv.engines.{pipe}.queue_depth={depth}" for pipe in ("MTE2", "MTE3")]
        with npusim.session("a2", overrides=engines, races="error"):
            src = npusim.tensor(host)
            out = npusim.zeros((len(steps) + 1, 64), np.int32)
            k = isa.Kernel("k", die=0)
            p = k.aiv(0)
            ubs = [p.alloc(64, np.int32) for _ in range(2)]
            for i, step in enumerate(steps):
                ub = ubs[i % 2]
                if step == "load":
                    p.copy(ub, isa.gm(src, i * 64))
                    p.set_flag("MTE2", "VECTOR", i % 2)
                    p.wait_flag("MTE2", "VECTOR", i % 2)
                elif step == "add":
                    p.adds(ub, ub, 3)
                p.set_flag("VECTOR", "MTE3", i % 2)
                p.wait_flag("VECTOR", "MTE3", i % 2)
                p.copy(isa.gm(out, i * 64), ub)
                p.set_flag("MTE3", "MTE2", i % 2)  # the buffer is free for the next load into it,
                p.set_flag("MTE3", "VECTOR", i % 2)  # and for the next add on it
                p.wait_flag("MTE3", "MTE2", i % 2)
                p.wait_flag("MTE3", "VECTOR", i % 2)
            k.launch()
            npusim.synchronize()
            return out.numpy().ravel().tolist()

    assert run(4) == run(1)
