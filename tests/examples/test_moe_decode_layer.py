"""examples/moe_decode_layer.py end to end through the CLI: four ranks run the layer (router, dispatch,
grouped matmuls, activation, combine) captured in a graph, the output matches the float64 reference,
the stage table and the communication / compute split are printed."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

import npusim.torch_npu

ROOT = Path(__file__).parents[2]

pytestmark = pytest.mark.skipif(not hasattr(npusim.torch_npu, "npu_grouped_matmul"),
                                reason="npu_grouped_matmul (the cube pipeline's branch) has not landed in this tree")


def test_four_ranks_with_data_match_the_reference(tmp_path):
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    result = subprocess.run([sys.executable, "-m", "npusim", "run", "--config", "a3", "examples/moe_decode_layer.py", "--param", "ep=4",
                             "--param", "tokens=8", "--param", "hidden=1024", "--param", "intermediate=128", "--trace", "none",
                             "--out", str(tmp_path)], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "EP4 (64 expert(s) per die of 256)" in out
    for stage in ("router", "dispatch", "experts", "combine"):
        assert f"  {stage}" in out
    assert "communication (dispatch + combine)" in out and "against expert compute" in out
    assert "256 token-expert pairs received: ok" in out
