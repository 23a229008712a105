"""Bad values and disagreeing ranks: a clear error naming the rank and the rule, before anything is written."""

from __future__ import annotations

import numpy as np
import pytest

import npusim
import npusim.torch_npu as torch_npu
from npusim.errors import OpArgumentError, WorkloadError
from tests.kernels.moe_distribute.harness import BF16


def dispatch_all(ids_of, *, ep=4, experts=8, masks=None, world=None):
    outs = []
    for rank in range(ep):
        x = npusim.tensor(np.ones((4, 1024), BF16), device=rank)
        mask = None if masks is None else npusim.tensor(masks[rank], device=rank)
        outs.append(torch_npu.npu_moe_distribute_dispatch_v2(
            x, npusim.tensor(ids_of(rank), device=rank), "ep", ep if world is None else world(rank), rank, experts, x_active_mask=mask))
    return outs


def good(rank: int) -> np.ndarray:
    return np.array([[0, 1], [2, 3], [4, 5], [6, 7]], np.int32)


@pytest.mark.parametrize("bad, message", [
    (np.array([[0, 1], [2, 8], [4, 5], [6, 7]], np.int32), r"rank 2 of group 'ep': expert_ids\[1, 1\] = 8 is out of range: the op page "
                                                          r"requires values in \[0, 8\)"),
    (np.array([[0, 1], [2, -1], [4, 5], [6, 7]], np.int32), r"expert_ids\[1, 1\] = -1 is out of range"),
    (np.array([[0, 1], [3, 3], [4, 5], [6, 7]], np.int32), r"rank 2 of group 'ep': expert_ids\[1\] = \[3, 3\] names expert 3 twice: the op "
                                                          "page requires the K ids of a row to differ"),
])
def test_bad_expert_ids_are_refused_before_anything_is_sent(bad, message) -> None:
    with pytest.raises(WorkloadError, match=message):
        with npusim.session("a3"):
            outs = dispatch_all(lambda rank: bad if rank == 2 else good(rank))
            try:
                npusim.synchronize()
            finally:
                for out in outs[2]:  # nothing of rank 2's outputs was written
                    assert not out.allocation.data.any()


def test_a_mask_with_a_gap_is_refused() -> None:
    masks = [np.array([True, False, True, False])] + [np.ones(4, bool)] * 3
    with pytest.raises(WorkloadError, match="rank 0 of group 'ep': x_active_mask = \\[1, 0, 1, 0\\] has a False before a True"):
        with npusim.session("a3"):
            dispatch_all(good, masks=masks)
            npusim.synchronize()


def test_ranks_that_disagree_on_the_world_size_are_refused_at_the_call() -> None:
    with pytest.raises(OpArgumentError, match="rank 1 \\(device 1\\) calls group 'ep' with ep_world_size=8, but rank 0 called it with 4; "
                                              "the world size must be the same on every rank"):
        with npusim.session("a3"):
            dispatch_all(good, world=lambda rank: 4 if rank == 0 else 8, experts=8)


def test_ranks_that_disagree_on_the_experts_are_refused() -> None:
    with pytest.raises(OpArgumentError, match="rank 1 passes moe_expert_num=12 for group 'ep', but rank 0 passed 8"):
        with npusim.session("a3"):
            for rank, experts in ((0, 8), (1, 12)):
                torch_npu.npu_moe_distribute_dispatch_v2(npusim.tensor(np.ones((4, 1024), BF16), device=rank),
                                                         npusim.tensor(good(rank), device=rank), "ep", 4, rank, experts)


def test_two_devices_claiming_one_rank_are_refused() -> None:
    with pytest.raises(OpArgumentError, match="ep_rank_id=0 of group 'ep' is called from device 1, but device 0 already is that rank"):
        with npusim.session("a3"):
            for device in (0, 1):
                torch_npu.npu_moe_distribute_dispatch_v2(npusim.tensor(np.ones((4, 1024), BF16), device=device),
                                                         npusim.tensor(good(0), device=device), "ep", 4, 0, 8)


def test_a_rank_that_never_calls_leaves_the_others_waiting_for_the_group() -> None:
    from npusim.errors import DeadlockError

    with pytest.raises(DeadlockError, match="group 'ep': 3 of its 4 ranks have called an op of it \\(ranks 0, 1, 2\\); the ops of ranks 3 were never "
                                            "called"):
        with npusim.session("a3"):
            for rank in range(3):  # rank 3 of 4 never calls
                torch_npu.npu_moe_distribute_dispatch_v2(npusim.tensor(np.ones((4, 1024), BF16), device=rank),
                                                         npusim.tensor(good(rank), device=rank), "ep", 4, rank, 8)
            npusim.synchronize()
