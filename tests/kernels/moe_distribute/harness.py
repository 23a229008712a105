"""Running a group of ranks through the MoE ops on the numpy path (one session, every rank's call
issued in rank order), for the tests."""

from __future__ import annotations

from dataclasses import dataclass, field

import ml_dtypes
import numpy as np

import npusim
import npusim.torch_npu as torch_npu
from tests.kernels.moe_distribute.reference import RankInput

BF16 = np.dtype(ml_dtypes.bfloat16)


@dataclass
class Case:
    ep: int = 4
    bs: int = 4
    h: int = 1024
    k: int = 2
    experts: int = 8
    quant: bool = False
    smooth: bool = False
    mask: str = "none"  # none, 1d, 2d
    shared_ranks: int = 0
    shared_num: int = 1
    zero: int = 0
    copy: int = 0
    const: int = 0
    tokens_type: int = 1
    dtype: np.dtype = BF16
    seed: int = 0
    config: str = "a3"
    comm_alg: str = ""
    overrides: list = field(default_factory=list)

    @property
    def total_experts(self) -> int:
        return self.experts + self.zero + self.copy + self.const


def make_inputs(case: Case) -> tuple[list[RankInput], np.ndarray | None]:
    rng = np.random.default_rng(case.seed)
    inputs = []
    for _ in range(case.ep):
        x = rng.standard_normal((case.bs, case.h)).astype(case.dtype)
        ids = np.stack([rng.choice(case.total_experts, case.k, replace=False) for _ in range(case.bs)]).astype(np.int32)
        mask = None
        if case.mask == "1d":
            mask = np.arange(case.bs) < rng.integers(0, case.bs + 1)
        elif case.mask == "2d":
            mask = rng.random((case.bs, case.k)) < 0.7
        weights = rng.random((case.bs, case.k)).astype(np.float32)
        inputs.append(RankInput(x, ids, mask, weights))
    rows = case.experts + (case.shared_num if case.shared_ranks else 0)
    scales = rng.uniform(0.5, 2.0, (rows, case.h)).astype(np.float32) if case.smooth else None
    return inputs, scales


def run_dispatch(case: Case, inputs: list[RankInput], scales, *, data: bool = True, combine_rows=None, combine_extra=None):
    """Dispatch on every rank (then, with ``combine_rows``, a combine of those rows per rank);
    returns (dispatch outputs as numpy per rank, combine outputs per rank or None, the session).
    Without data the dispatch outputs are the counts only (expert_token_nums, ep_recv_counts: real
    then too, later ops read them)."""
    common = dict(shared_expert_rank_num=case.shared_ranks, shared_expert_num=case.shared_num if case.shared_ranks else 1,
                  zero_expert_num=case.zero, copy_expert_num=case.copy, const_expert_num=case.const)
    with npusim.session(case.config, case.overrides, data=data) as session:
        outs, ids = [], []
        for rank, ri in enumerate(inputs):
            ids.append(npusim.tensor(ri.ids, device=rank))
            outs.append(torch_npu.npu_moe_distribute_dispatch_v2(
                npusim.tensor(ri.x, device=rank), ids[rank], "ep", case.ep, rank, case.experts,
                scales=None if scales is None else npusim.tensor(scales, device=rank),
                x_active_mask=None if ri.mask is None else npusim.tensor(ri.mask, device=rank),
                quant_mode=2 if case.quant else 0, expert_token_nums_type=case.tokens_type, comm_alg=case.comm_alg,
                expert_scales=npusim.tensor(ri.expert_scales, device=rank) if case.comm_alg == "hierarchy" else None, **common))
        combined = None
        if combine_rows is not None:
            combined = []
            for rank, ri in enumerate(inputs):
                expand_x, _, assist, _, counts, _, expand_scales = outs[rank]
                rows = np.zeros(expand_x.shape, case.dtype)
                rows[: len(combine_rows[rank])] = combine_rows[rank]
                extra = {name: npusim.tensor(value[rank], device=rank) for name, value in (combine_extra or {}).items()}
                combined.append(torch_npu.npu_moe_distribute_combine_v2(
                    npusim.tensor(rows, device=rank), ids[rank], assist, counts, npusim.tensor(ri.expert_scales, device=rank),
                    "ep", case.ep, rank, case.experts,
                    x_active_mask=None if ri.mask is None else npusim.tensor(ri.mask, device=rank),
                    expand_scales=expand_scales if case.config == "a2" or case.comm_alg == "hierarchy" else None,
                    comm_alg="" if case.comm_alg == "fullmesh_v2" else case.comm_alg, **common, **extra))
        npusim.synchronize()
        got = [[t.numpy() for t in (out if data else out[3:5])] for out in outs]
        comb = [c.numpy() for c in combined] if data and combined is not None else None
    return got, comb, session
