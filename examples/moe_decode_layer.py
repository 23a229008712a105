"""One MoE layer of DeepSeek-V3's decode as a serving stack runs it with expert parallelism (the
w8a8 dynamic path of vLLM-Ascend on a CloudMatrix384), one rank per die, written with torch and
``npusim.torch_npu`` as such a stack writes it:

1. the router: ``linear`` of the tokens with the gate's weights, then ``npu_moe_gating_top_k``
   (sigmoid scores plus the correction bias, the 4 best of 8 expert groups, the 8 best experts of
   those, weights renormalised and scaled by 2.5);
2. ``npu_moe_distribute_dispatch_v2`` with ``quant_mode=2``: each token, quantised to int8 per
   token, written by the AIV cores straight into the windows of the ranks of its 8 experts;
3. ``npu_grouped_matmul`` (int8, per-channel scales of the weights, the dispatch's per-token
   scales, the rows of each local expert from the dispatch's ``expert_token_nums``), then
   ``npu_dequant_swiglu_quant`` (SwiGLU, requantised per token), then the second grouped matmul;
4. ``npu_moe_distribute_combine_v2``: each expert's rows written back to their tokens' ranks and
   summed there with the router's weights in float32.

Every rank calls the ops with its ``ep_rank_id`` and the EP group's name and size, as the real API
is called from each process of an SPMD program (``npusim.spawn`` runs ``rank_main`` once per rank,
as ``torch.multiprocessing.spawn`` does). The EP group is all dies of the config by default:
``--set shape.nodes=N`` (16 dies per a3 node) sets how many, ``--param ep`` uses fewer. Past 256
dies each die hosts one expert: the layer then has one expert per die (``experts``), as a serving
stack replicates DeepSeek's 256 to fill the SuperPoD.

The layer is captured in an NPU graph on each rank and replayed, as a serving stack runs decode
(one host launch per replay, no per-op host cost).

Printed: each stage's time in the last replay (mean and slowest rank) and the layer's split
between communication (dispatch, combine) and expert compute (grouped matmuls, activation); the run's
report (``npusim run``) adds the critical path, whose dispatch and combine entries (writes into
peers' windows, waits on counts and flags, SyncAll) say how much of the layer waits on the fabric.
With data (small EP and dims) the output is compared with a float64 reference of the same layer
(int8 rounding of the tokens and activations allowed for: relative error under 3%).

Parameters (``--param NAME=VALUE``): ``ep``, ``tokens`` (per rank), ``hidden``, ``intermediate``
(per expert), ``experts``, ``topk``, ``comm_alg`` (the dispatch's: "", ``fullmesh_v1``, ``fullmesh_v2`` or, at 16 to
256 dies, ``hierarchy``),
``seed``, ``replays``.

The dispatch's window must hold what the op page requires (``hccl.buffer``, HCCL_BUFFSIZE: 956 MiB
at EP16 with 16 experts per die, 3 GiB at EP768 with one; the op names the size it needs).

Run: npusim run --config a3 examples/moe_decode_layer.py --param ep=4 --param tokens=8 --param hidden=1024 --param intermediate=128
     npusim run --config a3 --set hccl.buffer=1GiB examples/moe_decode_layer.py --no-data          (EP16, DeepSeek-V3's sizes)
     npusim run --config a3 --set shape.nodes=48 --set hccl.buffer=3GiB examples/moe_decode_layer.py --no-data --trace none
     npusim sweep --config a3 --set hccl.buffer=3GiB examples/moe_decode_layer.py --no-data --grid shape.nodes=1,2,4
         --grid param.comm_alg=fullmesh_v1,fullmesh_v2,hierarchy
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import torch

import npusim
import npusim.torch_npu as torch_npu
from npusim.errors import UsageError
from npusim.trace.summary import ops, records

BF16 = ml_dtypes.bfloat16
DEEPSEEK_EXPERTS = 256
GROUPS, GROUPS_KEPT, SCALING = 8, 4, 2.5
"""DeepSeek-V3's router: 8 groups of experts, the 4 best kept, the weights scaled by 2.5."""
DATA_BYTES_LIMIT = 1 << 30
"""With data, the ranks' expert weights together may take at most 1 GiB of host memory."""
STAGES = (("router", ("MatMulV3", "MoeGatingTopK", "Cast")), ("dispatch", ("MoeDistributeDispatchV2",)),
          ("experts", ("GroupedMatmul", "DequantSwigluQuant")), ("combine", ("MoeDistributeCombineV2",)))
"""The layer's stages and the kernels of each (their spans on a die, first start to last end)."""


def _weights(rng: np.random.Generator, experts: int, k: int, n: int, data: bool):
    """int8 weights [experts, k, n] with a bfloat16 scale per output column (None without data)."""
    if not data:
        return None, None
    w = rng.standard_normal((experts, k, n), dtype=np.float32) / np.sqrt(k)
    scale = (np.abs(w).max(axis=1) / 127).astype(BF16)
    return np.rint(w / scale.astype(np.float32)[:, None, :]).astype(np.int8), scale


def _npu(array: np.ndarray | None, shape, dtype) -> torch.Tensor:
    """The array on the current npu device, or (timing only) an empty tensor of its shape."""
    if array is None:
        return torch.empty(shape, dtype=dtype, device="npu")
    if array.dtype == BF16:
        return torch.from_numpy(array.view(np.int16)).view(torch.bfloat16).npu()
    return torch.from_numpy(array).npu()


def layer(x, gate_w, bias, w1, s1, w2, s2, topk: int, common: dict) -> tuple:
    """The layer's ops on the current device (the module docstring's steps); returns the output,
    the router's choice and the dispatch's counts."""
    alg = common["comm_alg"]  # the dispatch's; a fullmesh_v1 / v2 dispatch pairs with the default combine
    logits = torch.nn.functional.linear(x, gate_w)
    weights, ids, _ = torch_npu.npu_moe_gating_top_k(logits, k=topk, bias=bias, k_group=GROUPS_KEPT, group_count=GROUPS, group_select_mode=1,
                                                     renorm=0, norm_type=1, routed_scaling_factor=SCALING, eps=1e-20)
    weights32 = weights.to(torch.float32)
    hierarchy = alg == "hierarchy"  # the weights travel with the tokens, for the sums inside each server
    expand_x, token_scales, assist, per_expert, ep_counts, _, expand_scales = torch_npu.npu_moe_distribute_dispatch_v2(
        x, ids, quant_mode=2, expert_token_nums_type=1, expert_scales=weights32 if hierarchy else None, **common)
    grouped = dict(split_item=3, group_type=0, group_list_type=1, group_list=per_expert, output_dtype=torch.bfloat16)
    h = torch_npu.npu_grouped_matmul([expand_x], [w1], scale=[s1], per_token_scale=[token_scales], **grouped)[0]
    a, a_scales = torch_npu.npu_dequant_swiglu_quant(h, group_index=per_expert, activate_left=True, quant_mode=1)
    y = torch_npu.npu_grouped_matmul([a], [w2], scale=[s2], per_token_scale=[a_scales], **grouped)[0]
    combine = {**common, "comm_alg": alg if hierarchy else ""}  # the combine's comm_alg on A3 is "" (one kernel) or "hierarchy"
    out = torch_npu.npu_moe_distribute_combine_v2(y, ids, assist, ep_counts, weights32,
                                                  expand_scales=expand_scales if hierarchy else None, **combine)
    return out, ids, weights32, per_expert


def rank_main(rank: int, cfg: dict, results: dict) -> None:
    """One rank's layer (the module docstring's steps) on die ``rank``."""
    torch.npu.set_device(rank)
    ep, tokens, hidden, inter, experts, topk, alg = (cfg[k] for k in ("ep", "tokens", "hidden", "intermediate", "experts", "topk", "comm_alg"))
    local = experts // ep
    data = cfg["data"]
    rng = np.random.default_rng([cfg["seed"], rank])
    shared = np.random.default_rng(cfg["seed"])  # the router's weights: the same on every rank
    x_host = rng.standard_normal((tokens, hidden), dtype=np.float32).astype(BF16) if data else None
    gate_host = (shared.standard_normal((experts, hidden), dtype=np.float32) / np.sqrt(hidden)).astype(BF16) if data else None
    bias_host = (shared.standard_normal(experts, dtype=np.float32) / 100).astype(BF16) if data else None
    w1_host, s1_host = _weights(rng, local, hidden, 2 * inter, data)
    w2_host, s2_host = _weights(rng, local, inter, hidden, data)

    x = _npu(x_host, (tokens, hidden), torch.bfloat16)
    gate_w, bias = _npu(gate_host, (experts, hidden), torch.bfloat16), _npu(bias_host, (experts,), torch.bfloat16)
    w1, s1 = _npu(w1_host, (local, hidden, 2 * inter), torch.int8), _npu(s1_host, (local, 2 * inter), torch.bfloat16)
    w2, s2 = _npu(w2_host, (local, inter, hidden), torch.int8), _npu(s2_host, (local, hidden), torch.bfloat16)
    group = "ep"  # the EP group's HCCL name, as torch.distributed's group gives it to each rank
    common = dict(group_ep=group, ep_world_size=ep, ep_rank_id=rank, moe_expert_num=experts, global_bs=tokens * ep, comm_alg=alg)

    graph = torch.npu.NPUGraph()
    with torch.npu.graph(graph):  # captured once, replayed: each replay one host launch, as serving runs decode
        out, ids, weights, per_expert = layer(x, gate_w, bias, w1, s1, w2, s2, topk, common)
    for _ in range(cfg["replays"]):
        graph.replay()
    torch.npu.synchronize()
    if data:
        results[rank] = dict(x=x_host, w1=(w1_host, s1_host), w2=(w2_host, s2_host), ids=ids.cpu().numpy(),
                             weights=weights.cpu().numpy(), out=out.cpu().view(torch.int16).numpy().view(BF16),
                             received=int(per_expert.cpu().sum()))


def reference(results: dict, ep: int, local: int) -> np.ndarray:
    """The layer in float64 from the ranks' inputs and the router's choice: each token's experts
    (expert e on rank e // local) applied to it, weighted and summed."""
    experts = {}
    for rank in range(ep):
        (w1, s1), (w2, s2) = results[rank]["w1"], results[rank]["w2"]
        for e in range(local):
            experts[rank * local + e] = (w1[e] * s1[e].astype(np.float64), w2[e] * s2[e].astype(np.float64))
    outs = []
    for rank in range(ep):
        x = results[rank]["x"].astype(np.float64)
        out = np.zeros_like(x)
        for t in range(x.shape[0]):
            for e, w in zip(results[rank]["ids"][t], results[rank]["weights"][t]):
                first, second = experts[int(e)]
                h = x[t] @ first
                act, gate = np.split(h, 2)
                out[t] += w * ((act / (1 + np.exp(-act)) * gate) @ second)
        outs.append(out)
    return np.stack(outs)


def stage_times(record, ep: int) -> tuple[dict[str, list[float]], list[float]]:
    """Each stage's span on each rank's die in the last replay, in us (first start to last end of
    its kernels), and each rank's layer (the router's start to the combine's end)."""
    spans: dict[str, list[float]] = {stage: [] for stage, _ in STAGES}
    layers = []
    by_die: dict[int, list[dict]] = {}
    for op in records(ops(record)):
        by_die.setdefault(op["die"], []).append(op)
    for die in range(ep):
        mine = by_die.get(die, [])
        start = max(op["start_us"] for op in mine if op["name"] == STAGES[0][1][0])  # the last replay's router
        last = [op for op in mine if op["start_us"] >= start]
        for stage, kernels in STAGES:
            of_stage = [op for op in last if op["name"] in kernels]
            spans[stage].append(max(op["end_us"] for op in of_stage) - min(op["start_us"] for op in of_stage))
        layers.append(max(op["end_us"] for op in last) - start)
    return spans, layers


def main() -> None:
    session = npusim.current_session()
    dies = session.config.spec.shape.dies
    ep = npusim.param("ep", 0, "dies in the expert-parallel group, one rank each (0: every die of the config)") or dies
    cfg = dict(ep=ep, tokens=npusim.param("tokens", 128, "decode tokens per rank"),
               hidden=npusim.param("hidden", 7168, "the model's hidden size"),
               intermediate=npusim.param("intermediate", 2048, "each expert's intermediate size"),
               experts=npusim.param("experts", 0, "routed experts (0: DeepSeek's 256, or one per die past 256 dies)"),
               topk=npusim.param("topk", 8, "experts per token"), comm_alg=npusim.param("comm_alg", "", "the MoE ops' comm_alg"),
               seed=npusim.param("seed", 0, "the seed of the inputs and weights"),
               replays=npusim.param("replays", 1, "replays of the captured layer (the last one is reported)"), data=session.with_data)
    cfg["experts"] = cfg["experts"] or max(DEEPSEEK_EXPERTS, ep)
    if ep > dies:
        raise UsageError(f"moe_decode_layer: ep={ep} ranks need as many dies; config {session.config.name!r} has {dies}: "
                         f"add nodes (--set shape.nodes={-(-ep // 16)} on a3) or lower --param ep")
    if cfg["experts"] % ep:
        raise UsageError(f"moe_decode_layer: experts={cfg['experts']} must be a multiple of ep={ep} (each rank hosts the same number)")
    local = cfg["experts"] // ep
    weight_bytes = ep * local * 3 * cfg["hidden"] * cfg["intermediate"]
    if session.with_data and weight_bytes > DATA_BYTES_LIMIT:
        raise UsageError(f"moe_decode_layer: with data the {ep} ranks' int8 expert weights take {weight_bytes / 2**30:.1f} GiB of host memory "
                         f"(limit {DATA_BYTES_LIMIT / 2**30:.0f} GiB): run timing only (--no-data), or shrink the layer "
                         "(--param hidden=1024 --param intermediate=256)")
    results: dict = {}
    npusim.spawn(rank_main, args=(cfg, results), nprocs=ep)

    spans, layer = stage_times(session.system.record(), ep)
    print(f"MoE decode layer on {session.config.name}, EP{ep} ({local} expert(s) per die of {cfg['experts']}), {cfg['tokens']} tokens "
          f"per rank, hidden {cfg['hidden']}, intermediate {cfg['intermediate']}, top-{cfg['topk']}, comm_alg {cfg['comm_alg']!r}")
    print(f"  {'stage':<10}{'mean us':>10}{'slowest us':>12}{'share':>8}")
    for stage, _ in STAGES:
        mean = float(np.mean(spans[stage]))
        print(f"  {stage:<10}{mean:>10.1f}{max(spans[stage]):>12.1f}{mean / float(np.mean(layer)):>8.1%}")
    comm = float(np.mean(np.add(spans["dispatch"], spans["combine"])))
    compute = float(np.mean(spans["experts"]))
    print(f"  communication (dispatch + combine) {comm:.1f} us against expert compute {compute:.1f} us: {comm / compute:.2f}x; "
          f"layer {float(np.mean(layer)):.1f} us (slowest rank {max(layer):.1f} us)")
    if not session.with_data:
        print("outputs not checked (timing only)")
        return
    got = np.stack([results[r]["out"] for r in range(ep)]).astype(np.float64)
    want = reference(results, ep, local)
    error = float(np.linalg.norm(got - want) / np.linalg.norm(want))
    pairs = sum(results[r]["received"] for r in range(ep))
    ok = error < 0.03 and pairs == ep * cfg["tokens"] * cfg["topk"]
    print(f"output against a float64 reference: relative error {error:.2%} (int8 tokens and activations), {pairs} token-expert pairs "
          f"received: {'ok' if ok else 'WRONG'}")
    if not ok:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
