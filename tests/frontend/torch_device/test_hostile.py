"""What a torch program meets at the edges of the npu device (issue 32): empty tensors, torch's own
errors raised through npu tensors, and the documented non-features (inductor, autograd) refused
saying what is not modelled and what to use."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import npusim
from npusim.errors import UsageError

ROOT = Path(__file__).resolve().parents[3]


def test_an_empty_tensor_clones_copies_casts_and_fills():
    with npusim.session("a2"):
        x = torch.empty(0, device="npu")
        assert x.clone().shape == (0,) and x.clone().device == torch.device("npu:0")
        assert torch.empty(0, 3, device="npu").t().contiguous().shape == (3, 0) and x.to(torch.float16).dtype == torch.float16
        assert x.copy_(torch.empty(0)).fill_(1.0).cpu().shape == (0,)


@pytest.mark.parametrize(("make", "error", "message"), [
    (lambda: torch.ones(2, dtype=torch.int32, device="npu").item(), RuntimeError, "a Tensor with 2 elements cannot be converted to Scalar"),
    (lambda: torch.tensor([1.0, 2.0], device="npu").item(), RuntimeError, "a Tensor with 2 elements cannot be converted to Scalar"),
    (lambda: float(torch.ones(2, device="npu")), ValueError, "only one element tensors can be converted to Python scalars"),
    (lambda: torch.ones(1, 4, device="npu").expand(3, 4).add_(1), RuntimeError,
     "more than one element of the written-to tensor refers to a single memory location"),
])
def test_torchs_own_error_reaches_the_caller_through_a_temporary_npu_tensor(make, error, message):
    """The tensor is freed while the error is raised past it: its storage's deleter must not run
    Python there (it cleared the error: "SystemError: error return without exception set")."""
    with npusim.session("a2"):
        with pytest.raises(error, match=message):
            make()


@pytest.mark.filterwarnings("ignore::UserWarning")  # the forward pass's host fallbacks (HostFallbackWarning) and torch's note on them
def test_autograd_is_refused_saying_what_to_use_and_forward_ops_on_parameters_run():
    with npusim.session("a2"):
        model = torch.nn.Linear(4, 4).npu()  # its parameters require grad
        loss = model(torch.ones(2, 4, device="npu")).sum()  # the forward pass runs (inference without no_grad)
        with pytest.raises(UsageError, match=r"autograd is not modelled on the npu device: the backward pass ran aten\.\S+ on npu tensors; "
                                             r"run the model under torch\.no_grad\(\) or torch\.inference_mode\(\)"):
            loss.backward()
        with torch.no_grad():
            assert model(torch.ones(2, 4, device="npu")).shape == (2, 4)


def test_torch_compile_with_inductor_exits_2_saying_what_is_not_modelled_and_what_to_use(tmp_path):
    workload = tmp_path / "inductor.py"
    workload.write_text("import torch\nimport npusim.torch_npu\nmodel = torch.compile(torch.nn.Linear(4, 4).npu(), backend='inductor')\n"
                        "model(torch.ones(2, 4, device='npu'))\n")
    run = subprocess.run([sys.executable, "-m", "npusim", "run", "-c", "a2", str(workload), "--out", str(tmp_path / "run")], cwd=tmp_path,
                         env=dict(os.environ, PYTHONPATH=str(ROOT)), capture_output=True, text=True, timeout=300)
    assert run.returncode == 2, run.stderr
    assert ("torch.compile with the inductor backend (the default) is not modelled on the npu device" in run.stderr
            and "use backend=npusim.torchair.get_npu_backend()" in run.stderr and "KeyError" not in run.stderr)
    assert "        at inductor.py:4: model(torch.ones(2, 4, device='npu'))" in run.stderr and not (tmp_path / "run").exists()
