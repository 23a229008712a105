"""Every op npusim runs on the device (not a host fallback) on non-contiguous inputs: transposed,
sliced, expanded and as_strided views, in each dtype the op takes, as each operand (input, other,
indices, updates, the target written into). Each result equals torch's CPU result on the same views,
or, for torch_npu's ops (no CPU kernel), the op's own result on contiguous copies of the inputs,
whose values ``tests/kernels`` check against the ops' formulas. Issue 31: a silent wrong number
(the 3-D matmul on a transposed operand) came from a layout; these tests hold every layout to torch.

test_host_fallback.py covers the same layouts for float32 across the device and host ops together;
this file covers the device ops' dtypes, mixed layouts of two operands, and torch_npu's operands."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import npusim
import npusim.torch_npu as torch_npu

LAYOUTS = {
    "contiguous": lambda x: x.reshape(-1)[:60].view(3, 4, 5),
    "transposed": lambda x: x.reshape(-1)[:60].view(5, 4, 3).transpose(0, 2),
    "sliced": lambda x: x[1:, 1:5, 1:6],
    "expanded": lambda x: x[:1, :4, :1].expand(3, 4, 5),
    "as_strided": lambda x: x.as_strided((3, 4, 5), (40, 9, 1), 3),
}
"""Views [3, 4, 5] of a [4, 6, 8] tensor."""

DTYPES = [torch.float32, torch.float16, torch.bfloat16, torch.int32]
"""The dtypes the device's add / sub take (npusim.kernels.elementwise.op.BINARY_DTYPES); copies and
casts take them all."""

pytestmark = pytest.mark.filterwarnings("ignore::npusim.frontend.torch_device.aten.HostFallbackWarning")


def _base(dtype: torch.dtype, seed: int = 0) -> torch.Tensor:
    values = np.random.default_rng(seed).normal(0, 20, (4, 6, 8)).astype(np.float32)
    return torch.from_numpy(values).to(dtype)


def _same(got: torch.Tensor, expected: torch.Tensor, what: str) -> None:
    assert got.dtype == expected.dtype and got.shape == expected.shape, what
    assert torch.equal(got, expected), what


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_copies_casts_and_reads_of_a_view(layout, dtype):
    """cpu(), clone, contiguous, .to(every dtype), .npu() of a CPU view, item() of an element, unfold."""
    view = LAYOUTS[layout]
    host = _base(dtype)
    with npusim.session("a2"):
        device = view(host.npu())
        expected = view(host)
        _same(device.cpu(), expected, "cpu()")
        _same(device.clone().cpu(), expected.clone(), "clone")
        _same(device.contiguous().cpu(), expected.contiguous(), "contiguous")
        for target in DTYPES:
            _same(device.to(target).cpu(), expected.to(target), f"to {target}")
        _same(expected.npu().cpu(), expected, ".npu() of a CPU view")
        assert device[2, 1, 3].item() == expected[2, 1, 3].item()
        _same(device.unfold(2, 2, 1).cpu(), expected.unfold(2, 2, 1), "unfold")


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("other", sorted(LAYOUTS))
@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_add_and_sub_of_two_views(layout, other, dtype):
    """x + y and x - y with x and y of any two layouts, and x + x[:1] (broadcast)."""
    a, b = _base(dtype, 1), _base(dtype, 2)
    x_of, y_of = LAYOUTS[layout], LAYOUTS[other]
    with npusim.session("a2"):
        x, y = x_of(a.npu()), y_of(b.npu())
        hx, hy = x_of(a), y_of(b)
        _same((x + y).cpu(), hx + hy, "add")
        _same((y - x).cpu(), hy - hx, "sub")
        _same(torch.add(x, x).cpu(), torch.add(hx, hx), "add of one view twice")
        _same((x + y[:1]).cpu(), hx + hy[:1], "add of a broadcast operand")


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("layout", sorted(set(LAYOUTS) - {"expanded"}))
def test_writes_into_a_view_of_each_dtype(layout, dtype):
    """copy_ from a CPU view and from an npu view of another layout, fill_, zero_, an in-place add,
    into a view of a bigger tensor: the rest of the tensor stays as it was."""
    view = LAYOUTS[layout]
    source = _base(dtype, 3)
    with npusim.session("a2"):
        cpu = _base(dtype, 4)
        device = cpu.npu()
        view(device).copy_(LAYOUTS["expanded"](source))
        view(cpu).copy_(LAYOUTS["expanded"](source))
        _same(device.cpu(), cpu, "copy_ from a CPU view")
        view(device).copy_(LAYOUTS["transposed"](source.npu()))
        view(cpu).copy_(LAYOUTS["transposed"](source))
        _same(device.cpu(), cpu, "copy_ from an npu view")
        view(device).add_(view(source.npu()))
        view(cpu).add_(view(source))
        _same(device.cpu(), cpu, "add_")
        view(device).fill_(3)
        view(cpu).fill_(3)
        _same(device.cpu(), cpu, "fill_")
        view(device).zero_()
        view(cpu).zero_()
        _same(device.cpu(), cpu, "zero_")


UPDATE_LAYOUTS = {
    "contiguous": lambda u: u,
    "transposed": lambda u: u.transpose(2, 3).contiguous().transpose(2, 3),
    "sliced": lambda u: torch.cat([u, u], dim=3)[..., ::2],
    "expanded": lambda u: u[:1].expand(2, *u.shape[1:]),
    "as_strided": lambda u: torch.cat([u, u], dim=0).as_strided(u.shape, u.stride(), u.numel()),
}
"""Layouts of the [2, 4, 1, 8] (or [2, 1, 128]) updates of the scatters; each has its values on the CPU too."""

TARGETS = {
    "contiguous": lambda cache: cache.reshape(-1)[: cache.numel() // 2].view(*cache.shape[:-1], cache.shape[-1] // 2),
    "sliced": lambda cache: cache[..., : cache.shape[-1] // 2],
    "as_strided": lambda cache: cache.as_strided((*cache.shape[:-1], cache.shape[-1] // 2), cache.stride(), cache.shape[-1] // 2),
}
"""Layouts of the cache a scatter writes into: views of half of a wider one."""


@pytest.mark.parametrize("target", sorted(TARGETS))
@pytest.mark.parametrize("layout", sorted(UPDATE_LAYOUTS))
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16], ids=str)
def test_scatter_update_of_views_is_torchs_indexed_write(layout, target, dtype):
    """scatter_update_ (axis -2, 1-D indices: batch b writes its row at indices[b]) with updates,
    indices (a strided slice) and the cache in each layout: the cache's CPU indexed write."""
    rng = np.random.default_rng(5)
    updates = torch.from_numpy(rng.normal(size=(2, 4, 1, 8)).astype(np.float32)).to(dtype)
    indices = torch.tensor([7, 1, 7, 3, 7])[1::2]  # [1, 3], stride 2
    cache = torch.from_numpy(rng.normal(size=(2, 4, 6, 16)).astype(np.float32)).to(dtype)
    u = UPDATE_LAYOUTS[layout](updates)
    with npusim.session("a2"):
        device = cache.npu()
        npu_updates = UPDATE_LAYOUTS[layout](updates.npu())
        assert torch.equal(npu_updates.cpu(), u)
        torch_npu.scatter_update_(TARGETS[target](device), torch.tensor([7, 1, 7, 3, 7]).npu()[1::2], npu_updates, -2)
        fresh = torch_npu.scatter_update(TARGETS[target](cache.npu()), indices.npu(), npu_updates, -2).cpu()
        got = device.cpu()
    expected = cache.clone()
    written = TARGETS[target](expected)
    for b, row in enumerate(indices.tolist()):
        written[b, :, row] = u[b, :, 0]
    _same(got, expected, "scatter_update_")
    _same(fresh, TARGETS[target](expected).contiguous(), "scatter_update")


@pytest.mark.parametrize("target", sorted(TARGETS))
@pytest.mark.parametrize("layout", sorted(UPDATE_LAYOUTS))
def test_npu_quant_scatter_of_views_equals_it_on_contiguous_copies(layout, target):
    """npu_quant_scatter_ / npu_quant_scatter (bf16 updates into an int8 cache, per-channel scales)
    with updates, indices, scales and the cache in each layout: the rows it writes on contiguous
    copies, written into the view; the rest of the cache untouched."""
    rng = np.random.default_rng(6)
    updates = torch.from_numpy(rng.normal(0, 4, size=(2, 4, 1, 128)).astype(np.float32)).to(torch.bfloat16)
    wide_scales = torch.from_numpy(rng.uniform(0.1, 1, size=(256,)).astype(np.float32)).to(torch.bfloat16)
    cache = torch.from_numpy(rng.integers(-100, 100, size=(2, 4, 8, 256)).astype(np.int8))
    with npusim.session("a2"):
        scales = wide_scales.npu()[::2]  # strided
        indices = torch.tensor([5, 2, 5, 6], dtype=torch.int32).npu()[1::2]
        npu_updates = UPDATE_LAYOUTS[layout](updates.npu())
        device = cache.npu()
        torch_npu.npu_quant_scatter_(TARGETS[target](device), indices, npu_updates, scales, axis=-2, quant_axis=-1)
        fresh = torch_npu.npu_quant_scatter(TARGETS[target](cache.npu()), indices, npu_updates, scales, axis=-2, quant_axis=-1).cpu()
        reference = TARGETS[target](cache.npu()).contiguous()
        torch_npu.npu_quant_scatter_(reference, indices.contiguous(), npu_updates.contiguous(), scales.contiguous(), axis=-2, quant_axis=-1)
        got, expected_rows = device.cpu(), reference.cpu()
    expected = cache.clone()
    TARGETS[target](expected).copy_(expected_rows)
    assert not torch.equal(expected, cache)  # the rows were written
    _same(got, expected, "npu_quant_scatter_")
    _same(fresh, expected_rows, "npu_quant_scatter")


@pytest.mark.parametrize("div_mode", [True, False])
@pytest.mark.parametrize("layout", sorted(LAYOUTS))
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16], ids=str)
def test_npu_quantize_of_views_is_the_formula(layout, dtype, div_mode):
    """npu_quantize of an input in each layout, with strided scales and zero points (per channel,
    the last dim): round(x / scale + zero) (div_mode) or round(x * scale + zero), clamped to int8."""
    view = LAYOUTS[layout]
    x = _base(dtype, 7)
    rng = np.random.default_rng(7)
    wide_scales = torch.from_numpy(rng.uniform(0.5, 4, size=(10,)).astype(np.float32)).to(dtype)
    # aclnnQuantize: integer offsets (bf16 with bf16 input); aclnnAscendQuantV3: the scales' dtype
    zero_dtype = torch.int32 if div_mode and dtype != torch.bfloat16 else dtype
    wide_zeros = torch.from_numpy(rng.integers(-5, 5, size=(10,)).astype(np.float32)).to(zero_dtype)
    with npusim.session("a2"):
        xv = view(x.npu())
        channels = xv.shape[-1]
        scales, zeros = wide_scales.npu()[::2][:channels], wide_zeros.npu()[::2][:channels]
        got = torch_npu.npu_quantize(xv, scales, zeros, torch.qint8, -1, div_mode=div_mode).cpu()
        contiguous = torch_npu.npu_quantize(xv.contiguous(), scales.contiguous(), zeros.contiguous(), torch.qint8, -1,
                                            div_mode=div_mode).cpu()
    _same(got, contiguous, "npu_quantize on a view against on a contiguous copy")
    s, z = wide_scales[::2][:channels].float(), wide_zeros[::2][:channels].float()
    scaled = view(x).float() / s if div_mode else view(x).float() * s
    expected = torch.clamp(torch.round(scaled + z), -128, 127).to(torch.int8)
    _same(got, expected, "npu_quantize against its formula")
