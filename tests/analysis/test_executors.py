"""Sweep workers under faults: a killed worker fails only its point (after one retry) and the pool
goes on; a point past its timeout is stopped, in the simulation or stuck in Python; no local worker
survives the sweep process, however it ends (SIGKILL, SIGTERM, Ctrl-C); the workload a worker runs
is the task's own bytes, never a file someone planted. The same on a Dask cluster where it applies
(a lost worker, a point timeout)."""

import contextlib
import csv
import hashlib
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import dask
import distributed
import pytest

from npusim.analysis import run_sweep
from npusim.analysis.executors import LocalExecutor
from npusim.analysis.grid import axes_from, points_of
from npusim.analysis.points import workload_source
from npusim.analysis.sweep import plan
from npusim.errors import UsageError
from tests.analysis.workloads import write

ROOT = Path(__file__).resolve().parents[2]

# A small kernel; param `die_on` names the point whose worker is killed as the out-of-memory killer
# would (SIGKILL); with `once`, only the first time (a marker file says it happened).
DIES = '''
import os, signal
from pathlib import Path
import numpy as np
import npusim
from npusim import isa

point = npusim.param("point", 0, "which point this is")
die_on = npusim.param("die_on", -1, "the point whose worker is killed")
once = npusim.param("once", "", "a marker file: kill only when it does not exist yet")
if point == die_on and not (once and Path(once).exists()):
    if once:
        Path(once).write_text("killed once")
    os.kill(os.getpid(), signal.SIGKILL)
x = npusim.tensor(np.ones(4096, np.float16))
kernel = isa.Kernel("copy", die=0)
p = kernel.aiv(0)
p.copy(p.alloc(4096, np.float16), isa.gm(x))
kernel.launch()
'''

# Point `stuck` loops forever in the workload's own Python (no simulation to stop it).
STUCK = '''
import npusim
point = npusim.param("point", 0, "which point this is")
stuck = npusim.param("stuck", -1, "the point that never returns")
while point == stuck:
    pass
'''


def test_a_killed_worker_fails_only_its_point_after_one_retry(tmp_path):
    workload = write(tmp_path, "dies.py", DIES)
    outcome = run_sweep("a2", workload, {"param.point": [0, 1, 2, 3]}, params={"die_on": "1"}, data=False, workers=2, progress=False)
    status = {row["param.point"]: row["status"] for row in outcome.rows}
    assert status == {0: "ok", 1: "failed", 2: "ok", 3: "ok"}
    lost = outcome.rows[1]
    assert lost["error_type"] == "WorkerLost" and "died (killed by SIGKILL) 2 times" in lost["error"]


def test_a_worker_killed_once_is_replaced_and_its_point_retried(tmp_path):
    workload = write(tmp_path, "dies.py", DIES)
    marker = tmp_path / "killed"
    outcome = run_sweep("a2", workload, {"param.point": [0, 1, 2]}, params={"die_on": "1", "once": str(marker)}, data=False, workers=1,
                        progress=False)
    assert marker.exists() and [row["status"] for row in outcome.rows] == ["ok", "ok", "ok"]


def test_a_point_stuck_in_python_is_stopped_at_its_timeout_and_the_others_complete(tmp_path):
    workload = write(tmp_path, "stuck.py", STUCK)
    outcome = run_sweep("a2", workload, {"param.point": [0, 1, 2]}, params={"stuck": "1"}, data=False, workers=2, progress=False,
                        point_timeout_s=0.5)
    assert [row["status"] for row in outcome.rows] == ["ok", "failed", "ok"]
    assert outcome.rows[1]["error_type"] == "WallTimeError" and "longer than its timeout of 0.5 s" in outcome.rows[1]["error"]


# DIES, and point `forever` simulates until it is stopped (a new small kernel at each synchronisation).
SIMULATES_FOREVER = DIES + '''
forever = npusim.param("forever", -1, "the point that never ends")
while point == forever:
    again = isa.Kernel("copy", die=0)
    q = again.aiv(0)
    q.copy(q.alloc(4096, np.float16), isa.gm(x))
    again.launch()
    npusim.synchronize()
'''


def children_of(pids: list[int]) -> list[int]:
    """The running processes whose parent is one of ``pids`` (from /proc)."""
    children = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) in pids and fields[0] != "Z":
                children.append(int(entry.name))
    return children


def test_on_a_dask_cluster_a_killed_worker_fails_only_its_point_and_a_point_timeout_stops_any_point(tmp_path):
    """Without a timeout a point that kills its Dask worker fails alone (KilledWorker); with one,
    each point runs in a process of its own on the worker, so a point simulating forever and one
    stuck in the workload's Python both stop at their timeout and leave no process or busy thread."""
    workload = write(tmp_path, "dies.py", SIMULATES_FOREVER + STUCK.split("\n", 2)[2].replace("while point == stuck:", "stuck = npusim.param('stuck', -1)\nwhile point == stuck:"))
    # allowed-failures 0: Dask gives up on a task at the first death of its worker (the executor then submits it once more);
    # worker-saturation 1: a worker holds only the task it runs, so no other point is queued on a dying worker
    with dask.config.set({"distributed.scheduler.allowed-failures": 0, "distributed.scheduler.worker-saturation": 1.0}), \
            distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster, \
            distributed.Client(cluster) as client:
        killed = run_sweep("a2", workload, {"param.point": [0, 1]}, params={"die_on": "1"}, data=False, scheduler=cluster.scheduler_address,
                           progress=False)
        client.wait_for_workers(2, timeout=120)  # the nannies restart the killed ones
        swept: dict = {}
        sweep = threading.Thread(target=lambda: swept.update(outcome=run_sweep(
            "a2", workload, {"param.point": [0, 1, 2, 3]}, params={"die_on": "1", "forever": "2", "stuck": "3"}, data=False,
            scheduler=cluster.scheduler_address, progress=False, point_timeout_s=1)), daemon=True)
        sweep.start()
        sweep.join(120)  # were the stuck point to keep its Dask worker, the sweep would never end (closing the cluster then ends it)
        assert not sweep.is_alive(), "the sweep did not end: a point stuck in the workload's Python kept its Dask worker"
        bounded = swept["outcome"]
        workers = list(client.run(os.getpid).values())  # the same workers: none died, their points' processes did
        assert len(workers) == 2 and children_of(workers) == [] and all(not tasks for tasks in client.processing().values())
    assert {row["param.point"]: (row["status"], row["error_type"]) for row in killed.rows} == {0: ("ok", ""), 1: ("failed", "KilledWorker")}
    assert "failed 2 times" in killed.rows[1]["error"]
    status = {row["param.point"]: (row["status"], row["error_type"]) for row in bounded.rows}
    assert status == {0: ("ok", ""), 1: ("failed", "WorkerLost"), 2: ("failed", "WallTimeError"), 3: ("failed", "WallTimeError")}
    assert "died (killed by SIGKILL) 2 times" in bounded.rows[1]["error"]  # its own process died, not the Dask worker
    assert "went past its wall-clock limit of 1 s" in bounded.rows[2]["error"]
    assert "longer than its timeout of 1 s" in bounded.rows[3]["error"]  # stuck in Python: its process was killed


def test_a_worker_that_cannot_start_says_so(tmp_path, monkeypatch):
    """A worker that dies before it runs npusim's code (an import failing) is not reported as a
    point needing more memory."""
    import npusim.analysis.executors as executors

    workload = write(tmp_path, "w.py", "import npusim\nnpusim.param('tile', 1)\n")
    (task,) = plan("a2", workload, points_of(axes_from({"param.tile": [2]})), ["param.tile"], data=False).tasks
    monkeypatch.setattr(executors, "_worker_main", sys.exit)  # the worker process fails before npusim's code runs, as a failed import would
    with LocalExecutor(1) as executor:
        ((_, outcome),) = list(executor.run([task]))
    assert outcome["error_type"] == "WorkerLost" and "died as it started (exit status 1), before running this point, 2 times" in outcome["error"]
    assert "could not import npusim" in outcome["error"] and "more memory" not in outcome["error"]


def test_workers_import_the_installed_npusim_whatever_the_working_folder_holds(tmp_path):
    """Started from the parent of a checkout (a folder named npusim there), the workers import the
    installed package, not the folder (Python 3.11's fork server put the working folder first)."""
    command = Path(sys.executable).parent / "npusim"
    if not command.exists():
        pytest.skip("no npusim command beside this Python (an installed npusim)")
    (tmp_path / "npusim" / "npusim").mkdir(parents=True)  # a checkout: its package one level down
    workload = write(tmp_path, "w.py", "import npusim\nnpusim.param('tile', 1)\n")
    run = subprocess.run([str(command), "sweep", "-c", "a2", str(workload), "--grid", "param.tile=1,2", "--workers", "2", "--out", "out"],
                         cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "none failed" in run.stdout


def test_a_point_timeout_must_be_a_positive_number_of_seconds():
    for bad in (0, -1, float("inf"), float("nan"), "10", True):
        with pytest.raises(UsageError, match="point timeout"):
            LocalExecutor(1, point_timeout_s=bad)


def group_members(group: int) -> list[int]:
    """The processes of process group ``group`` (from /proc)."""
    members = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[2]) == group and fields[0] != "Z":
                members.append(int(entry.name))
    return members


def start_sweep(tmp_path: Path, started) -> tuple[subprocess.Popen, Path]:
    """An `npusim sweep` with two workers in a process group of its own (the ``started`` fixture:
    killed with all it started when the test ends), once it has finished a point (so its fork
    server and workers are up)."""
    out = tmp_path / "out"
    workload = write(tmp_path, "stuck.py", STUCK)
    command = [sys.executable, "-m", "npusim", "sweep", "-c", "a2", str(workload), "--grid", "param.point=0,1,2,3,4,5", "--param", "stuck=1",
               "--no-data", "--workers", "2", "--out", str(out)]
    sweep = started(command, cwd=tmp_path, env=dict(os.environ, PYTHONPATH=str(ROOT)), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    while not (out / "results.csv").exists() and sweep.poll() is None:
        time.sleep(0.05)
    assert sweep.poll() is None and len(group_members(sweep.pid)) >= 3  # the sweep, its fork server, its workers
    return sweep, out


def wait_until_gone(group: int) -> list[int]:
    """The processes of ``group`` still running once its workers had time to exit (none, when they
    die with the sweep); those are then killed, so that a failing test leaves nothing behind."""
    for _ in range(600):  # the lifeline closes at once; at most 30 s for the processes to be reaped
        if not group_members(group):
            break
        time.sleep(0.05)
    survivors = group_members(group)
    for pid in survivors:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    return survivors


def test_no_worker_survives_the_sweep_process_killed_with_sigkill(tmp_path, started):
    sweep, _ = start_sweep(tmp_path, started)
    sweep.kill()
    sweep.wait()
    assert wait_until_gone(sweep.pid) == []


@pytest.mark.parametrize(("signum", "status"), [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_sigterm_and_ctrl_c_stop_the_sweep_at_once_keeping_its_finished_points(tmp_path, signum, status, started):
    sweep, out = start_sweep(tmp_path, started)
    os.killpg(sweep.pid, signum)  # Ctrl-C reaches the whole group; timeout sends SIGTERM to the sweep
    _, stderr = sweep.communicate(timeout=60)  # without a point timeout the stuck point never ends: only stopping does
    assert sweep.returncode == status and "run the same command with --resume" in stderr
    assert wait_until_gone(sweep.pid) == []
    with open(out / "results.csv", newline="") as handle:
        assert [row["status"] for row in csv.DictReader(handle)][:1] == ["ok"]


def test_a_worker_runs_the_tasks_own_bytes_and_never_a_planted_file(tmp_path):
    honest = "import npusim\nnpusim.param('tile', 1)\n"
    workload = write(tmp_path, "w.py", honest)
    sweep_plan = plan("a2", workload, points_of(axes_from({"param.tile": [2]})), ["param.tile"], data=False)
    (task,) = sweep_plan.tasks
    marker = tmp_path / "planted-code-ran"
    planted = Path(tempfile.gettempdir()) / f"npusim-workload-{hashlib.sha256(honest.encode()).hexdigest()[:16]}" / "w.py"
    planted.parent.mkdir(exist_ok=True)
    planted.write_text(f"open({str(marker)!r}, 'w').write('owned')\n")  # where earlier versions looked for a copy
    try:
        workload.unlink()  # the worker's machine does not have the file
        source = workload_source(task)
        assert source.data == honest.encode() and source.path == Path(task.workload)
        with LocalExecutor(1) as executor:
            ((_, outcome),) = list(executor.run([task]))
        assert outcome["status"] == "ok" and not marker.exists()
        with pytest.raises(Exception, match="do not match their sha256"):
            workload_source(type(task)(**{**task.__dict__, "workload_source": b"import os\n"}))
    finally:
        planted.unlink()
        planted.parent.rmdir()
