"""npu_dequant_swiglu_quant against a numpy reference of its op page's formulas (dequant, SwiGLU,
smooth scales, dynamic quantisation with the kernel's ``max * (1 / 127)``)."""

from __future__ import annotations

import re

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import npusim
import npusim.torch_npu as torch_npu
from npusim.errors import OpArgumentError, WorkloadError

F32 = np.float32


def reference(x, group_index=None, weight_scale=None, activation_scale=None, quant_scale=None, activate_left=False):
    """(y, scale) of the rows the groups cover (all rows without group_index)."""
    tokens, width = x.shape
    h = width // 2
    counts = [tokens] if group_index is None else list(group_index)
    y, scale = np.zeros((tokens, h), np.int8), np.zeros(tokens, F32)
    row = 0
    for g, count in enumerate(counts):
        rows = slice(row, row + count)
        v = x[rows].astype(F32)
        if weight_scale is not None:
            v = (v * weight_scale[g]).astype(F32) * activation_scale[rows]
        left, right = v[:, :h], v[:, h:]
        act, gate = (left, right) if activate_left else (right, left)
        out = gate * (act / (F32(1) + np.exp(-act)))
        if quant_scale is not None:
            out = quant_scale[g].astype(F32) * out
        s = np.abs(out).max(axis=1) * F32(1.0 / 127.0)
        y[rows] = np.rint(out / s[:, None]).astype(np.int8)
        scale[rows] = s
        row += count
    return y, scale


def run(x, data=True, **tensors):
    kwargs = {k: v for k, v in tensors.items() if not isinstance(v, np.ndarray)}
    with npusim.session("a3", data=data) as session:
        args = {k: npusim.tensor(v, device=2) for k, v in tensors.items() if isinstance(v, np.ndarray)}
        y, scale = torch_npu.npu_dequant_swiglu_quant(npusim.tensor(x, device=2), quant_mode=1, **args, **kwargs)
        npusim.synchronize()
        out = (y.numpy(), scale.numpy()) if data else None
    return out, session


@pytest.mark.parametrize("dtype", [ml_dtypes.bfloat16, np.float16])
@pytest.mark.parametrize("left", [True, False])
def test_float_rows_grouped_as_an_moe_layer_has_them(dtype, left) -> None:
    rng = np.random.default_rng(1)
    counts = np.array([5, 0, 70, 3], np.int64)
    x = rng.normal(0, 2, (90, 256)).astype(dtype)  # rows past the groups' 78 are left alone
    qs = rng.uniform(0.5, 2, (4, 128)).astype(F32)
    (y, scale), _ = run(x, group_index=counts, quant_scale=qs, activate_left=left)
    ry, rs = reference(x, counts, quant_scale=qs, activate_left=left)
    np.testing.assert_array_equal(scale, rs)
    np.testing.assert_array_equal(y, ry)
    assert not y[78:].any() and not scale[78:].any()


def test_int32_rows_dequantised_per_group_and_row() -> None:
    rng = np.random.default_rng(2)
    counts = np.array([7, 9], np.int64)
    x = rng.integers(-5000, 5000, (16, 128), dtype=np.int32)
    ws = rng.uniform(1e-4, 1e-3, (2, 128)).astype(F32)
    act = rng.uniform(0.5, 1.5, (16, 1)).astype(F32)
    qs = rng.uniform(0.5, 2, (2, 64)).astype(ml_dtypes.bfloat16)
    (y, scale), _ = run(x, group_index=counts, weight_scale=ws, activation_scale=act, quant_scale=qs, activate_left=True)
    ry, rs = reference(x, counts, ws, act, qs, activate_left=True)
    np.testing.assert_array_equal(scale, rs)
    np.testing.assert_array_equal(y, ry)


@settings(max_examples=8, deadline=None)
@given(st.integers(1, 40), st.sampled_from([64, 128, 320]), st.integers(0, 2**16))
def test_without_group_index_every_row(tokens, h, seed) -> None:
    rng = np.random.default_rng(seed)
    x = rng.normal(0, 3, (tokens, 2 * h)).astype(ml_dtypes.bfloat16)
    (y, scale), _ = run(x)
    ry, rs = reference(x)
    np.testing.assert_array_equal(scale, rs)
    np.testing.assert_array_equal(y, ry)


def test_the_time_follows_the_groups_rows_and_timing_only_reads_counts_of_control_memory() -> None:
    rng = np.random.default_rng(3)
    x = rng.normal(0, 1, (2048, 1024)).astype(ml_dtypes.bfloat16)
    few, many = np.array([64, 64], np.int64), np.array([1024, 1024], np.int64)
    _, short = run(x, group_index=few)
    _, long = run(x, group_index=many)
    assert long.result.simulated_ps > 4 * short.result.simulated_ps
    with pytest.warns(UserWarning, match="group_index is not known in a timing-only run"):
        _, timing_only = run(x, data=False, group_index=many)
    assert timing_only.result.simulated_ps == long.result.simulated_ps


@pytest.mark.parametrize("counts, rule", [
    ([10, -1], "group_index[1] = -1 on the device: the counts must be non-negative"),
    ([10, 30], "group_index sums to 40 on the device, more than x's 32 rows"),
])
def test_bad_counts_on_the_device(counts, rule) -> None:
    x = np.ones((32, 128), ml_dtypes.bfloat16)
    with pytest.raises(WorkloadError, match=re.escape(rule)):
        run(x, group_index=np.array(counts, np.int64))


@pytest.mark.parametrize("change, rule", [
    (dict(x=np.ones((4, 3), ml_dtypes.bfloat16)), "x.shape[-1] = 3: must be even"),
    (dict(x=np.ones((4, 4), np.float32)), "x.dtype = float32: must be int32, float16 or bfloat16"),
    (dict(x=np.ones((2, 4, 4), ml_dtypes.bfloat16)), "x must be 2-D"),
    (dict(quant_mode=0), "static quantisation is not modelled"),
    (dict(quant_mode=3), "quant_mode = 3: must be 0 (static) or 1 (dynamic)"),
    (dict(swiglu_mode=1), "the variant SwiGLUs"),
    (dict(swiglu_mode=4), "swiglu_mode = 4: must be 0, 1 or 2"),
    (dict(clamp_limit=-1.0), "clamp_limit = -1.0: must be a positive finite number"),
    (dict(glu_alpha=float("inf")), "glu_alpha = inf: must be finite"),
    (dict(group_index=np.array([4], np.int32)), "group_index = [1] int32: must be a 1-D int64 tensor"),
    (dict(x=np.ones((4, 200), ml_dtypes.bfloat16), group_index=np.array([4], np.int64)),
     "with group_index, H = 100 (half of it) must be at most 10496 and a multiple of 64"),
    (dict(quant_scale=np.ones((2, 64), np.float32)), "quant_scale.shape = [2, 64]: must be [groupNum, H] = [1, 64]"),
    (dict(activation_scale=np.ones((4, 1), np.float32)), "activation_scale = a tensor: must be None for a bfloat16 x"),
    (dict(x=np.ones((4, 128), np.int32)), "activation_scale = None: must be given for an int32 x"),
    (dict(quant_offset=np.ones((1, 64), np.float32), group_index=np.array([4], np.int64)), "quant_offset = a tensor: must be None with group_index"),
    (dict(dst_type=1), "dst_type = 1: an Ascend 950 option"),
])
def test_the_page_rules(change, rule) -> None:
    args = dict(x=np.ones((4, 128), ml_dtypes.bfloat16), quant_mode=1)
    args.update(change)
    with npusim.session("a3"):
        tensors = {k: npusim.tensor(v, device=0) if isinstance(v, np.ndarray) else v for k, v in args.items()}
        with pytest.raises(OpArgumentError, match=re.escape(rule)):
            torch_npu.npu_dequant_swiglu_quant(**tensors)


def test_torch_custom_op() -> None:
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(4)
    x = rng.normal(0, 1, (12, 256)).astype(F32)
    counts = np.array([5, 7], np.int64)
    with npusim.session("a3"):
        y, scale = torch.ops.npu.npu_dequant_swiglu_quant(torch.from_numpy(x).to(torch.bfloat16).npu(),
                                                           group_index=torch.from_numpy(counts).npu(), quant_mode=1)
        got_y, got_s = y.cpu().numpy(), scale.cpu().numpy()
    ry, rs = reference(x.astype(ml_dtypes.bfloat16), counts)
    np.testing.assert_array_equal(got_y, ry)
    np.testing.assert_array_equal(got_s, rs)
