"""The torch_npu facade: real signatures, every error through it, options, warnings in the trace,
out-of-place and non-contiguous calls."""

from __future__ import annotations

import inspect

import ml_dtypes
import numpy as np
import pytest

import npusim
from npusim.errors import ConfigError, OpArgumentError, RaceError, ResourceError, UsageError
from npusim.kernels.quant_scatter import OverlappingWritesWarning
from npusim.trace.summary import ops, records

BF16 = ml_dtypes.bfloat16


def quantized(updates, scales, zero_points=None):
    """int8(clip(rint(u / s + zp))) in float32: the op's formula, for small hand-made cases."""
    value = updates.astype(np.float32) / scales.reshape(-1).astype(np.float32)
    if zero_points is not None:
        value = value + zero_points.reshape(-1).astype(np.float32)
    return np.clip(np.rint(value), -128, 127).astype(np.int8)


def arrays(input_shape=(4, 8, 32), updates_shape=(4, 2, 32), indices=(0, 2, 4, 6), bf16=True, zero_points=True):
    rng = np.random.default_rng(0)
    u_dtype, s_dtype, z_dtype = (BF16, BF16, BF16) if bf16 else (np.float16, np.float32, np.int32)
    last = updates_shape[-1]
    return dict(
        input=rng.integers(-128, 128, input_shape).astype(np.int8),
        indices=np.array(indices, np.int32),
        updates=rng.normal(0, 40, updates_shape).astype(u_dtype),
        quant_scales=rng.uniform(0.5, 2, last).astype(s_dtype),
        quant_zero_points=rng.integers(-3, 4, last).astype(z_dtype) if zero_points else None,
    )


def on_device(host: dict, device: int = 0) -> dict:
    return {k: None if v is None else npusim.tensor(v, device=device) for k, v in host.items()}


def test_the_facade_is_imported_from_npusim_and_has_the_real_signatures():
    from npusim import torch_npu

    assert npusim.torch_npu is torch_npu
    expected = ["input", "indices", "updates", "quant_scales", "quant_zero_points", "axis", "quant_axis", "reduce", "dst_type",
                "round_mode"]  # op-plugin's current schema (op_plugin/config/op_plugin_functions.yaml)
    for op in (torch_npu.npu_quant_scatter_, torch_npu.npu_quant_scatter):
        parameters = inspect.signature(op).parameters
        assert list(parameters) == expected
        assert [parameters[name].default for name in expected[4:]] == [None, 0, 1, "update", None, "rint"]  # the op page's signature


@pytest.mark.parametrize("left_out", [("axis", "quant_axis"), ("quant_axis",)])
def test_a_call_that_leaves_out_axis_or_quant_axis_takes_the_documented_default_and_the_op_refuses_it(left_out):
    """The documented signature defaults axis=0, quant_axis=1 (the op page, op-plugin's schema); the op's own checks refuse
    both on A2 / A3 (axis never the first dim, quant_axis the last), so leaving them out fails as on the device."""
    given = {name: value for name, value in (("axis", -2), ("quant_axis", -1)) if name not in left_out}
    first = left_out[0]
    with npusim.session("a2"):
        t = on_device(arrays())
        with pytest.raises(OpArgumentError, match=rf"npu_quant_scatter_: {first} = {0 if first == 'axis' else 1}: .* are the defaults of "
                                                  r"the documented signature, which the op refuses: pass axis=-2, quant_axis=-1"):
            npusim.torch_npu.npu_quant_scatter_(**t, **given)


def test_in_place_returns_input_and_writes_the_quantised_rows_positional_or_keyword():
    from npusim import torch_npu

    host = arrays()
    with npusim.session("a2"):
        t = on_device(host)
        returned = torch_npu.npu_quant_scatter_(t["input"], t["indices"], t["updates"], t["quant_scales"],
                                                t["quant_zero_points"], -2, -1, "update")
        assert returned is t["input"]
        out = returned.numpy()
        t2 = on_device(host)
        torch_npu.npu_quant_scatter_(**t2, axis=1, quant_axis=2, reduce="update")
        assert np.array_equal(t2["input"].numpy(), out)
    expected = host["input"].copy()
    q = quantized(host["updates"], host["quant_scales"], host["quant_zero_points"])
    for b, row in enumerate(host["indices"]):
        expected[b, row:row + 2] = q[b]
    assert np.array_equal(out, expected)


# ------------------------------------------------------------------------------------------ errors


def call(**changes):
    """Call npu_quant_scatter_ on a2 with arrays() changed by ``changes`` (host arrays or tensors)."""
    from npusim import torch_npu

    arguments = {"axis": -2, "quant_axis": -1, **{k: v for k, v in changes.items() if k in ("axis", "quant_axis", "reduce")}}
    host = arrays(**{k: v for k, v in changes.items() if k in ("input_shape", "updates_shape", "indices", "bf16", "zero_points")})
    host.update({k: v for k, v in changes.items() if k in host})
    tensors = {k: v if v is None or isinstance(v, npusim.DeviceTensor) or k == "input" and isinstance(v, list) else npusim.tensor(v)
               for k, v in host.items()}
    return torch_npu.npu_quant_scatter_(**tensors, **arguments)


BAD_CALLS = [
    (dict(input=[[1]]), OpArgumentError, ["input = list: must be an npusim device tensor", "npusim.tensor(array"]),
    (dict(axis="1"), OpArgumentError, ["axis = '1': must be an int"]),
    (dict(quant_axis=True), OpArgumentError, ["quant_axis = True: must be an int"]),
    (dict(reduce="add"), OpArgumentError, ["reduce = 'add'", "only 'update'"]),
    (dict(input=np.zeros((4, 8, 32), np.float16)), OpArgumentError, ["input.dtype = float16", "int8"]),
    (dict(indices=np.array([0, 2, 4, 6], np.int16)), OpArgumentError, ["indices.dtype = int16", "int32 or int64"]),
    (dict(updates=np.zeros((4, 2, 32), np.float32)), OpArgumentError, ["updates.dtype = float32", "not a supported dtype"]),
    (dict(quant_scales=np.ones(32, BF16), bf16=False, zero_points=False), OpArgumentError,
     ["(float16, bfloat16, None)", "not an allowed combination on Atlas A2 (ascend910b)"]),
    (dict(updates=np.zeros((4, 64), BF16)), OpArgumentError, ["updates.shape = (4, 64)", "rank of input (3"]),
    (dict(input_shape=(4, 32), updates_shape=(4, 32)), OpArgumentError, ["rank 3..8, not 2"]),
    (dict(input_shape=(1,) * 8 + (32,), updates_shape=(1,) * 8 + (32,), indices=(0,)), OpArgumentError, ["rank 3..8, not 9"]),
    (dict(axis=0), OpArgumentError, ["axis = 0", "never the first or the last dimension"]),
    (dict(axis=-1), OpArgumentError, ["axis = -1"]),
    (dict(quant_axis=1), OpArgumentError, ["quant_axis = 1", "must be the last dimension"]),
    (dict(quant_scales=np.ones(16, BF16)), OpArgumentError, ["quant_scales.shape = (16,)", "as many elements as the last dim of updates (32)"]),
    (dict(quant_zero_points=np.ones((1, 31), BF16)), OpArgumentError, ["quant_zero_points.shape = (1, 31)"]),
    (dict(indices=np.zeros((4, 1, 1), np.int32)), OpArgumentError, ["indices.shape = (4, 1, 1)", "1-D [B] or 2-D [B, 2]"]),
    (dict(indices=np.zeros((4, 3), np.int32)), OpArgumentError, ["indices.shape = (4, 3)", "[B, 2]"]),
    (dict(indices=(0, 2, 4)), OpArgumentError, ["updates.shape[0] (4) must equal indices.shape[0] (3)"]),
    (dict(input_shape=(3, 8, 32), indices=(0, 1, 2, 3)), OpArgumentError, ["must not exceed input.shape[0] (3)"]),
    (dict(updates_shape=(4, 9, 32)), OpArgumentError, ["updates.shape[1] (9) along axis must not exceed input.shape[1] (8)"]),
    (dict(input_shape=(4, 8, 2, 32), updates_shape=(4, 2, 3, 32), axis=1), OpArgumentError, ["updates.shape[2] (3) must equal input.shape[2] (2)"]),
    (dict(input_shape=(4, 8, 48), updates_shape=(4, 2, 48)), OpArgumentError, ["48 int8 = 48 bytes", "multiple of 32 bytes"]),
    (dict(indices=(0, 7, 4, 6)), OpArgumentError,
     ["indices[1] = 7", "batch 1 would write rows [7, 9) of input batch 1", "silently corrupt memory", "torch_npu.options(out_of_range='unchecked')"]),
    (dict(indices=np.array([[0, 0], [4, 0], [1, 0], [2, 0]], np.int32)), OpArgumentError, ["indices[1] = [4, 0]", "input batch 4"]),
    (dict(input_shape=(60000, 1, 32), updates_shape=(60000, 1, 32), indices=np.zeros(60000, np.int32)), ResourceError,
     ["stages all 60000 indices in UB", "split the call"]),
]


@pytest.mark.parametrize("changes, error, fragments", BAD_CALLS, ids=[", ".join(c) for c, _, _ in BAD_CALLS])
def test_every_bad_call_is_refused_naming_argument_value_and_rule(changes, error, fragments):
    with npusim.session("a2") as session:
        with pytest.raises(error) as info:
            call(**changes)
        assert session.system.recorder.ops == []  # refused before anything is issued
    for fragment in fragments:
        assert fragment in str(info.value), f"{fragment!r} not in {str(info.value)!r}"


def test_a_dtype_row_the_product_does_not_allow_names_the_product():
    with npusim.session("a3"), pytest.raises(OpArgumentError, match=r"not an allowed combination on Atlas A3 \(ascend910c\)"):
        call(bf16=False, zero_points=False, quant_scales=np.ones(32, BF16))


def test_on_the_atlas_inference_series_only_the_fp16_row_runs():
    with npusim.session("atlas-300i-duo"):
        with pytest.raises(OpArgumentError, match=r"updates.dtype = bfloat16: not supported on Atlas inference series "
                                                  r"\(ascend310p\); allowed: float16"):
            call()  # the A2/A3 bf16 row
        with pytest.raises(OpArgumentError, match=r"quant_scales.dtype = bfloat16: not supported on Atlas inference series"):
            call(bf16=False, quant_scales=np.ones(32, BF16))
        host = arrays(bf16=False)
        x = npusim.tensor(host["input"])
        npusim.torch_npu.npu_quant_scatter_(x, *(npusim.tensor(host[k]) for k in ("indices", "updates", "quant_scales", "quant_zero_points")),
                                            axis=-2, quant_axis=-1)
        expected = host["input"].copy()
        for b, row in enumerate(host["indices"]):
            expected[b, row:row + 2] = quantized(host["updates"][b], host["quant_scales"], host["quant_zero_points"])
        assert np.array_equal(x.numpy(), expected)  # the fp16 / fp32 / int32 row runs, on the 310P kernel


def test_tensors_on_another_device_or_session_are_refused():
    from npusim import torch_npu

    with npusim.session("a2") as first:
        stray = npusim.tensor(np.zeros(32, BF16))
    with npusim.session("a2"):
        t = on_device(arrays())
        with pytest.raises(OpArgumentError, match="quant_scales is on device 1, input on device 0: .* create quant_scales with device=0"):
            torch_npu.npu_quant_scatter_(**dict(t, quant_scales=npusim.tensor(np.ones(32, BF16), device=1)), axis=-2, quant_axis=-1)
        with pytest.raises(UsageError, match="quant_scales belongs to another npusim session than input"):
            torch_npu.npu_quant_scatter_(**dict(t, quant_scales=stray), axis=-2, quant_axis=-1)
    assert first.result.status == "ok"


def test_overlapping_destinations_warn_by_default_and_raise_on_request():
    from npusim import torch_npu

    host = arrays(indices=np.array([[0, 0], [1, 0], [0, 1], [3, 4]], np.int32))
    with npusim.session("a2") as session:
        t = on_device(host)
        with pytest.warns(OverlappingWritesWarning, match=r"batches 0 and 2 write overlapping destinations .*rows \[0, 2\) of input batch 0.*rows \[1, 3\) of input batch 0"):
            torch_npu.npu_quant_scatter_(**t, axis=-2, quant_axis=-1)
        with torch_npu.options(overlap="error"), pytest.raises(RaceError, match=r"1 colliding pair\(s\): \(0, 2\)"):
            torch_npu.npu_quant_scatter_(**on_device(host), axis=-2, quant_axis=-1)
    (op,) = [row for row in records(ops(session.result.record)) if row["name"] == "QuantUpdateScatter"]
    (instant,) = session.result.recorder.instants
    assert instant.name == "overlapping writes" and "batches 0 and 2" in instant.message
    assert instant.time_ps == round(op["start_us"] * 1e6)  # marked where the racing kernel starts


def test_options_are_checked_nest_and_restore():
    from npusim import torch_npu

    with pytest.raises(UsageError, match="out_of_range = 'ignore': use one of 'error', 'unchecked'"):
        with torch_npu.options(out_of_range="ignore"):
            pass
    with pytest.raises(UsageError, match="overlap = 'silent'"):
        with torch_npu.options(overlap="silent"):
            pass
    with pytest.raises(UsageError, match="double_buffer = 1: use True or False"):
        with torch_npu.options(double_buffer=1):
            pass
    with torch_npu.options(double_buffer=True) as outer:
        with torch_npu.options(overlap="error") as inner:
            assert (inner.double_buffer, inner.overlap, inner.out_of_range) == (True, "error", "error")
        assert outer == torch_npu.Options(double_buffer=True)
    with torch_npu.options() as default:
        assert default == torch_npu.Options()


def test_a_config_without_the_op_setting_is_a_config_error():
    with npusim.session("a2", overrides=["ops=null"]), pytest.raises(ConfigError, match=r"has no ops.quant_scatter section \(vector_cores: how the op is launched\); add it"):
        call()
    with pytest.raises(ConfigError, match="ops.quant_scatter.vector_cores is 64, but a die has 48 vector cores"):
        with npusim.session("a2", overrides=["ops.quant_scatter.vector_cores=64"]):
            pass


def test_empty_tensors_are_a_no_op():
    from npusim import torch_npu

    host = arrays(input_shape=(4, 8, 32), updates_shape=(0, 2, 32), indices=np.zeros(0, np.int32))
    with npusim.session("a2") as session:
        t = on_device(host)
        assert torch_npu.npu_quant_scatter_(**t, axis=0) is t["input"]  # empty: not even the axis is checked
        assert np.array_equal(t["input"].numpy(), host["input"])
    assert session.result.recorder.ops == []


def test_without_data_indices_are_not_checked():
    with npusim.session("a2", data=False) as session:
        call(indices=(0, 7, 4, 6))  # out of range: unknowable without the values
    assert [op.name for op in session.result.recorder.ops] == ["QuantUpdateScatter"]


def write_on_device(dst, src, stream=None):
    """Queue a kernel on dst's die that copies src into dst through UB (work the op must not overtake)."""
    from npusim import isa

    kernel = isa.Kernel("write indices", die=dst.device)
    program = kernel.aiv(0)
    staging = program.alloc(dst.size, dst.dtype)
    program.copy(staging, isa.gm(src))
    program.set_flag("MTE2", "MTE3", 0)
    program.wait_flag("MTE2", "MTE3", 0)
    program.copy(isa.gm(dst), staging)
    kernel.launch(stream)


def _expected_with_indices(host, final):
    expected = host["input"].copy()
    q = quantized(host["updates"], host["quant_scales"], host["quant_zero_points"])
    for b, row in enumerate(final):
        expected[b, row:row + 2] = q[b]
    return expected


def test_indices_written_by_work_queued_on_the_ops_stream_are_the_values_it_uses():
    """The host checks the index values at the call; work queued before the op on its stream runs
    before its kernels, so the simulation runs that work first (the host does not wait: its clock
    and the op's launch are those without it) and the op checks and uses the values it leaves."""
    from npusim import torch_npu

    host = arrays(indices=(0, 2, 4, 6))
    final = np.array([6, 4, 2, 0], np.int32)
    with npusim.session("a2") as session:
        t = on_device(host)
        write_on_device(t["indices"], npusim.tensor(final))
        host_before = session.host.now_ps
        out = torch_npu.npu_quant_scatter_(**t, axis=-2, quant_axis=-1)
        assert session.host.now_ps == host_before < session.env.now  # the simulation ran ahead; the host did not wait
        got = out.numpy()
    assert np.array_equal(got, _expected_with_indices(host, final))


def test_indices_a_device_add_computes_just_before_the_call_are_used():
    """Issue 31's add / sub run on the device: indices = base + offset (npu int32 tensors) right
    before a scatter_update_ are the values its kernel reads."""
    import torch

    from npusim import torch_npu

    with npusim.session("a2"):
        indices = torch.tensor([0, 1], dtype=torch.int32).npu() + torch.tensor([3, 4], dtype=torch.int32).npu()
        got = torch_npu.scatter_update_(torch.zeros(2, 4, 6, 8).npu(), indices, torch.ones(2, 4, 1, 8).npu(), -2).cpu()
    assert got[0, :, 3].eq(1).all() and got[1, :, 5].eq(1).all() and got.sum() == 2 * 4 * 8


# ------------------------------------------------------------------------ out of place, views


def test_out_of_place_leaves_input_untouched_and_costs_the_clone():
    from npusim import torch_npu

    host = arrays(input_shape=(48, 256, 128), updates_shape=(48, 1, 128), indices=np.arange(48, dtype=np.int32))
    with npusim.session("a2") as in_place:
        t = on_device(host)
        torch_npu.npu_quant_scatter_(**t, axis=-2, quant_axis=-1)
        expected = t["input"].numpy()
    with npusim.session("a2") as out_of_place:
        t = on_device(host)
        result = torch_npu.npu_quant_scatter(**t, axis=-2, quant_axis=-1)
        assert result is not t["input"] and result.is_contiguous()
        assert np.array_equal(result.numpy(), expected)
        assert np.array_equal(t["input"].numpy(), host["input"])
    rows = {row["name"]: row for row in records(ops(out_of_place.result.record))}
    clone = rows["Clone"]
    assert clone["dma_bytes"] == 2 * host["input"].nbytes  # read and written once
    assert rows["QuantUpdateScatter"]["start_us"] >= clone["end_us"]
    extra = out_of_place.result.simulated_ps - in_place.result.simulated_ps
    assert extra == pytest.approx(clone["duration_us"] * 1e6, rel=0.01) and extra > 0


def test_a_non_contiguous_input_is_copied_on_the_device_around_the_kernel():
    from npusim import torch_npu

    host = arrays()
    with npusim.session("a2") as session:
        t = on_device(host)
        base = npusim.tensor(np.zeros((8, 4, 32), np.int8))
        view = base.transpose(0, 1)  # [4, 8, 32], non-contiguous
        view_host = base.host_view()
        view_host[...] = host["input"].transpose(1, 0, 2)
        torch_npu.npu_quant_scatter_(**dict(t, input=view), axis=-2, quant_axis=-1)
        t2 = on_device(host)
        torch_npu.npu_quant_scatter_(**t2, axis=-2, quant_axis=-1)
        assert np.array_equal(view.numpy(), t2["input"].numpy())
    names = [op.name for op in session.result.recorder.ops]
    assert names[:3] == ["Contiguous", "QuantUpdateScatter", "ViewCopy"]
