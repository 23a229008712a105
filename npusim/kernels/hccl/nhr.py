"""NHR, the nonuniform hierarchical ring (HCCL user guide, coll_algo_intro/NHR.md): ``ceil(log2 p)``
steps whatever ``p``; the first exchanges half the data with the nearest neighbour, each later one
half as much at twice the distance, so the heaviest traffic stays between neighbours. The slices of
step ``s`` (distance ``2^s``) are HCCL's own (hicann/hccl ``InsTempReduceScatterNHR::GetStepInfoList``):
rank ``x`` sends ``floor((p - 1 + 2^s) / 2^(s+1))`` blocks, ``x - 2^s``, ``x - 2^s - 2^(s+1)`` ..., to
rank ``x - 2^s``, which adds them into its own. An all-gather plays the reduce-scatter backwards
(the guide: "AllGather算子的收发关系则完全相反")."""

from __future__ import annotations

from collections.abc import Sequence

from npusim.config.registry import COLLECTIVES
from npusim.kernels.hccl.algorithm import ALL_GATHER, ALL_REDUCE, BROADCAST, REDUCE_SCATTER, SCATTER, Algorithm
from npusim.kernels.hccl.schedule import Block, StepList, Transfer, moves

SUPPORT_NHR = frozenset({REDUCE_SCATTER, ALL_GATHER, ALL_REDUCE, BROADCAST, SCATTER})
"""The guide's NHR and NB rows (ReduceScatter(V), AllGather(V), AllReduce, Broadcast, Scatter), on A2
between servers and on A3 between servers and SuperPoDs."""


def sliced_reduce_scatter(members: Sequence[int], blocks: Sequence[Block], sign: int) -> StepList:
    """The reduce-scatter of NHR (``sign = -1``: rank ``x`` sends to ``x - 2^s``) or NB (``+1``): at
    step ``s`` each rank adds ``floor((p - 1 + 2^s) / 2^(s+1))`` blocks, spaced ``2^(s+1)`` apart from
    the receiver's own, into the receiver's."""
    p = len(members)
    steps: StepList = []
    s = 0
    while (1 << s) < p:
        delta, stride = 1 << s, 1 << (s + 1)
        count = (p - 1 + delta) // stride
        step = []
        for x in range(p):
            to = (x + sign * delta) % p
            for i in range(count):
                step.extend(moves(members[x], members[to], blocks[(to + sign * i * stride) % p], True))
        steps.append(step)
        s += 1
    return steps


def backwards(steps: StepList) -> StepList:
    """The all-gather that plays a reduce-scatter backwards: its steps in reverse order, each transfer
    from its receiver back to its sender, copying."""
    return [[Transfer(t.dst, t.src, t.dst_offset, t.src_offset, t.nbytes) for t in step] for step in reversed(steps)]


@COLLECTIVES.register("nhr")
class NonuniformHierarchicalRing(Algorithm):
    """Block ``x`` is summed pairwise: its own and ``x + 1``'s first, then the partial of ``x + 2, x + 3``,
    then that of ``x + 4 .. x + 7`` ... (each step ``dst = dst op src``)."""

    name = "nhr"
    hccl_name = "NHR"
    support = {"atlas_a2": {1: SUPPORT_NHR}, "atlas_a3": {1: SUPPORT_NHR, 2: SUPPORT_NHR}}
    fallback = "H-D_R or ring"

    def reduce_scatter(self, members: Sequence[int], blocks: Sequence[Block], itemsize: int) -> StepList:
        return sliced_reduce_scatter(members, blocks, -1)

    def all_gather(self, members: Sequence[int], blocks: Sequence[Block], itemsize: int) -> StepList:
        return backwards(sliced_reduce_scatter(members, blocks, -1))
