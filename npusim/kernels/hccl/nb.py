"""NB, the nonuniform Bruck algorithm (HCCL user guide, coll_algo_intro/NB.md): ``ceil(log2 p)`` steps
for any ``p``; in the reduce-scatter each rank sends ``floor((p - 1 + 2^k) / 2^(k+1))`` blocks to the
rank ``2^k`` ahead of it (the guide's formula), and the all-gather runs it backwards, the distance
falling as the data grows. It moves the same bytes per step as NHR, in the other direction around
the ranks (NHR sends to ``x - 2^k``); on npusim's non-blocking switches the two time alike."""

from __future__ import annotations

from collections.abc import Sequence

from npusim.config.registry import COLLECTIVES
from npusim.kernels.hccl.algorithm import Algorithm
from npusim.kernels.hccl.nhr import SUPPORT_NHR, backwards, sliced_reduce_scatter
from npusim.kernels.hccl.schedule import Block, StepList


@COLLECTIVES.register("nb")
class NonuniformBruck(Algorithm):
    """Block ``x`` is summed pairwise as in NHR, from the other side: ``x`` and ``x - 1``, then the
    partial of ``x - 2, x - 3`` ..."""

    name = "nb"
    hccl_name = "NB"
    support = {"atlas_a2": {1: SUPPORT_NHR}, "atlas_a3": {1: SUPPORT_NHR, 2: SUPPORT_NHR}}
    fallback = "NHR, H-D_R or ring"

    def reduce_scatter(self, members: Sequence[int], blocks: Sequence[Block], itemsize: int) -> StepList:
        return sliced_reduce_scatter(members, blocks, +1)

    def all_gather(self, members: Sequence[int], blocks: Sequence[Block], itemsize: int) -> StepList:
        return backwards(sliced_reduce_scatter(members, blocks, +1))
