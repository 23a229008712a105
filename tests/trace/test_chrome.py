"""The Chrome trace: valid for Perfetto, exact microsecond timestamps, byte-identical reruns."""

import json

import numpy as np

import npusim
from npusim import isa
from npusim.trace.chrome import _us, write_chrome_trace


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


def test_exact_microseconds():
    assert _us(0) == "0" and _us(1) == "0.000001" and _us(1_500_000) == "1.500000" and _us(3_000_000) == "3"


def test_trace_is_valid_chrome_json_with_named_lanes(tmp_path):
    path, result = run_small(tmp_path, "trace.json")
    trace = json.loads(path.read_text())
    events = trace["traceEvents"]
    names = {e["args"]["name"] for e in events if e.get("name") == "thread_name"}
    assert {"aiv0 MTE2", "aiv0 VECTOR", "aiv0 MTE3"} <= names
    complete = [e for e in events if e["ph"] == "X"]
    assert len(complete) == len(result.recorder)
    for e in complete:
        assert {"name", "ph", "ts", "dur", "pid", "tid"} <= e.keys() and e["dur"] >= 0
        assert e["args"]["op"] == "scale#0" and e["args"]["tile"] in range(4)
    counters = [e for e in events if e["ph"] == "C"]
    assert any(e["name"] == "die0 HBM GB/s" for e in counters)
    other = trace["otherData"]
    assert other["config"] == "a2" and other["trace_format"] == 2 and other["ops"][0]["name"] == "scale"


def test_no_two_events_overlap_on_one_lane(tmp_path):
    path, _ = run_small(tmp_path, "trace.json")
    lanes = {}
    for e in json.loads(path.read_text())["traceEvents"]:
        if e["ph"] == "X":
            lanes.setdefault((e["pid"], e["tid"]), []).append((float(e["ts"]), float(e["ts"]) + float(e["dur"])))
    for spans in lanes.values():
        spans.sort()
        for (_, end), (start, _) in zip(spans, spans[1:]):
            assert start >= end - 1e-9


def test_same_inputs_give_byte_identical_traces(tmp_path):
    first, _ = run_small(tmp_path, "a.json")
    second, _ = run_small(tmp_path, "b.json")
    assert first.read_bytes() == second.read_bytes()
    assert not list(tmp_path.glob("*.tmp"))  # written atomically


def test_missing_folders_of_the_trace_path_are_created(tmp_path):
    path, _ = run_small(tmp_path / "new" / "folder", "trace.json")
    assert path.is_file()
