"""The trace as a performance engineer reads it: every event well formed, flows with both ends
bound inside their slices, counters, metadata; and the writer streams in bounded memory."""

import errno
import io
import json
import os
import time
import tracemalloc
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import npusim
from npusim import isa
from npusim.config import load_config
from npusim.errors import UsageError
from npusim.hw.core import flag_key
from npusim.hw.pipes import Pipe
from npusim.hw.system import System
from npusim.trace import chrome
from npusim.trace.chrome import TraceOnTwoCores, write_chrome_trace
from npusim.trace.recorder import BufferSpan, Recorder
from npusim.trace.selection import TraceSelection
from tests.trace.viewers import perfetto_import, perfetto_ns, viewer_problems

FIELDS = {
    "X": {"name", "ph", "ts", "dur", "pid", "tid"},
    "M": {"name", "ph", "pid", "tid", "args"},
    "C": {"name", "ph", "ts", "pid", "args"},
    "s": {"ph", "id", "name", "ts", "pid", "tid"},
    "f": {"ph", "bp", "id", "name", "ts", "pid", "tid"},
    "i": {"name", "ph", "ts", "pid", "s", "args"},
}


def double_buffered(cores=2, tiles=4):
    """A load -> vector -> store pipeline on die 0 (returns the session's result)."""
    with npusim.session("a2") as s:
        n = cores * tiles * 2048
        x = npusim.tensor(np.arange(n, dtype=np.float16) % 7)
        k = isa.Kernel("pipeline", die=0)
        for core in range(cores):
            p = k.aiv(core)
            buffers = [p.alloc(2048, np.float16) for _ in range(2)]
            for t in range(tiles):
                ub, event = buffers[t % 2], t % 2
                offset = (core * tiles + t) * 2048
                with p.tile(t):
                    if t >= 2:
                        p.wait_flag("MTE3", "MTE2", event)
                    p.copy(ub, isa.gm(x, offset), name="load")
                    p.set_flag("MTE2", "VECTOR", event)
                    p.wait_flag("MTE2", "VECTOR", event)
                    p.muls(ub, ub, 2.0)
                    p.set_flag("VECTOR", "MTE3", event)
                    p.wait_flag("VECTOR", "MTE3", event)
                    p.copy(isa.gm(x, offset), ub, name="store")
                    p.set_flag("MTE3", "MTE2", event)
        k.launch()
        s.system.recorder.instant(5, 0, "race", "a test warning")
    return s.result


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    result = double_buffered()
    path = write_chrome_trace(result.record, tmp_path_factory.mktemp("trace") / "trace.json", metadata={"config": "a2"})
    return result, json.loads(path.read_text()), path


def test_every_event_has_the_fields_of_its_phase_and_no_negative_duration(written):
    result, trace, _ = written
    events = trace["traceEvents"]
    assert {e["ph"] for e in events} == set(FIELDS)
    for e in events:
        assert FIELDS[e["ph"]] <= e.keys(), e
        if e["ph"] == "X":
            assert e["dur"] >= 0 and e["ts"] >= 0
    assert sum(e["ph"] == "X" for e in events) == len(result.recorder) + trace["otherData"]["release_slices"]


def test_lanes_are_named_like_the_vendor_tools_and_only_lanes_with_events_appear(written):
    _, trace, _ = written
    names = {e["args"]["name"] for e in trace["traceEvents"] if e["name"] == "thread_name"}
    assert names == {f"aiv{c} {pipe}" for c in (0, 1) for pipe in ("MTE2", "VECTOR", "MTE3")} | {  # no SCALAR work: no SCALAR lane
        f"aiv{c} {pipe} wait" for c in (0, 1) for pipe in ("MTE2", "MTE3")}  # the waits of pipes whose copies stay in flight


def flows(events):
    """Each flow as Perfetto binds it: (name, the event its start binds to, the event its end binds to)."""
    imported = perfetto_import(events)
    return [(name, events[source.index], events[target.index]) for (_, name), (source, target) in imported.flows.items()]


def test_every_flow_binds_both_ends_in_perfetto_and_points_forward(written):
    _, trace, _ = written
    events = trace["traceEvents"]
    starts = {(e["id"], e["name"]) for e in events if e["ph"] == "s"}
    assert len(starts) == sum(e["ph"] == "s" for e in events) == sum(e["ph"] == "f" for e in events)  # ids unique
    assert len(flows(events)) == len(starts) == trace["otherData"]["flows"]
    assert viewer_problems(events) == []  # bound, in order, and drawn from the source's end to a later start


def test_flag_flows_join_each_set_flag_to_where_its_wait_was_released(written):
    _, trace, _ = written
    events = trace["traceEvents"]
    flag = [(source, target) for name, source, target in flows(events) if name == "flag"]
    assert len(flag) == 2 * (4 * 3 - 2)  # per core: 3 waits per tile, minus the two first MTE3 -> MTE2 waits
    waits = {(e["pid"], e["tid"], e["ts"]): e for e in events if e["ph"] == "X" and e["name"].startswith("wait_flag")}
    released = 0
    for source, target in flag:
        assert source["name"].startswith("set_flag ")
        if target["name"] == "release":  # inside the wait that was waiting when the flag was raised
            wait = next(w for (pid, tid, ts), w in waits.items() if (pid, tid) == (target["pid"], target["tid"]) and ts < target["ts"] < ts + w["dur"])
            assert target["ts"] == round(source["ts"] + source["dur"], 3)  # from the moment the set_flag ended
            released += 1
        else:
            wait = target
            assert wait["ts"] >= source["ts"] + source["dur"]
        assert wait["name"] == "wait_flag " + source["name"].removeprefix("set_flag ")
    assert released == trace["otherData"]["release_slices"] > 0


def test_data_flows_join_each_load_to_the_vector_instruction_after_its_wait(written):
    _, trace, _ = written
    pairs = [(load, consumer) for name, load, consumer in flows(trace["traceEvents"]) if name == "data"]
    assert len(pairs) == 2 * 4  # one per load
    for load, consumer in pairs:
        assert load["name"] == "load" and consumer["name"] == "muls"
        assert (load["pid"], load["args"]["tile"]) == (consumer["pid"], consumer["args"]["tile"])
        assert consumer["ts"] >= load["ts"] + load["dur"]


def test_dma_events_name_their_bottleneck_and_counters_give_bandwidth_and_ub_occupancy(written):
    _, trace, _ = written
    events = trace["traceEvents"]
    assert {e["args"]["bottleneck"] for e in events if e["ph"] == "X" and e["name"] in ("load", "store")} <= {"die0 HBM", "engine rate"}
    counters = {}
    for e in events:
        if e["ph"] == "C":
            counters.setdefault(e["name"], []).append(e)
    assert "die0 HBM GB/s" in counters
    ub = counters["aiv00 UB KiB"]  # the index zero-padded to the 48 cores of a2: counters listed by name are in core order
    assert [c["args"]["KiB"] for c in ub] == [8.0, 0.0]  # two 4 KiB buffers for the run, then freed
    assert ub[0]["ts"] == 0 and perfetto_ns(ub[1]["ts"]) == max(perfetto_ns(e["ts"]) + perfetto_ns(e["dur"]) for e in events if e["ph"] == "X" and e["tid"] in
                                                   {m["tid"] for m in events if m["name"] == "thread_name" and m["args"]["name"].startswith("aiv0 ")})


def test_warnings_are_instants_and_metadata_names_config_ops_and_format(written):
    _, trace, _ = written
    instants = [e for e in trace["traceEvents"] if e["ph"] == "i"]
    assert [(e["name"], e["args"]["message"]) for e in instants] == [("race", "a test warning")]
    other = trace["otherData"]
    assert other["config"] == "a2" and other["trace_format"] == 4 and other["time_unit"] == "us"
    assert other["ops"] == [{"id": 0, "name": "pipeline", "die": 0, "args": {}}]
    assert other["config_spec"]["name"] == "a2" and other["events"] == sum(e["ph"] == "X" and e["name"] != "release" for e in trace["traceEvents"])


def test_the_chunk_size_does_not_change_a_byte(written, tmp_path, monkeypatch):
    result, _, path = written
    small = write_chrome_trace(result.record, tmp_path / "small.json", metadata={"config": "a2"}, chunk_events=7)
    assert small.read_bytes() == path.read_bytes()
    assert max(len(r.rate_log) for r in result.record.resources) > 3
    monkeypatch.setattr(chrome, "COUNTER_CHUNK_POINTS", 3)  # counter points in batches of 3
    batched = write_chrome_trace(result.record, tmp_path / "batched.json", metadata={"config": "a2"})
    assert batched.read_bytes() == path.read_bytes()


def test_flows_recorded_by_ops_are_checked_and_drawn_with_their_name(tmp_path):
    result = double_buffered(cores=1, tiles=1)
    recorder = result.recorder
    with pytest.raises(UsageError, match="its to event 99999 is not a recorded event index"):
        recorder.flow(0, 99_999, "signal")
    with pytest.raises(UsageError, match="its from event -1"):
        recorder.flow(-1, 0, "signal")
    last = len(recorder) - 1
    recorder.flow(np.int64(0), last, "signal")
    recorded = recorder.flows()
    assert (recorded["from"][-1], recorded["to"][-1], recorder.names[recorded["name"][-1]]) == (0, last, "signal")
    events = json.loads(write_chrome_trace(result.record, tmp_path / "t.json").read_text())["traceEvents"]
    assert [(source["name"], target["name"]) for name, source, target in flows(events) if name == "signal"] == [("load", "set_flag MTE3->MTE2 #0")]


PATTERN = (  # one tile of a double-buffered core: (lane, instruction, flag source within the tile or None)
    ("MTE2", "wait_flag MTE3->MTE2 #0", "previous"), ("MTE2", "copy GM->UB", None), ("MTE2", "set_flag MTE2->VECTOR #0", None),
    ("VECTOR", "wait_flag MTE2->VECTOR #0", 2), ("VECTOR", "muls", None), ("VECTOR", "set_flag VECTOR->MTE3 #0", None),
    ("MTE3", "wait_flag VECTOR->MTE3 #0", 5), ("MTE3", "copy UB->GM", None), ("MTE3", "set_flag MTE3->MTE2 #0", None),
)


def synthetic_system(tiles: int, cores: int = 48) -> System:
    """A system whose recorder holds ``tiles`` x ``cores`` x 9 events of a double-buffered
    pipeline (flag names, one kernel run per core, DMA records), recorded as whole columns: no
    simulation. Its flag flows, paired by the recorder, are checked against the pattern's."""
    system = System(load_config("a2").spec, with_data=False)
    system.die(0)  # registers die 0's HBM as resource 0, the DMAs' bottleneck
    recorder = system.recorder
    op = recorder.op("synthetic", 0)
    lanes = {(c, lane): recorder.track(0, f"aiv{c}", lane) for c in range(cores) for lane in ("MTE2", "VECTOR", "MTE3")}
    names = [recorder.name_id(name, waits=name.startswith("wait")) for _, name, _ in PATTERN]
    for name_id, (_, name, _) in zip(names, PATTERN):
        if "flag" not in name:
            continue
        kind, pipes, event = name.split()
        src, dst = pipes.split("->")
        recorder.flag_name(name_id, kind == "set_flag", flag_key(Pipe[src], Pipe[dst], int(event[1:])))
    for c in range(cores):
        recorder.kernel_run(0, f"aiv{c}")  # one run per core, from the first event
    block = np.arange(tiles * cores, dtype=np.int64)  # (tile, core) blocks, tile-major
    tile, core = block // cores, block % cores
    k = np.arange(len(PATTERN), dtype=np.int64)
    index = (block[:, None] * len(PATTERN) + k[None, :]).ravel()
    track = np.array([[lanes[(c, lane)] for lane, _, _ in PATTERN] for c in range(cores)], dtype=np.int64)[core].ravel()
    name = np.tile(np.array(names, dtype=np.int64), len(block))
    name[: cores * len(PATTERN) : len(PATTERN)] = recorder.name_id("pipe_barrier MTE2", waits=True)  # tile 0 waits for no flag
    start = (tile[:, None] * 10_000_000 + k[None, :] * 1_000_000).ravel()
    recorder.record_columns(track, name, start, start + 900_000, np.tile(np.where(np.isin(k, (1, 7)), 16384, 0), len(block)),
                            np.full(len(index), op), np.repeat(tile, len(PATTERN)))
    base = block * len(PATTERN)
    waits = [(base + 3, base + 2), (base + 6, base + 5)]
    later = block >= cores
    waits.append((base[later], base[later] - cores * len(PATTERN) + 8))  # the previous tile's MTE3 -> MTE2 set
    to = np.concatenate([w for w, _ in waits])
    order = np.argsort(to, kind="stable")
    sets, waits_of_sets = recorder.flag_flow_pairs()  # paired from the events, flag names and runs
    assert sets.tolist() == np.concatenate([f for _, f in waits])[order].tolist() and waits_of_sets.tolist() == to[order].tolist()
    dmas = np.sort(np.concatenate([base + 1, base + 7]))
    for dma in dmas.tolist():
        recorder.rows.transfer(dma, 500_000, 0)  # 0.5 us fixed, bottleneck resource 0
    assert len(recorder) == len(index)
    return system


def test_the_writer_streams_100k_events_in_a_fraction_of_the_recorder_memory(tmp_path):
    """The writer holds one chunk at a time, so its peak does not grow with the run: 100 K events
    in chunks of 512 stay far below the recorder's own columns (a full copy would be several
    times them). tracemalloc slows allocation ~15x, hence the moderate size."""
    system = synthetic_system(tiles=232)  # 100,224 events
    recorder = system.recorder
    tracemalloc.start()
    tracemalloc.reset_peak()
    path = write_chrome_trace(system.record(), tmp_path / "big.json", chunk_events=512)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert peak < 0.25 * recorder.nbytes, f"writer peak {peak / 2**20:.1f} MiB for {recorder.nbytes / 2**20:.1f} MiB of columns"
    with open(path) as f:
        kinds = [line[line.index('"ph":"') + 6] for line in f if '"ph":"' in line]
    assert kinds.count("X") == len(recorder)
    assert kinds.count("s") == kinds.count("f") == recorder.flow_count + 232 * 48  # flag flows + a data flow per load


# -- on two cores: a forked copy writes the events and flows, this process the counters ------------


@pytest.fixture(scope="module")
def four_dies():
    """A 4-PE all-gather on a2, timing only: events on 4 dies, flows, counters."""
    import contextlib
    import io

    from npusim.frontend.workload import run_workload_file

    with contextlib.redirect_stdout(io.StringIO()), npusim.session("a2", data=False, params={"n_pes": 4}) as s:
        run_workload_file(Path(__file__).resolve().parents[2] / "examples" / "shmem_allgather.py")
    return s.result


needs_fork = pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork here")


@needs_fork
@pytest.mark.parametrize("selection", [TraceSelection(), TraceSelection("all", (1, 2), None), TraceSelection("all", None, (3_000_000, 9_000_000)),
                                       TraceSelection("ops", (0, 3), (1_000_000, 20_000_000)), TraceSelection("all", (5,), None),
                                       TraceSelection("all", None, (10**15, 10**15 + 1))],
                         ids=["all", "dies", "window", "ops", "a die with nothing", "a window with nothing"])
def test_two_cores_write_the_bytes_one_writes(four_dies, tmp_path, selection):
    alone = write_chrome_trace(four_dies.record, tmp_path / "alone.json", metadata={"config": "a2"}, selection=selection, chunk_events=500)
    two = TraceOnTwoCores(four_dies.record, tmp_path / "two.json", metadata={"config": "a2"}, selection=selection, chunk_events=500)
    assert two.finish() == tmp_path / "two.json"
    assert two.path.read_bytes() == alone.read_bytes()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["alone.json", "two.json"]


@needs_fork
def test_a_trace_with_nothing_written_is_the_same_on_two_cores(tmp_path):
    with npusim.session("a2") as s:
        pass
    alone = write_chrome_trace(s.result.record, tmp_path / "alone.json")
    assert TraceOnTwoCores(s.result.record, tmp_path / "two.json").finish().read_bytes() == alone.read_bytes()


def _full_disk(*args):
    raise OSError(errno.ENOSPC, "No space left on device")


@needs_fork
@pytest.mark.parametrize("selection", [TraceSelection(), TraceSelection("all", (1, 2), None), TraceSelection("all", None, (3_000_000, 9_000_000)),
                                       TraceSelection("ops", None, None), TraceSelection("all", None, (10**15, 10**15 + 1))],
                         ids=["all", "dies", "window", "ops", "a window with nothing"])
@pytest.mark.parametrize("points", [1, 7, 10**9], ids=["a point a piece", "7 points a piece", "a resource a piece"])
@pytest.mark.parametrize("taker", ["both", "the copy", "this process"])
def test_the_counters_split_anywhere_between_the_two_processes_give_the_bytes_one_writes(four_dies, tmp_path, monkeypatch, selection, points, taker):
    monkeypatch.setattr(chrome, "COUNTER_CHUNK_POINTS", points)
    if taker == "the copy":  # this process finds every piece taken
        monkeypatch.setattr(chrome.TwoEnds, "back", lambda self: None)
    elif taker == "this process":  # the copy does
        monkeypatch.setattr(chrome.TwoEnds, "front", lambda self: None)
    alone = write_chrome_trace(four_dies.record, tmp_path / "alone.json", metadata={"config": "a2"}, selection=selection, chunk_events=500)
    two = TraceOnTwoCores(four_dies.record, tmp_path / "two.json", metadata={"config": "a2"}, selection=selection, chunk_events=500)
    logs = sum(1 for resource in four_dies.record.resources if resource.rate_log and selection.keeps_die(resource.die))
    l2 = sum(1 for die, (times, _, _) in four_dies.record.l2.log.items() if len(times) and selection.keeps_die(die))
    pieces = two.writer.counter_pieces()
    assert pieces == 0 if selection.level == "ops" else (pieces == logs + 1 + l2) == (points == 10**9 or selection.window_ps == (10**15, 10**15 + 1))
    # none; a resource's points (one for each after the run's end) a piece, the buffers, and each die's L2 hit rate; more
    assert two.finish().read_bytes() == alone.read_bytes()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["alone.json", "two.json"]


@needs_fork
@pytest.mark.parametrize("part", ["_events", "_rate_counters", "_copy"])  # written by the copy; by either; by this process
def test_a_failure_of_either_process_leaves_no_trace_and_no_temporary(four_dies, tmp_path, monkeypatch, part):
    monkeypatch.setattr(*(chrome, part) if part == "_copy" else (chrome._Writer, part), _full_disk)  # the copy is forked with it
    two = TraceOnTwoCores(four_dies.record, tmp_path / "trace.json")
    pid = two.head.pid
    with pytest.raises(OSError) as error:
        two.finish()
    assert error.value.errno == errno.ENOSPC and list(tmp_path.iterdir()) == []
    with pytest.raises(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)  # reaped


@needs_fork
def test_an_abandoned_trace_stops_its_copy_and_leaves_nothing(four_dies, tmp_path, monkeypatch):
    monkeypatch.setattr(chrome._Writer, "_events", lambda self: time.sleep(60))
    two = TraceOnTwoCores(four_dies.record, tmp_path / "trace.json")
    pid = two.head.pid
    two.abandon()
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)


# -- buffer counters, against their definition point by point ------------------------------------

SPANS = st.lists(st.builds(lambda die, unit, buffer, start, length, nbytes: BufferSpan(die, unit, buffer, 1 << 20, nbytes, start, start + length, 0),
                           st.integers(0, 3), st.sampled_from(["aiv0", "aiv1", "aic0"]), st.sampled_from(["UB", "L1"]), st.integers(0, 5000),
                           st.integers(0, 3000), st.integers(0, 1 << 20)), max_size=40)


CORES = {"aiv": SimpleNamespace(count=48), "aic": SimpleNamespace(count=24)}  # a2's: names zero-padded to aiv00, aic00


def buffer_counter_lines(spans, selection):
    """The buffer counters' lines as they are defined: per (die, unit, buffer) in order (the
    core's index zero-padded), its points (time, 0 for an end and 1 for a start, bytes) in order,
    inside the window (the point in force at its start moved to it); of the points at one written
    instant the last, and of those each whose written value differs from the one before, a line."""
    lines = []
    padded = {"aiv0": "aiv00", "aiv1": "aiv01", "aic0": "aic00"}
    for die, unit, buffer in sorted({(s.die, padded[s.unit], s.buffer) for s in spans}):
        if selection.dies is not None and die not in selection.dies:
            continue
        points = sorted(p for s in spans if (s.die, padded[s.unit], s.buffer) == (die, unit, buffer) for p in ((s.start_ps, 1, s.bytes), (s.end_ps, 0, 0)))
        if selection.window_ps is not None:
            low, high = selection.window_ps
            before = [p for p in points if p[0] <= low]
            points = ([(low, *before[-1][1:])] if before else []) + [p for p in points if low < p[0] <= high]
        at_instant = {chrome._ts(chrome.ns_of(t)): f"{b / 1024:.3f}" for t, _, b in points}  # the last point of each instant
        shown = [(ts, value) for i, (ts, value) in enumerate(at_instant.items()) if i == 0 or value != list(at_instant.values())[i - 1]]
        name = json.dumps(f"{unit} {buffer} KiB")
        lines += [f'{{"name":{name},"ph":"C","ts":{ts},"pid":{die},"args":{{"KiB":{value}}}}}' for ts, value in shown]
    return ",\n".join(lines).encode()


@settings(max_examples=60, deadline=None)
@given(SPANS, st.none() | st.frozensets(st.integers(0, 3)), st.none() | st.tuples(st.integers(0, 9000), st.integers(0, 9000)).map(sorted))
def test_buffer_counters_are_their_points_in_order_inside_the_selection(spans, dies, window):
    recorder = Recorder()
    for span in spans:
        recorder.buffer_span(span)
    selection = TraceSelection("all", None if dies is None else tuple(sorted(dies)), None if window is None else tuple(window))
    out = io.BytesIO()
    writer = chrome._Writer(SimpleNamespace(spec=SimpleNamespace(shape=SimpleNamespace(dies=4), die=SimpleNamespace(cores=CORES)), recorder=recorder),
                            out, 2048, selection)
    writer._buffer_counters()
    assert out.getvalue() == buffer_counter_lines(spans, selection)
