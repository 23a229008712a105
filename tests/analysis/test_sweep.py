"""Sweeps from Python: local processes and a Dask LocalCluster give the same results; a failing
point is recorded; an interrupted sweep resumes without redoing finished points; everything is
checked before any point runs."""

import csv
import json
import math
import sys

import distributed
import pytest

from npusim.analysis import run_sweep, sweep
from npusim.engine import engine_record
from npusim.errors import ConfigError, UnknownParameterError, UsageError
from tests.analysis.workloads import HBM_BOUND_COPY, write

GRID = {"die.hbm.bandwidth": ["1.6 TB/s", "3.2 TB/s"], "param.tile": [16384, 32768]}


@pytest.fixture
def copy_workload(tmp_path):
    return write(tmp_path, "copy.py", HBM_BOUND_COPY)


def rows_of(path):
    with open(path, newline="") as handle:
        return list(csv.DictReader(handle))


def test_local_processes_and_a_dask_cluster_give_the_same_results(copy_workload):
    local = run_sweep("a2", copy_workload, GRID, data=False, workers=2, progress=False)
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster:
        remote = run_sweep("a2", copy_workload, GRID, data=False, scheduler=cluster.scheduler_address, progress=False)
    assert remote.where.startswith("the Dask cluster at tcp://")
    assert [r["status"] for r in local.rows] == ["ok"] * 4
    assert [(r["key"], r["simulated_us"], r["bottleneck"]) for r in local.rows] == [(r["key"], r["simulated_us"], r["bottleneck"]) for r in remote.rows]
    times = {(r["die.hbm.bandwidth"], r["param.tile"]): r["simulated_us"] for r in local.rows}
    assert times[("3.2 TB/s", 32768)] < times[("1.6 TB/s", 32768)]  # the swept value reached the simulation


def test_a_failing_point_is_recorded_and_the_others_complete(copy_workload, tmp_path):
    out = tmp_path / "out"
    outcome = run_sweep("a2", copy_workload, {"param.tile": [16384, 32768]}, params={"fail_tile": "32768"}, data=False,
                        workers=2, out=out, progress=False)
    assert (outcome.ran, outcome.reused, outcome.failed) == (2, 0, 1)
    ok, failed = outcome.rows
    assert ok["status"] == "ok" and ok["simulated_us"] > 0 and ok["bottleneck"] == "MTE2 waiting on die0 HBM" and ok["util_hbm"] > 0.4
    assert failed["status"] == "failed" and failed["error_type"] == "ValueError" and failed["error"] == "tile 32768 is the failing value"
    assert math.isnan(failed["simulated_us"])
    exits = write(tmp_path, "exits.py", "import sys\nsys.exit('the workload gave up')\n")
    (quits,) = run_sweep("a2", exits, {"die.hbm.bandwidth": ["1 TB/s"]}, data=False, workers=1, progress=False).rows
    assert (quits["status"], quits["error_type"], quits["error"]) == ("failed", "WorkloadError", "the workload exited with sys.exit: the workload gave up")
    ends = write(tmp_path, "ends.py", "import sys\nsys.exit(0)\n")
    (ended,) = run_sweep("a2", ends, {"die.hbm.bandwidth": ["1 TB/s"]}, data=False, workers=1, progress=False).rows
    assert ended["status"] == "ok"  # sys.exit(0) ends a workload normally
    assert sorted(row["status"] for row in rows_of(out / "results.csv")) == ["failed", "ok"]  # in the order they finished
    assert set(outcome.files) == {"csv", "parquet", "plot", "manifest"} and all(path.exists() for path in outcome.files.values())
    manifest = json.loads((out / "sweep.json").read_text())
    assert manifest["grid"] == {"param.tile": ["16384", "32768"]} and manifest["params"] == {"fail_tile": "32768"} and manifest["points"] == 2
    engine = engine_record()  # which engine ran: the sweep's in its manifest, each point's (its worker's) in its row
    assert {key: manifest[key] for key in engine} == engine and ok["engine"] == failed["engine"] == engine["engine"]
    assert (out / "simulated_time.png").read_bytes()[:4] == b"\x89PNG"


def test_an_interrupted_sweep_resumes_without_redoing_finished_points(copy_workload, tmp_path):
    out, fixed = tmp_path / "out", {"fail_tile": "32768"}
    first = run_sweep("a2", copy_workload, {"die.hbm.bandwidth": ["1.6 TB/s"], "param.tile": [16384, 32768]}, params=fixed,
                      data=False, workers=2, out=out, progress=False)
    assert (first.ran, first.failed) == (2, 1)
    # The sweep of the whole grid was interrupted after these two points, in the middle of a third row.
    results = out / "results.csv"
    text = results.read_text().replace(f",{first.rows[0]['wall_s']!r},", ",123.0,")
    results.write_text(text + first.rows[0]["key"][:5])
    with pytest.raises(UsageError, match="add --resume"):
        run_sweep("a2", copy_workload, GRID, params=fixed, data=False, workers=2, out=out, progress=False)
    resumed = run_sweep("a2", copy_workload, GRID, params=fixed, data=False, workers=2, out=out, resume=True, progress=False)
    assert (resumed.ran, resumed.reused, resumed.failed) == (3, 1, 2)  # the failed point is simulated again
    assert resumed.rows[0]["wall_s"] == 123.0 and resumed.rows[0]["simulated_us"] == first.rows[0]["simulated_us"]
    recorded = rows_of(results)
    assert len(recorded) == 2 + 3 and [row["key"] for row in recorded].count(first.rows[1]["key"]) == 2
    again = run_sweep("a2", copy_workload, GRID, params=fixed, data=False, workers=2, out=out, resume=True, progress=False)
    assert (again.ran, again.reused) == (2, 2) and len(rows_of(results)) == 5 + 2  # only the failed ones


def test_a_typo_in_a_key_fails_the_whole_sweep_before_anything_runs(copy_workload, tmp_path):
    grid = {"die.hbm.bandwith": ["1.6 TB/s", "3.2 TB/s"], "die.l2.bandwidth": ["0 TB/s"], "param.tile": [16384]}
    with pytest.raises(ConfigError) as error:
        run_sweep("a2", copy_workload, grid, data=False, out=tmp_path / "out", progress=False)
    message = str(error.value)
    assert "--grid die.hbm.bandwith=1.6 TB/s: die.hbm.bandwith: unknown key 'bandwith'; did you mean 'bandwidth'?" in message
    assert "--grid die.l2.bandwidth=0 TB/s: die.l2.bandwidth: '0 TB/s' must be positive" in message
    assert not (tmp_path / "out").exists()


def test_a_grid_value_the_engine_cannot_take_fails_the_sweep_before_anything_runs(copy_workload, tmp_path):
    with pytest.raises(ConfigError, match=r"^--grid die.aicpu.poll_interval=0.1 ps: die.aicpu.poll_interval: '0.1 ps' is 0.1 ps, which rounds to 0"):
        run_sweep("a2", copy_workload, {"die.aicpu.poll_interval": ["1 us", "0.1 ps"]}, data=False, out=tmp_path / "out", progress=False)
    assert not (tmp_path / "out").exists()


def test_a_seed_numpy_does_not_take_fails_the_sweep_before_anything_runs(copy_workload, tmp_path):
    with pytest.raises(UsageError, match=r"^seed -1: give a whole number from 0 to 4294967295"):
        run_sweep("a2", copy_workload, {"param.tile": [16384]}, seed=-1, data=False, out=tmp_path / "out", progress=False)
    assert not (tmp_path / "out").exists()


def test_parameters_are_checked_by_reading_the_workload(copy_workload, tmp_path):
    with pytest.raises(UsageError, match=r"parameter tile='big': expected a int like its default 32768"):
        run_sweep("a2", copy_workload, {"param.tile": [16384, "big"]}, data=False, progress=False)
    with pytest.raises(UsageError, match=r"param.tile is both fixed \(--set / --param\) and swept"):
        run_sweep("a2", copy_workload, {"param.tile": [16384]}, params={"tile": "8192"}, data=False, progress=False)
    with pytest.raises(UsageError, match="die.hbm.bandwidth is both fixed"):
        run_sweep("a2", copy_workload, {"die.hbm.bandwidth": ["1 TB/s"]}, overrides=["die.hbm.bandwidth=2 TB/s"], data=False, progress=False)


def test_a_name_the_declaration_pass_cannot_see_is_checked_by_the_first_point(tmp_path):
    (tmp_path / "helper.py").write_text("import npusim\n\ndef size():\n    return npusim.param('size', 4)\n")
    workload = write(tmp_path, "uses_helper.py", "import helper\nhelper.size()\n")
    outcome = run_sweep("a2", workload, {"param.size": [1, 2, 3]}, data=False, workers=2, out=tmp_path / "ok", progress=False)
    assert [row["status"] for row in outcome.rows] == ["ok"] * 3
    with pytest.raises(UnknownParameterError, match=r"no parameter 'sise' \(did you mean 'size'\?\)"):
        run_sweep("a2", workload, {"param.sise": [1, 2, 3]}, data=False, workers=2, out=tmp_path / "typo", progress=False)
    assert not (tmp_path / "typo").exists()  # nothing recorded: the sweep can be run again as it is


def test_the_dataframe_has_one_typed_row_per_point(copy_workload):
    frame = sweep("a2", copy_workload, GRID, data=False, workers=2, progress=False)
    assert len(frame) == 4 and list(frame["param.tile"]) == [16384, 32768, 16384, 32768]
    assert frame["simulated_us"].dtype == float and (frame["status"] == "ok").all()
    assert frame.attrs["ran"] == 4 and frame.attrs["failed"] == 0


def test_missing_optional_packages_are_named_with_the_extra_to_install(copy_workload, monkeypatch):
    monkeypatch.setitem(sys.modules, "distributed", None)
    with pytest.raises(UsageError, match=r"needs Dask distributed, which is not installed; install it with: pip install 'npusim\[cluster\]'"):
        run_sweep("a2", copy_workload, {"param.tile": [16384]}, data=False, scheduler="tcp://127.0.0.1:8786", progress=False)
    monkeypatch.setitem(sys.modules, "pandas", None)
    with pytest.raises(UsageError, match=r"pip install 'npusim\[analysis\]'"):
        sweep("a2", copy_workload, {"param.tile": [16384]}, data=False, progress=False)


def test_worker_counts_and_scheduler_addresses_are_checked(copy_workload):
    with pytest.raises(UsageError, match="workers=0: give a whole number of worker processes, 1 or more"):
        run_sweep("a2", copy_workload, {"param.tile": [16384]}, data=False, workers=0, progress=False)
    with pytest.raises(UsageError, match="--scheduler '127.0.0.1:8786': give the scheduler's address, e.g. tcp://"):
        run_sweep("a2", copy_workload, {"param.tile": [16384]}, data=False, scheduler="127.0.0.1:8786", progress=False)


def test_progress_off_a_terminal_is_plain_lines_at_most_every_few_seconds():
    import io

    from rich.console import Console

    from npusim.analysis.sweep import PointProgress

    out = io.StringIO()
    with PointProgress("sweep of w.py", 5, console=Console(file=out, force_terminal=False, width=20)) as progress:
        for done in range(5):
            progress.finished(failed=done // 3)
    lines = out.getvalue().splitlines()
    assert lines == ["sweep of w.py: 5 points to simulate", lines[1]]  # the start, then the last point only (the others within every_s)
    assert lines[1].startswith("sweep of w.py: 5/5 points done, 1 failed, ") and "━" not in out.getvalue()
