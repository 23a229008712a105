"""torch.distributed with the hccl backend on simulated ranks: a torch program's ranks started with
torch.multiprocessing.spawn inside a session, every collective torch programs call, exact results,
async work ordering the stream, and the refusals."""

from __future__ import annotations

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

import npusim
import npusim.torch_npu  # noqa: F401 (registers the npu device and the hccl backend)
from npusim.errors import DeadlockError, OpArgumentError, UsageError
from tests.conftest import events_of

WORLD = 4
results: dict = {}


def setup(rank: int, world: int = WORLD) -> None:
    torch.npu.set_device(rank)
    dist.init_process_group("hccl", rank=rank, world_size=world)


def collectives(rank: int, dtype: torch.dtype) -> None:
    setup(rank)
    out = {}
    x = torch.full((3, 5), rank + 1, dtype=dtype).npu()
    dist.all_reduce(x)
    out["sum"] = x.cpu()
    for op in (dist.ReduceOp.MAX, dist.ReduceOp.MIN):
        y = torch.full((4,), rank + 1, dtype=dtype).npu()
        dist.all_reduce(y, op=op)
        out[str(op)] = y.cpu()
    gathered = torch.empty(WORLD * 6, dtype=dtype, device="npu")
    dist.all_gather_into_tensor(gathered, torch.full((6,), rank, dtype=dtype).npu())
    out["gather"] = gathered.cpu()
    parts = [torch.empty(2, dtype=dtype, device="npu") for _ in range(WORLD)]
    dist.all_gather(parts, torch.full((2,), rank, dtype=dtype).npu())
    out["gather list"] = torch.cat([p.cpu() for p in parts])
    scattered = torch.empty(3, dtype=dtype, device="npu")
    dist.reduce_scatter_tensor(scattered, torch.arange(WORLD * 3, dtype=dtype).npu())
    out["reduce_scatter"] = scattered.cpu()
    b = torch.full((5,), rank, dtype=dtype).npu()
    dist.broadcast(b, src=2)
    out["broadcast"] = b.cpu()
    r = torch.full((5,), rank + 1, dtype=dtype).npu()
    dist.reduce(r, dst=1)
    out["reduce"] = r.cpu()
    a2a = torch.empty(WORLD * 2, dtype=dtype, device="npu")
    dist.all_to_all_single(a2a, torch.arange(WORLD * 2, dtype=dtype).npu() + 10 * rank)
    out["all_to_all"] = a2a.cpu()
    dist.barrier()
    results[rank] = out


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16, torch.int32, torch.int8])
def test_every_collective(dtype: torch.dtype) -> None:
    results.clear()
    with npusim.session("a2"):
        mp.spawn(collectives, args=(dtype,), nprocs=WORLD)
    for rank, out in results.items():
        assert torch.equal(out["sum"], torch.full((3, 5), 10, dtype=dtype))
        assert torch.equal(out[str(dist.ReduceOp.MAX)], torch.full((4,), WORLD, dtype=dtype))
        assert torch.equal(out[str(dist.ReduceOp.MIN)], torch.full((4,), 1, dtype=dtype))
        assert torch.equal(out["gather"], torch.arange(WORLD, dtype=dtype).repeat_interleave(6))
        assert torch.equal(out["gather list"], torch.arange(WORLD, dtype=dtype).repeat_interleave(2))
        assert torch.equal(out["reduce_scatter"], (torch.arange(3, dtype=dtype) + 3 * rank) * WORLD)
        assert torch.equal(out["broadcast"], torch.full((5,), 2, dtype=dtype))
        if rank == 1:
            assert torch.equal(out["reduce"], torch.full((5,), 10, dtype=dtype))
        assert torch.equal(out["all_to_all"], torch.tensor([2 * rank + 10 * s + k for s in range(WORLD) for k in range(2)], dtype=dtype))


def products_and_averages(rank: int) -> None:
    setup(rank)
    p = torch.full((3,), float(rank + 1)).npu()
    dist.all_reduce(p, op=dist.ReduceOp.PRODUCT)
    a = torch.full((3,), float(rank + 1), dtype=torch.float16).npu()
    dist.all_reduce(a, op=dist.ReduceOp.AVG)
    results[rank] = (p.cpu(), a.cpu())


def test_product_and_average() -> None:
    results.clear()
    with npusim.session("a2"):
        mp.spawn(products_and_averages, nprocs=WORLD)
    for p, a in results.values():
        assert torch.equal(p, torch.full((3,), 24.0)) and torch.equal(a, torch.full((3,), 2.5, dtype=torch.float16))


def uneven_all_to_all_and_point_to_point(rank: int) -> None:
    setup(rank)
    send = [rank + 1] * WORLD  # rank r sends r + 1 rows to every rank
    recv = [s + 1 for s in range(WORLD)]
    x = (torch.arange(sum(send) * 2).reshape(sum(send), 2) + 100 * rank).npu()
    y = torch.empty(sum(recv), 2, dtype=x.dtype, device="npu")
    dist.all_to_all_single(y, x, output_split_sizes=recv, input_split_sizes=send)
    right, left = torch.full((4,), rank).npu(), torch.empty(4, dtype=torch.int64, device="npu")
    ops = [dist.P2POp(dist.isend, right, (rank + 1) % WORLD), dist.P2POp(dist.irecv, left, (rank - 1) % WORLD)]
    for work in dist.batch_isend_irecv(ops):
        work.wait()
    if rank == 0:
        dist.send(torch.full((2,), 7).npu(), dst=3)
    elif rank == 3:
        got = torch.empty(2, dtype=torch.int64, device="npu")
        dist.recv(got, src=0)
        results["p2p"] = got.cpu()
    results[rank] = (y.cpu(), left.cpu())


def test_uneven_all_to_all_and_point_to_point() -> None:
    results.clear()
    with npusim.session("a2"):
        mp.spawn(uneven_all_to_all_and_point_to_point, nprocs=WORLD)
    for rank in range(WORLD):
        y, left = results[rank]
        rows = [torch.arange((s + 1) * WORLD * 2).reshape(-1, 2)[rank * (s + 1):(rank + 1) * (s + 1)] + 100 * s for s in range(WORLD)]
        assert torch.equal(y, torch.cat(rows))
        assert torch.equal(left, torch.full((4,), (rank - 1) % WORLD))
    assert torch.equal(results["p2p"], torch.full((2,), 7))


def groups(rank: int) -> None:
    setup(rank)
    pair = dist.new_group([1, 3])
    x = torch.full((2,), float(rank)).npu()
    if rank in (1, 3):
        dist.all_reduce(x, group=pair)
    results[rank] = x.cpu()


def test_new_group() -> None:
    results.clear()
    with npusim.session("a2") as session:
        mp.spawn(groups, nprocs=WORLD)
    assert [results[r].tolist() for r in range(WORLD)] == [[0, 0], [4, 4], [2, 2], [4, 4]]
    lanes = {(e["die"], e["lane"]) for e in events_of(session.result) if e["unit"] == "hccl"}
    assert lanes == {(1, "group 1"), (3, "group 1")}


def async_overlap(rank: int, wait: bool) -> None:
    setup(rank, 2)
    x = torch.ones(1 << 16).npu()
    work = dist.all_reduce(x, async_op=True)
    if wait:
        work.wait()
    y = x.clone()  # queued on the current stream: after the all-reduce only once the work was waited for
    results[rank] = (y.cpu(), work.is_completed())


@pytest.mark.parametrize("wait", [True, False])
def test_async_work_orders_the_current_stream(wait: bool) -> None:
    results.clear()
    with npusim.session("a2", overrides=["host.op_launch=1 ns"]) as session:
        mp.spawn(async_overlap, args=(wait,), nprocs=2)
    events = events_of(session.result)
    reduced = max(e["end"] for e in events if e["unit"] == "hccl" and e["die"] == 0)
    clone = min(e["start"] for e in events if e["die"] == 0 and e["unit"].startswith("aiv"))
    assert (clone >= reduced) == wait
    if wait:
        assert torch.equal(results[0][0], torch.full((1 << 16,), 2.0)) and results[0][1]


def skips_a_collective(rank: int) -> None:
    setup(rank)
    x = torch.ones(4).npu()
    if rank != 2:
        dist.all_reduce(x)
    x.cpu()


def test_a_rank_that_skips_a_collective_is_named() -> None:
    with pytest.raises(DeadlockError, match=r"HcclAllReduce #1: rank\(s\) 0, 1, 3 called it and wait; rank\(s\) 2 never did"), \
            npusim.session("a2"):
        mp.spawn(skips_a_collective, nprocs=WORLD)


def mismatched_dtypes(rank: int) -> None:
    setup(rank, 2)
    dist.all_reduce(torch.ones(4, dtype=torch.float16 if rank == 1 else torch.float32).npu())


def wrong_backend(rank: int) -> None:
    dist.init_process_group("gloo", rank=rank, world_size=2)


def wrong_world(rank: int) -> None:
    dist.init_process_group("hccl", rank=rank, world_size=8)


@pytest.mark.parametrize("program,error,message", [
    (mismatched_dtypes, OpArgumentError, "rank 1 passes dtype float16 but rank 0 float32"),
    (wrong_backend, UsageError, "npusim simulates HCCL; use backend='hccl'"),
    (wrong_world, UsageError, "the program runs 2 ranks"),
])
def test_refusals(program, error, message: str) -> None:
    with pytest.raises(error, match=message), npusim.session("a2"):
        mp.spawn(program, nprocs=2)


def test_spawn_outside_a_session_is_torchs_own() -> None:
    from npusim.frontend.torch_device.distributed import _original_spawn

    assert mp.spawn is not _original_spawn
    with pytest.raises(UsageError, match="more than the 8 devices"), npusim.session("a2"):
        mp.spawn(collectives, args=(torch.float32,), nprocs=9)
