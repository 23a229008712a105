"""Where each token goes and where it lands: what the dispatch kernel's vector and scalar code
computes from the expert ids before it writes (``CalTokenSendExpertCnt`` and the window offsets of
hicann/ops-transformer ``moe_distribute_dispatch_v2.h``), here in numpy, read when the kernel starts.

A rank sends each valid (token, k) pair whose expert is a MoE expert to the rank hosting the
expert, into block ``(sender, local expert)`` of that rank's window at the pair's position among
the sender's pairs for that expert, in (token, k) order; zero, copy and constant experts are
computed locally by the combine and sent nowhere. With shared-expert ranks, every active token also
goes to one replica of each shared expert (replica ``sender % ranks_per_shared_expert`` of shared
expert ``j``), into the sender's block at the token's index among the active tokens.

The values are data: a timing-only run (data off) has no expert ids, so it routes by
:func:`synthetic_expert_ids` (documented in docs/moe.md).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from npusim.errors import WorkloadError
from npusim.kernels.moe_distribute.checks import MoeShape


@dataclass(frozen=True)
class SendPlan:
    """What one rank sends. MoE pairs (arrays over the valid pairs, in (token, k) order): ``token``,
    ``k``, ``expert``, ``rank`` (destination), ``local`` (the expert's index on it), ``position``
    (index in the destination block); ``expert_counts``: pairs per MoE expert. Shared sends: per
    active token (``active``) and shared expert ``j``, to ``shared_rank[j]``."""

    token: np.ndarray
    k: np.ndarray
    expert: np.ndarray
    rank: np.ndarray
    local: np.ndarray
    position: np.ndarray
    expert_counts: np.ndarray
    active: np.ndarray
    shared_rank: tuple[int, ...]

    @property
    def pairs(self) -> int:
        return len(self.token)


def active_tokens(shape: MoeShape, mask: np.ndarray | None) -> np.ndarray:
    """The tokens that take part: all without a mask, the ``True`` ones of a 1-D mask, those with
    any ``True`` of a 2-D one."""
    if mask is None:
        return np.arange(shape.bs)
    if mask.ndim == 1:
        return np.flatnonzero(mask)
    return np.flatnonzero(mask.any(axis=1))


def check_ids(api: str, shape: MoeShape, ids: np.ndarray, mask: np.ndarray | None) -> None:
    """The values' rules, checked when the kernel starts, before it writes anything: expert ids in
    [0, all experts), no id twice in a row, a 1-D mask's ``True`` before its ``False``."""
    where = f"rank {shape.ep_rank_id} of group {shape.group_ep!r}"
    total = shape.total_experts
    bad = np.argwhere((ids < 0) | (ids >= total))
    if len(bad):
        t, k = (int(v) for v in bad[0])
        raise WorkloadError(
            f"torch_npu dispatch on {where}: expert_ids[{t}, {k}] = {int(ids[t, k])} is out of range: the op page requires values in "
            f"[0, {total}) (moe_expert_num {shape.moe_expert_num} + zero, copy, constant experts); {len(bad)} value(s) out of range. "
            "Nothing was sent; fix the router's output"
        )
    ordered = np.sort(ids, axis=1)
    twice = np.argwhere(ordered[:, 1:] == ordered[:, :-1])
    if len(twice):
        t = int(twice[0][0])
        raise WorkloadError(
            f"torch_npu dispatch on {where}: expert_ids[{t}] = {ids[t].tolist()} names expert {int(ordered[t, twice[0][1]])} twice: "
            "the op page requires the K ids of a row to differ. Nothing was sent; fix the router's top-k"
        )
    if mask is not None and mask.ndim == 1:
        n = int(mask.sum())
        if not mask[:n].all():
            raise WorkloadError(
                f"torch_npu dispatch on {where}: x_active_mask = {mask.astype(int).tolist()} has a False before a True: the op page "
                "requires the active tokens first (True before False). Nothing was sent"
            )


def send_plan(shape: MoeShape, ids: np.ndarray, mask: np.ndarray | None) -> SendPlan:
    """The pairs one rank sends (see the module docstring)."""
    valid = ids < shape.moe_expert_num
    if mask is not None:
        valid &= mask[:, None] if mask.ndim == 1 else mask
    token, k = np.nonzero(valid)
    expert = ids[token, k].astype(np.int64)
    # a pair's position: how many earlier valid pairs of this rank go to the same expert
    order = np.argsort(expert, kind="stable")
    counts = np.bincount(expert, minlength=shape.moe_expert_num)
    starts = np.concatenate(([0], np.cumsum(counts)[:-1]))
    position = np.empty(len(expert), np.int64)
    position[order] = np.arange(len(expert)) - starts[expert[order]]
    active = active_tokens(shape, mask)
    per = shape.ranks_per_shared_expert
    shared = tuple(shape.ep_rank_id % per + j * per for j in range(shape.shared_experts)) if shape.shared_experts else ()
    return SendPlan(token, k, expert, shape.shared_expert_rank_num + expert // shape.local_experts, expert % shape.local_experts,
                    position, counts, active, shared)


def synthetic_expert_ids(shape: MoeShape, call: int) -> np.ndarray:
    """Expert ids for a timing-only run, which has none: each token's K experts drawn uniformly
    without repeats from the MoE experts, by a generator seeded with the rank and the call (the
    same ids on every run)."""
    rng = np.random.default_rng((shape.ep_rank_id, call, shape.moe_expert_num))
    return np.argsort(rng.random((shape.bs, shape.moe_expert_num)), axis=1)[:, : shape.k].astype(np.int32)


@dataclass(frozen=True)
class ReceivePlan:
    """What one rank received, from the counts in its status words: ``counts[b]`` rows in block
    ``b`` (a MoE rank: ``local expert * ep_world_size + sender``; a shared rank: the sender),
    stored in expand_x in block order (``starts[b]`` the first row)."""

    counts: np.ndarray
    starts: np.ndarray

    @property
    def rows(self) -> int:
        return int(self.counts.sum())


def receive_plan(counts: np.ndarray) -> ReceivePlan:
    counts = np.asarray(counts, np.int64)
    return ReceivePlan(counts, np.concatenate(([0], np.cumsum(counts)[:-1])).astype(np.int64))
