"""npusim.torchair: torch.compile captures the traced graph once per set of input tensors and
replays it (one host launch per call); a wrong compiler_config is a clear error."""

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import npusim  # noqa: E402
import npusim.torch_npu as torch_npu  # noqa: E402
import npusim.torchair as tng  # noqa: E402
from npusim.errors import UsageError  # noqa: E402


def test_a_compiled_function_replays_its_capture_and_recaptures_for_other_tensors():
    def write(data, indices, updates):
        return torch_npu.scatter_update_(data, indices, updates, -2)

    compiled = torch.compile(write, backend=tng.get_npu_backend(), dynamic=False, fullgraph=True)
    with npusim.session("a2") as session:
        host = session.host
        a, b = torch.zeros(2, 4, 8).npu(), torch.zeros(2, 4, 8).npu()
        indices, updates = torch.tensor([1, 3], dtype=torch.int32).npu(), torch.ones(2, 1, 8).npu()
        compiled(a, indices, updates)
        start = host.now_ps
        assert compiled(a, indices, updates) is a
        assert host.now_ps - start == host.graph_launch_ps  # a replay: one launch, no per-op cost
        compiled(b, indices, updates)  # other tensors: a capture of their own
        expected = np.zeros((2, 4, 8), np.float32)
        expected[0, 1] = expected[1, 3] = 1
        assert np.array_equal(a.cpu().numpy(), expected) and np.array_equal(b.cpu().numpy(), expected)


def test_compiler_config_must_be_torchairs():
    with pytest.raises(UsageError, match="pass a torchair CompilerConfig"):
        tng.get_npu_backend(compiler_config={"mode": "reduce-overhead"})
