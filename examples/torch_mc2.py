"""torch_npu's fused matmul + all-reduce (MC2, ``npu_mm_all_reduce_base``) against the same matmul then
``dist.all_reduce`` apart, in a torch program's ranks (one process per NPU, the ``hccl`` backend).

Each rank multiplies its ``m`` x ``k`` fp16 activations by the same ``k`` x ``n`` fp16 weight and the
ranks' products are summed. Fused, the op cuts the rows into tiles and each tile's all-reduce runs on
the group's HCCL stream while the next tile's matmul computes (docs/collectives.md, "Overlap with
compute, and the MC2 ops"); apart, the all-reduce starts when the whole matmul is done. Rank 0 times
both with ``torch.npu.Event`` (each from its first launch, so each includes one host launch) and,
with data on, checks that both give the sum computed on the host in float32, within float16's
rounding.

Parameters (``--param NAME=VALUE``): ``m``, ``k``, ``n`` (the matmul's sizes), ``ranks`` (0: every
die of the config's first server).

Run: npusim run --config a2 examples/torch_mc2.py
"""

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

import npusim
import npusim.torch_npu as torch_npu

m = npusim.param("m", 2048, "rows of each rank's activations")
k = npusim.param("k", 1024, "the contracted size")
n = npusim.param("n", 2048, "columns of the weight")
ranks = npusim.param("ranks", 0, "ranks, one per NPU (0: every NPU of one server)")

world = ranks or npusim.current_session().system.spec.shape.dies_per_node
generator = torch.Generator().manual_seed(0)
xs = [torch.randint(-2, 3, (m, k), generator=generator).to(torch.float16) for _ in range(world)]
w = torch.randint(-1, 2, (k, n), generator=generator).to(torch.float16)
times: dict = {}
outputs: dict = {}


def hccl_comm_name(group: dist.ProcessGroup) -> str:
    """The ``hcom`` argument of the MC2 ops, as their pages obtain it."""
    return group._get_backend(torch.device("npu")).get_hccl_comm_name(dist.get_rank())


def rank_main(rank: int) -> None:
    torch.npu.set_device(rank)
    dist.init_process_group("hccl", rank=rank, world_size=world)
    x1, x2 = xs[rank].npu(), w.npu()
    torch.npu.synchronize()
    marks = [torch.npu.Event(enable_timing=True) for _ in range(5)]
    marks[0].record()
    fused = torch_npu.npu_mm_all_reduce_base(x1, x2, hccl_comm_name(dist.distributed_c10d._get_default_group()))
    marks[1].record()
    torch.npu.synchronize()
    marks[2].record()
    apart = torch.matmul(x1, x2)
    marks[3].record()
    dist.all_reduce(apart)
    marks[4].record()
    torch.npu.synchronize()
    times[rank] = (marks[0].elapsed_time(marks[1]) * 1e3, marks[2].elapsed_time(marks[3]) * 1e3,
                   marks[3].elapsed_time(marks[4]) * 1e3)
    if rank == 0 and npusim.current_session().with_data:
        outputs["fused"], outputs["apart"] = fused.cpu().float(), apart.cpu().float()


mp.spawn(rank_main, nprocs=world)
fused_us, matmul_us, all_reduce_us = times[0]
print(f"{m} x {k} x {n} fp16 on each of {world} ranks, then summed over them (rank 0): fused npu_mm_all_reduce_base "
      f"{fused_us:.1f} us; apart: matmul {matmul_us:.1f} us then all-reduce {all_reduce_us:.1f} us "
      f"({matmul_us + all_reduce_us:.1f} us)")
if outputs:
    reference = sum((x.float() @ w.float()).half().float() for x in xs)
    bound = world * 2**-10 * reference.abs().max()  # a float16 rounding (half of 2^-10 relative) per add of a partial sum
    close = {name: bool((value - reference).abs().max() <= bound) for name, value in outputs.items()}
    print("both outputs match the host's (float16 rounding)" if all(close.values())
          else f"OUTPUT DIFFERS FROM THE HOST'S: {[name for name, ok in close.items() if not ok]}")
    if not all(close.values()):
        raise SystemExit(1)
