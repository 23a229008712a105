"""A run's memory: refused before it starts or before a launch simulates when its estimate exceeds
the limit, stopped as it simulates past the limit, and the machine's available memory by default
(npusim/frontend/memory.py)."""

import contextlib
import ctypes
import gc
import io
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import npusim
from npusim import isa
from npusim.errors import MemoryLimitError, UsageError
from npusim.frontend.memory import SESSION_BYTES, MemoryBudget, available_bytes, parse_memory, resident_bytes
from npusim.runtime.program import BYTES_PER_TILE_OP

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
MiB = 1 << 20


def test_a_limit_below_what_a_session_needs_is_refused_before_anything_is_built():
    with pytest.raises(MemoryLimitError, match=r"needs at least .* to start .* more than its limit of .*\(max_memory="):
        with npusim.session("a2", max_memory=resident_bytes() + SESSION_BYTES // 2):
            pytest.fail("the session must not start")


def test_a_launch_whose_tile_ops_would_exceed_the_limit_is_refused_before_it_simulates():
    """The a3 all-gather's 16 PEs make 4,128 tile ops, ~11 kB each while simulated: about 44 MiB."""
    from shmem_allgather import run_allgather  # noqa: F401  (examples/ is on the path below)

    budget = MemoryBudget(1 << 50, "a test")
    with pytest.raises(MemoryLimitError) as refused:
        with npusim.session("a3", data=False, max_memory=budget) as active:
            budget.limit = resident_bytes() + 8 * MiB  # what the process holds as the workload starts, and 8 MiB
            with contextlib.redirect_stdout(io.StringIO()):
                run_allgather()
    message = str(refused.value)
    assert "the launch of allgather_kernel on 16 PEs (4,128 tile ops) would need about " in message
    assert f"{4128 * BYTES_PER_TILE_OP / MiB:.2f} MiB more memory" in message and "launch fewer PEs" in message
    assert active.env.now == 0  # refused before it simulated


@pytest.fixture(autouse=True)
def examples_on_the_path(monkeypatch):
    monkeypatch.syspath_prepend(str(EXAMPLES))


def resident_in_use() -> int:
    """The resident memory this process holds in use, in bytes: measured once the garbage is
    collected and the memory the C allocator kept after earlier tests freed it is handed back
    (glibc's malloc_trim, where there is one). The allocator gives such memory back when it sees
    fit (a free that makes the top of its heap large enough, an empty pymalloc arena), so a run can
    go below a baseline that counts it, by more than the margins below (58 MiB of it after a few
    test modules, 170 MiB when sessions froze their garbage too)."""
    gc.collect()
    trim = getattr(ctypes.CDLL(None), "malloc_trim", None)
    if trim is not None:
        trim(0)
    return resident_bytes()


def test_a_run_that_grows_past_its_limit_while_simulating_is_stopped_saying_how_far_it_got():
    with pytest.raises(MemoryLimitError, match=r"the run used .* of memory at .* us simulated, after .* events.*: more than its limit of "
                                               r".*; it was stopped before the system would kill it"):
        with npusim.session("a2", data=False, max_memory=resident_in_use() + SESSION_BYTES + 16 * MiB):
            ballast = np.ones((SESSION_BYTES + 64 * MiB) // 8)  # the workload's own memory: more than was left
            x = npusim.tensor(np.ones(4096, np.float16))
            kernel = isa.Kernel("copy", die=0)
            p = kernel.aiv(0)
            p.copy(p.alloc(4096, np.float16), isa.gm(x))
            kernel.launch()
            npusim.synchronize()
    assert ballast.sum() > 0


def test_the_default_limit_is_what_the_machine_has_available():
    if available_bytes() is None:
        pytest.skip("the available memory is not known on this system")
    budget = MemoryBudget.of_machine()
    assert budget.limit > resident_bytes() and "had available" in budget.describe()


def test_sizes_are_parsed_and_bad_ones_refused():
    assert parse_memory("4GiB") == 4 << 30 and parse_memory("500 MB") == 500_000_000
    for bad in ("lots", "0B", "-1GiB", "3 s"):
        with pytest.raises(UsageError, match="--max-memory"):
            parse_memory(bad)
    with pytest.raises(UsageError, match="max_memory"):
        with npusim.session("a2", max_memory=-5):
            pass


def test_a_large_launch_is_announced(capsys):
    budget = MemoryBudget(1 << 50, "a test")
    budget.expect(2 << 30, "the launch of k on 768 PEs (165,000 tile ops)")
    budget.expect(2 << 30, "another")
    err = capsys.readouterr().err
    assert err.count("npusim: the launch of k on 768 PEs (165,000 tile ops) will need about ") == 1 and "another" not in err


def test_npusim_run_refuses_a_limit_it_cannot_start_in_exit_2_writing_nothing(tmp_path):
    run = subprocess.run([sys.executable, "-m", "npusim", "run", "-c", "a2", str(EXAMPLES / "vector_add.py"), "--max-memory", "50MB",
                          "--out", str(tmp_path / "out")], cwd=tmp_path, env=dict(os.environ, PYTHONPATH=str(ROOT)), capture_output=True,
                         text=True, timeout=300)
    assert run.returncode == 2 and "to start" in run.stderr and "more than its limit of 47.68 MiB (--max-memory 50MB)" in run.stderr
    assert not (tmp_path / "out").exists() and "Traceback" not in run.stderr


@pytest.mark.parametrize("make", ["npusim", "torch"])
def test_a_tensor_whose_values_would_exceed_the_limit_is_refused_before_they_are_allocated(make):
    """A device tensor's values are held in this process (the simulated GM's bytes): 1 GiB of them
    with 64 MiB left is refused before they are allocated, naming the tensor, its die and what to do;
    simulating timing only (no values) takes it."""
    if make == "torch":
        import torch

        from npusim import torch_npu  # noqa: F401  (the npu device)
    limit = resident_bytes() + SESSION_BYTES + 64 * MiB

    def allocate():
        if make == "torch":
            return torch.empty(1 << 29, dtype=torch.float16, device="npu")
        return npusim.empty((1 << 29,), np.float16, device=1)

    with pytest.raises(MemoryLimitError) as refused:
        with npusim.session("a2", max_memory=limit):
            allocate()
    message = str(refused.value)
    die = 0 if make == "torch" else 1
    assert f"allocating tensor[{1 << 29}]<float16> on die {die} would need about 1.00 GiB more memory" in message
    assert "use smaller tensors or simulate timing only (--no-data, data=False)" in message
    assert resident_bytes() < limit  # refused before the bytes were taken
    with npusim.session("a2", data=False, max_memory=limit):
        assert allocate() is not None


def test_npusim_run_refuses_a_tensor_too_large_for_the_limit_exit_2_writing_nothing(tmp_path):
    workload = tmp_path / "big.py"
    workload.write_text("import numpy as np\nimport npusim\nx = npusim.empty((8 << 30,), np.uint8)\n")
    command = [sys.executable, "-m", "npusim", "run", "-c", "a2", str(workload), "--max-memory", "1GiB", "--out", str(tmp_path / "out")]
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    run = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert run.returncode == 2 and "allocating tensor[8589934592]<uint8> on die 0 would need about 8.00 GiB more memory" in run.stderr
    assert "more than its limit of 1.00 GiB (--max-memory 1GiB)" in run.stderr and "Traceback" not in run.stderr
    assert not (tmp_path / "out").exists()
    timing_only = subprocess.run([*command, "--no-data"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert timing_only.returncode == 0, timing_only.stderr
