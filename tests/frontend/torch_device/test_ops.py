"""torch programs on the npu device: the seed's two documentation examples (single op and graph
mode, /work/shared/seeds/003: the op page of torch_npu.npu_quant_scatter_) and the cases of
op-plugin's test_custom_ops/test_npu_quant_scatter.py (Ascend/op-plugin @517f2e7d), made as their
code makes them, checked against numpy references."""

from __future__ import annotations

import warnings

import ml_dtypes
import numpy as np
import pytest
import torch

import npusim
import npusim.torch_npu as torch_npu
import npusim.torchair as tng
from npusim.errors import GraphCaptureError, OpArgumentError, UsageError
from npusim.kernels.quant_scatter.checks import IgnoredArgumentWarning
from npusim.torchair.configs.compiler_config import CompilerConfig

BF16 = ml_dtypes.bfloat16


def quant_scatter_reference(var, indices, updates, scales, zero_points):
    """var[b, ..., indices[b] (+ rows), :] = int8(clip(rint(f32(u) / f32(s) + f32(zp)))) along axis -2."""
    value = updates.astype(np.float32) / scales.reshape(-1).astype(np.float32)
    if zero_points is not None:
        value = value + zero_points.reshape(-1).astype(np.float32)
    q = np.clip(np.rint(value), -128, 127).astype(np.int8)
    out = var.copy()
    rows = updates.shape[-2]
    for b in range(updates.shape[0]):
        dest, offset = (indices[b] if indices.ndim == 2 else (b, indices[b]))
        out[int(dest), ..., int(offset):int(offset) + rows, :] = q[b]
    return out


def test_the_single_op_example_writes_the_quantised_rows():
    rng = np.random.default_rng(3)
    data_var = rng.uniform(0, 1, [24, 4096, 128]).astype(np.int8)
    data_indices = rng.uniform(0, 1, [24]).astype(np.int32)
    data_updates = rng.uniform(1, 2, [24, 1, 128]).astype(np.float16)
    data_scales = rng.uniform(0, 1, [1, 1, 128]).astype(np.float16)
    data_zero_points = rng.uniform(0, 1, [1, 1, 128]).astype(np.float16)
    with npusim.session("a2"):
        var = torch.from_numpy(data_var).to(torch.int8).npu()
        indices = torch.from_numpy(data_indices).to(torch.int32).npu()
        updates = torch.from_numpy(data_updates).to(torch.bfloat16).npu()
        scales = torch.from_numpy(data_scales).to(torch.bfloat16).npu()
        zero_points = torch.from_numpy(data_zero_points).to(torch.bfloat16).npu()
        out = torch_npu.npu_quant_scatter_(var, indices, updates, scales, zero_points, axis=-2, quant_axis=-1, reduce="update")
        assert out is var and var.device == torch.device("npu:0") and var.dtype == torch.int8
        got = var.cpu().numpy()
    def bf16(a):
        return a.astype(np.float32).astype(BF16)  # what .to(torch.bfloat16) makes of fp16 values (exact in fp32)
    expected = quant_scatter_reference(data_var, data_indices, bf16(data_updates), bf16(data_scales), bf16(data_zero_points))
    assert np.array_equal(got, expected)


def graph_example_inputs(rng):
    updates_data = rng.uniform(-1, 1, size=[1, 11, 1, 32])
    var_data = rng.uniform(1, 2, size=[1, 11, 1, 32]).astype(np.int8)
    scales_data = rng.uniform(1, 2, size=[1, 1, 1, 32])
    indices_data = rng.uniform(0, 1, size=[1, 2]).astype(np.int32)
    zero_points_data = rng.uniform(0, 1, size=[1, 1, 1, 32])
    return updates_data, var_data, scales_data, indices_data, zero_points_data


def test_the_graph_mode_example_gives_the_eager_result_and_a_shorter_host_timeline():
    updates_data, var_data, scales_data, indices_data, zero_points_data = graph_example_inputs(np.random.default_rng(5))
    with npusim.session("a2") as session:
        updates = torch.from_numpy(updates_data).npu().to(torch.bfloat16).npu()  # float64 on the device, then a Cast kernel
        var = torch.from_numpy(var_data).npu()
        scales = torch.from_numpy(scales_data).npu().to(torch.bfloat16).npu()
        zero_points = torch.from_numpy(zero_points_data).to(torch.bfloat16).npu()
        indices = torch.from_numpy(indices_data).npu()

        class Model(torch.nn.Module):
            def forward(self):
                return torch_npu.npu_quant_scatter_(var, indices, updates, scales, zero_points, axis=-2, quant_axis=-1, reduce="update")

        config = CompilerConfig()
        config.debug.graph_dump.type = "pbtxt"
        model = torch.compile(Model(), backend=tng.get_npu_backend(compiler_config=config), dynamic=False, fullgraph=True)
        with torch.no_grad():
            graph_output = model()
        npusim.synchronize()
        host_before = session.host.now_ps
        model()  # a replay: one host launch
        npusim.synchronize()
        replay_host = session.host.now_ps - max(host_before, session.env.now)
        graph_values = graph_output.cpu().numpy()
        single_op = torch_npu.npu_quant_scatter_(var, indices, updates, scales, zero_points, axis=-2, quant_axis=-1, reduce="update")
        start = session.host.now_ps
        npusim.synchronize()
        assert graph_output is var and single_op is var
        single_values = single_op.cpu().numpy()
        eager_host = start - host_before
        assert replay_host <= 0 or replay_host < eager_host
        host = session.host
        assert host.graph_launch_ps < host.op_launch_ps + host.tiling_ps
    expected = quant_scatter_reference(var_data, indices_data, updates_data.astype(np.float32).astype(BF16),
                                       scales_data.astype(np.float32).astype(BF16), zero_points_data.astype(BF16))
    assert np.array_equal(graph_values, expected) and np.array_equal(single_values, expected)
    assert set(np.unique(expected)) <= {-1, 0, 1, 2}


def test_op_plugin_case_npu_quantize_then_scatter_update_equals_npu_quant_scatter():
    """test_npu_quant_scatter: var [1, 1, 32] int8, indices [1] int32, updates [1, 1, 32] bf16, scales [1, 1, 32] bf16."""
    rng = np.random.default_rng(11)
    with npusim.session("a2"):
        var1 = torch.from_numpy(rng.uniform(0, 1, [1, 1, 32]).astype(np.int8)).to(torch.int8).npu()
        var2 = var1.clone()
        indices1 = torch.from_numpy(rng.uniform(0, 1, [1]).astype(np.int32)).to(torch.int32).npu()
        updates1 = torch.from_numpy(rng.uniform(1, 2, [1, 1, 32]).astype(np.float16)).to(torch.bfloat16).npu()
        scales1 = torch.from_numpy(rng.uniform(0, 1, [1, 1, 32]).astype(np.float16)).to(torch.bfloat16).npu()
        quantised = torch_npu.npu_quantize(updates1, scales1.view(32), None, torch.qint8, -1).to(torch.int8)
        assert quantised.dtype == torch.int8
        supported = torch_npu.scatter_update(var1, indices1, quantised, -2)
        custom = torch_npu.npu_quant_scatter(var2, indices1.clone(), updates1.clone(), scales1.clone(), None, -2, -1, "update")
        assert custom is not var2
        expected = quant_scatter_reference(var1.cpu().numpy(), indices1.cpu().numpy(), updates1.float().cpu().numpy(),
                                           scales1.float().cpu().numpy(), None)
        assert np.array_equal(supported.cpu().numpy(), expected) and np.array_equal(custom.cpu().numpy(), expected)


@pytest.mark.parametrize("dst_type, round_mode, message", [
    (torch.int16, "rint", "dst_type = int16: not a dtype the op writes"),
    (None, "floor", "round_mode = 'floor': not a round mode"),
])
def test_dst_type_and_round_mode_no_product_takes_are_refused(dst_type, round_mode, message):
    with npusim.session("a2"):
        var = torch.zeros(1, 1, 32, dtype=torch.int8).npu()
        with pytest.raises(OpArgumentError, match=message.replace("(", r"\(").replace(")", r"\)")):
            torch_npu.npu_quant_scatter(var, torch.zeros(1, dtype=torch.int32).npu(), torch.ones(1, 1, 32, dtype=torch.bfloat16).npu(),
                                        torch.ones(1, 1, 32, dtype=torch.bfloat16).npu(), None, -2, -1, "update", dst_type, round_mode)


@pytest.mark.parametrize("dst_type, round_mode, ignored", [
    (torch.float8_e5m2, "rint", "dst_type=float8_e5m2"),
    (None, "round", "round_mode='round'"),
    (torch.float8_e4m3fn, "hybrid", "dst_type=float8_e4m3fn and round_mode='hybrid'"),
    (torch.int8, "rint", None),
])
def test_the_ascend_950_output_modes_are_ignored_on_a2_as_the_device_does(dst_type, round_mode, ignored):
    """op-plugin on A2/A3 calls aclnnInplaceQuantScatter, which writes int8 rounded half to even
    whatever dst_type and round_mode say: the same call gives the same int8 result, with a warning."""
    with npusim.session("a2"):
        var = torch.zeros(1, 1, 32, dtype=torch.int8).npu()
        args = (var, torch.zeros(1, dtype=torch.int32).npu(), torch.ones(1, 1, 32, dtype=torch.bfloat16).npu(),
                torch.ones(1, 1, 32, dtype=torch.bfloat16).npu(), None, -2, -1, "update", dst_type, round_mode)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            out = torch_npu.npu_quant_scatter(*args)
        messages = [str(w.message) for w in caught if issubclass(w.category, IgnoredArgumentWarning)]
        assert out.dtype == torch.int8 and out.cpu().numpy().tolist() == [[[1] * 32]]
        assert (messages == []) if ignored is None else (len(messages) == 1 and ignored in messages[0] and "writes int8" in messages[0])


def test_bad_inputs_are_clear_errors():
    with npusim.session("a2") as first:
        old = torch.zeros(1, 1, 32, dtype=torch.int8).npu()
    with npusim.session("a2"):
        def args(var):
            return (var, torch.zeros(1, dtype=torch.int32).npu(), torch.ones(1, 1, 32, dtype=torch.bfloat16).npu(),
                                    torch.ones(1, 1, 32, dtype=torch.bfloat16).npu())
        with pytest.raises(UsageError, match="belongs to another npusim session"):
            torch_npu.npu_quant_scatter_(*args(old))
        with pytest.raises(OpArgumentError, match="is on device 1, input on device 0"):
            torch_npu.npu_quant_scatter_(torch.zeros(1, 1, 32, dtype=torch.int8).npu(), torch.zeros(1, dtype=torch.int32).npu(1),
                                         torch.ones(1, 1, 32, dtype=torch.bfloat16).npu(), torch.ones(1, 1, 32, dtype=torch.bfloat16).npu())
        with pytest.raises(OpArgumentError, match="updates.dtype = float32: not a supported dtype"):
            var = torch.zeros(1, 1, 32, dtype=torch.int8).npu()
            torch_npu.npu_quant_scatter_(var, torch.zeros(1, dtype=torch.int32).npu(), torch.ones(1, 1, 32).npu(), torch.ones(32).npu())
        with pytest.raises(OpArgumentError, match="indices is on cpu"):
            torch_npu.scatter_update_(torch.zeros(2, 4).npu(), torch.zeros(2, dtype=torch.int32), torch.zeros(2, 1).npu(), -1)
    assert old.cpu().numpy().tolist() == [[[0] * 32]]  # an ended session's tensor still reads
    assert first.result is not None


def test_capturing_a_synchronising_call_is_an_error_and_leaves_no_capture_open():
    with npusim.session("a2") as session:
        x = torch.zeros(4).npu()
        graph = torch.npu.NPUGraph()
        with pytest.raises(GraphCaptureError, match="a synchronising call"):
            with torch.npu.graph(graph):
                x.cpu()
        assert session.capture is None
        assert x.cpu().tolist() == [0.0] * 4


def test_the_schema_takes_the_documented_defaults_and_the_op_refuses_them_on_a2():
    """op-plugin's schema defaults axis=0, quant_axis=1 (the op page's signature); the op's own check
    refuses axis 0 (never the first dim) on A2 / A3, so a call that leaves them out fails as on the device."""
    schema = torch.ops.npu.npu_quant_scatter_.default._schema
    assert {a.name: a.default_value for a in schema.arguments if a.name in ("axis", "quant_axis")} == {"axis": 0, "quant_axis": 1}
    with npusim.session("a2"):
        var = torch.zeros(1, 2, 32, dtype=torch.int8).npu()
        args = (var, torch.zeros(1, dtype=torch.int32).npu(), torch.ones(1, 1, 32, dtype=torch.bfloat16).npu(),
                torch.ones(32, dtype=torch.bfloat16).npu())
        with pytest.raises(OpArgumentError, match=r"axis = 0: axis must be in \[1, 1\] .* defaults of the documented signature"):
            torch_npu.npu_quant_scatter_(*args)
        with pytest.raises(OpArgumentError, match=r"quant_axis = 1: quant_axis must be the last dimension"):
            torch_npu.npu_quant_scatter_(*args, axis=-2)
        torch_npu.npu_quant_scatter_(*args, axis=-2, quant_axis=-1)
        assert var.cpu().numpy()[0, 0].tolist() == [1] * 32
