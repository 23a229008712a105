"""CANN's MoE dispatch and combine as CloudMatrix384's Table 6 measured them (Zuo et al., "Serving
Large Language Models on Huawei CloudMatrix384", arXiv 2506.12708, section 5.5.1): on ``ep`` ranks
(one die each) of an Atlas A3 SuperPoD, ``tokens`` tokens of ``hidden`` bf16 values per rank, each
sent to ``topk`` of ``experts`` experts, int8 (``quant_mode=2``) in the dispatch and bf16 in the
combine, through ``torch_npu.npu_moe_distribute_dispatch_v2`` / ``combine_v2``, every rank starting
each op at once. The routing is the timing-only run's (uniform, docs/moe.md).

Figures: ``dispatch_us`` and ``combine_us``, from the op's start to the end of the last rank's.

Parameters (``--param NAME=VALUE``): ``ep``, ``tokens``, ``hidden``, ``topk``, ``experts``,
``quant_mode``, ``comm_alg``.

Run: npusim run --config a3 --no-data --set hccl.buffer='1 GiB' npusim/calibration/workloads/moe_dispatch_combine.py --param ep=8
"""

from __future__ import annotations

import ml_dtypes
import numpy as np

import npusim
from npusim import torch_npu

BF16 = np.dtype(ml_dtypes.bfloat16)


def run(ep: int, tokens: int = 128, hidden: int = 7168, topk: int = 8, experts: int = 256, quant_mode: int = 2,
        comm_alg: str = "") -> dict[str, float]:
    """Dispatch then combine on dies 0 .. ep-1 of the current session; the two ops' times in us."""
    session = npusim.current_session()
    ids = [npusim.empty((tokens, topk), np.int32, device=rank) for rank in range(ep)]
    outs = [torch_npu.npu_moe_distribute_dispatch_v2(npusim.empty((tokens, hidden), BF16, device=rank), ids[rank], "ep", ep, rank, experts,
                                                     quant_mode=quant_mode, comm_alg=comm_alg) for rank in range(ep)]
    start = session.now_us
    npusim.synchronize()
    dispatched = session.now_us
    for rank, (expand_x, _, assist, _, counts, _, _) in enumerate(outs):
        torch_npu.npu_moe_distribute_combine_v2(npusim.empty(expand_x.shape, BF16, device=rank), ids[rank], assist, counts,
                                                npusim.empty((tokens, topk), np.float32, device=rank), "ep", ep, rank, experts,
                                                comm_alg=comm_alg)
    npusim.synchronize()
    return {"dispatch_us": dispatched - start, "combine_us": session.now_us - dispatched}


def main() -> None:
    session = npusim.current_session()
    ep = npusim.param("ep", 8, "expert-parallel ranks, one die each")
    args = dict(tokens=npusim.param("tokens", 128, "tokens per rank"), hidden=npusim.param("hidden", 7168, "bf16 values per token"),
                topk=npusim.param("topk", 8, "experts per token"), experts=npusim.param("experts", 256, "routed experts"),
                quant_mode=npusim.param("quant_mode", 2, "0: bf16 dispatch, 2: dynamic int8"),
                comm_alg=npusim.param("comm_alg", "", "the ops' comm_alg"))
    figures = run(ep, **args)
    print(f"MoE dispatch / combine on {session.config.name}, EP{ep}: dispatch {figures['dispatch_us']:.1f} us, "
          f"combine {figures['combine_us']:.1f} us (CloudMatrix384 Table 6: EP8 116 / 118 us, EP16 131 / 132 us)")
