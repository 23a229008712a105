"""Trace selections (``--trace``, ``--trace-dies``, ``--trace-window``): parsing and bad input, and
filtered traces that are valid and hold only what was asked."""

import contextlib
import io
import json
from pathlib import Path

import pytest

import npusim
from npusim.errors import UsageError
from npusim.frontend.workload import run_workload_file
from npusim.trace.chrome import write_chrome_trace
from npusim.trace.selection import TraceSelection, parse_trace_dies, parse_trace_window, trace_selection
from tests.trace.viewers import perfetto_ns, viewer_problems

ALLGATHER = Path(__file__).resolve().parents[2] / "examples" / "shmem_allgather.py"


def test_die_ranges_and_windows_parse():
    assert parse_trace_dies("0-3,6,5", 8) == (0, 1, 2, 3, 5, 6)
    assert parse_trace_dies(None, 8) is None
    assert parse_trace_window("10us:50us") == (10_000_000, 50_000_000)
    assert parse_trace_window("0:1.5us") == (0, 1_500_000)
    assert parse_trace_window("2ns:")[0] == 2_000 and parse_trace_window(":2ns") == (0, 2_000)


@pytest.mark.parametrize("dies, message", [("0-8", "outside the dies of the config, 0-7"), ("3-1", "high to low"),
                                           ("a", "'a' is not a die index or a range")])
def test_bad_die_ranges_are_refused(dies, message):
    with pytest.raises(UsageError, match=message):
        parse_trace_dies(dies, 8)


@pytest.mark.parametrize("window, message", [("10us", "write START:END"), ("5us:1us", "start is after the end"),
                                             ("10:20us", "missing unit"), ("1 cycles:2us", "in cycles")])
def test_bad_windows_are_refused(window, message):
    with pytest.raises(UsageError, match=message):
        parse_trace_window(window)


def test_an_unknown_level_is_refused():
    with pytest.raises(UsageError, match="choose one of all, ops, none"):
        trace_selection("some", die_count=8)


@pytest.fixture(scope="module")
def run():
    """A 4-PE all-gather on a2, timing only: events on 4 dies, flows, counters."""
    with contextlib.redirect_stdout(io.StringIO()):
        with npusim.session("a2", data=False, params={"n_pes": 4}) as s:
            run_workload_file(ALLGATHER)
    return s.result


def written(run, tmp_path, selection):
    path = write_chrome_trace(run.record, tmp_path / "trace.json", selection=selection)
    return json.loads(path.read_text())


def test_the_default_selection_writes_the_whole_trace(run, tmp_path):
    whole = write_chrome_trace(run.record, tmp_path / "a.json").read_bytes()
    assert write_chrome_trace(run.record, tmp_path / "b.json", selection=TraceSelection()).read_bytes() == whole
    assert "trace_selection" not in json.loads(whole)["otherData"]


def test_a_die_selection_keeps_only_those_dies(run, tmp_path):
    trace = written(run, tmp_path, TraceSelection(dies=(1, 2)))
    events = trace["traceEvents"]
    assert {e["pid"] for e in events} == {1, 2}
    slices = [e for e in events if e["ph"] == "X" and e["name"] != "release"]
    assert trace["otherData"]["trace_selection"]["events_written"] == len(slices) < len(run.recorder)
    assert_flows_are_paired(events)
    assert viewer_problems(events) == []


def test_a_window_keeps_what_overlaps_it(run, tmp_path):
    low, high = 10.0, 20.0
    trace = written(run, tmp_path, TraceSelection(window_ps=(10_000_000, 20_000_000)))
    events = trace["traceEvents"]
    slices = [e for e in events if e["ph"] == "X" and e["name"] != "release"]  # a release is part of its wait
    assert slices and all(perfetto_ns(e["ts"]) <= high * 1000 and perfetto_ns(e["ts"]) + perfetto_ns(e["dur"]) >= low * 1000 for e in slices)
    counters = [e for e in events if e["ph"] == "C"]
    assert counters and all(low <= e["ts"] <= high for e in counters)
    assert min(e["ts"] for e in counters) == low  # each counter starts with its value at the window's start
    assert_flows_are_paired(events)
    assert viewer_problems(events) == []
    assert trace["otherData"]["trace_selection"]["window_us"] == [10.0, 20.0]


def test_the_ops_level_writes_one_slice_per_op_and_core(run, tmp_path):
    trace = written(run, tmp_path, TraceSelection(level="ops", dies=(0,)))
    slices = [e for e in trace["traceEvents"] if e["ph"] == "X"]
    assert slices and {e["pid"] for e in slices} == {0}
    keys = [(e["args"]["op"], e["tid"]) for e in slices]
    assert len(keys) == len(set(keys))  # one slice per op and core
    table = run.recorder.columns()
    on_die0 = [i for i, t in enumerate(table["track"]) if run.recorder.tracks[t].die == 0 and table["op"][i] >= 0]
    assert sum(e["args"]["instructions"] for e in slices) == len(on_die0)
    assert not [e for e in trace["traceEvents"] if e["ph"] in ("s", "f", "C")]
    assert viewer_problems(trace["traceEvents"]) == []


def assert_flows_are_paired(events):
    """Every flow arrow has its start and its end, each on a kept slice's lane."""
    lanes = {(e["pid"], e["tid"]) for e in events if e["ph"] == "X"}
    starts = {e["id"]: e for e in events if e["ph"] == "s"}
    ends = {e["id"]: e for e in events if e["ph"] == "f"}
    assert starts.keys() == ends.keys()
    assert all((e["pid"], e["tid"]) in lanes for e in (*starts.values(), *ends.values()))
