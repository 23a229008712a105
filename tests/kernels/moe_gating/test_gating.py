"""npu_moe_gating_top_k against a numpy reference of its op page's equivalent computation."""

from __future__ import annotations

import re

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import npusim
import npusim.torch_npu as torch_npu
from npusim.errors import OpArgumentError
from npusim.isa.vector import halving_reduce

F32 = np.float32


def reference(x, k, bias=None, k_group=1, group_count=1, group_select_mode=0, norm_type=0, routed_scaling_factor=1.0, eps=1e-20):
    """The page's computation, sums in the vector unit's halving order (docs/moe.md)."""
    xf = x.astype(F32)
    if norm_type == 0:
        e = np.exp(xf).astype(F32)
        norm = (e / halving_reduce(e, np.add)[:, None]).astype(F32)
    else:
        norm = (F32(1) / (F32(1) + np.exp(-xf))).astype(F32)
    score = norm + (bias.astype(F32) if bias is not None else F32(0))
    tokens = x.shape[0]
    g = score.reshape(tokens, group_count, -1)
    group_score = g.max(-1) if group_select_mode == 0 else np.sort(g, axis=-1)[..., -2:].sum(-1, dtype=F32)
    chosen = np.argsort(-group_score, axis=-1, kind="stable")[:, :k_group]
    mask = np.ones((tokens, group_count), bool)
    mask[np.arange(tokens)[:, None], chosen] = False
    masked = np.where(mask[..., None], -np.inf, g).reshape(tokens, -1)
    idx = np.argsort(-masked, axis=-1, kind="stable")[:, :k]
    y = np.take_along_axis(norm, idx, axis=1)
    if norm_type == 1:
        y = (y / (halving_reduce(y, np.add)[:, None] + F32(eps))).astype(F32)
    return (y * F32(routed_scaling_factor)).astype(x.dtype), idx.astype(np.int32), norm


def run(x, k, **kwargs):
    with npusim.session("a3"):
        bias = kwargs.pop("bias", None)
        y, idx, out = torch_npu.npu_moe_gating_top_k(npusim.tensor(x, device=1), k, out_flag=True,
                                                     bias=None if bias is None else npusim.tensor(bias, device=1), **kwargs)
        return y.numpy(), idx.numpy(), out.numpy()


@pytest.mark.parametrize("kwargs", [
    dict(k=8, k_group=4, group_count=8, group_select_mode=1, norm_type=1, routed_scaling_factor=2.5),  # DeepSeek-V3's router
    dict(k=6, k_group=4, group_count=8, group_select_mode=1, norm_type=1),  # the page's example
    dict(k=2, norm_type=0),
    dict(k=3, k_group=2, group_count=4, group_select_mode=0, norm_type=0),
])
@pytest.mark.parametrize("dtype", [np.float32, ml_dtypes.bfloat16])
def test_gating_matches_the_page(kwargs, dtype) -> None:
    rng = np.random.default_rng(0)
    x = rng.uniform(-2, 2, (5, 256)).astype(dtype)
    bias = rng.uniform(-0.5, 0.5, 256).astype(dtype)
    got = run(x, bias=bias, **kwargs)
    want = reference(x, bias=bias, **kwargs)
    assert np.array_equal(got[1], want[1])
    assert np.array_equal(got[0].view(np.uint8), want[0].view(np.uint8))
    assert np.array_equal(got[2].view(np.uint32), want[2].view(np.uint32))


@settings(max_examples=10, deadline=None)
@given(tokens=st.integers(1, 6), groups=st.sampled_from([1, 2, 4]), seed=st.integers(0, 10**6))
def test_gating_on_random_shapes(tokens, groups, seed) -> None:
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((tokens, 64)).astype(np.float32)
    k_group = max(1, groups // 2)
    got = run(x, 4, k_group=k_group, group_count=groups, group_select_mode=1, norm_type=1)
    want = reference(x, 4, k_group=k_group, group_count=groups, group_select_mode=1, norm_type=1)
    assert np.array_equal(got[1], want[1]) and np.array_equal(got[0].view(np.uint32), want[0].view(np.uint32))


@pytest.mark.parametrize("kwargs, message", [
    (dict(k=0), "k = 0: must be in [1, x.shape[-1] / group_count * k_group]"),
    (dict(k=8, group_count=3), "group_count = 3: must divide the 256 experts"),
    (dict(k=8, group_count=8, k_group=9), "k_group = 9: must be in [1, group_count]"),
    (dict(k=2, renorm=1), "renorm = 1: only 0"),
    (dict(k=2, norm_type=2), "norm_type = 2: 0 (softmax) or 1 (sigmoid)"),
    (dict(k=2, group_select_mode=2), "group_select_mode = 2"),
])
def test_gating_checks(kwargs, message) -> None:
    with pytest.raises(OpArgumentError, match=re.escape(message)):
        with npusim.session("a3"):
            torch_npu.npu_moe_gating_top_k(npusim.tensor(np.zeros((2, 256), np.float32)), **kwargs)
