"""torch_npu's names the framework's tests and examples use (issue 31): ``torch_npu.__version__``,
``torch_npu.testing.common_utils.get_npu_device``, ``torch.npu.is_current_stream_capturing``,
``torch.npu.config``, ``empty_cache`` / ``memory_allocated``, ``torch_npu.npu_format_cast`` (ND
formats only), ``torchair.ge_concrete_graph.ge_apis`` (importable; its GE operators are refused),
npu_quantize's ``div_mode=False`` through torch and in a torchair graph (op-plugin's API page)."""

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import npusim  # noqa: E402
import npusim.torch_npu as torch_npu  # noqa: E402
import npusim.torchair as tng  # noqa: E402
from npusim.errors import OpArgumentError, UsageError  # noqa: E402
from npusim.torch_npu.testing.common_utils import get_npu_device, set_npu_device  # noqa: E402


def test_the_version_follows_torchs():
    assert torch_npu.__version__.startswith(torch.__version__.split("+")[0] + "+npusim.")


def test_get_npu_device_follows_set_npu_device(monkeypatch):
    monkeypatch.delenv("SET_NPU_DEVICE", raising=False)
    assert get_npu_device() == "npu:0"
    monkeypatch.setenv("SET_NPU_DEVICE", "3")
    assert get_npu_device() == "npu:3"
    with npusim.session("a2"):
        assert set_npu_device() == "npu:3" and torch.npu.current_device() == 3


def test_capturing_config_and_memory_queries():
    with npusim.session("a2"):
        assert not torch_npu.npu.is_current_stream_capturing()
        graph = torch.npu.NPUGraph()
        with torch.npu.graph(graph):
            assert torch.npu.is_current_stream_capturing()
        assert not torch.npu.is_current_stream_capturing()
        torch.npu.config.allow_internal_format = True
        before = torch.npu.memory_allocated()
        torch.empty(1024, device="npu")
        assert torch.npu.memory_reserved() >= before + 4096
        torch.npu.empty_cache()


def test_format_cast_keeps_nd_and_refuses_private_formats():
    with npusim.session("a2"):
        x = torch.ones(4, 16).npu()
        assert torch_npu.npu_format_cast(x, 2) is x and torch_npu.get_npu_format(x) == 2
        with pytest.raises(UsageError, match=r"acl_format = 29 \(FRACTAL_NZ\): npusim models ND tensors only"):
            torch_npu.npu_format_cast(x, 29)
        with pytest.raises(OpArgumentError, match="must be an int"):
            torch_npu.npu_format_cast(x, "NZ")


def test_ge_apis_imports_and_refuses_its_operators():
    from npusim.torchair.ge_concrete_graph import ge_apis as ge

    with pytest.raises(UsageError, match=r"ge_apis.Cast: npusim builds no GE graph"):
        getattr(ge, "Cast")  # noqa: B009 (the attribute access is what is tested)


def test_npu_quantize_multiplies_with_div_mode_false_eagerly_and_in_a_graph():
    """op-plugin's torch_npu-npu_quantize.md examples: bf16 [1, 1, 12] x, scales 0.1 (eager); fp16
    [2, 3, 12] x, scales 3, axis 1 (graph mode, torch.compile with dynamic=True)."""
    rng = np.random.default_rng(7)
    x = torch.from_numpy(rng.normal(size=(2, 3, 12)).astype(np.float32)).to(torch.float16)
    expected = torch.clamp(torch.round(x.float() * 3), -128, 127).to(torch.int8)

    class Network(torch.nn.Module):
        def forward(self, x, scale, zero_points, dst_type, div_mode):
            return torch_npu.npu_quantize(x, scale, zero_points=zero_points, dtype=dst_type, div_mode=div_mode)

    with npusim.session("a2"):
        small = torch.from_numpy(rng.normal(size=(1, 1, 12)).astype(np.float32)).bfloat16()
        out = torch_npu.npu_quantize(small.npu(), torch.tensor([0.1] * 12).bfloat16().npu(), None, torch.qint8, -1, False)
        assert out.dtype == torch.int8 and torch.equal(out.cpu(), torch.round(small.float() * torch.tensor(0.1).bfloat16().float()).to(torch.int8))
        model = torch.compile(Network(), fullgraph=True, backend=tng.get_npu_backend(compiler_config=tng.CompilerConfig()), dynamic=True)
        out = model(x.npu(), torch.tensor([3.0] * 12, dtype=torch.float16).npu(), None, dst_type=torch.qint8, div_mode=False)
        assert torch.equal(out.cpu(), expected)
