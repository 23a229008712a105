"""The Atlas 300I Duo example through the command line, as a user runs it: both core kinds of a
310P chip stream through its LPDDR, one AI core's matmul leaves L0C through UB, the result crosses
the card's PCIe to the other chip, and npu_quant_scatter_ writes a KV cache there in the fp16 row."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from npusim.trace.summary import records

ROOT = Path(__file__).parents[2]


def npusim_run(*args: str, out: Path) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-m", "npusim", "run", "--config", "atlas-300i-duo", *args, "examples/atlas_300i_duo.py",
                           "--out", str(out)], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)


def figures(stdout: str) -> list[str]:
    return [line for line in stdout.splitlines() if line.startswith(("scale_add:", "matmul tile", "copy of z", "KV-cache write"))]


def test_the_card_example_checks_its_results_and_uses_both_core_kinds_and_the_pcie_link(tmp_path):
    run = npusim_run(out=tmp_path / "data")
    assert run.returncode == 0, run.stderr
    assert "results match numpy: yes" in run.stdout
    lines = figures(run.stdout)
    assert len(lines) == 4
    assert "8 AI cores and 7 vector cores" in lines[0] and "of the 204 GB/s LPDDR4X" in lines[0]
    assert "to chip 1 over PCIe" in lines[2]
    copy_gb_per_s = float(lines[2].split("= ")[-1].split(" GB/s")[0])
    assert 20 < copy_gb_per_s < 31.5 * 0.86  # the PCIe port's payload rate minus the SDMA set-up

    trace = json.loads((tmp_path / "data" / "trace.json").read_text())
    lanes = {event["args"]["name"] for event in trace["traceEvents"] if event.get("ph") == "M" and event.get("name") == "thread_name"}
    assert {"aicore0 CUBE", "aicore0 MTE1", "aicore0 VECTOR", "vectorcore6 MTE2", "sdma ch0"} <= lanes
    assert not any("FIXP" in lane for lane in lanes)  # the 310P has no FixPipe
    assert [op["name"] for op in trace["otherData"]["ops"] if op["name"] == "QuantUpdateScatter"] == ["QuantUpdateScatter"]
    assert trace["otherData"]["config"] == "atlas-300i-duo"
    summary = json.loads((tmp_path / "data" / "summary.json").read_text())
    memories = {row["resource"] for row in records(summary["bandwidth"]) if row["kind"] == "hbm"}
    assert memories == {"die0 LPDDR4X", "die1 LPDDR4X"}  # the card's DRAM by its name (die.hbm.technology), not "HBM"

    timing_only = npusim_run("--no-data", out=tmp_path / "no-data")
    assert timing_only.returncode == 0, timing_only.stderr
    assert figures(timing_only.stdout) == lines
