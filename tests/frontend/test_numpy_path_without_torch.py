"""Without the 'torch' extra the numpy path works as before: a fresh interpreter in which torch
cannot be imported runs torch_npu's ops on npusim device tensors."""

import subprocess
import sys
from pathlib import Path

PROGRAM = """
import sys
sys.modules["torch"] = None  # as if torch were not installed: importing it fails
import numpy as np
import npusim
from npusim import torch_npu
assert not torch_npu.TORCH and "npu" not in torch_npu.__all__
with npusim.session("a2") as session:
    cache = npusim.tensor(np.zeros((2, 4, 32), np.int8))
    torch_npu.npu_quant_scatter_(cache, npusim.tensor(np.array([1, 2], np.int32)), npusim.tensor(np.full((2, 1, 32), 3, np.float16)),
                                 npusim.tensor(np.ones(32, np.float32)), axis=-2, quant_axis=-1)
    out = torch_npu.scatter_update(cache, npusim.tensor(np.array([0, 0], np.int32)), npusim.tensor(np.full((2, 1, 32), 7, np.int8)), -2)
    assert cache.numpy()[0, 1].tolist() == [3] * 32 and out.numpy()[1, 0].tolist() == [7] * 32
    assert all(track.unit != "host" for track in session.system.recorder.tracks)  # no host launches on the numpy path
print("numpy path ok")
"""


def test_the_numpy_path_runs_without_torch():
    run = subprocess.run([sys.executable, "-c", PROGRAM], capture_output=True, text=True, cwd=Path(__file__).parents[2])
    assert run.returncode == 0, run.stderr
    assert "numpy path ok" in run.stdout
    assert "torch" not in run.stderr
