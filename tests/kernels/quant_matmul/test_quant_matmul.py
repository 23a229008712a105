"""torch_npu.npu_quant_matmul: the rows of table 2 of its op page (op-plugin
docs/zh/custom_APIs/torch_npu/torch_npu-npu_quant_matmul.md, Atlas A2 / A3) accepted and the other
combinations refused naming the argument, its value and the rule; results bit-exact against the
documented formulas (tests/kernels/cube/reference.py), the float32 scale packed as
npu_trans_quant_param packs it where op-plugin converts it; the numpy path."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import npusim
import npusim.torch_npu as torch_npu
from npusim.errors import OpArgumentError
from tests.kernels.cube import reference

torch = pytest.importorskip("torch")

BF16 = ml_dtypes.bfloat16
M, K, N = 40, 96, 24


def device(array):
    if array.dtype == BF16:
        return torch.from_numpy(array.view(np.int16)).view(torch.bfloat16).npu()
    return torch.from_numpy(array).npu()


def values(tensor):
    cpu = tensor.cpu()
    return cpu.view(torch.int16).numpy().view(BF16) if cpu.dtype == torch.bfloat16 else cpu.numpy()


@pytest.fixture
def operands():
    rng = np.random.default_rng(7)
    return {"x1": rng.integers(-20, 20, (M, K)).astype(np.int8), "x2": rng.integers(-20, 20, (K, N)).astype(np.int8),
            "scale": rng.uniform(0.001, 0.02, N).astype(np.float32), "token": rng.uniform(0.5, 2, M).astype(np.float32),
            "offset": rng.uniform(-3, 3, N).astype(np.float32), "bias32": rng.integers(-500, 500, N).astype(np.int32),
            "biasf": rng.uniform(-1, 1, N).astype(np.float32)}


# (output dtype, scale dtype, offset, pertoken, bias dtype) -> expected: rows of table 2 and combinations outside it
TABLE_2 = [
    ("float16", "int64", False, False, "int32", None),
    ("float16", "float32", False, False, None, None),
    ("int8", "float32", True, False, "int32", None),
    ("int8", "int64", False, False, None, None),
    ("bfloat16", "bfloat16", False, True, "bfloat16", None),
    ("bfloat16", "float32", False, False, "float32", None),
    ("float16", "float32", False, True, "int32", None),
    ("float16", "bfloat16", False, False, None, "scale.dtype = bfloat16: with output_dtype float16 must be one of int64, float32"),
    ("bfloat16", "int64", False, False, None, "scale.dtype = int64: with output_dtype bfloat16 must be one of float32, bfloat16"),
    ("float16", "float32", True, False, None, "offset = .*: is taken only with an int8 output"),
    ("int8", "float32", False, True, None, "pertoken_scale = .*: is not taken with an int8 output"),
    ("float16", "int64", False, True, None, "scale.dtype = int64: with pertoken_scale and a float16 output must be float32"),
    ("int8", "float32", False, False, "float32", "bias.dtype = float32: with output_dtype int8 must be one of int32"),
]


def _pack(scale, offset=None):
    """npu_trans_quant_param's int64 of a float32 scale (and offset), from its op page."""
    bits = scale.view(np.uint32).astype(np.uint64) & np.uint64(0xFFFFE000) | np.uint64(1 << 46)
    if offset is not None:
        bits = bits | ((np.clip(np.rint(offset), -256, 255).astype(np.int64).astype(np.uint64) & np.uint64(0x1FF)) << np.uint64(37))
    return bits.view(np.int64)


@pytest.mark.parametrize("out,scale_dtype,offset,pertoken,bias,error", TABLE_2)
def test_table_2_of_the_op_page(operands, out, scale_dtype, offset, pertoken, bias, error):
    o = operands
    scale = {"float32": o["scale"], "bfloat16": o["scale"].astype(BF16), "int64": _pack(o["scale"])}[scale_dtype]
    bias_host = None if bias is None else o["bias32"] if bias == "int32" else o["biasf"].astype(np.dtype(bias) if bias != "bfloat16" else BF16)
    with npusim.session("a2"):
        args = dict(offset=device(o["offset"]) if offset else None, pertoken_scale=device(o["token"]) if pertoken else None,
                    bias=None if bias_host is None else device(bias_host), output_dtype=getattr(torch, out))
        if error is not None:
            with pytest.raises(OpArgumentError, match=f"npu_quant_matmul: {error}"):
                torch_npu.npu_quant_matmul(device(o["x1"]), device(o["x2"]), device(scale), **args)
            return
        got = values(torch_npu.npu_quant_matmul(device(o["x1"]), device(o["x2"]), device(scale), **args))
    start = bias_host if bias == "int32" else None
    acc = reference.accumulate(o["x1"], o["x2"], start)
    applied = scale.astype(np.float32) if scale_dtype != "int64" else reference.fp19(o["scale"])
    if scale_dtype == "float32" and not pertoken and out in ("float16", "int8"):
        applied = reference.fp19(o["scale"])  # op-plugin packs it with npu_trans_quant_param first
    offset_applied = np.clip(np.rint(o["offset"]), -256, 255) if offset else None
    want = reference.dequantize(acc, applied, token=o["token"] if pertoken else None, offset=offset_applied,
                                bias=None if bias in (None, "int32") else bias_host.astype(np.float32), out_dtype=np.dtype(out) if out != "bfloat16" else BF16)
    assert np.array_equal(got.view(np.uint8), want.view(np.uint8))


def test_a_transposed_weight_and_a_batch_broadcast(operands):
    o = operands
    x1 = np.stack([o["x1"], o["x1"][::-1].copy()])
    with npusim.session("a2") as session:
        weight = device(np.ascontiguousarray(o["x2"].T)).t()  # [K, N], the transpose of a contiguous [N, K]
        got = values(torch_npu.npu_quant_matmul(device(x1), weight, device(o["scale"].astype(BF16)), output_dtype=torch.bfloat16))
        assert "Contiguous" not in [op.name for op in session.system.recorder.ops]
    want = np.stack([reference.dequantize(reference.accumulate(x, o["x2"]), o["scale"].astype(BF16).astype(np.float32), out_dtype=BF16)
                     for x in x1])
    assert np.array_equal(got.view(np.uint8), want.view(np.uint8))


@pytest.mark.parametrize("change,error", [
    ({"x1": np.zeros((M, K), np.float16)}, r"x1.dtype = float16: must be int8"),
    ({"x2": np.zeros((K + 1, N), np.int8)}, r"x2.shape = \[97, 24\]: its k \(97"),
    ({"scale": np.ones(N + 1, np.float32)}, r"scale.shape = \[25\]: must be 1-D of 1 or n = 24"),
    ({"token": np.ones(M + 1, np.float32)}, r"pertoken_scale.shape = \[41\]: must be 1-D of m = 40"),
    ({"x1": np.zeros((2, 2, 2, 2, 2, 2, M, K), np.int8)}, r"x1.shape = .*: must have 2 to 6 dims"),
])
def test_argument_errors_name_the_argument_and_rule(operands, change, error):
    o = {**operands, **change}
    with npusim.session("a2", data=False):
        with pytest.raises(OpArgumentError, match=f"npu_quant_matmul: {error}"):
            torch_npu.npu_quant_matmul(device(o["x1"]), device(o["x2"]), device(o["scale"]), pertoken_scale=device(o["token"]),
                                       output_dtype=torch.bfloat16)


def test_unmodelled_arguments_are_refused(operands):
    o = operands
    with npusim.session("a2", data=False):
        with pytest.raises(OpArgumentError, match="group_sizes = .*per-group quantisation .* not modelled"):
            torch_npu.npu_quant_matmul(device(o["x1"]), device(o["x2"]), device(o["scale"]), output_dtype=torch.bfloat16, group_sizes=[1, 1, 32])
        with pytest.raises(OpArgumentError, match="output_dtype = int32"):
            torch_npu.npu_quant_matmul(device(o["x1"]), device(o["x2"]), device(o["scale"]), output_dtype=torch.int32)


def test_the_numpy_path(operands):
    o = operands
    with npusim.session("a2"):
        got = torch_npu.npu_quant_matmul(npusim.tensor(o["x1"]), npusim.tensor(o["x2"]), npusim.tensor(o["scale"].astype(BF16)),
                                         output_dtype="bfloat16").numpy()
    want = reference.dequantize(reference.accumulate(o["x1"], o["x2"]), o["scale"].astype(BF16).astype(np.float32), out_dtype=BF16)
    assert np.array_equal(got.view(np.uint8), want.view(np.uint8))
