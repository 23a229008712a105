"""torch's matrix products on the npu device as cube kernels: torch.matmul's shapes (vectors,
broadcast batches), mm, bmm, addmm, nn.functional.linear, in float16, bfloat16 and float32,
bit-exact against the documented accumulation (tests/kernels/cube/reference.py); transposed
operands read as they are, other non-contiguous operands copied first (Contiguous), neither changing
the result; torch's errors; the tiling from torch_npu.options."""

from __future__ import annotations

import warnings

import ml_dtypes
import numpy as np
import pytest
import torch

import npusim
import npusim.torch_npu as torch_npu
from npusim.errors import OpArgumentError, UsageError
from tests.kernels.cube import reference

BF16 = ml_dtypes.bfloat16
TORCH = {np.float16: torch.float16, BF16: torch.bfloat16, np.float32: torch.float32}


def host(array: np.ndarray) -> torch.Tensor:
    if array.dtype == BF16:
        return torch.from_numpy(array.view(np.int16)).view(torch.bfloat16)
    return torch.from_numpy(array)


def values(tensor: torch.Tensor) -> np.ndarray:
    cpu = tensor.cpu()
    return cpu.view(torch.int16).numpy().view(BF16) if cpu.dtype == torch.bfloat16 else cpu.numpy()


def rand(rng, shape, dtype) -> np.ndarray:
    return (rng.standard_normal(shape) / 4).astype(np.float32).astype(dtype)


def same(got: np.ndarray, want: np.ndarray) -> bool:
    return got.shape == want.shape and got.dtype == want.dtype and np.array_equal(got.view(np.uint8), want.view(np.uint8))


def kernel_names(session) -> list[str]:
    """The kernels launched so far (not the host's eager calls, aclnn*)."""
    return [op.name for op in session.system.recorder.ops if not op.name.startswith("aclnn")]


@pytest.mark.parametrize("dtype", [np.float16, BF16, np.float32])
def test_mm_bmm_and_matmul_are_bit_exact(dtype):
    rng = np.random.default_rng(1)
    a, b = rand(rng, (3, 70, 90), dtype), rand(rng, (3, 90, 50), dtype)
    with npusim.session("a2") as session:
        ta, tb = host(a).npu(), host(b).npu()
        got_mm = values(torch.mm(ta[0], tb[0]))
        got_bmm = values(torch.bmm(ta, tb))
        got_at = values(ta @ tb)
        names = kernel_names(session)
    assert same(got_mm, reference.matmul(a[0], b[0]))
    want = np.stack([reference.matmul(a[i], b[i]) for i in range(3)])
    assert same(got_bmm, want) and same(got_at, want)
    assert names.count("MatMulV3") == 1 and names.count("BatchMatMulV3") == 2


def test_matmul_makes_vectors_matrices_and_broadcasts_batches():
    rng = np.random.default_rng(2)
    a, b, v, w = rand(rng, (2, 3, 20, 30), np.float16), rand(rng, (30, 10), np.float16), rand(rng, (30,), np.float16), rand(rng, (20,), np.float16)
    c = rand(rng, (3, 30, 10), np.float16)
    with npusim.session("a2") as session:
        ta, tb, tv, tw, tc = (host(x).npu() for x in (a, b, v, w, c))
        folded = values(ta @ tb)  # mat2 one matrix: the batch runs as one product of 2 x 3 x 20 rows
        broadcast = values(ta @ tc)  # [2, 3, 20, 30] @ [3, 30, 10]
        matrix_vector = values(ta[0, 0] @ tv)
        vector_matrix = values(tw @ ta[0, 0])
        dot = values(tv @ tv)
        names = kernel_names(session)
    assert same(folded, np.stack([[reference.matmul(a[i, j], b) for j in range(3)] for i in range(2)]))
    assert same(broadcast, np.stack([[reference.matmul(a[i, j], c[j]) for j in range(3)] for i in range(2)]))
    assert same(matrix_vector, reference.matmul(a[0, 0], v[:, None])[:, 0])
    assert same(vector_matrix, reference.matmul(w[None, :], a[0, 0])[0])
    assert dot.shape == () and same(dot.reshape(1, 1), reference.matmul(v[None, :], v[:, None]))
    assert names[0] == "MatMulV3" and names[1] == "BatchMatMulV3"


def test_addmm_and_linear_start_the_accumulator_from_the_bias_row():
    rng = np.random.default_rng(3)
    x, w, bias = rand(rng, (4, 33, 64), np.float16), rand(rng, (48, 64), np.float16), rand(rng, (48,), np.float16)
    with npusim.session("a2"):
        tx, tw, tbias = host(x).npu(), host(w).npu(), host(bias).npu()
        linear = values(torch.nn.functional.linear(tx, tw, tbias))
        addmm = values(torch.addmm(tbias, tx[0], tw.t()))
    assert same(linear, np.stack([reference.matmul(x[i], w.T, bias) for i in range(4)]))
    assert same(addmm, reference.matmul(x[0], w.T, bias))


def test_transposed_operands_are_read_as_they_are_and_others_copied_first():
    """A transposed 3-D operand (a permuted view) needs no copy; a view whose rows are not
    contiguous (every other column) gets a Contiguous kernel; both give the product of the values."""
    rng = np.random.default_rng(4)
    a, b = rand(rng, (2, 40, 64), np.float16), rand(rng, (2, 48, 64), np.float16)
    with npusim.session("a2") as session:
        ta, tb = host(a).npu(), host(b).npu()
        transposed = values(torch.matmul(ta, tb.transpose(1, 2)))
        no_copy = kernel_names(session)
        strided = values(torch.matmul(ta[:, :, ::2], tb.transpose(1, 2)[:, ::2, :]))
        names = kernel_names(session)
    assert same(transposed, np.stack([reference.matmul(a[i], b[i].T) for i in range(2)]))
    assert "Contiguous" not in no_copy
    assert same(strided, np.stack([reference.matmul(np.ascontiguousarray(a[i][:, ::2]), np.ascontiguousarray(b[i].T[::2])) for i in range(2)]))
    assert names.count("Contiguous") == 2


def test_torchs_errors():
    with npusim.session("a2", data=False):
        a, b = torch.empty((4, 5), dtype=torch.float16, device="npu"), torch.empty((6, 7), dtype=torch.float16, device="npu")
        with pytest.raises(OpArgumentError, match=r"torch.mm: mat2.shape = \[6, 7\]: mat1 and mat2 shapes cannot be multiplied \(4x5 and 6x7\)"):
            torch.mm(a, b)
        with pytest.raises(OpArgumentError, match="expected self and mat2 to have the same dtype, but got: float16 != float32"):
            torch.mm(a, torch.empty((5, 2), dtype=torch.float32, device="npu"))
        with pytest.raises(OpArgumentError, match="self.dtype = int32: is not supported by the npu's matmul"):
            torch.mm(torch.empty((2, 2), dtype=torch.int32, device="npu"), torch.empty((2, 2), dtype=torch.int32, device="npu"))
        with pytest.raises(OpArgumentError, match=r"mat2 batch dims = \[3\]: do not broadcast with self's \[2\]"):
            torch.matmul(torch.empty((2, 4, 5), dtype=torch.float16, device="npu"), torch.empty((3, 5, 4), dtype=torch.float16, device="npu"))


def test_addmm_with_scaling_runs_on_the_host_with_torchs_result():
    rng = np.random.default_rng(5)
    x, w, c = rand(rng, (8, 16), np.float32), rand(rng, (16, 4), np.float32), rand(rng, (8, 4), np.float32)
    with npusim.session("a2"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            got = values(torch.addmm(host(c).npu(), host(x).npu(), host(w).npu(), beta=0.5, alpha=2.0))
    assert np.allclose(got, torch.addmm(host(c), host(x), host(w), beta=0.5, alpha=2.0).numpy())


def test_the_tiling_is_the_options_and_refuses_unknown_fields():
    with npusim.session("a2", data=False) as session:
        a, b = torch.empty((2048, 2048), dtype=torch.float16, device="npu"), torch.empty((2048, 2048), dtype=torch.float16, device="npu")
        a @ b
        with torch_npu.options(matmul_tiling={"base_m": 64, "base_n": 128, "cores": 4}):
            a @ b
        default, chosen = [op.args for op in session.system.recorder.ops if op.name == "MatMulV3"]
        with pytest.raises(UsageError, match="matmul_tiling has no field 'tile_m'"), torch_npu.options(matmul_tiling={"tile_m": 64}):
            pass
    assert (default["base"], default["cores"], default["step_k"]) == ([128, 256, 64], 24, [4, 4])  # MatMulV3's basic block
    assert (chosen["base"], chosen["cores"]) == ([64, 128, 64], 4)
