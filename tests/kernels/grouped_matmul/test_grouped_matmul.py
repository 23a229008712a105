"""torch_npu.npu_grouped_matmul in the forms an MoE layer uses (op-plugin
docs/zh/custom_APIs/torch_npu/torch_npu-npu_grouped_matmul.md): groups of one x's rows with a Tensor
group_list of counts or running sums (group_list_type 1 / 0) or a List[int], one [E, K, N] weight or
a list of weights, int8 with per-channel scale and per_token_scale (bfloat16 / float16 out) or
float16 / bfloat16; separate products (group_type -1). Results bit-exact against the documented
formulas; the checks of the op page and of op-plugin's GroupedMatmulKernelNpuOpApi.cpp name the
argument, value and rule; group_list is read when the kernel starts (counts written by work queued
before the call are the ones used); without data the rows are split evenly, with a warning."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import npusim
import npusim.torch_npu as torch_npu
from npusim.errors import OpArgumentError
from npusim.kernels.grouped_matmul.checks import GroupSizesAssumedWarning
from tests.kernels.cube import reference

torch = pytest.importorskip("torch")

BF16 = ml_dtypes.bfloat16
E, K, N = 4, 64, 48


def device(array):
    if array.dtype == BF16:
        return torch.from_numpy(array.view(np.int16)).view(torch.bfloat16).npu()
    return torch.from_numpy(array).npu()


def values(tensor):
    cpu = tensor.cpu()
    return cpu.view(torch.int16).numpy().view(BF16) if cpu.dtype == torch.bfloat16 else cpu.numpy()


def quantised(x, w, counts, scale, token, out_dtype):
    """y rows of group g = dequantize(x_g @ w_g, scale_g, token_g)."""
    rows, out = 0, []
    for g, count in enumerate(counts):
        acc = reference.accumulate(x[rows:rows + count], w[g])
        out.append(reference.dequantize(acc, scale[g].astype(np.float32), token=token[rows:rows + count], out_dtype=out_dtype))
        rows += count
    return np.concatenate(out)


@pytest.fixture
def int8_case():
    rng = np.random.default_rng(11)
    counts = np.array([30, 0, 17, 53])
    m = int(counts.sum())
    return {"counts": counts, "x": rng.integers(-30, 30, (m, K)).astype(np.int8), "w": rng.integers(-30, 30, (E, K, N)).astype(np.int8),
            "scale": rng.uniform(0.001, 0.01, (E, N)).astype(np.float32).astype(BF16), "token": rng.uniform(0.5, 2, m).astype(np.float32)}


@pytest.mark.parametrize("group_list_type", [0, 1])
def test_int8_groups_of_rows_with_per_channel_and_per_token_scales(int8_case, group_list_type):
    c = int8_case
    group_list = np.cumsum(c["counts"]) if group_list_type == 0 else c["counts"]
    with npusim.session("a3"):
        (y,) = torch_npu.npu_grouped_matmul([device(c["x"])], [device(c["w"])], scale=[device(c["scale"])], per_token_scale=[device(c["token"])],
                                            group_list=device(group_list.astype(np.int64)), split_item=3, group_type=0,
                                            group_list_type=group_list_type, output_dtype=torch.bfloat16)
        got = values(y)
    want = quantised(c["x"], c["w"], c["counts"], c["scale"], c["token"], BF16)
    assert np.array_equal(got.view(np.uint8), want.view(np.uint8))


def test_a_list_of_transposed_weights_and_a_float16_output(int8_case):
    c = int8_case
    scale32 = c["scale"].astype(np.float32)
    with npusim.session("a2") as session:
        weights = [device(np.ascontiguousarray(c["w"][g].T)).t() for g in range(E)]
        (y,) = torch_npu.npu_grouped_matmul([device(c["x"])], weights, scale=[device(scale32[g]) for g in range(E)],
                                            per_token_scale=[device(c["token"])], group_list=device(c["counts"].astype(np.int64)), split_item=2,
                                            group_type=0, group_list_type=1, output_dtype=torch.float16)
        got = values(y)
        assert "Contiguous" not in [op.name for op in session.system.recorder.ops]
    want = quantised(c["x"], c["w"], c["counts"], scale32, c["token"], np.float16)
    assert np.array_equal(got.view(np.uint8), want.view(np.uint8))


def test_float_groups_with_a_list_of_ints_and_separate_products():
    rng = np.random.default_rng(12)
    x = (rng.standard_normal((50, K)) / 4).astype(np.float16)
    w = (rng.standard_normal((3, K, N)) / 4).astype(np.float16)
    bias = (rng.standard_normal((3, N))).astype(np.float16)
    with npusim.session("a2"):
        (grouped,) = torch_npu.npu_grouped_matmul([device(x)], [device(w[g]) for g in range(3)], bias=[device(bias[g]) for g in range(3)],
                                                  group_list=[10, 10, 50], split_item=2)
        separate = torch_npu.npu_grouped_matmul([device(x[:20]), device(x[20:])], [device(w[0]), device(w[1])], split_item=0, group_type=-1)
        got, parts = values(grouped), [values(t) for t in separate]

    def product(rows, g):  # y = x @ w + bias: the bias added after the accumulation (formula 1)
        return (reference.accumulate(rows, w[g]) + bias[g].astype(np.float32)).astype(np.float32).astype(np.float16)

    assert np.array_equal(got, np.concatenate([product(x[:10], 0), product(x[10:10], 1), product(x[10:], 2)]))
    assert np.array_equal(parts[0], reference.matmul(x[:20], w[0])) and np.array_equal(parts[1], reference.matmul(x[20:], w[1]))


def test_group_sizes_are_read_when_the_kernel_starts(int8_case):
    """The counts are written on the device by work queued before the call (here a copy from
    another tensor): the kernel uses those, not what group_list held when it was called."""
    c = int8_case
    with npusim.session("a3"):
        group_list = torch.zeros(E, dtype=torch.int64, device="npu")
        group_list.copy_(device(c["counts"].astype(np.int64)).clone())
        (y,) = torch_npu.npu_grouped_matmul([device(c["x"])], [device(c["w"])], scale=[device(c["scale"])], per_token_scale=[device(c["token"])],
                                            group_list=group_list, split_item=3, group_type=0, group_list_type=1, output_dtype=torch.bfloat16)
        got = values(y)
    assert np.array_equal(got.view(np.uint8), quantised(c["x"], c["w"], c["counts"], c["scale"], c["token"], BF16).view(np.uint8))


def test_bad_group_sizes_are_refused_when_the_kernel_starts(int8_case):
    c = int8_case
    with npusim.session("a3"):
        bad = device(np.array([30, 0, 17, 54], np.int64))
        with pytest.raises(OpArgumentError, match=r"group_list = \[30, 0, 17, 54\]: counts must sum to at most x's rows \(100\), not 101"):
            torch_npu.npu_grouped_matmul([device(c["x"])], [device(c["w"])], scale=[device(c["scale"])], group_list=bad, split_item=3,
                                         group_type=0, group_list_type=1, output_dtype=torch.bfloat16)
            npusim.synchronize()


def test_groups_of_fewer_rows_than_x_compute_those_rows_only(int8_case):
    """An MoE dispatch's expand_x has room for more rows than tokens arrive: the counts sum to at
    most x's rows (aclnnGroupedMatmulV4: "at most x's first dimension"); the rows after them are
    not computed and their output rows keep what they held."""
    c = int8_case
    counts = np.array([30, 0, 17, 50], np.int64)
    used = int(counts.sum())
    with npusim.session("a3"):
        (y,) = torch_npu.npu_grouped_matmul([device(c["x"])], [device(c["w"])], scale=[device(c["scale"])], per_token_scale=[device(c["token"])],
                                            group_list=device(counts), split_item=3, group_type=0, group_list_type=1, output_dtype=torch.bfloat16)
        got = values(y)
    expected = quantised(c["x"][:used], c["w"], counts, c["scale"], c["token"][:used], BF16)
    assert got.shape[0] == c["x"].shape[0] and np.array_equal(got[:used].view(np.uint8), expected.view(np.uint8))


def test_a_timing_only_run_splits_the_rows_evenly_and_says_so():
    with npusim.session("a3", data=False) as session:
        x, w = torch.empty((1000, 256), dtype=torch.int8, device="npu"), torch.empty((8, 256, 128), dtype=torch.int8, device="npu")
        scale = torch.empty((8, 128), dtype=torch.bfloat16, device="npu")
        group_list = torch.empty(8, dtype=torch.int64, device="npu")
        with pytest.warns(GroupSizesAssumedWarning, match="1000 rows are taken as split evenly over 8 groups"):
            torch_npu.npu_grouped_matmul([x], [w], scale=[scale], group_list=group_list, split_item=3, group_type=0, group_list_type=1,
                                         output_dtype=torch.bfloat16)
            npusim.synchronize()
        (op,) = [op for op in session.system.recorder.ops if op.name == "GroupedMatmul"]
    assert op.args["group sizes"] == [125] * 8


# op page 参数说明 / 约束说明 and GroupedMatmulKernelNpuOpApi.cpp: (arguments changed, error)
CHECKS = [
    ({"group_type": None}, "group_type = None: must be given with the Tensor form"),
    ({"group_type": 2}, "group_type = 2: groups along k are not modelled"),
    ({"split_item": 0}, "split_item = 0: must be 2 or 3 for groups of one x's rows"),
    ({"group_list_type": 2}, r"group_list_type = 2: \(\[group index, size\] pairs\) is not modelled"),
    ({"group_list": "short"}, r"group_list = \[3\] int64: must be a 1-D int64 tensor of 4 values"),
    ({"scale": "float16"}, r"scale\[0\].dtype = float16: with output_dtype bfloat16 is not a row of table 2"),
    ({"per_token_scale": "long"}, r"per_token_scale = \[\[101\]\]: must be one tensor of \[100\]"),
    ({"act_type": 1}, "act_type = 1: activations fused into the epilogue are not modelled"),
]


@pytest.mark.parametrize("change,error", CHECKS)
def test_checks_name_the_argument_value_and_rule(int8_case, change, error):
    c = int8_case
    with npusim.session("a3", data=False):
        kwargs = dict(scale=[device(c["scale"])], per_token_scale=[device(c["token"])], group_list=device(c["counts"].astype(np.int64)),
                      split_item=3, group_type=0, group_list_type=1, output_dtype=torch.bfloat16, act_type=0)
        if change.get("group_list") == "short":
            kwargs["group_list"] = device(np.array([1, 2, 3], np.int64))
        elif change.get("scale") == "float16":
            kwargs["scale"] = [device(c["scale"].astype(np.float16))]
        elif change.get("per_token_scale") == "long":
            kwargs["per_token_scale"] = [device(np.ones(101, np.float32))]
        else:
            kwargs.update(change)
        with pytest.raises(OpArgumentError, match=f"npu_grouped_matmul: {error}"):
            torch_npu.npu_grouped_matmul([device(c["x"])], [device(c["w"])], **kwargs)
