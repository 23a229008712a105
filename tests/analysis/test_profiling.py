"""op_summary.csv and pipe_utilization.csv: their columns, and their numbers add up to the trace."""

import contextlib
import csv
import io
import json
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import npusim
from npusim.analysis.profiling import (
    PIPE_UTILIZATION_COLUMNS,
    PIPES,
    CoreEvents,
    _distinct,
    csv_bytes,
    op_summary,
    op_summary_columns,
    pipe_utilization,
)
from npusim.trace.summary import records
from tests.trace.viewers import perfetto_ns

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def simulated(config, example, **params):
    with contextlib.redirect_stdout(io.StringIO()):
        return npusim.simulate(config, EXAMPLES / example, params=params, data=False)


@pytest.fixture(scope="module")
def allgather(tmp_path_factory):
    """A 4-PE PyPTO all-gather on a2 (tile ops on vector cores, AICPU schedulers) and its trace."""
    result = simulated("a2", "shmem_allgather.py", n_pes=4)
    trace = json.loads(result.write_trace(tmp_path_factory.mktemp("allgather") / "trace.json").read_text())
    return result, trace["traceEvents"]


def read_csv(data: bytes) -> list[dict]:
    return list(csv.DictReader(io.StringIO(data.decode())))


def test_the_csvs_have_msprof_column_names_and_one_row_per_launch_and_per_core(allgather):
    result, _ = allgather
    columns = op_summary_columns(result.record.spec)
    ops = read_csv(csv_bytes(columns, op_summary(result.record)))
    assert list(ops[0]) == columns
    assert columns[columns.index("aic_time(us)"):] == [  # msprof's names and order of an A2 op_summary's PipeUtilization columns, then memory_bound
        "aic_time(us)", "aic_total_cycles", "aic_mac_time(us)", "aic_mac_ratio", "aic_scalar_time(us)", "aic_scalar_ratio", "aic_mte1_time(us)",
        "aic_mte1_ratio", "aic_mte2_time(us)", "aic_mte2_ratio", "aic_fixpipe_time(us)", "aic_fixpipe_ratio", "aic_memory_bound",
        "aiv_time(us)", "aiv_total_cycles", "aiv_vec_time(us)", "aiv_vec_ratio", "aiv_scalar_time(us)", "aiv_scalar_ratio", "aiv_mte2_time(us)",
        "aiv_mte2_ratio", "aiv_mte3_time(us)", "aiv_mte3_ratio", "aiv_memory_bound", "dma_bytes",
        *(f"{kind}_{metric}" for kind in ("aic", "aiv") for metric in (  # msprof's L2Cache columns (one read channel: r0)
            "write_cache_hit", "write_cache_miss_allocate", "r0_read_cache_hit", "r0_read_cache_miss_allocate", "write_hit_rate(%)",
            "read_hit_rate(%)", "total_hit_rate(%)"))]
    assert {"Task Start Time(us)", "Task Duration(us)", "Task Wait Time(us)", "Block Dim", "Mix Block Dim"} <= set(ops[0])
    # one row per op launch, as msprof has one per task: each PE's kernel launch, with every op of the PE in it (not one per tile op)
    recorder = result.recorder
    assert len(recorder.ops) > 40
    launched = sorted({op.part_of for op in recorder.ops if op.part_of >= 0})
    assert len(launched) == 4 and all(recorder.ops[i].name == "allgather_kernel" and recorder.ops[i].part_of == -1 for i in launched)
    assert sorted(row["Op Name"] for row in ops) == sorted(f"allgather_kernel#{i}" for i in launched)
    assert sorted(int(row["Device_id"]) for row in ops) == [0, 1, 2, 3] and {row["Task Type"] for row in ops} == {"AI_VECTOR_CORE"}
    starts = [float(row["Task Start Time(us)"]) for row in ops]
    assert starts == sorted(starts)
    cores = read_csv(csv_bytes(PIPE_UTILIZATION_COLUMNS, pipe_utilization(result.record)))
    assert list(cores[0]) == PIPE_UTILIZATION_COLUMNS
    used = {(t.die, t.unit) for t in result.recorder.tracks if t.unit.startswith("aiv")}
    assert {(int(row["Device_id"]), row["core"]) for row in cores} == used


def slices_of_launches(result, events):
    """The trace's instruction slices by op launch (``name#id`` of the launch an op is part of):
    (lane name, start ns, end ns, name)."""
    lanes = {(e["pid"], e["tid"]): e["args"]["name"] for e in events if e.get("name") == "thread_name"}
    ops = result.recorder.ops
    by_launch = {}
    for e in events:
        if e["ph"] == "X" and "op" in e.get("args", {}):
            op_id = int(e["args"]["op"].split("#")[1])
            launch = ops[op_id].part_of if ops[op_id].part_of >= 0 else op_id
            start = perfetto_ns(e["ts"])
            by_launch.setdefault(f"{ops[launch].name}#{launch}", []).append((lanes[(e["pid"], e["tid"])], start, start + perfetto_ns(e["dur"]), e["name"]))
    return by_launch


def test_launch_durations_cycles_and_pipe_times_add_up_to_the_trace_slices(allgather):
    result, events = allgather
    by_launch = slices_of_launches(result, events)
    waits = {result.recorder.names[i] for i in result.recorder.wait_names}
    clock_hz = result.record.spec.die.clock.hz
    for row in op_summary(result.record):
        slices = by_launch[row["Op Name"]]
        span = max(end for _, _, end, _ in slices) - min(start for _, start, _, _ in slices)
        assert row["Task Duration(us)"] * 1e3 == pytest.approx(span, abs=1)  # the trace's times are on the ns grid
        on_cores = [s for s in slices if s[0].startswith("aiv")]
        assert row["Block Dim"] == len({lane.split()[0] for lane, _, _, _ in on_cores}) == 48 and row["Mix Block Dim"] == 0
        per_core = {}
        for lane, start, end, _ in on_cores:
            first, last = per_core.get(lane.split()[0], (start, end))
            per_core[lane.split()[0]] = (min(first, start), max(last, end))
        executed_ns = sum(b - a for a, b in per_core.values())
        assert row["aiv_time(us)"] * 1e3 == pytest.approx(executed_ns / len(per_core), abs=1)
        assert row["aiv_total_cycles"] == pytest.approx(executed_ns * clock_hz / 1e9, abs=len(per_core) * 2)  # msprof's: cycles of every core
        for pipe, short in PIPES:
            if pipe not in ("SCALAR", "VECTOR", "MTE2", "MTE3"):
                assert f"aiv_{short}_time(us)" not in row  # a vector core has no such pipe: no column
                continue
            busy = sum(end - start for lane, start, end, name in on_cores if lane.endswith(f" {pipe}") and name not in waits)
            assert row[f"aiv_{short}_time(us)"] * row["Block Dim"] * 1e3 == pytest.approx(busy, abs=len(on_cores) + 1)
            assert 0 <= row[f"aiv_{short}_ratio"] <= 1
            assert row[f"aiv_{short}_ratio"] == pytest.approx(row[f"aiv_{short}_time(us)"] / row["aiv_time(us)"], abs=1e-5)
        assert row["aiv_vec_ratio"] == 0 and row["aiv_memory_bound"] == ""  # an all-gather computes nothing: mte2 / 0 is not a number
        assert all(value == "" for column, value in row.items() if column.startswith("aic_"))  # it ran on no cube core


def test_task_types_are_msprofs_names():
    from npusim.analysis.profiling import _task_type, _unit_kind

    assert [_unit_kind(unit) for unit in ("aiv3", "aicpu1", "aicpu control", "sdma", "rdma", "host")] == ["aiv", "aicpu", "aicpu", "sdma", "rdma", "host"]
    pipes = {"aic": {"CUBE", "MTE2"}, "aiv": {"VECTOR", "MTE2"}}
    assert _task_type(set(), pipes, {"aicpu"}) == "AI_CPU"  # an AICPU's scheduler and control lanes alike: not "AICPU CONTROL"
    assert [_task_type(kinds, pipes, set()) for kinds in ({"aic"}, {"aiv"}, {"aic", "aiv"})] == ["AI_CORE", "AI_VECTOR_CORE", "MIX_AIC"]


def test_task_wait_time_is_the_gap_since_the_launches_before_on_the_die():
    result = simulated("a2", "allgather_matmul.py", n_pes=4)  # four of the eight dies: the ranks end apart, so some launches wait
    ends: dict[int, float] = {}
    gaps = 0
    rows = op_summary(result.record)
    assert {row["OP Type"] for row in rows} == {"allgather_matmul_kernel", "matmul_kernel"}
    for row in rows:
        die, start = row["Device_id"], row["Task Start Time(us)"]
        expected = max(0.0, start - ends[die]) if die in ends else 0.0
        assert row["Task Wait Time(us)"] == pytest.approx(expected, abs=1e-6)
        gaps += row["Task Wait Time(us)"] > 0
        ends[die] = max(ends.get(die, 0.0), start + row["Task Duration(us)"])
    assert gaps  # the dies wait between some of their launches


def test_pipe_utilization_adds_up_to_the_summary_pipes_and_its_ratios_mean_op_summarys(allgather):
    result, _ = allgather
    rows = pipe_utilization(result.record)
    for pipe_row in records(result.summary["pipes"]):
        short = dict(PIPES).get(pipe_row["pipe"])
        if short is None:  # an AICPU lane, not a core's pipe
            continue
        times = [row[f"{short}_time(us)"] for row in rows if row["Device_id"] == pipe_row["die"] and row[f"{short}_time(us)"] != ""]
        assert sum(times) == pytest.approx(pipe_row["busy_us"], abs=1e-5)
    # one launch per core here: a core's row is its share of the launch's row, with the same meaning of time and ratio
    launches = {row["Device_id"]: row for row in op_summary(result.record)}
    for die, launch in launches.items():
        cores = [row for row in rows if row["Device_id"] == die]
        assert all(row["ops"] == 1 for row in cores)
        assert sum(row["time(us)"] for row in cores) / len(cores) == pytest.approx(launch["aiv_time(us)"], abs=1e-5)
        assert sum(row["total_cycles"] for row in cores) == pytest.approx(launch["aiv_total_cycles"], abs=len(cores))
        mte2 = sum(row["mte2_time(us)"] for row in cores) / sum(row["time(us)"] for row in cores)
        assert mte2 == pytest.approx(launch["aiv_mte2_ratio"], abs=1e-5)  # busy over the cores' execution time, in both
        for row in cores:
            assert row["mte2_ratio"] == pytest.approx(row["mte2_time(us)"] / row["time(us)"], abs=1e-6) and 0 <= row["mte2_ratio"] <= 1


def test_a_cores_time_counts_each_instant_it_ran_a_launch_once(allgather):
    """A core's execution time is the union of its launches' executions (gaps and overlaps once)."""
    result, _ = allgather
    events = CoreEvents(result.record)
    events.pair_core = np.array([0, 0, 0, 1, 1], dtype=np.int64)
    events.pair_first = np.array([0, 5, 20, 10, 0], dtype=np.int64)
    events.pair_last = np.array([10, 8, 30, 12, 3], dtype=np.int64)
    events.cores = events.cores[:3]
    assert events.core_time_ps().tolist() == [20, 5, 0]  # core 0: [0, 10] with [5, 8] inside, then [20, 30]; core 1: [0, 3] and [10, 12]


def test_memory_bound_is_msprofs_mte2_over_the_busiest_compute_pipe():
    from npusim.analysis.profiling import _memory_bound

    assert _memory_bound({"CUBE": 0.2, "MTE2": 0.5}) == 2.5 and _memory_bound({"VECTOR": 0.5, "MTE2": 0.25}) == 0.5
    assert _memory_bound({"CUBE": 0.1, "VECTOR": 0.4, "MTE2": 0.2}) == 0.5  # 300I Duo AI cores have both
    assert _memory_bound({"VECTOR": 0.0, "MTE2": 0.3}) == "" and _memory_bound({"VECTOR": 0.3}) == ""


def test_an_aclnn_op_lists_its_input_and_output_shapes_and_dtypes():
    result = simulated("a2", "kv_cache_quant_scatter.py")
    first = op_summary(result.record)[0]
    assert first["OP Type"] == "QuantUpdateScatter" and first["Task Type"] == "AI_VECTOR_CORE"
    assert first["Input Shapes"] == "24;24,1,128;1,1,128;1,1,128" and first["Input Data Types"] == "int32;bfloat16;bfloat16;bfloat16"
    assert first["Output Shapes"] == "24,4096,128" and first["Output Data Types"] == "int8"  # the cache it writes in place
    assert first["Block Dim"] == 24 and first["dma_bytes"] > 0


def test_a_launch_of_cube_and_vector_tile_ops_is_mix_aic_with_both_kinds_columns():
    result = simulated("a2", "pypto_matmul_add.py", m=128, k=256, n=256)
    (row,) = op_summary(result.record)
    assert row["OP Type"] == "matmul_add_kernel" and row["Task Type"] == "MIX_AIC"
    assert row["aic_mac_ratio"] > 0 and row["aiv_vec_ratio"] > 0 and row["Block Dim"] > 0 and row["Mix Block Dim"] > 0
    assert row["aic_memory_bound"] == pytest.approx(row["aic_mte2_ratio"] / row["aic_mac_ratio"], abs=1e-5)


def test_an_empty_run_has_only_headers():
    with npusim.session("a2") as s:
        pass
    assert csv_bytes(op_summary_columns(s.result.record.spec), op_summary(s.result.record)).decode().count("\n") == 1
    assert pipe_utilization(s.result.record) == [] and np.isfinite(s.result.simulated_ps)


def test_an_op_on_two_kinds_of_core_counts_each_kind_and_has_each_kinds_columns():
    result = simulated("atlas-300i-duo", "atlas_300i_duo.py")
    columns = op_summary_columns(result.record.spec)
    assert "aicore_mac_ratio" in columns and "vectorcore_time(us)" in columns and "vectorcore_mac_ratio" not in columns
    row = next(row for row in op_summary(result.record) if row["OP Type"] == "scale_add")
    assert row["Task Type"] == "MIX_AIC"  # on the AI cores (with a cube) and the vector cores
    recorder, events = result.recorder, result.recorder.columns()
    units = {recorder.tracks[track].unit for track, op in zip(events["track"].tolist(), events["op"].tolist()) if op == int(row["Op Name"].split("#")[1])}
    used = {(unit.rstrip("0123456789"), unit) for unit in units}
    assert row["Block Dim"] == sum(kind == "aicore" for kind, _ in used) and row["Mix Block Dim"] == sum(kind == "vectorcore" for kind, _ in used) > 0
    assert row["aicore_mte2_ratio"] > 0 and row["vectorcore_mte2_ratio"] > 0


def test_both_tables_from_one_pass_over_the_events_are_the_tables_of_the_run(allgather):
    result, _ = allgather
    events = CoreEvents(result.record)
    assert op_summary(result.record, events) == op_summary(result.record) == op_summary(result.record, events, result.summary["ops"])
    assert pipe_utilization(result.record, events) == pipe_utilization(result.record)


def test_a_csv_row_lacking_a_column_is_refused():
    with pytest.raises(KeyError):
        csv_bytes(["a", "b"], [{"a": 1}])


@given(st.lists(st.integers(-2**62, 2**62)))
def test_the_distinct_values_are_numpys_unique_values(values):
    array = np.array(values, dtype=np.int64)
    assert _distinct(array).tolist() == np.unique(array).tolist()


@given(st.dictionaries(st.tuples(st.integers(-1, 12), st.sampled_from(["aiv", "aic", "sdma"])),
                       st.lists(st.floats(0, 1e6, allow_nan=False) | st.integers(0, 10**6).map(float), min_size=5, max_size=5), max_size=40),
       st.lists(st.integers(0, 5), min_size=11, max_size=11))
def test_a_launchs_l2_lines_are_its_ops_summed_in_op_order(ops, parts):
    """profiling._l2_of_launches (numpy's add.at) gives the sums, to the bit, of a loop over the
    (op, kind) rows in order: per launch and kind, each op's counts added to the total so far."""
    from types import SimpleNamespace

    from npusim.analysis.profiling import _l2_of_launches

    launch_of = np.array([*parts, 11], dtype=np.int64)  # 11 ops in launches 0..5; the last: events of no op
    expected: dict[int, dict[str, list[float]]] = {}
    for (op, kind), counts in sorted(ops.items()):
        if 0 <= op < 11:
            of_kind = expected.setdefault(int(launch_of[op]), {})
            of_kind[kind] = list(counts) if kind not in of_kind else [a + b for a, b in zip(of_kind[kind], counts)]
    assert _l2_of_launches(SimpleNamespace(l2=SimpleNamespace(ops=ops)), launch_of) == expected
