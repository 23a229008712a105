"""A tensor-parallel MLP block as a torch program runs it on an Ascend server: one process per NPU
(``torch.multiprocessing.spawn``), ``torch.distributed`` with the ``hccl`` backend, each rank holding
a column slice of the first weight and a row slice of the second; each rank's partial output is
summed with ``dist.all_reduce`` (HCCL's algorithm for the server, docs/collectives.md). The program
is what it would be on the machine; under ``npusim run`` the ranks are the simulated dies.

Each rank times its matmuls and the all-reduce with ``torch.npu.Event``; with data on, rank 0 checks
the block's output against the block computed on the host in float32 (equal within float16's
rounding: the device rounds each matmul's output and each partial sum of the all-reduce to float16).

Parameters (``--param NAME=VALUE``): ``tokens``, ``hidden``, ``ffn`` (the block's sizes), ``ranks``
(0: every die of the config's first server).

Run: python -m npusim run --config a2 examples/torch_tensor_parallel.py
     python -m npusim run --config a2 --set hccl.expansion_mode=aiv examples/torch_tensor_parallel.py --param tokens=16
"""

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

import npusim
import npusim.torch_npu  # noqa: F401 (the npu device and the hccl backend)

tokens = npusim.param("tokens", 512, "tokens of the batch (rows of x)")
hidden = npusim.param("hidden", 4096, "the model's hidden size")
ffn = npusim.param("ffn", 11008, "the MLP's inner size, split over the ranks")
ranks = npusim.param("ranks", 0, "ranks, one per NPU (0: every NPU of one server)")

world = ranks or npusim.current_session().system.spec.shape.dies_per_node
if ffn % world:
    raise SystemExit(f"ffn={ffn} must split evenly over {world} ranks")
generator = torch.Generator().manual_seed(0)
x = torch.randint(-2, 3, (tokens, hidden), generator=generator).to(torch.float16)
w1 = torch.randint(-1, 2, (hidden, ffn), generator=generator).to(torch.float16)
w2 = torch.randint(-1, 2, (ffn, hidden), generator=generator).to(torch.float16)
times: dict = {}


def rank_main(rank: int) -> None:
    torch.npu.set_device(rank)
    dist.init_process_group("hccl", rank=rank, world_size=world)
    part = ffn // world
    xs = x.npu()
    w1s = w1[:, rank * part:(rank + 1) * part].contiguous().npu()  # column-parallel
    w2s = w2[rank * part:(rank + 1) * part].contiguous().npu()  # row-parallel
    torch.npu.synchronize()
    start, computed, reduced = (torch.npu.Event(enable_timing=True) for _ in range(3))
    start.record()
    y = torch.matmul(torch.matmul(xs, w1s), w2s)  # this rank's partial sum of the block's output
    computed.record()
    dist.all_reduce(y)
    reduced.record()
    torch.npu.synchronize()
    times[rank] = (start.elapsed_time(computed) * 1e3, computed.elapsed_time(reduced) * 1e3)
    if rank == 0 and npusim.current_session().with_data:
        reference = (x.float() @ w1.float()).half().float() @ w2.float()
        bound = world * 2**-10 * reference.abs().max()  # a float16 rounding (half of 2^-10 relative) per add of a partial sum
        times["close"] = bool((y.cpu().float() - reference).abs().max() <= bound)


mp.spawn(rank_main, nprocs=world)
compute_us, reduce_us = times[0]
print(f"tensor-parallel MLP, {tokens} x {hidden} -> {ffn} -> {hidden} fp16 over {world} ranks: matmuls {compute_us:.1f} us, "
      f"all-reduce of {tokens * hidden * 2 / 2**20:.1f} MiB {reduce_us:.1f} us (rank 0)")
if "close" in times:
    print("output matches the host's (float16 rounding)" if times["close"] else "OUTPUT DIFFERS FROM THE HOST'S")
    if not times["close"]:
        raise SystemExit(1)
