"""The framework's program styles of issue 31, on the cases' shapes and dtypes (hicann/pypto
@883e7dfb0): the host-data launch style of its single-op system tests
(``python/tests/st/operation/vector/test_amin_onboard.py``: ``pypto.runtime._device_init``,
``pypto.tensor`` on the host, ``with pypto.function``, ``pypto.min`` of a tail block's valid rows,
``_device_run_once_data_from_host`` on CPU tensors), ``Tensor.move`` (its examples and jit tests),
``pypto.RunMode``, views past the tensor end without ``valid_shape`` (the framework clips the valid
shape, logical_tensor.cpp GetViewValidShape) and the ragged tail tiles of matmul built on them, a
bf16 tensor divided by a Python int, jit kernels called with CPU tensors (the SIM run mode's host
data) and inside an NPUGraph capture (``python/tests/st/test_aclgraph_new_front.py``)."""

from __future__ import annotations

import subprocess
import sys

import ml_dtypes
import numpy as np
import pytest
import torch

import npusim
import npusim.torch_npu  # noqa: F401  (the npu device)
from npusim import formats, pypto
from npusim.errors import OpArgumentError, UsageError


def _amin_function(input_shape=(8, 8), view_shape=(4, 8), tile_shape=(4, 8)):
    """test_amin_onboard.py's function: amin over dim 1 of row blocks, the last block's valid rows by pypto.min."""
    pypto.runtime._device_init()
    input_tensor = pypto.tensor(input_shape, pypto.DT_FP32, "PTO_TENSOR_SELF")
    dst_tensor = pypto.tensor((input_shape[0],), pypto.DT_FP32, "PTO_TENSOR_DST")
    loops = -(-input_shape[0] // view_shape[0])
    with pypto.function("MAIN", input_tensor, dst_tensor):
        for b_idx in pypto.loop(loops, name="b0", idx_name="bidx"):
            view = pypto.view(input_tensor, view_shape, [b_idx * view_shape[0], 0],
                              valid_shape=[pypto.min(input_shape[0] - b_idx * view_shape[0], pypto.symbolic_scalar(view_shape[0])),
                                           pypto.symbolic_scalar(view_shape[1])])
            pypto.set_vec_tile_shapes(*tile_shape)
            pypto.assemble(pypto.amin(view, 1), [b_idx * view_shape[0]], dst_tensor)
    return input_tensor, dst_tensor


@pytest.mark.parametrize("flat", [False, True])
@pytest.mark.parametrize("rows", [8, 11])
def test_a_function_recorded_on_the_host_runs_once_on_cpu_data(rows, flat):
    """flat: the data of each parameter as a 1-D tensor of its elements in row-major order, as
    pto_test_case_runner.py passes it (the framework copies bytes; the shapes need not be the same)."""
    a = torch.from_numpy(np.random.default_rng(rows).normal(size=(rows, 8)).astype(np.float32))
    b = torch.zeros(rows)
    with npusim.session("a2"):
        _amin_function((rows, 8))
        given = a.reshape(-1) if flat else a
        pypto.runtime._device_run_once_data_from_host(pypto.from_torch(given, "a_tensor"), pypto.from_torch(b, "b_tensor"))
        pypto.runtime._device_fini()
        with pytest.raises(UsageError, match="has run; a recorded function runs once"):
            pypto.runtime._device_run_once_data_from_host(pypto.from_torch(a), pypto.from_torch(b))
    assert torch.equal(b, torch.amin(a, dim=1))


def test_host_data_mismatches_are_clear_errors():
    with npusim.session("a2"):
        with pytest.raises(UsageError, match="no function was recorded"):
            pypto.runtime._device_run_once_data_from_host(pypto.from_torch(torch.zeros(2)))
        _amin_function()
        with pytest.raises(OpArgumentError, match="1 tensors given, but function 'MAIN' takes 2"):
            pypto.runtime._device_run_once_data_from_host(pypto.from_torch(torch.zeros(8, 8)))
        with pytest.raises(OpArgumentError, match="argument 1 .* does not match parameter 1 .* the numbers of elements must be the same"):
            pypto.runtime._device_run_once_data_from_host(pypto.from_torch(torch.zeros(8, 8)), pypto.from_torch(torch.zeros(4)))
        with pytest.raises(OpArgumentError, match="argument 0 .* does not match parameter 0 .* the dtypes"):
            pypto.runtime._device_run_once_data_from_host(pypto.from_torch(torch.zeros(64, dtype=torch.float16)), pypto.from_torch(torch.zeros(8)))
        with pytest.raises(OpArgumentError, match="takes pypto.from_torch"):
            pypto.runtime._device_run_once_data_from_host(np.zeros((8, 8)), np.zeros(8))


def test_a_tensors_shape_is_a_list_as_the_frameworks():
    """``Tensor.shape`` is a list (python/pypto/tensor.py), so the framework's check of an op
    result's shape against torch's (python/tests/st/test_sigmoid.py, test_sigmoid_shape_dim: a
    [4, 4] DT_FP32 sigmoid) holds; a new list each time, as there, so changing it changes no tensor."""
    with npusim.session("a2"):
        x = pypto.tensor([4, 4], pypto.DT_FP32)
        with pypto.function("SIGMOID_SHAPE", x):
            pypto.set_vec_tile_shapes(4, 4)
            result = pypto.sigmoid(x)
            assert result.shape == list(torch.sigmoid(torch.randn(4, 4)).shape) == [4, 4]
            shape = result.shape
            shape.append(1)
            assert result.shape == [4, 4] and result.dim == 2
            rows = pypto.view(result, [2, 4], [2, 0])
            assert rows.shape == [2, 4] and isinstance(rows.shape, list)
            assert pypto.reshape(result, [16]).shape == [16]


def test_run_mode_and_scalar_min_max():
    assert [pypto.RunMode.NPU, pypto.RunMode.SIM] == [0, 1] and pypto.runtime.RunMode is pypto.RunMode
    assert int(pypto.min(3, 5)) == 3 and int(pypto.max(pypto.symbolic_scalar(3), 5)) == 5


@pypto.frontend.jit(runtime_options={"run_mode": pypto.RunMode.NPU})
def matmul_into(a: pypto.Tensor[[...], pypto.DT_BF16], b: pypto.Tensor[[...], pypto.DT_BF16], out: pypto.Tensor[[...], pypto.DT_BF16]):
    """basic_ops.py's matmul kernel: the result moved into out."""
    pypto.set_cube_tile_shapes([32, 32], [64, 64], [64, 64])
    out.move(pypto.matmul(a, b, a.dtype))


@pypto.frontend.jit
def add_local_then_move(x, out):
    pypto.set_vec_tile_shapes(4, 8)
    local = pypto.tensor([4, 8], pypto.DT_FP32)
    local.move(x + x)
    out.move(local)


def test_move_makes_a_result_the_tensors_value():
    rng = np.random.default_rng(0)
    a = torch.from_numpy(rng.normal(size=(64, 128)).astype(np.float32)).bfloat16()
    b = torch.from_numpy(rng.normal(size=(128, 64)).astype(np.float32)).bfloat16()
    x = torch.arange(32.0).reshape(4, 8)
    with npusim.session("a2"):
        out = torch.empty(64, 64, dtype=torch.bfloat16, device="npu")
        matmul_into(a.npu(), b.npu(), out)
        doubled = torch.zeros(4, 8, device="npu")
        add_local_then_move(x.npu(), doubled)
        torch.testing.assert_close(out.cpu().float(), (a.float() @ b.float()), atol=0.5, rtol=1e-2)
        assert torch.equal(doubled.cpu(), x + x)


@pypto.frontend.jit
def blocks_of_rows(x, out):
    """Row blocks of 8 over a tensor whose rows are not a multiple of 8: the last view runs past the
    end with no valid_shape, so its valid rows are what is left."""
    pypto.set_vec_tile_shapes(8, 16)
    for i in pypto.loop(-(-x.shape[0] // 8)):
        block = pypto.view(x, [8, 16], [i * 8, 0])
        out[i * 8:, :] = block * 2.0


@pypto.frontend.jit
def matmul_row_blocks(a, b, out):
    """C = A @ B in blocks of 32 rows of A (a ragged last block), a_trans / b_trans as the framework's matmul tests."""
    pypto.set_cube_tile_shapes([32, 32], [32, 64], [32, 64])
    for i in pypto.loop(-(-a.shape[0] // 32)):
        rows = pypto.view(a, [32, a.shape[1]], [i * 32, 0])
        out[i * 32:, :] = pypto.matmul(rows, b, pypto.DT_FP32, b_trans=True)


def test_views_past_the_end_take_the_valid_part_that_is_left():
    x = np.arange(13 * 16, dtype=np.float32).reshape(13, 16)
    with npusim.session("a2"):
        out = npusim.zeros((13, 16), np.float32)
        blocks_of_rows(npusim.tensor(x), out)
        assert np.array_equal(out.numpy(), x * 2)


@pytest.mark.parametrize("m, k, n", [(50, 64, 48), (63, 128, 32)])
def test_matmul_of_ragged_tail_blocks(m, k, n):
    rng = np.random.default_rng(m)
    a = rng.normal(size=(m, k)).astype(np.float16)
    b = rng.normal(size=(n, k)).astype(np.float16)
    with npusim.session("a2"):
        out = npusim.zeros((m, n), np.float32)
        matmul_row_blocks(npusim.tensor(a), npusim.tensor(b), out)
        got = out.numpy()
    np.testing.assert_allclose(got, a.astype(np.float32) @ b.astype(np.float32).T, rtol=1e-3, atol=1e-3)


@pypto.frontend.jit
def reshape_tail_rows(k_in: pypto.Tensor([pypto.DYNAMIC, pypto.DYNAMIC, pypto.STATIC]),
                      k_out: pypto.Tensor([pypto.DYNAMIC, pypto.DYNAMIC, pypto.STATIC])):
    """python/tests/st/frontend/test_reshape_copy_out.py's kernel: a view past the end (l of l_max
    rows valid), reshaped to 2-D and back with valid shapes, squared in between."""
    t, l, d = k_in.shape  # noqa: E741 - the framework's names
    l_max = 32
    for t_idx in pypto.loop(0, t, 4, name="t", idx_name="t_idx"):
        k = pypto.view(k_in, [4, l_max, d], [t_idx, 0, 0], valid_shape=[4, l, d])
        pypto.set_vec_tile_shapes(8, 16, 128)
        k_2d = pypto.reshape(k, [4 * l_max, d], valid_shape=[4 * l, d])
        pypto.set_vec_tile_shapes(128, 128)
        k_fp32 = pypto.cast(k_2d, pypto.DT_FP32)
        squared = pypto.mul(k_fp32, k_fp32)
        pypto.set_vec_tile_shapes(8, 16, 128)
        pypto.assemble(pypto.reshape(squared, [4, l_max, d], valid_shape=[4, l, d]), [t_idx, 0, 0], k_out)


@pypto.frontend.jit
def reshape_blocks_then_matmul(a: pypto.Tensor([pypto.STATIC, pypto.DYNAMIC, pypto.DYNAMIC]),
                               b: pypto.Tensor([pypto.DYNAMIC, pypto.DYNAMIC, pypto.STATIC]),
                               out: pypto.Tensor([pypto.DYNAMIC, pypto.DYNAMIC, pypto.STATIC, pypto.STATIC])):
    """python/tests/st/frontend/test_reshape_validshape_matmul.py's kernel: 5x5 blocks past the end
    of a 3x5 batch, flattened with valid shapes, multiplied, the 2-D result assembled by indexing
    into a 4-D output while the vector tile shape is 3-D."""
    batch, seq = b.shape[:2]
    for b_idx in pypto.loop((batch + 4) // 5, name="b", idx_name="b_idx"):
        for s_idx in pypto.loop((seq + 4) // 5, name="s", idx_name="s_idx"):
            pypto.set_cube_tile_shapes([32, 32], [64, 64], [64, 64])
            pypto.set_vec_tile_shapes(32, 32, 32)
            a_view = a[:, b_idx * 5:(b_idx + 1) * 5, s_idx * 5:(s_idx + 1) * 5]
            b_view = b[b_idx * 5:(b_idx + 1) * 5, s_idx * 5:(s_idx + 1) * 5, :]
            valid_b = pypto.min(5, batch - b_idx * 5)
            valid_s = pypto.min(5, seq - s_idx * 5)
            a_2d = pypto.reshape(a_view, [a_view.shape[0], 25], valid_shape=[a_view.shape[0], valid_b * valid_s])
            b_2d = pypto.reshape(b_view, [25, b_view.shape[-1]], valid_shape=[valid_b * valid_s, b_view.shape[-1]])
            out[b_idx, s_idx, :, :] = pypto.matmul(a_2d, b_2d, out_dtype=pypto.DT_FP32)


def test_a_reshape_of_a_view_past_the_end_copies_its_valid_part():
    k = torch.randn(4, 8, 512, dtype=torch.bfloat16)
    with npusim.session("a2"):
        k_out = torch.zeros(4, 8, 512, dtype=torch.float32).npu()
        reshape_tail_rows(k.npu(), k_out)
        got = k_out.cpu()
    assert torch.equal(got, k.float() ** 2)


def test_a_reshaped_tail_block_feeds_matmul_and_its_result_is_assembled_by_indexing():
    torch.manual_seed(20260608)
    a, b = torch.randn(256, 3, 5), torch.randn(3, 5, 64)
    with npusim.session("a2"):
        out = torch.zeros(1, 1, 256, 64).npu()
        reshape_blocks_then_matmul(a.npu(), b.npu(), out)
        got = out.cpu()
    torch.testing.assert_close(got[0, 0], a.reshape(256, 15) @ b.reshape(15, 64), rtol=1e-4, atol=1e-4)


@pypto.frontend.jit
def unit_view_read_then_assembled(x, out, twice):
    pypto.set_vec_tile_shapes(16, 16)
    total = pypto.add(x, x)
    pypto.set_vec_tile_shapes(1, 16, 16)
    viewed = pypto.reshape(total, [1, 16, 16])
    twice[:] = pypto.add(viewed, viewed)
    out[0, :, :] = total  # total was read where it is: this assemble copies it


def test_an_op_result_read_through_a_unit_dims_view_stays_where_it_was_read():
    x = torch.randn(16, 16)
    with npusim.session("a2"):
        out, twice = torch.zeros(2, 16, 16).npu(), torch.zeros(1, 16, 16).npu()
        unit_view_read_then_assembled(x.npu(), out, twice)
        assert torch.equal(out.cpu()[0], x + x)
        assert torch.equal(twice.cpu()[0], (x + x) + (x + x))


@pypto.frontend.jit
def divide_by_int(x, out):
    pypto.set_vec_tile_shapes(4, 16)
    out[:] = x / 3


@pypto.frontend.jit
def reflected_ops(x, out):
    pypto.set_vec_tile_shapes(4, 16)
    out[:] = (1 - x) + 2 / x


def test_a_bf16_tensor_divided_by_a_python_int():
    """A scalar the vector unit has no instruction for is duplicated with pypto.full: bf16 takes an int scalar as a float."""
    bf16 = ml_dtypes.bfloat16
    x = (np.arange(64).reshape(4, 16) + 1).astype(bf16)
    with npusim.session("a2"):
        out = npusim.zeros((4, 16), bf16)
        divide_by_int(npusim.tensor(x), out)
        reflected = npusim.zeros((4, 16), bf16)
        reflected_ops(npusim.tensor(x), reflected)
        assert np.array_equal(out.numpy(), (x.astype(np.float32) / np.float32(3)).astype(bf16))
        wide = x.astype(np.float32)  # the chain rounds once, at its end (AutoCast's cast pairs removed)
        assert np.array_equal(reflected.numpy(), ((np.float32(1) - wide) + (np.float32(2) / wide)).astype(bf16))


@pypto.frontend.jit(runtime_options={"run_mode": pypto.RunMode.SIM})
def add_kernel(x: pypto.Tensor[...], y: pypto.Tensor[...], out: pypto.Tensor[...]):
    """hello_world.py's kernel."""
    pypto.set_vec_tile_shapes(32, 32)
    out[:] = x + y


def test_a_jit_kernel_called_with_cpu_tensors_runs_on_their_data():
    x, y = torch.randn(64, 64), torch.randn(64, 64)
    out = torch.empty(64, 64)
    with npusim.session("a2"):
        add_kernel(x, y, out)
    assert torch.equal(out, x + y)


@pypto.frontend.jit()
def cust_dyn_func(a: pypto.Tensor([pypto.STATIC, pypto.STATIC], pypto.DT_INT32),
                  b: pypto.Tensor([pypto.STATIC, pypto.STATIC], pypto.DT_INT32),
                  c: pypto.Tensor([pypto.STATIC, pypto.STATIC], pypto.DT_INT32), tiling=32):
    pypto.set_vec_tile_shapes(tiling, tiling)
    for _ in pypto.loop(1, name="s0", idx_name="k"):
        c.move(pypto.add(a, b))


def test_a_jit_kernel_in_an_npu_graph_runs_at_each_replay_after_the_work_before_it():
    """test_aclgraph_new_front.py's network: torch adds, a jit kernel, torch ops on its result, captured and replayed."""
    rng = np.random.default_rng(9)
    data1 = torch.from_numpy(rng.integers(-5, 5, (256, 256)).astype(np.int32))
    data2 = torch.from_numpy(rng.integers(-5, 5, (256, 256)).astype(np.int32))

    def network(x, y):
        total = torch.add(x, y)
        c1 = torch.zeros(x.shape, dtype=torch.int32, device=y.device)
        cust_dyn_func(total, y, c1)
        return torch.add(torch.sub(c1, total), total)

    with npusim.session("a2"):
        x, y = data1.npu(), data2.npu()
        graph = torch.npu.NPUGraph()
        with torch.npu.graph(graph):
            result = network(x, y)
        assert not result.cpu().any()  # captured, not run
        graph.replay()
        assert torch.equal(result.cpu(), data1 + 2 * data2)
        y.copy_(torch.ones(256, 256, dtype=torch.int32))
        graph.replay()
        assert torch.equal(result.cpu(), data1 + 2)


def test_importing_pypto_after_torch_gives_torch_npu():
    """The framework's tests call torch.npu.set_device without importing torch_npu (on the machine torch loads it)."""
    code = "import torch\nfrom npusim import pypto\nimport npusim\nwith npusim.session('a2'):\n    torch.npu.set_device(1)\n    print(torch.npu.current_device())\n"
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "1"


def test_moving_a_result_into_a_view_keeps_the_ops_that_read_the_view():
    """test_cumsum_onboard.py: ``view.move(pypto.cumsum(view, 0))`` then assemble the view (now the
    int64 result) into the output; the cumsum built before the move still reads the int32 view."""
    a = torch.randint(-10, 10, (10, 10), dtype=torch.int32, generator=torch.Generator().manual_seed(1))
    out = torch.zeros(10, 10, dtype=torch.int64)
    with npusim.session("a2"):
        pypto.runtime._device_init()
        x = pypto.tensor((10, 10), pypto.DT_INT32, "in")
        y = pypto.tensor((10, 10), pypto.DT_INT64, "out")
        with pypto.function("MAIN", x, y):
            for b in pypto.loop(3):
                view = pypto.view(x, (10, 4), [0, b * 4],
                                  valid_shape=[pypto.symbolic_scalar(10), pypto.min(pypto.symbolic_scalar(10) - b * 4, pypto.symbolic_scalar(4))])
                pypto.set_vec_tile_shapes(10, 4)
                view.move(pypto.cumsum(view, 0))
                pypto.assemble(view, [0, b * 4], y)
        pypto.runtime._device_run_once_data_from_host(pypto.from_torch(a), pypto.from_torch(out))
    assert torch.equal(out, torch.cumsum(a, 0))


def test_the_frameworks_test_builder_style():
    """python/tests/st/pypto_test.py's run_pto: the tile shape set on the host, ``for _ in function``,
    ``pypto.tensor()`` placeholders given their value by move, a valid_shape past the view (test_relu.py)."""
    a = torch.rand(32, 32) * 100 - 50
    b = torch.zeros(32, 32)
    with npusim.session("a2"):
        inputs, outputs = [pypto.tensor((32, 32), pypto.DT_FP32, "A")], [pypto.tensor((32, 32), pypto.DT_FP32, "B")]
        pypto.set_vec_tile_shapes(32, 32)
        with pypto.function("MAIN", *inputs, *outputs) as recorded:
            for _ in recorded:
                for i in pypto.loop(2):
                    for j in pypto.loop(2):
                        tile = pypto.view(inputs[0], (16, 16), [i * 16, j * 16],
                                          valid_shape=[pypto.min(pypto.symbolic_scalar(32) - i * 16, pypto.symbolic_scalar(32)),
                                                       pypto.min(pypto.symbolic_scalar(32) - i * 16, pypto.symbolic_scalar(32))])
                        pypto.set_vec_tile_shapes(8, 8)
                        result = pypto.tensor()
                        result.move(pypto.relu(tile))
                        pypto.assemble(result, [i * 16, j * 16], outputs[0])
        assert all(isinstance(t, pypto.tensor) for t in outputs)
        pypto.runtime._device_run_once_data_from_host(pypto.from_torch(a), pypto.from_torch(b))
    assert torch.equal(b, torch.relu(a))


def test_the_frameworks_module_paths_and_helper_names():
    from npusim.pypto.symbolic_scalar import SymbolicScalar, SymInt

    assert callable(pypto.symbolic_scalar) and pypto.symbolic_scalar is SymbolicScalar  # the module import leaves it a function
    assert int(pypto.ceildiv(pypto.symbolic_scalar(7), 2)) == 4 and pypto.ceildiv(7, 2) == 4 and SymInt is not None
    assert pypto.DT_INT4.numpy == np.dtype(ml_dtypes.int4) and pypto.DT_FP8E4M3.numpy == np.dtype(ml_dtypes.float8_e4m3fn)
    assert "npusim cannot hold it" in repr(pypto.DT_HF4)  # a name (dtype tables import); ops refuse it
    assert pypto.DT_HF8.numpy == formats.HIFLOAT8  # held as its codes (npusim.formats)
    assert pypto.CompStage.TILE_GRAPH.value == 2 and pypto.symbolic_scalar(3).as_variable() is None  # hints
    with npusim.session("a2") as session:
        pypto.set_semantic_label("Query-Linear")
    assert {"where": "set_semantic_label", "options": {"label": "Query-Linear"}} in session.pypto_hints


def test_full_takes_a_valid_shape_of_symbolic_scalars():
    """test_vector_operation_part_one.py's full: 16-row blocks of a 2.0 fill, the valid rows by SymbolicScalar.min."""
    n, m = 24, 32
    with npusim.session("a2"):
        pypto.runtime._device_init()
        a = pypto.tensor((n, m), pypto.DT_FP32, "a")
        with pypto.function("FULL", a):
            pypto.set_vec_tile_shapes(8, 8)
            for b_idx in pypto.loop(2, name="L0", idx_name="b_idx"):
                block = pypto.tensor()
                block.move(pypto.full((16, m), 2.0, pypto.DT_FP32,
                                      valid_shape=[(pypto.symbolic_scalar(n) - b_idx * 16).min(pypto.symbolic_scalar(16)), m]))
                pypto.assemble(block, [b_idx * 16, 0], a)
        out = torch.zeros(n, m)
        pypto.runtime._device_run_once_data_from_host(pypto.from_torch(out))
        pypto.runtime._device_fini()
    assert torch.equal(out, torch.full((n, m), 2.0))


@pypto.frontend.jit
def fp16_chain(x, y, out, rounded):
    """test_verify_frontend_jit.py's add_dyn_kernel body: ((x * (x + y)) - y) * y in fp16."""
    pypto.set_vec_tile_shapes(32, 32)
    out[:] = ((x * (x + y)) - y) * y
    total = pypto.cast(pypto.cast(x + y, pypto.DT_FP32), x.dtype)  # the program's own casts stay
    rounded[:] = pypto.add(x + y, total)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_a_chain_of_fp16_or_bf16_ops_rounds_once_at_its_end(dtype):
    """The framework computes each fp16 add / sub / mul (and every bf16 op) in fp32 between casts
    its AutoCast pass adds, then removes the cast pairs between two such ops
    (auto_cast.cpp RemoveRedundantCastChain): test_verify_dyn's golden, computed in fp32 and rounded
    once, holds with torch.allclose's default tolerance."""
    a, b = torch.rand(72, 144, dtype=dtype), torch.rand(72, 144, dtype=dtype)
    with npusim.session("a2"):
        out, rounded = torch.zeros(72, 144, dtype=dtype).npu(), torch.zeros(72, 144, dtype=dtype).npu()
        fp16_chain(a.npu(), b.npu(), out, rounded)
        got, got_rounded = out.cpu(), rounded.cpu()
    af, bf = a.float(), b.float()
    assert torch.equal(got, (((af * (af + bf)) - bf) * bf).to(dtype))
    assert torch.equal(got_rounded, ((af + bf) + (af + bf).to(dtype).float()).to(dtype))


def test_a_device_value_read_while_a_host_data_function_records_is_an_error_not_zero():
    """test_page_attention.py's loop bound act_seqs[b] in a pypto.function on host tensors: its data
    only exists when the function runs, so reading it while recording is refused (it read the
    empty GM's 0 before: the loop ran no iteration and the output stayed zero, silently)."""
    with npusim.session("a2"):
        seqs = pypto.tensor([2], pypto.DT_INT32, "seqs")
        out = pypto.tensor([4, 8], pypto.DT_FP32, "out")
        with pytest.raises(UsageError, match=r"seqs.*\[0\]: a device-valued scalar .* recorded with pypto.function on host data has no data"):
            with pypto.function("MAIN", seqs, out):
                pypto.set_vec_tile_shapes(4, 8)
                for _ in pypto.loop(0, seqs[0], 1):
                    pypto.assemble(pypto.full([4, 8], 1.0, pypto.DT_FP32), [0, 0], out)
