"""The op pages' rules, as the ops refuse a call: each case names the argument, the value and the rule."""

from __future__ import annotations

from types import SimpleNamespace

import ml_dtypes
import numpy as np
import pytest

from npusim.errors import OpArgumentError
from npusim.kernels.moe_distribute.checks import A2, A3, MB, check_combine, check_dispatch, window_bytes_needed

BF16 = np.dtype(ml_dtypes.bfloat16)
BUFFER = 2000 * MB


def t(*shape, dtype=BF16):
    return SimpleNamespace(shape=shape, dtype=np.dtype(dtype), ndim=len(shape))


def dispatch_args(**changes):
    args = dict(x=t(8, 7168), expert_ids=t(8, 8, dtype=np.int32), group_ep="ep", ep_world_size=16, ep_rank_id=3, moe_expert_num=256,
                scales=None, x_active_mask=None, expert_scales=None, elastic_info=None, performance_info=None, group_tp="",
                tp_world_size=0, tp_rank_id=0, expert_shard_type=0, shared_expert_num=1, shared_expert_rank_num=0, quant_mode=0,
                global_bs=0, expert_token_nums_type=1, comm_alg="", zero_expert_num=0, copy_expert_num=0, const_expert_num=0)
    args.update(changes)
    return args


# (series, version, changes, substring of the message): every rule the dispatch pages state
DISPATCH_CASES = [
    (A3, 2, dict(ep_world_size=769), "ep_world_size = 769: must be in [2, 768]"),
    (A3, 2, dict(ep_world_size=1), "ep_world_size = 1: must be in [2, 768]"),
    (A3, 2, dict(comm_alg="hierarchy", ep_world_size=24, moe_expert_num=240), "multiple of 16 in [16, 256]"),
    (A3, 2, dict(comm_alg="fullmesh"), "comm_alg = 'fullmesh': on Atlas A3 comm_alg is one of"),
    (A2, 2, dict(comm_alg="fullmesh_v1"), "comm_alg = 'fullmesh_v1': on Atlas A2 comm_alg is one of"),
    (A2, 2, dict(ep_world_size=9, moe_expert_num=9), "ep_world_size = 9: on Atlas A2 with comm_alg 'fullmesh' it is one of"),
    (A2, 2, dict(comm_alg="hierarchy", ep_world_size=8), "with comm_alg 'hierarchy' it is one of 16, 32, 64"),
    (A3, 1, dict(ep_world_size=12, moe_expert_num=12), "ep_world_size = 12: on Atlas A3 it is one of 8, 16, 32"),
    (A3, 2, dict(ep_rank_id=16), "ep_rank_id = 16: must be in [0, ep_world_size)"),
    (A3, 2, dict(moe_expert_num=1025), "moe_expert_num = 1025: must be in [1, 1024]"),
    (A3, 2, dict(moe_expert_num=250), "must be a multiple of ep_world_size - shared_expert_rank_num = 16"),
    (A3, 1, dict(moe_expert_num=528), "moe_expert_num = 528: must be in [1, 512]"),
    (A3, 2, dict(comm_alg="hierarchy", moe_expert_num=528), "must be in [1, 512] with comm_alg 'hierarchy'"),
    (A3, 2, dict(comm_alg="hierarchy"), "expert_scales = None: required with comm_alg 'hierarchy' on Atlas A3"),
    (A2, 1, dict(moe_expert_num=400), "moe_expert_num / ep_world_size may be at most 24"),
    (A3, 2, dict(ep_world_size=700, shared_expert_num=4, shared_expert_rank_num=400, moe_expert_num=900),
     "local_expert_num x ep_world_size = 3 x 700 = 2100 must be at most 2048"),
    (A3, 2, dict(x=t(513, 7168), expert_ids=t(513, 8, dtype=np.int32)), "BS (x.shape[0]) = 513: must be in (0, 512]"),
    (A3, 2, dict(comm_alg="fullmesh_v2", x=t(257, 7168), expert_ids=t(257, 8, dtype=np.int32)), "BS (x.shape[0]) = 257: must be in (0, 256]"),
    (A2, 2, dict(x=t(257, 7168), expert_ids=t(257, 8, dtype=np.int32)), "must be in (0, 256] on Atlas A2"),
    (A3, 2, dict(x=t(8, 1000)), "H (x.shape[1]) = 1000: must be in [1024, 8192]"),
    (A3, 2, dict(x=t(8, 9000)), "H (x.shape[1]) = 9000: must be in [1024, 8192]"),
    (A2, 2, dict(x=t(8, 7200)), "H (x.shape[1]) = 7200: must be in [1, 7168] and a multiple of 32"),
    (A3, 1, dict(x=t(8, 4096)), "H (x.shape[1]) = 4096: must be in [7168, 7168]"),
    (A3, 2, dict(expert_ids=t(8, 17, dtype=np.int32)), "K (expert_ids.shape[1]) = 17: must be in (0, 16]"),
    (A3, 2, dict(comm_alg="fullmesh_v2", expert_ids=t(8, 13, dtype=np.int32)), "K (expert_ids.shape[1]) = 13: must be in (0, 12]"),
    (A3, 1, dict(expert_ids=t(8, 9, dtype=np.int32)), "K (expert_ids.shape[1]) = 9: must be in (0, 8]"),
    (A3, 2, dict(expert_ids=t(8, 8, dtype=np.int32), moe_expert_num=16, ep_world_size=16), None),
    (A3, 2, dict(expert_ids=t(7, 8, dtype=np.int32)), "expert_ids.shape = (7, 8): must be (BS, K)"),
    (A3, 2, dict(x=t(8, 7168, dtype=np.float32)), "x.dtype = float32"),
    (A3, 2, dict(x=t(8, 7168, dtype=np.int32)), "x.dtype = int32"),
    (A3, 2, dict(expert_ids=t(8, 8, dtype=np.int64)), "expert_ids.dtype = int64"),
    (A3, 2, dict(quant_mode=1), "quant_mode = 1: 0 (no quantisation) or 2"),
    (A3, 2, dict(scales=t(256, 7168, dtype=np.float32)), "smooth scales apply to quant_mode 2 only"),
    (A3, 2, dict(quant_mode=2, scales=t(255, 7168, dtype=np.float32)), "scales.shape = (255, 7168): must be (shared_expert_num + moe_expert_num, H)"),
    (A3, 2, dict(x_active_mask=t(8, dtype=np.int32)), "x_active_mask.dtype = int32: must be bool"),
    (A3, 2, dict(x_active_mask=t(9, dtype=np.bool_)), "x_active_mask.shape = (9,)"),
    (A3, 1, dict(x_active_mask=t(8, dtype=np.bool_)), "reserved in the first op pair"),
    (A2, 2, dict(comm_alg="hierarchy", ep_world_size=16, x_active_mask=t(8, dtype=np.bool_)), "not supported with comm_alg 'hierarchy' on Atlas A2"),
    (A3, 2, dict(expert_scales=t(8, 8, dtype=np.float32)), "expert_scales = a tensor: not supported with comm_alg 'fullmesh_v1' on Atlas A3"),
    (A3, 2, dict(elastic_info=t(4, dtype=np.int32)), "elastic_info = a tensor: reserved"),
    (A3, 2, dict(performance_info=t(15, dtype=np.int64)), "performance_info.shape = (15,): must be (ep_world_size,)"),
    (A3, 2, dict(expert_token_nums_type=2), "expert_token_nums_type = 2: 0 (prefix sums) or 1 (counts)"),
    (A3, 2, dict(expert_shard_type=1), "expert_shard_type = 1: only 0"),
    (A3, 2, dict(shared_expert_num=5), "shared_expert_num = 5: must be in [0, 4]"),
    (A3, 2, dict(shared_expert_rank_num=16), "shared_expert_rank_num = 16: must be in [0, ep_world_size)"),
    (A3, 2, dict(shared_expert_num=2, shared_expert_rank_num=3, moe_expert_num=260), "must be a multiple of shared_expert_num (2)"),
    (A2, 2, dict(ep_world_size=16, shared_expert_rank_num=1, moe_expert_num=255), "Atlas A2 has no shared-expert ranks"),
    (A3, 2, dict(global_bs=100), "global_bs = 100: 0, or max_bs x ep_world_size"),
    (A3, 2, dict(global_bs=16 * 4), "global_bs = 64: 0, or max_bs x ep_world_size with max_bs >= BS (8)"),
    (A3, 2, dict(group_ep=""), "group_ep = '': the EP domain's name must be a string of 1 to 127 characters"),
    (A3, 2, dict(group_ep="g" * 128), "must be a string of 1 to 127 characters"),
    (A3, 2, dict(zero_expert_num=-1), "zero_expert_num = -1: must be in [0, 2^31 - 1)"),
    (A2, 2, dict(const_expert_num=1), "const_expert_num = 1: not supported with comm_alg 'fullmesh' on Atlas A2"),
    (A3, 2, dict(comm_alg="hierarchy", copy_expert_num=1), "copy_expert_num = 1: not supported with comm_alg 'hierarchy'"),
    (A3, 2, dict(expert_ids=t(8, 2, dtype=np.int32), moe_expert_num=16, ep_world_size=16, x=t(8, 7168)), None),
    (A3, 2, dict(tp_world_size=3), "tp_world_size = 3: 0 or 1 (no TP domain), or 2 on Atlas A3"),
    (A2, 2, dict(tp_world_size=2), "tp_world_size = 2: 0 or 1 (no TP domain), or 2 on Atlas A3"),
    (A3, 2, dict(tp_world_size=2, group_tp="tp", tp_rank_id=2, moe_expert_num=16), "tp_rank_id = 2: must be 0 or 1"),
    (A3, 2, dict(tp_world_size=2, group_tp="ep", moe_expert_num=16), "group_tp = 'ep': a TP domain of 2 needs its own name"),
    (A3, 2, dict(tp_world_size=2, group_tp="tp"), "a TP domain is supported with one expert per rank only (local_expert_num is 16)"),
    (A3, 2, dict(tp_world_size=2, group_tp="tp", moe_expert_num=16, comm_alg="fullmesh_v2"), "run with tp_world_size 1 only"),
    (A3, 2, dict(tp_rank_id=1), "tp_rank_id = 1: must be 0 without a TP domain"),
    (A3, 2, dict(comm_alg="hierarchy", shared_expert_rank_num=1, moe_expert_num=240 - 15), "supports no shared experts"),
]


@pytest.mark.parametrize("series, version, changes, message", DISPATCH_CASES)
def test_dispatch_checks(series, version, changes, message) -> None:
    api = "npu_moe_distribute_dispatch_v2" if version == 2 else "npu_moe_distribute_dispatch"
    args = dispatch_args(**changes)
    if message is None:
        check_dispatch(api, version, series, args, BUFFER)
        return
    with pytest.raises(OpArgumentError) as raised:
        check_dispatch(api, version, series, args, BUFFER)
    assert message in str(raised.value)
    assert str(raised.value).startswith(f"torch_npu.{api}: ")


def test_a_window_too_small_names_the_rank_the_sizes_and_the_need() -> None:
    args = dispatch_args(x=t(128, 7168), expert_ids=t(128, 8, dtype=np.int32), ep_world_size=8)
    with pytest.raises(OpArgumentError, match=r"rank 3 of group 'ep': the HCCL buffer of 200 MB .* requires at least 956 MB; raise it"):
        check_dispatch("npu_moe_distribute_dispatch_v2", 2, A3, args, 200 * MB)
    check_dispatch("npu_moe_distribute_dispatch_v2", 2, A3, args, 956 * MB)


def test_window_formulas_of_the_pages() -> None:
    """The pages' HCCL_BUFFSIZE formulas, worked by hand for one shape each."""
    problem = check_dispatch("d", 2, A3, dispatch_args(x=t(128, 7168), expert_ids=t(128, 8, dtype=np.int32), ep_world_size=8), BUFFER)
    # 2 * (local * max_bs * ep * Align512(Align32(2H) + 64) + (K + shared) * max_bs * Align512(2H))
    assert window_bytes_needed(problem.shape, 2, 2) == 2 * (32 * 128 * 8 * 14848 + 8 * 128 * 14336)
    a2 = check_dispatch("d", 2, A2, dispatch_args(ep_world_size=8, moe_expert_num=64), BUFFER)
    # 2 * (BS * ep * min(local, K) * H * 2 + 2 MB)
    assert window_bytes_needed(a2.shape, 2, 2) == 2 * (8 * 8 * 8 * 7168 * 2 + 2 * MB)


def combine_args(**changes):
    args = dict(expand_x=t(8 * 16 * 8, 7168), expert_ids=t(8, 8, dtype=np.int32), assist_info_for_combine=t(8 * 16 * 8 * 128, dtype=np.int32),
                ep_send_counts=t(16 * 16, dtype=np.int32), expert_scales=t(8, 8, dtype=np.float32), group_ep="ep", ep_world_size=16,
                ep_rank_id=0, moe_expert_num=256)
    args.update(changes)
    return args


COMBINE_CASES = [
    (dict(expand_x=t(100, 7168)), "expand_x.shape = (100, 7168): must have at least A = 1024 rows"),
    (dict(expand_x=t(1024, 7168, dtype=np.int8)), "expand_x.dtype = int8"),
    (dict(assist_info_for_combine=t(1000, dtype=np.int32)), "must have at least 131072 entries (A x 128)"),
    (dict(ep_send_counts=t(100, dtype=np.int32)), "ep_send_counts.shape = (100,): must have at least 256 entries"),
    (dict(expert_scales=t(8, 7, dtype=np.float32)), "expert_scales.shape = (8, 7): must be (BS, K)"),
    (dict(expert_scales=t(8, 8, dtype=BF16)), "expert_scales.dtype = bfloat16"),
    (dict(comm_alg="fullmesh_v1"), "comm_alg = 'fullmesh_v1': on Atlas A3 comm_alg is one of '', 'hierarchy'"),
    (dict(expand_scales=t(1024, dtype=np.float32)), "supported with comm_alg 'hierarchy' only on Atlas A3"),
    (dict(comm_alg="hierarchy"), "expand_scales = None: required with comm_alg 'hierarchy' on Atlas A3"),
    (dict(copy_expert_num=1), "copy and constant experts need ori_x"),
    (dict(const_expert_num=1, ori_x=t(8, 7168)), "constant experts need it as (const_expert_num, H)"),
    (dict(ori_x=t(8, 7168, dtype=np.float16)), "ori_x.dtype = float16: must be expand_x's (bfloat16)"),
    (dict(shared_expert_x=t(4, 7168)), "shared_expert_x.shape = (4, 7168): must be (BS, H)"),
    (dict(comm_quant_mode=1), "comm_quant_mode = 1: 0 (no quantisation) or 2"),
    (dict(comm_quant_mode=2), "int8 communication in the combine is not modelled by npusim yet"),
    (dict(tp_world_size=2, group_tp="tp", moe_expert_num=16), "a TP domain of 2 needs the dispatch's tp_recv_counts"),
]


@pytest.mark.parametrize("changes, message", COMBINE_CASES)
def test_combine_checks(changes, message) -> None:
    with pytest.raises(OpArgumentError) as raised:
        check_combine("npu_moe_distribute_combine_v2", 2, A3, combine_args(**changes), BUFFER)
    assert message in str(raised.value)


def test_a_good_combine_passes_and_a_shared_3d_x_is_accepted() -> None:
    problem = check_combine("c", 2, A3, combine_args(shared_expert_x=t(2, 4, 7168)), BUFFER)
    assert (problem.shape.bs, problem.shape.h, problem.expand_rows) == (8, 7168, 1024)
