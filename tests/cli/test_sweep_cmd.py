"""``npusim sweep`` and ``npusim whatif`` end to end, as a user runs them: outputs and exit codes."""

import csv
import os
import signal
import subprocess
import sys
import time

import pytest

from tests.analysis.workloads import LINK_BOUND_REMOTE_LOAD, write
from tests.cli.test_run import DEMO, ROOT, npusim


def test_a_sweep_with_a_failing_point_exits_0_and_writes_its_files(tmp_path):
    out = tmp_path / "out"
    run = npusim("sweep", "-c", "a2", DEMO, "--grid", "param.tile=16384,32768", "--grid", "param.double_buffer=true", "--no-data",
                 "--workers", "2", "--out", out, cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    assert "2 points simulated on 2 local worker processes; 1 failed" in run.stdout
    assert "━" not in run.stderr and ": 2/2 points done, 1 failed, " in run.stderr  # off a terminal: plain lines, no bar
    assert "failed (1 point): ResourceError: kernel 'vector_add' on die 0 aiv0: allocating 64.00 KiB in UB" in run.stdout
    lines = run.stdout.splitlines()
    first_ok = next(i for i, line in enumerate(lines) if "16384" in line and " ok " in line)
    assert first_ok < next(i for i, line in enumerate(lines) if "32768" in line and "failed" in line)  # sorted, failures last
    assert {p.name for p in out.iterdir()} == {"results.csv", "results.parquet", "simulated_time.png", "sweep.json"}
    with open(out / "results.csv", newline="") as handle:
        assert sorted(row["status"] for row in csv.DictReader(handle)) == ["failed", "ok"]

    again = npusim("sweep", "-c", "a2", DEMO, "--grid", "param.tile=16384,32768", "--grid", "param.double_buffer=true", "--no-data",
                   "--workers", "2", "--out", out, cwd=tmp_path)
    assert again.returncode == 2 and "add --resume" in again.stderr
    resumed = npusim("sweep", "-c", "a2", DEMO, "--grid", "param.tile=16384,32768", "--grid", "param.double_buffer=true", "--no-data",
                     "--workers", "2", "--out", out, "--resume", cwd=tmp_path)
    assert resumed.returncode == 0 and "1 point simulated on 2 local worker processes, 1 already in results.csv; 1 failed" in resumed.stdout


def test_every_point_failing_exits_1(tmp_path):
    run = npusim("sweep", "-c", "a2", DEMO, "--grid", "param.tile=32768,65536", "--no-data", "--out", tmp_path / "out", cwd=tmp_path)
    assert run.returncode == 1 and "every point failed" in run.stderr


def test_usage_and_config_errors_exit_2_before_anything_runs(tmp_path):
    typo = npusim("sweep", "-c", "a2", DEMO, "--grid", "die.hbm.bandwith=1.6TB/s,3.2TB/s", "--out", tmp_path / "out", cwd=tmp_path)
    assert typo.returncode == 2 and "--grid die.hbm.bandwith=1.6TB/s: die.hbm.bandwith: unknown key 'bandwith'; did you mean 'bandwidth'?" in typo.stderr
    assert "Traceback" not in typo.stderr and not (tmp_path / "out").exists()
    syntax = npusim("sweep", "-c", "a2", DEMO, "--grid", "param.tile", cwd=tmp_path)
    assert syntax.returncode == 2 and "write KEY=V1,V2" in syntax.stderr
    both = npusim("sweep", "-c", "a2", DEMO, "--grid", "param.tile=8192", "--workers", "2", "--scheduler", "tcp://127.0.0.1:8786", cwd=tmp_path)
    assert both.returncode == 2 and "give --workers or --scheduler, not both" in both.stderr
    assert not (tmp_path / "sweeps").exists()


def test_whatif_doubling_ranks_the_link_of_a_link_bound_load_first(tmp_path):
    workload = write(tmp_path, "remote_load.py", LINK_BOUND_REMOTE_LOAD)
    run = npusim("whatif", "-c", "a2", workload, "--doubling", "--param", "tiles=2", "--workers", "2", cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    assert "reading: doubling the HCCS link bandwidth and write credits gives" in run.stdout and "everything else under 1.05x" in run.stdout
    table = run.stdout.splitlines()
    assert any(line.split("│")[2].strip() == "HCCS link bandwidth + write credits" for line in table if line.startswith("│") and line.split("│")[1].strip() == "1")


def test_ctrl_c_stops_the_sweep_with_its_finished_rows_kept_then_resume_finishes_it(tmp_path, started):
    out = tmp_path / "out"
    command = [sys.executable, "-m", "npusim", "sweep", "-c", "a2", str(DEMO), "--grid", "param.tile=8192,16384",
               "--grid", "param.cores=8,16", "--no-data", "--workers", "1", "--out", str(out)]
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    sweep = started(command, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    for _ in range(6000):  # wait (at most 60 s) for the first finished row, then press Ctrl-C
        if (out / "results.csv").exists() or sweep.poll() is not None:
            break
        time.sleep(0.01)
    os.killpg(sweep.pid, signal.SIGINT)
    _, stderr = sweep.communicate(timeout=120)
    assert sweep.returncode == 130 and "run the same command with --resume" in stderr
    with open(out / "results.csv", newline="") as handle:
        finished = len(list(csv.DictReader(handle)))
    assert 1 <= finished < 4
    resumed = npusim(*command[3:], "--resume", cwd=tmp_path)
    assert resumed.returncode == 0 and f"{4 - finished} point{'s' if finished < 3 else ''} simulated on 1 local worker process, {finished} already in results.csv" in resumed.stdout


def test_a_config_name_that_would_leave_the_sweeps_folder_exits_2(tmp_path):
    config = tmp_path / "escape.yaml"
    config.write_text('extends: a2\nname: "/../../../../tmp/escape"\n')
    run = npusim("sweep", "-c", config, DEMO, "--grid", "param.tile=16384", "--no-data", cwd=tmp_path)
    assert run.returncode == 2 and run.stderr.startswith(f"npusim: error: {config}:2: name: '/../../../../tmp/escape' is not a safe name")
    assert not (tmp_path / "sweeps").exists()


def test_a_negative_seed_is_a_usage_error_of_sweep_and_whatif(tmp_path):
    for command in ("sweep", "whatif"):
        run = npusim(command, "-c", "a2", DEMO, "--grid" if command == "sweep" else "--param", "param.tile=16384" if command == "sweep" else "tile=16384",
                     "--seed", "-1", cwd=tmp_path)
        assert run.returncode == 2 and "Invalid value for '--seed': -1 is not in the range 0<=x<=4294967295" in run.stderr, run.stderr
    assert not (tmp_path / "sweeps").exists()


def test_a_bad_point_timeout_exits_2_before_anything_runs(tmp_path):
    run = npusim("sweep", "-c", "a2", DEMO, "--grid", "param.tile=8192", "--point-timeout", "0", "--out", tmp_path / "s", cwd=tmp_path)
    assert run.returncode == 2 and "point timeout 0.0: give a number of seconds above 0" in run.stderr
    assert not (tmp_path / "s" / "results.csv").exists()


def test_a_sweep_whose_points_simulate_nothing_prints_its_table():
    """Points of 0 us are as fast as the best (1.00), not a ZeroDivisionError after the sweep."""
    import io
    import math

    from rich.console import Console

    from npusim.analysis.points import OUTCOME_COLUMNS
    from npusim.cli.tables import print_sweep_table

    rows = [{**dict.fromkeys(OUTCOME_COLUMNS, math.nan), "param.n": n, "status": "ok", "simulated_us": 0.0, "bottleneck": "",
             "wall_s": 0.05} for n in (1, 2)]
    out = io.StringIO()
    print_sweep_table(rows, ["param.n"], title="sweep of nothing.py on a2: 2 points", console=Console(file=out, width=200))
    table = [line for line in out.getvalue().splitlines() if line.startswith("│")]
    assert len(table) == 2 and all("0.000 │   1.00 │" in row for row in table)


def test_times_the_best_of_points_of_zero_time():
    from npusim.cli.tables import times_best

    assert times_best(2.0, 1.0) == 2.0 and times_best(0.0, 0.0) == 1.0 and times_best(3.0, 0.0) == float("inf")


NOTHING = "import npusim\nn = npusim.param('n', 1)\n"


def test_a_sweep_into_a_folder_of_the_users_is_refused_and_changes_nothing(tmp_path):
    """As run refuses a folder it did not write: the user's own sweep.json and plot stay as they were."""
    workload = tmp_path / "w.py"
    workload.write_text(NOTHING)
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "sweep.json").write_text('{"my": "notes"}')
    (mine / "simulated_time.png").write_bytes(b"my plot")
    run = npusim("sweep", "-c", "a2", workload, "--grid", "param.n=1,2", "--workers", "1", "--out", mine, cwd=tmp_path)
    assert run.returncode == 2 and "sweep.json' was not written by npusim sweep" in run.stderr and "choose another --out" in run.stderr
    assert (mine / "sweep.json").read_text() == '{"my": "notes"}' and (mine / "simulated_time.png").read_bytes() == b"my plot"
    assert sorted(p.name for p in mine.iterdir()) == ["simulated_time.png", "sweep.json"]
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "notes.txt").write_text("mine")
    other = npusim("sweep", "-c", "a2", workload, "--grid", "param.n=1", "--workers", "1", "--out", tmp_path / "other", cwd=tmp_path)
    assert other.returncode == 2 and "holds notes.txt, which npusim sweep does not write" in other.stderr
    # a sweep's own folder is continued: test_ctrl_c_stops_the_sweep_with_its_finished_rows_kept_then_resume_finishes_it


def test_a_second_sweep_into_the_same_folder_meanwhile_is_refused(tmp_path):
    from npusim.analysis.sweep import sweep_folder

    workload = tmp_path / "w.py"
    workload.write_text(NOTHING)
    out = tmp_path / "out"
    with sweep_folder(out):  # a sweep writing there now
        second = npusim("sweep", "-c", "a2", workload, "--grid", "param.n=1,2", "--workers", "1", "--out", out, cwd=tmp_path)
        assert list(out.iterdir()) == []  # nothing of the second's: no second header, no interleaved rows
    assert second.returncode == 2 and f"another npusim sweep is writing to {str(out)!r} now" in second.stderr
    with sweep_folder(out):  # once the first has ended, the folder is free
        pass


def test_a_full_disk_during_a_sweep_is_one_line_and_keeps_the_whole_rows(tmp_path):
    disk = tmp_path / "disk"
    disk.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=12k", "tmpfs", str(disk)], capture_output=True).returncode != 0:
        pytest.skip("cannot mount a tmpfs here (needs root); tests/analysis/test_results.py injects the OSError instead")
    try:
        workload = tmp_path / "w.py"
        workload.write_text(NOTHING)
        run = npusim("sweep", "-c", "a2", workload, "--grid", "param.n=1,2,3", "--workers", "1", "--out", disk / "s", cwd=tmp_path)
        assert run.returncode == 1 and "Traceback" not in run.stderr
        errors = [line for line in run.stderr.splitlines() if line.startswith("npusim: error")]
        assert errors == [f"npusim: error: cannot write the sweep's files in {str(disk / 's')!r}: No space left on device; the rows of the points "
                          f"that finished are whole in {str(disk / 's' / 'results.csv')!r}: free some space, then run the same command with "
                          "--resume to simulate only the others"]
        with open(disk / "s" / "results.csv", newline="") as handle:
            assert [row["status"] for row in csv.DictReader(handle)] == ["ok", "ok", "ok"]
    finally:
        subprocess.run(["umount", str(disk)], check=True)
