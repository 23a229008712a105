"""``npusim run`` end to end, as a user runs it: outputs, exit codes, errors, determinism."""

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "examples" / "vector_add.py"


def npusim(*args, cwd):
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-m", "npusim", *map(str, args)], cwd=cwd, env=env, capture_output=True, text=True, timeout=300)


def test_demo_runs_from_any_folder_with_a_builtin_config(tmp_path):
    run = npusim("run", "--config", "a3", DEMO, cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    assert "output matches numpy: yes" in run.stdout and "simulated" in run.stdout
    out = tmp_path / "traces" / "vector_add-a3"
    summary = json.loads((out / "summary.json").read_text())
    manifest = json.loads((out / "manifest.json").read_text())
    assert summary["status"] == "ok" and summary["simulated_time_us"] > 0
    assert {row["pipe"] for row in summary["pipes"]} >= {"MTE2", "VECTOR", "MTE3"}
    assert any(row["resource"] == "die0 HBM" for row in summary["bandwidth"])
    assert manifest["config"] == "a3" and manifest["seed"] == 0 and len(manifest["config_sha256"]) == 64
    assert manifest["npusim_version"] and manifest["command"][:2] == ["npusim", "run"]
    json.loads((out / "trace.json").read_text())


def test_same_run_twice_gives_identical_trace(tmp_path):
    for name in ("a", "b"):
        assert npusim("run", "-c", "a2", DEMO, "--no-data", "--out", tmp_path / name, cwd=tmp_path).returncode == 0
    assert (tmp_path / "a" / "trace.json").read_bytes() == (tmp_path / "b" / "trace.json").read_bytes()


def test_overrides_change_the_result_and_are_recorded(tmp_path):
    base = npusim("run", "-c", "a2", DEMO, "--no-data", "--out", tmp_path / "base", cwd=tmp_path)
    fast = npusim("run", "-c", "a2", DEMO, "--no-data", "--set", "die.hbm.bandwidth=3.2 TB/s", "--out", tmp_path / "fast", cwd=tmp_path)
    assert base.returncode == fast.returncode == 0
    t_base = json.loads((tmp_path / "base" / "summary.json").read_text())["simulated_time_us"]
    t_fast = json.loads((tmp_path / "fast" / "summary.json").read_text())["simulated_time_us"]
    assert t_fast < t_base
    assert json.loads((tmp_path / "fast" / "manifest.json").read_text())["overrides"] == ["die.hbm.bandwidth=3.2 TB/s"]


def test_config_error_exits_2_with_a_located_message(tmp_path):
    run = npusim("run", "-c", "a2", DEMO, "--set", "die.hbm.bandwith=1 TB/s", cwd=tmp_path)
    assert run.returncode == 2
    assert "die.hbm.bandwith" in run.stderr and "bandwidth" in run.stderr  # did-you-mean
    assert "Traceback" not in run.stderr and len(run.stderr.strip().splitlines()) <= 3
    assert not (tmp_path / "traces").exists()


def test_unknown_config_and_missing_workload_exit_2(tmp_path):
    run = npusim("run", "-c", "a9", DEMO, cwd=tmp_path)
    assert run.returncode == 2 and "a2" in run.stderr and "a3" in run.stderr
    run = npusim("run", "-c", "a2", tmp_path / "nope.py", cwd=tmp_path)
    assert run.returncode == 2 and "nope.py" in run.stderr and "does not exist" in run.stderr


def test_failing_workload_exits_1_and_keeps_the_trace_up_to_the_failure(tmp_path):
    workload = tmp_path / "fails.py"
    workload.write_text(
        "import numpy as np, npusim\n"
        "from npusim import isa\n"
        "x = npusim.tensor(np.ones(1024, np.float16))\n"
        "k = isa.Kernel('before', die=0)\n"
        "p = k.aiv(0)\n"
        "ub = p.alloc(1024, np.float16)\n"
        "p.copy(ub, isa.gm(x))\n"
        "k.launch()\n"
        "npusim.synchronize()\n"
        "raise RuntimeError('boom in the workload')\n"
    )
    run = npusim("run", "-c", "a2", workload, "--out", tmp_path / "out", cwd=tmp_path)
    assert run.returncode == 1
    assert "boom in the workload" in run.stderr and "Traceback" not in run.stderr
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["status"] == "failed" and "boom" in summary["error"] and summary["events"] == 1
    trace = json.loads((tmp_path / "out" / "trace.json").read_text())
    assert trace["otherData"]["status"] == "failed"
    debug = npusim("run", "-c", "a2", workload, "--out", tmp_path / "out", "--debug", cwd=tmp_path)
    assert debug.returncode == 1 and "Traceback" in debug.stderr


def test_main_function_is_called(tmp_path):
    workload = tmp_path / "with_main.py"
    workload.write_text("def main():\n    print('main was called')\n")
    run = npusim("run", "-c", "a2", workload, "--out", tmp_path / "o", cwd=tmp_path)
    assert run.returncode == 0 and run.stdout.count("main was called") == 1


def test_config_show_and_validate(tmp_path):
    show = npusim("config", "show", "a3", cwd=tmp_path)
    assert show.returncode == 0 and "1.6 TB/s" in show.stdout
    bad = tmp_path / "bad.yaml"
    bad.write_text("extends: a2.yaml\ndie:\n  hbm:\n    bandwidth: 0 TB/s\n")
    run = npusim("config", "validate", bad, cwd=tmp_path)
    assert run.returncode == 2 and "bad.yaml:4" in run.stderr and "die.hbm.bandwidth" in run.stderr


def test_trace_none_writes_no_trace_and_the_same_summary(tmp_path):
    full = npusim("run", "-c", "a2", DEMO, "--no-data", "--out", tmp_path / "full", cwd=tmp_path)
    bare = npusim("run", "-c", "a2", DEMO, "--no-data", "--trace", "none", "--out", tmp_path / "bare", cwd=tmp_path)
    assert full.returncode == bare.returncode == 0, bare.stderr
    assert not (tmp_path / "bare" / "trace.json").exists() and "wrote summary.json, manifest.json in" in bare.stdout
    summaries = [json.loads((tmp_path / name / "summary.json").read_text()) for name in ("full", "bare")]
    for summary in summaries:
        summary.pop("wall_time_s")
    assert summaries[0] == summaries[1]  # the summary and the critical path come from the whole run either way
    assert json.loads((tmp_path / "bare" / "manifest.json").read_text())["trace"]["level"] == "none"


def test_a_long_run_shows_no_progress_line_on_a_non_terminal(tmp_path):
    run = npusim("run", "-c", "a2", DEMO, "--no-data", "--out", tmp_path, cwd=tmp_path)
    assert run.returncode == 0 and "events, wall" not in run.stderr  # the line goes to stderr, on a terminal only


def test_a_network_quantum_is_recorded_and_a_bad_one_refused(tmp_path):
    run = npusim("run", "-c", "a2", DEMO, "--no-data", "--network-quantum", "10ns", "--out", tmp_path / "q", cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    assert json.loads((tmp_path / "q" / "manifest.json").read_text())["network_quantum"] == "10ns"
    assert json.loads((tmp_path / "q" / "trace.json").read_text())["otherData"]["network_quantum"] == "10ns"
    bad = npusim("run", "-c", "a2", DEMO, "--network-quantum", "10", cwd=tmp_path)
    assert bad.returncode == 2 and "network quantum '10': missing unit" in bad.stderr


def test_bad_trace_options_exit_2_before_simulating(tmp_path):
    for option, message in ((("--trace-dies", "0-8"), "outside the dies of the config, 0-7"),
                            (("--trace-window", "5us"), "write START:END"), (("--trace", "none", "--plot"), "drop --plot")):
        run = npusim("run", "-c", "a2", DEMO, *option, "--out", tmp_path, cwd=tmp_path)
        assert run.returncode == 2 and message in run.stderr and not (tmp_path / "summary.json").exists()
