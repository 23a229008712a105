"""examples/torch_mc2.py end to end through the CLI: the fused matmul + all-reduce and the same two
apart give the host's sum, and the fused op takes longer than either of its parts alone."""

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).parents[2]


def test_fused_and_apart_match_the_host(tmp_path):
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    result = subprocess.run([sys.executable, "-m", "npusim", "run", "--config", "a2", "examples/torch_mc2.py", "--param", "m=256",
                             "--param", "k=128", "--param", "n=256", "--param", "ranks=4", "--trace", "none", "--out", str(tmp_path)],
                            cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    assert "both outputs match the host's" in result.stdout
    times = re.search(r"on each of 4 ranks.*fused npu_mm_all_reduce_base ([\d.]+) us; apart: matmul ([\d.]+) us then all-reduce ([\d.]+) us",
                      result.stdout)
    assert times, result.stdout
    fused, matmul, all_reduce = map(float, times.groups())
    assert fused > max(matmul, all_reduce) > 0
