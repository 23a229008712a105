"""pypto.from_torch: a torch npu tensor as a kernel's device tensor (a kernel writes into the torch
tensor), its hints recorded, and a clear error for what npusim does not model."""

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import npusim  # noqa: E402
import npusim.torch_npu  # noqa: E402, F401  (the "npu" device)
from npusim import pypto  # noqa: E402
from npusim.errors import OpArgumentError, UsageError  # noqa: E402


@pypto.frontend.jit
def add_one(x, out):
    pypto.set_vec_tile_shapes(4, 8)
    out[:, :] = pypto.add(x, 1.0)


def test_a_kernel_writes_into_the_torch_tensors_from_torch_converted():
    values = np.arange(32, dtype=np.float32).reshape(4, 8)
    with npusim.session("a2") as session:
        x, out = torch.from_numpy(values).npu(), torch.zeros(4, 8).npu()
        add_one(pypto.from_torch(x, "x", dynamic_axis=[0]), pypto.from_torch(out, "out"))
        npusim.synchronize()
        np.testing.assert_array_equal(out.cpu().numpy(), values + 1)
    assert {"where": "from_torch", "options": {"name": "x", "dynamic_axis": [0]}} in session.pypto_hints


def test_the_dtype_helper_the_framework_tests_call_maps_torch_dtypes():
    assert pypto.converter._dtype_from(torch.bfloat16) is pypto.DT_BF16
    assert pypto.converter._dtype_from(torch.int32) is pypto.DT_INT32


BAD = [  # (what is passed, error, message)
    (lambda t: pypto.from_torch(np.zeros((4, 8), np.float32)), OpArgumentError, r"got ndarray; it converts a torch tensor"),
    (lambda t: pypto.from_torch(t.t(), "x"), OpArgumentError, r"from_torch\('x'\): .* not contiguous; pass tensor.contiguous\(\)"),
    (lambda t: pypto.from_torch(t, tensor_format=pypto.TileOpFormat.TILEOP_NZ), UsageError, r"ND layout only"),
    (lambda t: pypto.from_torch(t, dtype=pypto.DT_INT32), UsageError, r"reinterprets a DataType.DT_FP32 tensor's bytes"),
    (lambda t: pypto.from_torch(t, dynamic_axis=[2]), OpArgumentError, r"dynamic_axis \[2\] out of range for a 2-d tensor"),
]


@pytest.mark.parametrize("call, error, message", BAD)
def test_what_from_torch_does_not_take_is_a_clear_error(call, error, message):
    with npusim.session("a2"):
        t = torch.zeros(4, 8).npu()
        with pytest.raises(error, match=message):
            call(t)


def test_operation_options_are_recorded_as_hints():
    with npusim.session("a2", data=False) as session:
        pypto.experimental.set_operation_options(combine_axis=True)
    assert {"where": "set_operation_options", "options": {"combine_axis": True}} in session.pypto_hints
