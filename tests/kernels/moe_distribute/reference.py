"""An independent numpy reference of the MoE distribute ops, written from their op pages (not from
npusim's kernels), for exact tests.

Dispatch (``npu_moe_distribute_dispatch_v2``): with ``quant_mode=2``, in float32,
``x_fp32 = f32(x) * scales[expert]`` (no scales: ``f32(x)``), ``s = 127 / max(|x_fp32|)``,
``expand_x = int8(rint(x_fp32 * s))`` and ``dynamic_scales = 1 / s``; else ``expand_x = x``. Each
(token, k) pair of an active token whose expert is a MoE expert goes to the rank hosting it
(``shared_expert_rank_num + expert // local_experts``); a rank's rows are ordered by local expert,
then sender, then the sender's (token, k) order, with ``assist = (sender, token, k)`` per row,
``expert_token_nums`` per local expert (counts, or prefix sums with type 0) and ``ep_recv_counts``
the prefix sums over (expert, sender). With shared experts, each active token also goes to replica
``rank % (shared_expert_rank_num / shared_expert_num)`` of each shared expert (k = K + j).

Combine (``npu_moe_distribute_combine_v2``): in float32, for each active token,
``out = sum_k scale[t, k] * Moe_k + sum_j shared_j + shared_expert_x``, adding in that order from
0, each product rounded to float32; ``Moe_k`` is the expert's output row for a MoE expert, 0 for a
zero expert, ``ori_x`` for a copy expert, ``alpha_1 * ori_x + alpha_2 * v`` for a constant expert;
cast to the output dtype rounding half to even. Inactive tokens' rows stay 0.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

F32 = np.float32


@dataclass
class RankInput:
    x: np.ndarray
    ids: np.ndarray
    mask: np.ndarray | None = None
    expert_scales: np.ndarray | None = None


def pairs_of(ids: np.ndarray, mask: np.ndarray | None, moe: int) -> list[tuple[int, int, int]]:
    """(token, k, expert) of every pair a rank sends, in (token, k) order."""
    out = []
    for t in range(ids.shape[0]):
        for k in range(ids.shape[1]):
            active = True if mask is None else bool(mask[t] if mask.ndim == 1 else mask[t, k])
            if active and ids[t, k] < moe:
                out.append((t, k, int(ids[t, k])))
    return out


def active_of(bs: int, mask: np.ndarray | None) -> list[int]:
    if mask is None:
        return list(range(bs))
    return [t for t in range(bs) if (mask[t] if mask.ndim == 1 else mask[t].any())]


def quantize(row: np.ndarray, smooth: np.ndarray | None) -> tuple[np.ndarray, F32]:
    value = row.astype(F32)
    if smooth is not None:
        value = (value * smooth.astype(F32)).astype(F32)
    with np.errstate(divide="ignore", invalid="ignore"):
        scale = F32(127.0) / F32(np.abs(value).max())
        q = np.rint((value * scale).astype(F32))
    q[np.isnan(q)] = 0
    return np.clip(q, -128, 127).astype(np.int8), F32(F32(1.0) / scale)


def dispatch(inputs: list[RankInput], moe: int, *, quant: bool = False, scales: np.ndarray | None = None, shared_ranks: int = 0,
             shared_num: int = 1, tokens_type: int = 1) -> list[dict]:
    """Each rank's outputs: ``rows`` (expand_x's valid rows), ``scales``, ``assist`` (rows x 3),
    ``expert_token_nums``, ``ep_recv_counts``."""
    ep = len(inputs)
    local = moe // (ep - shared_ranks)
    shared = shared_num if shared_ranks else 0
    per_shared = shared_ranks // shared_num if shared else 1
    blocks: list[dict] = [dict() for _ in range(ep)]
    for sender, rank_input in enumerate(inputs):
        for t, k, e in pairs_of(rank_input.ids, rank_input.mask, moe):
            blocks[shared_ranks + e // local].setdefault((e % local, sender), []).append((t, k, e + shared))
        for j in range(shared):
            target = sender % per_shared + j * per_shared
            for t in active_of(rank_input.x.shape[0], rank_input.mask):
                blocks[target].setdefault((0, sender), []).append((t, rank_input.ids.shape[1] + j, j))
    outs = []
    for rank in range(ep):
        experts = 1 if rank < shared_ranks else local
        rows, row_scales, assist, counts = [], [], [], []
        for e in range(experts):
            for sender in range(ep):
                got = blocks[rank].get((e, sender), [])
                counts.append(len(got))
                for t, k, scales_row in got:
                    x = inputs[sender].x[t]
                    if quant:
                        q, s = quantize(x, None if scales is None else scales[scales_row])
                        rows.append(q)
                        row_scales.append(s)
                    else:
                        rows.append(x)
                    assist.append((sender, t, k))
        per_expert = np.array(counts).reshape(experts, ep).sum(axis=1)
        h = inputs[0].x.shape[1]
        outs.append({"rows": np.array(rows, np.int8 if quant else inputs[0].x.dtype).reshape(len(rows), h), "scales": np.array(row_scales, F32),
                     "assist": np.array(assist, np.int32).reshape(-1, 3),
                     "expert_token_nums": np.cumsum(per_expert) if tokens_type == 0 else per_expert,
                     "ep_recv_counts": np.cumsum(counts)})
    return outs


def combine(inputs: list[RankInput], outputs: list[np.ndarray], moe: int, *, dtype, zero: int = 0, copy: int = 0, const: int = 0,
            ori_x: list | None = None, alpha1=None, alpha2=None, v=None, shared_ranks: int = 0, shared_num: int = 1,
            shared_x: list | None = None) -> list[np.ndarray]:
    """Each rank's combined tokens, given ``outputs[rank]``: the expert output rows of rank
    ``rank`` in its expand_x order (as :func:`dispatch` orders them)."""
    ep = len(inputs)
    k_max = inputs[0].ids.shape[1]
    shared = shared_num if shared_ranks else 0
    back: dict[tuple[int, int, int], np.ndarray] = {}
    order = dispatch(inputs, moe, shared_ranks=shared_ranks, shared_num=shared_num)
    for rank in range(ep):
        for row, (sender, t, k) in zip(outputs[rank], order[rank]["assist"]):
            back[(int(sender), int(t), int(k))] = row
    results = []
    for rank, rank_input in enumerate(inputs):
        bs, h = rank_input.x.shape
        out = np.zeros((bs, h), dtype)
        for t in active_of(bs, rank_input.mask):
            total = np.zeros(h, F32)
            for k in range(k_max):
                e = int(rank_input.ids[t, k])
                if rank_input.mask is not None and rank_input.mask.ndim == 2 and not rank_input.mask[t, k]:
                    continue
                w = F32(rank_input.expert_scales[t, k])
                if e < moe:
                    term = back[(rank, t, k)].astype(F32)
                elif e < moe + zero:
                    continue
                elif e < moe + zero + copy:
                    term = ori_x[rank][t].astype(F32)
                else:
                    c = e - moe - zero - copy
                    term = ((alpha1[rank][c].astype(F32) * ori_x[rank][t].astype(F32)).astype(F32)
                            + (alpha2[rank][c].astype(F32) * v[rank][c].astype(F32)).astype(F32)).astype(F32)
                total = (total + (term * w).astype(F32)).astype(F32)
            for j in range(shared):
                total = (total + back[(rank, t, k_max + j)].astype(F32)).astype(F32)
            if shared_x is not None:
                total = (total + shared_x[rank][t].astype(F32)).astype(F32)
            out[t] = _round(total, dtype)
        results.append(out)
    return results


def combine_hierarchy(inputs: list[RankInput], outputs: list[np.ndarray], moe: int, *, dtype, server: int = 16) -> list[np.ndarray]:
    """A3 "hierarchy"'s combine (the pages: a token's rows summed inside each server before they
    cross): per active token, the weighted rows of the experts in each server summed in k order
    from 0, then those sums added in server order from 0, in float32; cast to the output dtype."""
    ep = len(inputs)
    local = moe // ep
    back: dict[tuple[int, int, int], np.ndarray] = {}
    for rank, o in enumerate(dispatch(inputs, moe)):
        for row, (sender, t, k) in zip(outputs[rank], o["assist"]):
            back[(int(sender), int(t), int(k))] = row
    results = []
    for rank, ri in enumerate(inputs):
        bs, h = ri.x.shape
        out = np.zeros((bs, h), dtype)
        for t in active_of(bs, ri.mask):
            parts: dict[int, np.ndarray] = {}
            for k in range(ri.ids.shape[1]):
                e = int(ri.ids[t, k])
                s = e // local // server
                term = (back[(rank, t, k)].astype(F32) * F32(ri.expert_scales[t, k])).astype(F32)
                parts[s] = (parts.get(s, np.zeros(h, F32)) + term).astype(F32)
            total = np.zeros(h, F32)
            for s in sorted(parts):
                total = (total + parts[s]).astype(F32)
            out[t] = _round(total, dtype)
        results.append(out)
    return results


def _round(values: np.ndarray, dtype) -> np.ndarray:
    """float32 to a 16-bit float, rounding half to even (ml_dtypes' and numpy's conversions do)."""
    return values.astype(dtype)
