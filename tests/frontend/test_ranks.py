"""npusim.spawn: one simulated host process per rank."""

from __future__ import annotations

import numpy as np
import pytest

import npusim
from npusim.errors import DeadlockError, UsageError

torch = pytest.importorskip("torch")
import npusim.torch_npu  # noqa: E402,F401  (registers the npu device)


def _cast(rank: int, rows: int) -> float:
    torch.npu.set_device(rank)
    x = torch.zeros(rows * (rank + 1), 1024, dtype=torch.float16).npu()
    x.to(torch.float32)
    torch.npu.synchronize()
    return npusim.current_session().now_us


def test_ranks_issue_at_once_and_wait_for_their_own_devices() -> None:
    ended: dict[int, float] = {}

    def rank_main(rank: int, rows: int) -> None:
        ended[rank] = _cast(rank, rows)
        assert torch.npu.current_device() == rank

    with npusim.session("a2") as one:
        npusim.spawn(rank_main, args=(64,), nprocs=4)
    with npusim.session("a2") as alone:
        ended_alone = _cast(3, 64)
    # every rank pays one launch on its own host clock: rank 3's work ends when it would alone
    assert ended[3] == pytest.approx(ended_alone)
    # a rank's synchronize returns when its own (smaller) work is done, before the others'
    assert ended[0] < ended[1] < ended[2] < ended[3]
    assert one.result.simulated_us == pytest.approx(alone.result.simulated_us)


def test_ranks_waiting_for_collectives_the_others_join_later_are_a_deadlock_naming_them() -> None:
    import npusim.torch_npu as torch_npu

    def rank_main(rank: int) -> None:
        torch.npu.set_device(rank)
        x = torch.zeros(2, 1024, dtype=torch.bfloat16).npu()
        ids = torch.tensor([[0, 1], [1, 2]], dtype=torch.int32).npu()
        first, then = ("a", "b") if rank == 0 else ("b", "a")  # each waits for a group the other joins only after
        torch_npu.npu_moe_distribute_dispatch_v2(x, ids, first, 2, rank, 4)[0].cpu()
        torch_npu.npu_moe_distribute_dispatch_v2(x, ids, then, 2, rank, 4)

    with pytest.raises(DeadlockError, match="rank 0 waits in a synchronising call") as raised:
        with npusim.session("a3"):
            npusim.spawn(rank_main, nprocs=2)
    assert "rank 1 waits in a synchronising call" in str(raised.value)


def test_an_error_in_a_rank_names_it() -> None:
    def rank_main(rank: int) -> None:
        if rank == 2:
            raise ValueError("bad input")

    with pytest.raises(ValueError, match="rank 2: bad input"):
        with npusim.session("a2"):
            npusim.spawn(rank_main, nprocs=4)


@pytest.mark.parametrize("call, message", [
    (lambda: npusim.spawn(lambda rank: None, nprocs=0), "nprocs=0"),
    (lambda: npusim.spawn(lambda rank: None, args=[1], nprocs=2), "must be a tuple"),
    (lambda: npusim.spawn(lambda rank: None, nprocs=2, join=False), "join=False"),
    (lambda: npusim.spawn("main", nprocs=2), "must be a function"),
])
def test_bad_arguments(call, message: str) -> None:
    with pytest.raises(UsageError, match=message):
        with npusim.session("a2"):
            call()


def test_spawn_needs_a_session_and_is_not_nested() -> None:
    with pytest.raises(UsageError, match="no npusim session"):
        npusim.spawn(lambda rank: None, nprocs=2)

    def rank_main(rank: int) -> None:
        npusim.spawn(lambda r: None, nprocs=2)

    with pytest.raises(UsageError, match="inside a rank"):
        with npusim.session("a2"):
            npusim.spawn(rank_main, nprocs=2)


def test_numpy_path_ranks() -> None:
    """Without torch tensors the ranks work the same (the ops take npusim tensors)."""
    seen = []

    def rank_main(rank: int) -> None:
        t = npusim.tensor(np.arange(4, dtype=np.float32), device=rank)
        seen.append((rank, float(t.numpy().sum())))

    with npusim.session("a2"):
        npusim.spawn(rank_main, nprocs=3)
    assert seen == [(0, 6.0), (1, 6.0), (2, 6.0)]
