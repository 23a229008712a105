"""The quant_scatter examples, end to end through the command line, as a user runs them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).parents[2]


def npusim_run(*args: str, out: Path) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-m", "npusim", "run", *args, "--out", str(out)], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=300)


def test_kv_cache_example_checks_its_caches_and_reports_latency_bandwidth_and_roofline(tmp_path):
    run = npusim_run("--config", "a2", "examples/kv_cache_quant_scatter.py", out=tmp_path / "data")
    assert run.returncode == 0, run.stderr
    lines = run.stdout.splitlines()
    assert sum("cache matches numpy: yes" in line for line in lines) == 4
    figures = [line for line in lines if line.strip().startswith("latency")]
    assert len(figures) == 4 and all("GB/s" in line and "of the 1.60 TB/s HBM peak" in line and "roofline" in line for line in figures)
    assert any("double buffering would make the prefill write" in line for line in lines)

    trace = json.loads((tmp_path / "data" / "trace.json").read_text())
    assert {"QuantUpdateScatter"} <= {op["name"] for op in trace["otherData"]["ops"]}
    summary = json.loads((tmp_path / "data" / "summary.json").read_text())
    assert summary["ops"]["name"] == ["QuantUpdateScatter"] * 4 and all(moved > 0 for moved in summary["ops"]["dma_bytes"])

    # Timing only gives the same figures (and handles the big caches without allocating them).
    timing_only = npusim_run("--config", "a2", "--no-data", "examples/kv_cache_quant_scatter.py", out=tmp_path / "no-data")
    assert timing_only.returncode == 0, timing_only.stderr
    assert [line for line in timing_only.stdout.splitlines() if line.strip().startswith("latency")] == figures


def test_documentation_example_2_outputs_only_minus_one_to_two(tmp_path):
    run = npusim_run("--config", "a2", "examples/quant_scatter_doc_example2.py", out=tmp_path)
    assert run.returncode == 0, run.stderr
    assert "all in {-1, 0, 1, 2} as documented" in run.stdout
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["status"] == "ok" and summary["ops"]["name"] == ["QuantUpdateScatter"]
