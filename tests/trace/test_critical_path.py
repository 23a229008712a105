"""The critical path and its bottleneck breakdown on cases whose answer is known."""

import re
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import npusim
from npusim import isa
from npusim.config import load_config
from npusim.hw.system import System
from npusim.trace.critical_path import IDLE, _by_then, _narrow, critical_path
from tests.conftest import events_of

ROOT = Path(__file__).resolve().parents[2]


def assert_tiles_end_to_end(path):
    """The segments cover [0, end of the last event] exactly, in order, without overlap."""
    assert path.segments[0].start_ps == 0 and path.segments[-1].end_ps == path.end_to_end_ps
    for before, after in zip(path.segments, path.segments[1:]):
        assert before.end_ps == after.start_ps
    assert sum(row["share"] for row in path.breakdown()) == pytest.approx(1.0)


def test_remote_loads_are_bound_by_the_hccs_link():
    """8 cores of die 0 read die 1's HBM over one HCCS link (25.8 GB/s, far below 8 MTE2s)."""
    with npusim.session("a2", data=False) as s:
        remote = npusim.empty(8 * 8 * 16384, np.float16, device=1)
        k = isa.Kernel("remote_load", die=0)
        for core in range(8):
            p = k.aiv(core)
            ub = p.alloc(16384, np.float16)
            for t in range(8):
                p.copy(ub, isa.gm(remote, (core * 8 + t) * 16384))
        k.launch()
    path = s.result.critical_path()
    assert_tiles_end_to_end(path)
    top = path.breakdown()[0]
    assert top["label"] == "MTE2 waiting on link die1->die0 HCCS" and top["kind"] == "link"
    assert top["share"] > 0.85
    rest = path.breakdown()[1:]
    assert [row["kind"] for row in rest] == ["dma fixed"]  # the only other cost: the DMA set-up and latency
    assert s.result.summary["bottlenecks"]["breakdown"][0]["label"] == top["label"]


def test_a_vector_loop_is_bound_by_the_vector_pipe():
    with npusim.session("a2", data=False) as s:
        k = isa.Kernel("vector_loop", die=0)
        p = k.aiv(3)
        a = p.alloc(16384, np.float16)
        for _ in range(20):
            p.adds(a, a, 1.0)
        k.launch()
    path = s.result.critical_path()
    assert_tiles_end_to_end(path)
    assert [(r["label"], r["kind"]) for r in path.breakdown()] == [("VECTOR on die0 aiv3", "pipe")]
    assert len(path.events) == len(s.result.recorder)


def test_a_load_then_compute_splits_between_hbm_fixed_cost_and_vector_exactly():
    with npusim.session("a2", data=False) as s:
        x = npusim.empty(65536, np.float16)
        k = isa.Kernel("mix", die=0)
        p = k.aiv(0)
        ub = p.alloc(65536, np.float16)
        p.copy(ub, isa.gm(x))
        p.set_flag("MTE2", "VECTOR", 0)
        p.wait_flag("MTE2", "VECTOR", 0)
        for _ in range(10):
            p.muls(ub, ub, 2.0)
        k.launch()
    events = events_of(s.result)
    load = next(e for e in events if e["lane"] == "MTE2" and e["name"].startswith("copy"))
    vector = [e for e in events if e["lane"] == "VECTOR" and e["name"] == "muls"]
    wait = next(e for e in events if e["name"].startswith("wait_flag"))
    setter = next(e for e in events if e["name"].startswith("set_flag"))
    path = s.result.critical_path()
    assert_tiles_end_to_end(path)
    rows = {r["label"]: r["time_us"] for r in path.breakdown()}
    fixed = s.result.recorder.transfers()["fixed_ps"][0]
    assert rows["MTE2 fixed cost (set-up, latency) on die0 aiv0"] == pytest.approx(fixed / 1e6)
    assert rows["MTE2 engine rate on die0 aiv0"] == pytest.approx((load["end"] - load["start"] - fixed) / 1e6)  # one core: its engine limits
    flag_time = (setter["end"] - setter["start"]) + (wait["end"] - setter["end"])  # the set, then the wait after the flag became visible
    assert rows["MTE2 on die0 aiv0"] + rows["VECTOR on die0 aiv0"] == pytest.approx((sum(e["end"] - e["start"] for e in vector) + flag_time) / 1e6)


def test_an_instruction_held_by_the_scalar_unit_puts_the_scalar_work_on_the_path():
    with npusim.session("a2", data=False) as s:
        k = isa.Kernel("issue", die=0)
        p = k.aiv(0)
        a = p.alloc(128, np.float16)
        p.scalar(500)
        p.adds(a, a, 1.0)
        k.launch()
    path = s.result.critical_path()
    assert_tiles_end_to_end(path)
    assert [r["label"] for r in path.breakdown()] == ["SCALAR on die0 aiv0", "VECTOR on die0 aiv0"]


def test_a_barrier_is_held_by_the_last_pipe_it_drains_and_kernels_follow_the_stream():
    with npusim.session("a2", data=False) as s:
        x = npusim.empty(16384, np.float16)
        for name in ("first", "second"):
            k = isa.Kernel(name, die=0)
            p = k.aiv(0)
            ub = p.alloc(16384, np.float16)
            p.copy(ub, isa.gm(x))  # MTE2, long
            p.pipe_barrier("ALL")  # SCALAR waits for it
            p.scalar(10)
            k.launch()
    path = s.result.critical_path()
    assert_tiles_end_to_end(path)
    recorder = s.result.recorder
    names = [recorder.names[n] for n in recorder.columns()["name"][path.events]]
    assert names == ["copy GM->UB", "pipe_barrier ALL", "scalar"] * 2  # both kernels, in stream order
    assert all(seg.kind != "idle" for seg in path.segments)


def test_a_sync_all_puts_the_slowest_core_then_its_cost_on_the_path():
    """Two cores meet at a SyncAll (after a pipe barrier, as the kernels write it): the path runs
    through the slow core's vector work, then a SyncAll's cost, which rests on die.sync_all."""
    with npusim.session("a3", data=False) as s:
        k = isa.Kernel("sync", die=0)
        barrier = k.barrier()
        slow, fast = k.aiv(0), k.aiv(1)
        a = slow.alloc(16384, np.float16)
        for _ in range(10):
            slow.adds(a, a, 1.0)
        slow.pipe_barrier("ALL")
        slow.sync_all(barrier)
        fast.sync_all(barrier)
        k.launch()
    path = s.result.critical_path()
    rows = path.breakdown()
    assert re.fullmatch(r"SyncAll on die0 aiv[01]", rows[0]["label"]) and rows[1]["label"] == "VECTOR on die0 aiv0"
    assert rows[0]["time_us"] == pytest.approx(s.system.timing.sync_all_ps / 1e6) == 25.0
    assert rows[0]["rests_on"] == [{"key": "die.sync_all", "time_us": 25.0, "share": 1.0}]


def test_a_recorded_flow_is_a_dependency_and_a_gap_before_its_target_is_idle():
    system = System(load_config("a2").spec, with_data=False)
    recorder = system.recorder
    aicpu = recorder.track(0, "aicpu0", "AICPU")
    pipe = recorder.track(1, "aiv0", "MTE2")
    name = recorder.name_id("work")
    producer = recorder.record(aicpu, name, 0, 10_000, 0, -1, -1)
    recorder.record(pipe, name, 0, 2_000, 0, -1, -1)
    consumer = recorder.record(pipe, name, 12_000, 15_000, 0, -1, -1)
    recorder.flow(producer, consumer, "signal")
    path = critical_path(system.record())
    assert path.events == [producer, consumer]
    assert [(seg.start_ps, seg.end_ps, seg.label) for seg in path.segments] == [
        (0, 10_000, "AICPU on die0 aicpu0"), (10_000, 12_000, IDLE), (12_000, 15_000, "MTE2 on die1 aiv0")]


def test_a_run_without_events_has_an_empty_path():
    system = System(load_config("a2").spec, with_data=False)
    path = critical_path(system.record())
    assert path.end_to_end_ps == 0 and path.segments == [] and path.breakdown() == [] and path.describe() == ""


def test_vector_add_summary_names_hbm_first_and_its_rows_add_up():
    result = npusim.simulate("a2", ROOT / "examples" / "vector_add.py", data=False)
    found = result.summary["bottlenecks"]
    assert found["end_to_end_us"] == pytest.approx(result.simulated_us)
    assert found["breakdown"][0]["label"] == "MTE2 waiting on die0 HBM"
    assert sum(r["share"] for r in found["breakdown"]) == pytest.approx(1.0)
    assert found["summary"].startswith(f"{found['breakdown'][0]['share']:.0%} MTE2 waiting on die0 HBM")


def test_each_segment_says_which_config_values_its_time_rests_on():
    """vector_add on a2: the wait on HBM rests on die.hbm.bandwidth, the DMA's fixed part on its
    engine's set-up and first burst and the L2 and HBM latencies in those
    proportions; every segment's terms add up to its time and name keys the config sets."""
    result = npusim.simulate("a2", ROOT / "examples" / "vector_add.py", data=False)
    loaded = load_config("a2")
    path = result.critical_path()
    for segment in path.segments:
        assert sum(term.ps for term in segment.terms) == (0 if segment.kind == "idle" else segment.duration_ps), segment
        assert all(term.keys and all(loaded.confidence_of(key).where != "schema" for key in term.keys) for term in segment.terms), segment
    rows = {row["label"]: row for row in path.breakdown()}
    assert rows["MTE2 waiting on die0 HBM"]["rests_on"] == [{"key": "die.hbm.bandwidth", "time_us": rows["MTE2 waiting on die0 HBM"]["time_us"],
                                                            "share": 1.0}]
    fixed = next(row for label, row in rows.items() if label.startswith("MTE2 fixed cost"))
    # a first read misses: the engine's set-up and its first burst, the HBM and L2 latencies (a miss's), as the config gives them
    die, hz = loaded.spec.die, loaded.spec.die.clock.hz
    mte2 = die.cores["aiv"].engines["MTE2"]
    fixed_cycles = dict(sorted({"die.cores.aiv.engines.MTE2.setup": mte2.setup.to_ps(hz), "die.hbm.latency": die.hbm.latency.to_ps(hz),
                                "die.l2.latency": die.l2.latency.to_ps(hz), "die.cores.aiv.engines.MTE2.per_burst": mte2.per_burst.to_ps(hz)}.items(),
                               key=lambda item: -item[1]))
    assert [entry["key"] for entry in fixed["rests_on"]] == list(fixed_cycles)
    assert [entry["share"] for entry in fixed["rests_on"]] == pytest.approx([cycles / sum(fixed_cycles.values()) for cycles in fixed_cycles.values()],
                                                                            abs=0.01)
    found = result.summary["bottlenecks"]
    assert [entry["key"] for entry in found["rests_on"][:2]] == ["die.hbm.bandwidth", "die.cores.aiv.engines.MTE2.setup"]
    top = found["rests_on"][0]
    assert (top["value"], top["confidence"], top["level"]) == ("1.6 TB/s", "M/L, knob", "L") and re.fullmatch(r"a2\.yaml:\d+", top["where"])  # a built-in by its name: the same from any checkout
    assert found["breakdown"][0]["mostly_on"] == "die.hbm.bandwidth" and found["breakdown"][0]["low_confidence"]
    assert found["low_confidence_share"] == pytest.approx(sum(e["share"] for e in found["rests_on"] if e["level"] == "L"))


@pytest.mark.parametrize("before", ["poll", "dispatch"])
def test_a_poll_pass_holds_nothing_the_signal_it_saw_does(before):
    """An AICPU lane polls in passes of 500 ps; a signal lands at 700 (in the second pass) and the
    third pass sees it. Empty passes hold up nothing: the path goes from the pass to the signal,
    the poll latency [700, 1000) on the AICPU lane. A busy (non-poll) event before the pass does
    hold it."""
    system = System(load_config("a2").spec, with_data=False)
    recorder = system.recorder
    aicpu = recorder.track(0, "aicpu0", "SCHEDULE")
    core = recorder.track(1, "aiv0", "MTE3")
    poll = recorder.name_id("poll", polls=True)
    signal = recorder.record(core, recorder.name_id("signal"), 200, 700, 4, -1, -1)
    first = recorder.record(aicpu, poll, 0, 500, 0, -1, -1)
    second = recorder.record(aicpu, recorder.name_id(before), 500, 1000, 0, -1, -1)
    seen = recorder.record(aicpu, poll, 1000, 1500, 0, -1, -1)
    done = recorder.record(aicpu, recorder.name_id("complete"), 1500, 1800, 0, -1, -1)
    recorder.flow(signal, seen, "signal->wait")
    path = critical_path(system.record())
    assert_tiles_end_to_end(path)
    lane, mte3 = "SCHEDULE on die0 aicpu0", "MTE3 on die1 aiv0"
    if before == "poll":
        assert path.events == [signal, seen, done]
        assert [(s.start_ps, s.end_ps, s.label) for s in path.segments] == [
            (0, 200, IDLE), (200, 700, mte3), (700, 1500, lane), (1500, 1800, lane)]
    else:
        assert path.events == [first, second, seen, done]
        assert {s.label for s in path.segments} == {lane}


# -- the sorts the walk's indexes are made with ---------------------------------------------------


@given(hnp.arrays(np.int64, st.integers(0, 300), elements=st.integers(-(2**40), 2**40) | st.integers(-40_000, 40_000) | st.integers(-3, 3)))
def test_narrowed_ids_sort_stably_in_the_same_order(values):
    narrowed = _narrow(values)
    assert np.array_equal(narrowed, values) and np.array_equal(np.argsort(narrowed, kind="stable"), np.argsort(values, kind="stable"))


@given(st.integers(0, 200).flatmap(lambda n: st.tuples(hnp.arrays(np.int64, n, elements=st.integers(0, 5) | st.integers(0, 2**62)),
                                                       hnp.arrays(np.int64, n, elements=st.integers(0, 7) | st.integers(0, 2**62)))))
def test_by_then_is_lexsorts_order(keys):
    first, then = keys
    assert np.array_equal(_by_then(first, then), np.lexsort((then, first)))


def test_atomic_adds_to_one_block_put_their_read_modify_writes_on_the_path():
    """16 cores of die 0 atomic-add 8 fp32 values each into the same 32-byte block: the L2 applies
    them one after another (die.l2.atomic_add each), so after the first bytes arrive the path is
    the chain of read-modify-writes, not the link or HBM the bytes crossed."""
    with npusim.session("a2", data=False) as s:
        target = npusim.zeros(8, np.float32)
        k = isa.Kernel("adds", die=0)
        for core in range(16):
            p = k.aiv(core)
            p.copy(isa.gm(target), p.alloc(8, np.float32), atomic="add", name="atomic add")
        k.launch()
    rmw = s.config.spec.die.l2.atomic_add.to_ps(s.config.spec.die.clock.hz)
    tails = s.result.recorder.tails()
    assert sorted(tails["tail_ps"].tolist()) == [rmw * n for n in range(1, 17)]  # each waits for the adds before it, then its own
    path = s.result.critical_path()
    assert_tiles_end_to_end(path)
    top = path.breakdown()[0]
    assert top["kind"] == "atomic" and re.fullmatch(r"MTE3 atomic adds applied at the L2 \(read-modify-write\) for die0 aiv\d+", top["label"])
    assert top["time_us"] == pytest.approx(16 * rmw / 1e6, rel=0.01) and top["share"] > 0.5
    assert top["rests_on"][0]["key"] == "die.l2.atomic_add"
    assert s.result.summary["bottlenecks"]["breakdown"][0]["label"] == top["label"]
