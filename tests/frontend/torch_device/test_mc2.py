"""torch_npu's MC2 ops (a matmul fused with a collective) in a torch program's ranks: exact results,
the tiles' collectives overlapping the matmul, a collective overlapping a matmul on another stream
(sharing the die's memory), and the op pages' refusals."""

from __future__ import annotations

import re

import numpy as np
import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

import npusim
import npusim.torch_npu as torch_npu
from npusim.errors import OpArgumentError
from npusim.kernels.hccl.mc2 import BASE_BLOCK_M, Estimates, check, row_tiles
from tests.conftest import events_of

results: dict = {}


def hcom_of(group=None) -> str:
    group = group or dist.distributed_c10d._get_default_group()
    return group._get_backend(torch.device("npu")).get_hccl_comm_name(dist.get_rank())


def exact(rank: int, world: int, dtype: torch.dtype, every: bool) -> None:
    torch.npu.set_device(rank)
    dist.init_process_group("hccl", rank=rank, world_size=world)
    hcom = hcom_of()
    x1 = torch.randint(-2, 3, (512, 256), generator=torch.Generator().manual_seed(rank)).to(dtype)
    x1[:, 16:] = 0  # sums of at most 16 x 2 x 2 per rank: every partial sum is a bf16 integer
    x2 = torch.randint(-2, 3, (512, 256), generator=torch.Generator().manual_seed(99)).to(dtype)  # given transposed: [n, k]
    reduced = torch_npu.npu_mm_all_reduce_base(x1.npu(), x2.npu().t(), hcom)
    if every:
        scattered = torch_npu.npu_mm_reduce_scatter_base(x1.npu(), x2.t().contiguous().npu(), hcom, world)
        product, gathered = torch_npu.npu_all_gather_base_mm(x1.npu(), x2.t().contiguous().npu(), hcom, world)
        results[rank] = (x1, x2.t(), reduced.cpu(), scattered.cpu(), product.cpu(), gathered.cpu())
    else:
        results[rank] = (x1, x2.t(), reduced.cpu())


def test_the_three_ops_are_exact() -> None:
    """Small integers: every order of the fp32 accumulation and of the adds gives the exact result."""
    world = 2  # each op cut into two tiles per rank (row_tiles)
    results.clear()
    with npusim.session("a2") as session:
        mp.spawn(exact, args=(world, torch.float16, True), nprocs=world)
    x2 = results[0][1].double()
    total = sum(results[r][0].double() @ x2 for r in range(world))
    everything = torch.cat([results[r][0] for r in range(world)])
    for rank, (_, _, reduced, scattered, product, gathered) in results.items():
        assert torch.equal(reduced.double(), total)
        assert torch.equal(scattered.double(), total[rank * 256:(rank + 1) * 256])
        assert torch.equal(gathered, everything)
        assert torch.equal(product.double(), everything.double() @ x2)
    ops = session.result.recorder.ops
    kernels = {ops[e["op"]].name for e in events_of(session.result) if e["unit"].startswith("aic")}
    assert kernels == {"MatmulAllReduce", "MatmulReduceScatter", "AllGatherMatmul"}
    steps = {e["name"] for e in events_of(session.result) if e["unit"] == "hccl" and e["die"] == 0}
    assert any(name.startswith("mesh RS") for name in steps)


def test_bf16() -> None:
    """Sums under 256: exact in bf16 too."""
    results.clear()
    with npusim.session("a2"):
        mp.spawn(exact, args=(2, torch.bfloat16, False), nprocs=2)
    assert torch.equal(results[0][2].double(), sum(results[r][0].double() @ results[0][1].double() for r in range(2)))


def timed(rank: int, world: int, mode: str) -> None:
    """The fused op, and the same matmul (a group of one rank) then the all-reduce, timed with events."""
    torch.npu.set_device(rank)
    dist.init_process_group("hccl", rank=rank, world_size=world)
    alone = [dist.new_group([r]) for r in range(world)][rank]
    x1 = torch.ones(1024, 1024, dtype=torch.float16).npu()
    x2 = torch.ones(1024, 2048, dtype=torch.float16).npu()
    torch.npu.synchronize()
    marks = [torch.npu.Event(enable_timing=True) for _ in range(4)]
    marks[0].record()
    if mode == "fused":
        torch_npu.npu_mm_all_reduce_base(x1, x2, hcom_of())
        marks[1].record()
    else:
        y = torch_npu.npu_mm_all_reduce_base(x1, x2, hcom_of(alone))
        marks[1].record()
        dist.all_reduce(y)
    marks[2].record()
    torch.npu.synchronize()
    results[(rank, mode)] = [marks[0].elapsed_time(m) * 1e3 for m in marks[1:3]]


def test_each_tiles_all_reduce_overlaps_the_next_tiles_matmul() -> None:
    world = 4
    for mode in ("fused", "apart"):
        with npusim.session("a2", data=False):
            mp.spawn(timed, args=(world, mode), nprocs=world)
    fused = results[(0, "fused")][0]
    matmul, both = results[(0, "apart")]
    all_reduce = both - matmul
    assert max(matmul, all_reduce) < fused < 0.9 * (matmul + all_reduce)  # 174.5 us against 104.5 + 120.7 (each with its host launch)


def side_stream(rank: int, world: int, mode: str, m: int, k: int, n: int) -> None:
    """An all-reduce on the group's HCCL stream and an m x k x n matmul on a stream of its own; events order them."""
    torch.npu.set_device(rank)
    dist.init_process_group("hccl", rank=rank, world_size=world)
    alone = [dist.new_group([r]) for r in range(world)][rank]
    x1 = torch.ones(m, k, dtype=torch.float16).npu()
    x2 = torch.ones(k, n, dtype=torch.float16).npu()
    grads = torch.ones(4096, 2048, dtype=torch.float16).npu()
    torch.npu.synchronize()
    side = torch.npu.Stream()
    start, computed, reduced, end = (torch.npu.Event(enable_timing=True) for _ in range(4))
    start.record()
    side.wait_event(start)
    work = dist.all_reduce(grads, async_op=True) if mode != "matmul" else None
    if mode != "all_reduce":
        with torch.npu.stream(side):
            torch_npu.npu_mm_all_reduce_base(x1, x2, hcom_of(alone))
            computed.record(side)
    if work is not None:
        work.wait()
    reduced.record()
    torch.npu.current_stream().wait_event(computed)  # what follows needs both
    end.record()
    torch.npu.synchronize()
    results[(rank, mode)] = (start.elapsed_time(computed) * 1e3 if mode != "all_reduce" else 0.0,
                             start.elapsed_time(reduced) * 1e3, start.elapsed_time(end) * 1e3)


def side_by_side(overrides: list[str]) -> tuple[float, float, float, float, float]:
    """On 8 A2 dies: the 2048 x 1024 x 2048 matmul alone, the all-reduce alone (each from ``start``,
    us), then the two on their streams at once: the matmul's end, the all-reduce's, the last."""
    world = 8
    for mode in ("matmul", "all_reduce", "both"):
        with npusim.session("a2", overrides, data=False) as session:
            mp.spawn(side_stream, args=(world, mode, 2048, 1024, 2048), nprocs=world)
    spec = session.system.spec
    launch_us = spec.host.op_launch.to_ps(spec.die.clock.hz) / 1e6  # the matmul is the second host call of "both"
    return results[(0, "matmul")][0] + launch_us, results[(0, "all_reduce")][1], *results[(0, "both")]


def test_a_matmul_on_another_stream_overlaps_an_all_reduce() -> None:
    matmul_alone, all_reduce_alone, matmul, all_reduce, end = side_by_side([])
    assert matmul >= matmul_alone and all_reduce >= all_reduce_alone
    assert end == pytest.approx(max(matmul, all_reduce)) and end < 0.75 * (matmul_alone + all_reduce_alone)


def test_a_matmul_beside_an_all_reduce_shares_the_dies_memory() -> None:
    """With the HBM scarce (200 GB/s, an eighth of an A2 die's) both streams wait on it: each is
    clearly slower beside the other (on a real A2 die the all-reduce, bound by its links, takes
    little of the HBM and the matmul loses ~0.1 us: the test above)."""
    matmul_alone, all_reduce_alone, matmul, all_reduce, end = side_by_side(["die.hbm.bandwidth=200 GB/s"])
    assert matmul > 1.1 * matmul_alone and all_reduce > 1.1 * all_reduce_alone  # 162.8 against 143.3 us, 281.8 against 251.1 us
    assert end == pytest.approx(max(matmul, all_reduce))


def refused(rank: int, world: int, case: str) -> None:
    torch.npu.set_device(rank)
    dist.init_process_group("hccl", rank=rank, world_size=world)
    hcom = hcom_of()
    x1 = torch.ones(256, 256, dtype=torch.float16).npu()
    x2 = torch.ones(256, 128, dtype=torch.float16).npu()
    if case == "bias":
        torch_npu.npu_mm_all_reduce_base(x1, x2, hcom, bias=torch.ones(128, dtype=torch.float16).npu())
    elif case == "dtype":
        torch_npu.npu_mm_all_reduce_base(x1.float(), x2.float(), hcom)
    elif case == "small k":
        torch_npu.npu_mm_reduce_scatter_base(torch.ones(256, 128, dtype=torch.float16).npu(), torch.ones(128, 64).half().npu(), hcom, world)
    elif case == "rows":
        torch_npu.npu_mm_reduce_scatter_base(torch.ones(255, 256, dtype=torch.float16).npu(), x2, hcom, world)
    elif case == "world_size":
        torch_npu.npu_all_gather_base_mm(x1, x2, hcom, 4)
    elif case == "hcom":
        torch_npu.npu_mm_all_reduce_base(x1, x2, "nobody")


@pytest.mark.parametrize("case,message", [
    ("bias", "bias='given': is not modelled yet"),
    ("dtype", "x1.dtype='float32': must be float16 or bfloat16"),
    ("small k", "k=128 must be in [256, 65535)"),
    ("rows", "m=255 must be a multiple of world_size (2)"),
    ("world_size", "world_size=4: must be the group's size, 2"),
    ("hcom", "hcom='nobody' names no communicator of this program"),
])
def test_refusals(case: str, message: str) -> None:
    with pytest.raises(OpArgumentError, match=re.escape(message)), npusim.session("a2"):
        mp.spawn(refused, args=(2, case), nprocs=2)


def test_no_mm_all_reduce_on_a3() -> None:
    with pytest.raises(OpArgumentError, match="runs on Atlas A2 only"):
        check("npu_mm_all_reduce_base", "allreduce", "atlas_a3", (256, 256), (256, 256), np.float16, np.float16, 2, x2_transposed=False)


def test_the_tiling_follows_mc2s_rules() -> None:
    """Tiles aligned to the base block, none under 64 KB of communication, nothing cut below two
    such tiles, at most 64, covering every row once; compute bound: the short tile last."""
    fast_links = Estimates(cube_flops=1e12, hbm_rate=1e15, peer_rate=1e12, sdma_rate=1e13, comm_fixed=1e-6)
    problem = check("api", "allreduce", "atlas_a2", (4096, 4096), (4096, 1024), np.float16, np.float16, 8, x2_transposed=False)
    tiles = row_tiles(problem, fast_links)
    assert sum(rows for _, rows in tiles) == 4096 and [start for start, _ in tiles] == list(np.cumsum([0] + [r for _, r in tiles[:-1]]))
    assert all(rows % BASE_BLOCK_M == 0 for _, rows in tiles) and 1 < len(tiles) <= 64
    assert tiles[-1][1] <= tiles[0][1]  # compute bound: the short tile last
    small = check("api", "allreduce", "atlas_a2", (200, 256), (256, 1024), np.float16, np.float16, 8, x2_transposed=False)
    assert row_tiles(small, fast_links) == [(0, 200)]
    slow_links = Estimates(cube_flops=1e15, hbm_rate=1e15, peer_rate=1e9, sdma_rate=1e13, comm_fixed=1e-6)
    tiles = row_tiles(problem, slow_links)
    assert tiles[0][1] <= tiles[-1][1]  # communication bound: the short tile first
