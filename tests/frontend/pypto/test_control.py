"""PyPTO kernel structure: jit kernels in their decorator forms, loops and their ranges, conditions,
device-valued scalars (values and timing), kernel-local tensors, views with tails, compiler hints
(recorded, not modelled) and the clear errors of what is not modelled."""

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import npusim
from npusim import pypto
from npusim.errors import OpArgumentError, UsageError

ROOT = Path(__file__).parents[3]


@pypto.frontend.jit
def copy_rows(x, n, out):
    """The first n rows of x into out, one row per loop iteration (n a tensor element or an int)."""
    pypto.set_vec_tile_shapes(1, x.shape[1])
    for i in pypto.loop(n[0] if isinstance(n, pypto.Tensor) else n, name="ROWS", idx_name="i"):
        out[i:i + 1, :] = x[i:i + 1, :]


@pypto.frontend.jit(pass_options={"enable_slice": True}, new_ir=False)
def double_where_flagged(x, flags, out):
    """Row i of out is 2 x row i of x where flags[i] == 1; other rows stay as they were."""
    pypto.set_vec_tile_shapes(1, x.shape[1])
    for i in pypto.loop(0, x.shape[0], 1):
        if flags[i] == 1:
            out[i:i + 1, :] = pypto.add(x[i:i + 1, :], x[i:i + 1, :])


def _run(kernel, *arrays, out_shape, out_dtype=np.float32, config="a2", data=True):
    with npusim.session(config, data=data) as session:
        tensors = [npusim.tensor(a, device=0) if isinstance(a, np.ndarray) else a for a in arrays]
        out = npusim.zeros(out_shape, out_dtype, device=0)
        kernel(*tensors, out)
        npusim.synchronize()
        return (out.numpy() if data else None), session


X = np.arange(32, dtype=np.float32).reshape(4, 8)


@pytest.mark.parametrize("n", [0, 1, 3, 4])
def test_a_loop_bound_read_from_device_memory_copies_that_many_rows(n):
    out, _ = _run(copy_rows, X, np.array([n], np.int32), out_shape=(4, 8))
    np.testing.assert_array_equal(out[:n], X[:n])
    assert not out[n:].any()


def test_a_device_valued_bound_costs_the_control_read_before_the_work_it_steers():
    _, from_device = _run(copy_rows, X, np.array([3], np.int32), out_shape=(4, 8))
    _, from_host = _run(copy_rows, X, 3, out_shape=(4, 8))
    read_us = from_device.config.spec.die.aicpu.control_read.to_ps(1) / 1e6
    assert from_device.now_us >= from_host.now_us + read_us * 0.999


def test_an_if_on_a_device_value_takes_the_branch_each_element_gives():
    flags = np.array([1, 0, 0, 1], np.int32)
    out, session = _run(double_where_flagged, X, flags, out_shape=(4, 8))
    np.testing.assert_array_equal(out, np.where(flags[:, None] == 1, 2 * X, 0))
    assert {"where": "jit double_where_flagged", "options": {"pass_options": {"enable_slice": True}, "new_ir": False,
                                                             "create_new_logical_tensor": False}} in session.pypto_hints


def test_without_data_a_device_valued_condition_is_an_error_that_says_to_run_with_data():
    with pytest.raises(UsageError, match=r"\[0\] \(GetTensorData\) on PE 0: .*--no-data.*run it with data"):
        _run(double_where_flagged, X, np.array([1, 0, 0, 1], np.int32), out_shape=(4, 8), data=False)


def test_jit_decorator_forms_give_the_same_kernel():
    def body(x, out):
        pypto.set_vec_tile_shapes(4, 8)
        out[:] = pypto.mul(x, 3.0)

    for kernel in (pypto.frontend.jit(body), pypto.frontend.jit()(body), pypto.jit(runtime_options={"stitch": 1})(body)):
        out, _ = _run(kernel, X, out_shape=(4, 8))
        np.testing.assert_array_equal(out, 3 * X)


def test_jit_checks_arguments_against_its_annotations():
    @pypto.frontend.jit
    def annotated(x: pypto.Tensor([pypto.DYNAMIC, 8], pypto.DT_FP32), out: pypto.Tensor()):
        out[:] = x

    with pytest.raises(OpArgumentError, match="argument x=3 must be a tensor"):
        _run(annotated, 3, out_shape=(4, 8))


@pytest.mark.parametrize("args, expected", [((4,), [0, 1, 2, 3]), ((1, 7, 2), [1, 3, 5]), ((5, 1, -2), [5, 3]), ((2, 2), [])])
def test_loop_ranges_are_pythons(args, expected):
    assert [int(i) for i in pypto.loop(*args)] == expected


def test_loop_begin_and_end_mark_the_first_and_last_iterations():
    marks = [(int(pypto.is_loop_begin(i)), int(pypto.is_loop_end(i))) for i in pypto.loop(1, 8, 3)]
    assert marks == [(1, 0), (0, 0), (0, 1)]


def test_loop_unroll_takes_the_largest_factor_that_fits_then_smaller_ones():
    assert [(int(i), f) for i, f in pypto.loop_unroll(0, 11, 1, unroll_list=[4, 2])] == [(0, 4), (4, 4), (8, 2), (10, 1)]


@pytest.mark.parametrize("call, message", [
    (lambda: list(pypto.loop(0, 4, 0)), "step=0 would never end"),
    (lambda: list(pypto.loop(1, 2, 3, 4)), "1 to 3 positional arguments"),
    (lambda: list(pypto.loop(4, stride=2)), r"unknown keyword\(s\) \['stride'\]"),
    (lambda: pypto.frontend.jit(pass_option={}), r"unknown option\(s\) \['pass_option'\]"),
    (lambda: pypto.options(tile_shapes=[1]), r"unknown option\(s\) \['tile_shapes'\]"),
    (lambda: pypto.frontend.dynamic("B"), r"pypto.frontend.dynamic\('B'\): symbolic dims in annotations are not modelled"),
    (lambda: pypto.is_loop_end(3), "must be a pypto.loop index"),
    (lambda: pypto.argsort, r"pypto.argsort is not modelled by npusim yet"),
])
def test_what_is_not_modelled_or_misspelt_is_a_clear_error_naming_it(call, message):
    with pytest.raises(UsageError, match=message):
        call()


def test_a_view_past_the_tensor_is_legal_when_its_valid_part_fits():
    @pypto.frontend.jit
    def tail_blocks(x, out):
        rows, cols = x.shape
        for start in pypto.loop(0, rows, 4):
            part = pypto.view(x, [4, cols], [start, 0], valid_shape=[(rows - start).min(4), cols])
            pypto.set_vec_tile_shapes(4, cols)
            out[start:, 0:] = pypto.add(part, 1.0)

    x = np.arange(48, dtype=np.float32).reshape(6, 8)
    out, _ = _run(tail_blocks, x, out_shape=(6, 8))
    np.testing.assert_array_equal(out, x + 1)


def test_a_view_whose_valid_part_runs_past_the_tensor_is_an_error():
    @pypto.frontend.jit
    def too_far(x, out):
        out[:] = pypto.view(x, [4, 8], [4, 0], valid_shape=[4, 8])

    with pytest.raises(OpArgumentError, match=r"view: offsets=\[4, 0\] puts the valid part of the view \[4, 8\] outside the tensor \[6, 8\]"):
        _run(too_far, np.zeros((6, 8), np.float32), out_shape=(6, 8))


def test_a_kernel_local_tensor_takes_a_result_and_is_assembled_into_gm():
    @pypto.frontend.jit
    def local(x, out):
        scratch = pypto.Tensor([2, 8], pypto.DT_FP32)
        pypto.set_vec_tile_shapes(2, 8)
        scratch[:] = pypto.mul(x[0:2, :], 2.0)
        out[2:, 0:] = scratch

    out, _ = _run(local, X, out_shape=(4, 8))
    expected = np.zeros((4, 8), np.float32)
    expected[2:] = 2 * X[:2]
    np.testing.assert_array_equal(out, expected)


def test_a_kernel_local_tensor_in_nz_format_is_an_error_naming_it():
    @pypto.frontend.jit
    def nz(x, out):
        pypto.Tensor([4, 8], pypto.DT_FP32, format=pypto.TileOpFormat.TILEOP_NZ)

    with pytest.raises(UsageError, match=r"format=.*TILEOP_NZ.*: npusim models ND tensors only"):
        _run(nz, X, out_shape=(4, 8))


def test_int32_elements_are_read_and_written_on_the_device():
    @pypto.frontend.jit
    def elements(x, out):
        pypto.set_vec_tile_shapes(1, 1)
        out[1, 2] = x[3, 7] + 1
        out[0, 0] = 5

    x = np.arange(32, dtype=np.int32).reshape(4, 8)
    out, _ = _run(elements, x, out_shape=(2, 4), out_dtype=np.int32)
    np.testing.assert_array_equal(out, [[5, 0, 0, 0], [0, 0, 32, 0]])


def test_only_int32_elements_can_be_read_on_the_device():
    @pypto.frontend.jit
    def read_float(x, out):
        out[0, 0] = x[3, 7]

    with pytest.raises(OpArgumentError, match=r"pypto.GetTensorData: tensor.dtype='DT_FP32' must be DT_INT32"):
        _run(read_float, X, out_shape=(4, 8))


def test_npusim_run_writes_the_hints_into_the_manifest(tmp_path):
    workload = tmp_path / "hinted.py"
    workload.write_text(
        "import numpy as np\nimport npusim\nfrom npusim import pypto\n\n"
        "@pypto.frontend.jit(pass_options={'enable_slice': True})\ndef k(x, out):\n    pypto.set_vec_tile_shapes(4, 8)\n    out[:] = x\n\n"
        "def main():\n    pypto.set_runtime_options(stitch_function_max_num=2)\n"
        "    k(npusim.tensor(np.ones((4, 8), np.float32), device=0), npusim.zeros((4, 8), np.float32, device=0))\n")
    result = subprocess.run([sys.executable, "-m", "npusim", "run", "--config", "a2", str(workload), "--out", str(tmp_path / "out")],
                            cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    hints = json.loads((tmp_path / "out" / "manifest.json").read_text())["pypto_hints"]
    assert [h["where"] for h in hints] == ["set_runtime_options", "jit k"]
