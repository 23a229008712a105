"""The Chrome trace: valid for Perfetto, times on a whole-nanosecond grid that viewers read back exactly, byte-identical reruns."""

import json

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

import npusim
from npusim import isa
from npusim.trace.chrome import _dur, _ts, ns_of, place_on_lanes, rounded_spans, write_chrome_trace
from tests.trace.viewers import load_events, perfetto_ns, viewer_problems


def run_small(tmp_path, name):
    with npusim.session("a2") as s:
        x = npusim.tensor(np.arange(4096, dtype=np.float16))
        k = isa.Kernel("scale", die=0)
        for core in range(4):
            p = k.aiv(core)
            ub = p.alloc(1024, np.float16)
            with p.tile(core):
                p.copy(ub, isa.gm(x, core * 1024))
                p.set_flag("MTE2", "VECTOR", 0)
                p.wait_flag("MTE2", "VECTOR", 0)
                p.muls(ub, ub, 2.0)
                p.set_flag("VECTOR", "MTE3", 0)
                p.wait_flag("VECTOR", "MTE3", 0)
                p.copy(isa.gm(x, core * 1024), ub)
        k.launch()
    return write_chrome_trace(s.result.record, tmp_path / name, metadata={"config": "a2"}), s.result


def test_times_are_whole_nanoseconds_written_in_microseconds():
    assert [ns_of(ps) for ps in (0, 499, 500, 1_499, 1_500, 12_345_678)] == [0, 0, 1, 1, 2, 12_346]
    assert (_ts(0), _ts(1), _ts(1_500), _ts(3_000)) == ("0", "0.001", "1.500", "3")
    assert (_dur(0), _dur(1), _dur(3), _dur(2_000_000)) == ("0", "0.000999", "0.002999", "1999.999999")


@given(st.integers(0, 10**13), st.integers(0, 10**9))
def test_perfetto_reads_back_the_nanoseconds_written(ts_ns, dur_ns):
    assert perfetto_ns(json.loads(_ts(ts_ns))) == ts_ns and perfetto_ns(json.loads(_dur(dur_ns))) == dur_ns


def placed_spans(track, start_ps, end_ps, last_end=None):
    track, start_ps, end_ps = (np.array(values, dtype=np.int64) for values in (track, start_ps, end_ps))
    last_end = np.zeros(int(track.max()) + 1, dtype=np.int64) if last_end is None else last_end
    start, end = rounded_spans(start_ps, end_ps)
    moved = place_on_lanes(track, start, end, end_ps > start_ps, last_end)
    return list(zip(start.tolist(), end.tolist())), moved.tolist(), last_end


def test_slices_of_under_a_nanosecond_are_shown_1_ns_long_one_after_the_other():
    # three events in one ns on lane 0 (0.2-0.4, 0.4-0.6, 0.6-3.1 ns), one on lane 1 left as it is
    spans, moved, last_end = placed_spans([0, 1, 0, 0], [200, 0, 400, 600], [400, 2_000, 600, 3_100])
    assert spans == [(0, 1), (0, 2), (1, 2), (2, 3)] and moved == [2, 3] and last_end.tolist() == [3, 2]
    # the next chunk starts where the lanes ended: a slice rounded to start before that end is moved
    spans, moved, _ = placed_spans([0, 1], [2_400, 2_000], [9_000, 2_000], last_end)
    assert spans == [(3, 9), (2, 2)] and moved == [0]  # a slice of no length stays so


def test_trace_is_valid_chrome_json_with_named_lanes(tmp_path):
    path, result = run_small(tmp_path, "trace.json")
    trace = json.loads(path.read_text())
    events = trace["traceEvents"]
    names = {e["args"]["name"] for e in events if e.get("name") == "thread_name"}
    assert {"aiv0 MTE2", "aiv0 VECTOR", "aiv0 MTE3"} <= names
    complete = [e for e in events if e["ph"] == "X" and e["name"] != "release"]
    assert len(complete) == len(result.recorder)
    releases = [e for e in events if e["name"] == "release"]
    assert len(releases) == trace["otherData"]["release_slices"] == 8  # each core's two waits started before their flag was raised
    for e in complete:
        assert {"name", "ph", "ts", "dur", "pid", "tid"} <= e.keys() and e["dur"] >= 0
        assert e["args"]["op"] == "scale#0" and e["args"]["tile"] in range(4)
    counters = [e for e in events if e["ph"] == "C"]
    assert any(e["name"] == "die0 HBM GB/s" for e in counters)
    other = trace["otherData"]
    assert other["config"] == "a2" and other["trace_format"] == 4 and other["ops"][0]["name"] == "scale"


def test_perfetto_and_speedscope_import_every_slice_in_place(tmp_path):
    path, _ = run_small(tmp_path, "trace.json")
    assert viewer_problems(load_events(path)) == []


def test_same_inputs_give_byte_identical_traces(tmp_path):
    first, _ = run_small(tmp_path, "a.json")
    second, _ = run_small(tmp_path, "b.json")
    assert first.read_bytes() == second.read_bytes()
    assert not list(tmp_path.glob("*.tmp"))  # written atomically


def test_missing_folders_of_the_trace_path_are_created(tmp_path):
    path, _ = run_small(tmp_path / "new" / "folder", "trace.json")
    assert path.is_file()


def allgather_trace(tmp_path):
    """The PyPTO all-gather on 2 PEs of a2 (AICPU schedulers, 48 vector cores a die) and its trace."""
    import contextlib
    import io
    from pathlib import Path

    with contextlib.redirect_stdout(io.StringIO()):
        result = npusim.simulate("a2", Path(__file__).resolve().parents[2] / "examples" / "shmem_allgather.py", params={"n_pes": 2}, data=False)
    return result, json.loads(result.write_trace(tmp_path / "trace.json").read_text())["traceEvents"]


def natural(name: str) -> tuple:
    """``aiv2`` before ``aiv10``: the text with each run of digits as its number."""
    import re

    return tuple(int(part) if part.isdigit() else part for part in re.split(r"(\d+)", name))


def test_each_die_lists_its_aicpu_lanes_first_then_its_cores_in_index_order(tmp_path):
    _, events = allgather_trace(tmp_path)
    names = {(e["pid"], e["tid"]): e["args"]["name"] for e in events if e.get("name") == "thread_name"}
    ranks = {(e["pid"], e["tid"]): e["args"]["sort_index"] for e in events if e.get("name") == "thread_sort_index"}
    for die in {pid for pid, _ in names}:
        lanes = [names[key] for key in sorted((key for key in names if key[0] == die), key=ranks.__getitem__)]
        aicpu = [lane for lane in lanes if lane.startswith("aicpu")]
        assert aicpu and lanes[: len(aicpu)] == aicpu  # the control path first, as MindStudio Insight shows it
        assert aicpu == sorted(aicpu, key=natural)
        cores = list(dict.fromkeys(lane.split()[0] for lane in lanes[len(aicpu):]))
        assert cores == sorted(cores, key=natural) and "aiv8" in cores and "aiv16" in cores  # as numbers, not as text


def test_counters_sort_in_core_order_as_text_and_change_at_every_point(tmp_path):
    result, events = allgather_trace(tmp_path)
    counters: dict[tuple[int, str], list[dict]] = {}
    for e in events:
        if e["ph"] == "C":
            counters.setdefault((e["pid"], e["name"]), []).append(e)
    for die in {pid for pid, _ in counters}:
        buffers = [name for pid, name in counters if pid == die and name.endswith(" KiB")]
        assert "aiv07 UB KiB" in buffers and "aiv16 UB KiB" in buffers
        assert sorted(buffers, key=str.lower) == sorted(buffers, key=natural)  # Perfetto lists them by lower(name): in core order
        assert list(dict.fromkeys(name for pid, name in counters if pid == die)) == sorted(
            dict.fromkeys(name for pid, name in counters if pid == die), key=lambda name: (not name.endswith("GB/s"), name))  # written so too
    written = 0
    for points in counters.values():
        values = [next(iter(e["args"].values())) for e in points]
        times = [perfetto_ns(e["ts"]) for e in points]
        assert all(b != a for a, b in zip(values, values[1:])) and all(b > a for a, b in zip(times, times[1:]))  # a point only at a change
        written += len(points)
    logged = (sum(len(r.rate_log) for r in result.record.resources if r.rate_log) + 2 * len(result.recorder.buffer_spans)
              + sum(len(times) for times, _, _ in result.record.l2.log.values()))
    assert written < logged  # repeats of the same value and points overridden at their instant are not written


def test_a_sync_all_draws_its_arrows_forward_from_the_last_arrival(tmp_path):
    """Three cores meet at a SyncAll, one of them late: its SyncAll holds an ``arrive`` slice where
    it arrived, the two others a ``release`` slice from its end on; each ``sync all`` arrow goes
    from the first to one of the second, forward in time."""
    with npusim.session("a3", data=False) as s:
        k = isa.Kernel("sync", die=0)
        barrier = k.barrier()
        slow = k.aiv(0)
        a = slow.alloc(16384, np.float16)
        for _ in range(10):
            slow.adds(a, a, 1.0)
        slow.pipe_barrier("ALL")
        for program in (slow, k.aiv(1), k.aiv(2)):
            program.sync_all(barrier)
        k.launch()
    trace = json.loads(write_chrome_trace(s.result.record, tmp_path / "trace.json").read_text())
    events = trace["traceEvents"]
    arrive = [e for e in events if e["name"] == "arrive"]
    syncs = {e["tid"]: e for e in events if e["name"] == "SyncAll"}
    releases = [e for e in events if e["name"] == "release" and e["tid"] in syncs]
    assert len(arrive) == trace["otherData"]["arrive_slices"] == 1 and arrive[0]["ts"] == syncs[arrive[0]["tid"]]["ts"]
    assert len(releases) == 2 and all(perfetto_ns(e["ts"]) == perfetto_ns(arrive[0]["ts"]) + 1 for e in releases)
    assert sum(e["ph"] == "s" and e["name"] == "sync all" for e in events) == 2
    assert viewer_problems(events) == []
