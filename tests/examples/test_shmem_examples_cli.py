"""The shmem examples end to end through the CLI: outputs match, figures are printed, trace written."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[2]


def run_cli(*args: str, out: Path) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-m", "npusim", "run", *args, "--out", str(out)], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize("example, config", [
    ("shmem_allgather.py", ["--config", "a2"]),
    ("shmem_allreduce.py", ["--config", "a2"]),
    ("shmem_allgather.py", ["--config", "a3", "--set", "shape.packages_per_node=2"]),  # 4 dies: SIO and UB switches
])
def test_example_runs_and_matches(example, config, tmp_path):
    result = run_cli(*config, f"examples/{example}", out=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "match the expected" in result.stdout and ": yes" in result.stdout
    assert "simulated time" in result.stdout
    assert "links:" in result.stdout and "GB/s each on average" in result.stdout
    trace = json.loads((tmp_path / "trace.json").read_text())
    lanes = {e["args"]["name"] for e in trace["traceEvents"] if e.get("name") == "thread_name"}
    assert "aicpu0 SCHEDULE" in lanes and any(lane.startswith("aiv") and lane.endswith(" MTE2") for lane in lanes)
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["status"] == "ok" and not summary["warnings"]


def test_timing_only_runs_skip_the_check(tmp_path):
    result = run_cli("--config", "a2", "--no-data", "examples/shmem_allreduce.py", out=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "outputs not checked (timing only)" in result.stdout
