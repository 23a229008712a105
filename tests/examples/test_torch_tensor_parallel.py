"""examples/torch_tensor_parallel.py end to end through the CLI: a torch program's ranks (mp.spawn,
torch.distributed with hccl) compute a tensor-parallel MLP block whose output matches the host's."""

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).parents[2]


def test_eight_ranks_match_the_host(tmp_path):
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    result = subprocess.run([sys.executable, "-m", "npusim", "run", "--config", "a2", "examples/torch_tensor_parallel.py", "--param",
                             "tokens=32", "--param", "hidden=512", "--param", "ffn=1024", "--trace", "none", "--out", str(tmp_path)],
                            cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    assert "32 x 512 -> 1024 -> 512 fp16 over 8 ranks" in result.stdout
    assert "output matches the host's" in result.stdout
