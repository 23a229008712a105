"""The compute examples end to end through the CLI: outputs match numpy, the times are printed, and
the trace has the AIC cube lanes and the AIV vector lanes."""

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


def lanes(out: Path) -> set[str]:
    trace = json.loads((out / "trace.json").read_text())
    return {e["args"]["name"] for e in trace["traceEvents"] if e.get("name") == "thread_name"}


def test_matmul_add_matches_numpy(tmp_path):
    result = run_cli("--config", "a2", "examples/pypto_matmul_add.py", "--param", "m=128", "--param", "k=256", "--param", "n=256",
                     out=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "outputs match numpy" in result.stdout and ": yes" in result.stdout and "TFLOPS" in result.stdout
    names = lanes(tmp_path)
    assert any(n.startswith("aic") and n.endswith(" CUBE") for n in names)
    assert any(n.startswith("aiv") and n.endswith(" VECTOR") for n in names)


@pytest.mark.parametrize("config", [["--config", "a2", "--param", "n_pes=4"], ["--config", "a3", "--set", "shape.packages_per_node=2"]])
def test_allgather_matmul_prints_both_times_and_matches(config, tmp_path):
    result = run_cli(*config, "examples/allgather_matmul.py", "--param", "rows=16", "--param", "k=256", "--param", "n=256", out=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "without overlap:" in result.stdout and "with overlap" in result.stdout
    assert "outputs match the expected all-gather + matmul: yes" in result.stdout


def test_torch_gemm_runs_both_cube_kernels_and_matches(tmp_path):
    result = run_cli("--config", "a2", "examples/torch_gemm.py", "--param", "m=64", "--param", "k=256", "--param", "n=96", out=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "MatMulV3" in result.stdout and "QuantBatchMatmulV3" in result.stdout
    assert "outputs match numpy: linear (within fp32 accumulation) yes, quant matmul (bit-exact) yes" in result.stdout
    names = lanes(tmp_path)
    assert {"aic0 CUBE", "aic0 MTE2", "aic0 MTE1", "aic0 FIXP"} <= names


def test_the_int8_grouped_gemm_calibration_workload_runs_as_a_user_runs_it(tmp_path):
    result = run_cli("--config", "a3", "npusim/calibration/workloads/int8_grouped_gemm.py", "--no-data", "--param", "groups=2",
                     "--param", "m=256", "--param", "n=304", "--param", "k=512", out=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "INT8 grouped GEMM G=2 M=256 N=304 K=512 (bf16 out, 128 x 152 blocks):" in result.stdout and "utilisation" in result.stdout
