"""Every example's trace as Perfetto and speedscope import it (``tests/trace/viewers.py`` replays
their rules): no slice dropped, set aside or mis-nested, every arrow bound at both ends and forward
in time. And the replay itself finds what the viewers would get wrong."""

import contextlib
import io
import json
from pathlib import Path

import pytest

import npusim
from npusim.trace.chrome import write_chrome_trace
from npusim.trace.selection import TraceSelection
from tests.trace.viewers import perfetto_import, perfetto_ns, speedscope_import, viewer_problems

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"

CASES = [  # (example, config, params): every example, with parameters that keep it fast where it is slow
    ("vector_add.py", "a2", {}),
    ("kv_cache_quant_scatter.py", "a2", {}),
    ("quant_scatter_doc_example2.py", "a2", {}),
    ("shmem_allgather.py", "a2", {}),
    ("shmem_allreduce.py", "a2", {}),
    ("pypto_matmul_add.py", "a2", {"m": 128, "k": 256, "n": 256}),
    ("allgather_matmul.py", "a2", {"n_pes": 4, "rows": 16, "k": 256, "n": 256}),
    ("atlas_300i_duo.py", "atlas-300i-duo", {}),
    ("moe_dispatch.py", "a2", {"ep": 4, "groups": 2, "tokens": 2, "hidden": 64}),
    ("hierarchical_allgather.py", "a3", {"n_pes": 8, "local": 4, "rows": 2, "cols": 64}),
    ("moe_dispatch_combine.py", "a2", {"ranks": 4, "batch": 4, "hidden": 64, "experts": 8, "topk": 2}),
    ("shmem_allgather.py", "a3", {"rows": 16, "cols": 512, "tile_rows": 8}),  # the 16 dies of an a3 node, UB links and SIO
    ("pypto_collectives.py", "a2", {"case": "reduce_scatter_bf16"}),
    ("torch_gemm.py", "a2", {"m": 64, "k": 256, "n": 96}),
    ("hccl_allreduce.py", "a2", {"mib": 1.0}),
    ("torch_tensor_parallel.py", "a2", {"tokens": 32, "hidden": 512, "ffn": 1024}),
    ("torch_mc2.py", "a2", {"m": 256, "k": 128, "n": 256, "ranks": 2}),
    ("moe_decode_layer.py", "a3", {"ep": 4, "tokens": 8, "hidden": 1024, "intermediate": 128}),
]
KNOWN_DEFECTS: dict[str, str] = {}
"""Examples whose trace a viewer does not import whole yet (the test fails once one is fixed: strict)."""
WITH_DATA = {"moe_dispatch_combine.py"}  # reads token counts on the device: no timing-only run
"""Examples that run with data (the others timing only, faster)."""


def test_every_example_is_listed():
    assert {example for example, _, _ in CASES} == {path.name for path in EXAMPLES.glob("*.py")}


@pytest.mark.parametrize("example, config, params", CASES, ids=[f"{case[0]}-{case[1]}" for case in CASES])
def test_viewers_import_every_slice_and_arrow_of_the_example(example, config, params, tmp_path, request):
    if example in KNOWN_DEFECTS:
        request.applymarker(pytest.mark.xfail(strict=True, reason=KNOWN_DEFECTS[example]))
    with contextlib.redirect_stdout(io.StringIO()):
        result = npusim.simulate(config, EXAMPLES / example, params=params, data=example in WITH_DATA)
    path = result.write_trace(tmp_path / "trace.json")
    events = json.loads(path.read_text())["traceEvents"]
    assert viewer_problems(events) == []
    assert sum(e["ph"] == "X" and e["name"] not in ("release", "arrive") for e in events) == len(result.recorder)


@pytest.mark.parametrize("selection", [TraceSelection(level="ops"), TraceSelection(window_ps=(10_000_000, 20_000_000)), TraceSelection(dies=(0, 1, 2, 3))],
                         ids=["ops", "window", "dies"])
def test_viewers_import_every_slice_and_arrow_of_a_partial_trace(selection, tmp_path):
    with contextlib.redirect_stdout(io.StringIO()):
        result = npusim.simulate("a3", EXAMPLES / "shmem_allgather.py", params={"rows": 16, "cols": 512, "tile_rows": 8}, data=False)
    events = json.loads(write_chrome_trace(result.record, tmp_path / "trace.json", selection=selection).read_text())["traceEvents"]
    assert any(e["ph"] == "X" for e in events) and viewer_problems(events) == []


# -- the replay finds what goes wrong ---------------------------------------------------------

def slice_(name, ts, dur, tid=1, **more):
    return {"name": name, "ph": "X", "ts": ts, "dur": dur, "pid": 0, "tid": tid, **more}


def flow(phase, flow_id, ts, tid=1):
    return {"ph": phase, "id": flow_id, "name": "flag", "ts": ts, "pid": 0, "tid": tid, **({"bp": "e"} if phase == "f" else {})}


def test_perfetto_rounds_ts_and_dur_each_to_whole_nanoseconds():
    assert [perfetto_ns(v) for v in (0, 3, 0.0004, 0.0005, 0.0015, 0.002999, 12.3456)] == [0, 3000, 0, 1, 2, 3, 12346]


def test_picosecond_slices_that_touch_overlap_once_rounded():
    # 0.6 ns + 1.6 ns: Perfetto ends the first at 1 + 2 = 3 ns; the second starts at round(2.2) = 2 ns
    events = [slice_("a", 0.0006, 0.0016), slice_("b", 0.0022, 0.002)]
    imported = perfetto_import(events)
    assert [s.name for s in imported.overlapping] == ["b"]
    assert viewer_problems(events)[0].startswith("1 slices overlap a neighbour in Perfetto")


def test_a_flow_end_before_its_start_is_dropped_and_a_turned_arrow_is_found():
    events = [slice_("set", 2, 1), slice_("wait", 1, 3, tid=2), flow("s", 1, 2.5), flow("f", 1, 1.5, tid=2)]
    assert len(perfetto_import(events).ended_before_start) == 1
    events[-1]["ts"] = 3.5  # bound inside the wait, which started before the set: Perfetto turns the arrow around
    imported = perfetto_import(events)
    assert imported.backwards() == [(1, "flag")] and imported.drawn_backwards() == [(1, "flag")]


def test_floating_point_ends_mis_nest_in_speedscope():
    # 0.1 + 0.2 > 0.3 in floating point: the second slice starts before the first ends
    events = [slice_("a", 0.1, 0.2, args={"k": 1}), slice_("b", 0.3, 0.1), slice_("c", 0, 0.1)]
    imported = speedscope_import(events)
    assert imported.depth[1] == 1 and imported.warnings
    assert any("mis-nested in speedscope" in problem for problem in viewer_problems(events))


def test_a_child_slice_belongs_inside_the_slice_written_before_it():
    inside = [slice_("wait_flag X", 1, 2.999), slice_("release", 3, 0.000998), slice_("SyncAll", 5, 2.999), slice_("arrive", 5, 0.000998)]
    assert viewer_problems(inside) == []
    elsewhere = [slice_("scalar", 1, 2.999), slice_("wait_flag X", 5, 1), slice_("release", 3, 0.000998)]
    assert any("mis-nested in Perfetto" in problem for problem in viewer_problems(elsewhere))
    assert any("mis-nested in speedscope" in problem for problem in viewer_problems(elsewhere))
