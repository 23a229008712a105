"""Ring: every rank sends to its right-hand neighbour only; a reduce-scatter and an all-gather take
``p - 1`` steps of one block each (HCCL user guide, coll_algo_intro/Ring.md). HCCL's broadcast and
reduce on a ring are a chain: the whole buffer goes one hop per step (the guide's cost
``(p - 1)(alpha + n beta)``), and scatter and gather pass the blocks along the ring."""

from __future__ import annotations

from collections.abc import Sequence

from npusim.config.registry import COLLECTIVES
from npusim.kernels.hccl.algorithm import SUPPORT_A2_RING, Algorithm
from npusim.kernels.hccl.schedule import Block, StepList, moves


@COLLECTIVES.register("ring")
class Ring(Algorithm):
    """Reduce-scatter step ``k``: rank ``i`` adds its partial of block ``i - k - 1`` into rank
    ``i + 1``'s, so block ``i`` is summed in the order ``i + 1, i + 2, ..., i`` (each step
    ``dst = dst op src``); all-gather step ``k``: rank ``i`` passes block ``i - k`` on."""

    name = "ring"
    hccl_name = "ring"
    support = {"atlas_a2": {1: SUPPORT_A2_RING}, "atlas_a3": {1: SUPPORT_A2_RING, 2: SUPPORT_A2_RING}}
    fallback = "NHR or H-D_R"
    inside_server = True

    def reduce_scatter(self, members: Sequence[int], blocks: Sequence[Block], itemsize: int) -> StepList:
        p = len(members)
        return [[t for i in range(p) for t in moves(members[i], members[(i + 1) % p], blocks[(i - k - 1) % p], True)]
                for k in range(p - 1)]

    def all_gather(self, members: Sequence[int], blocks: Sequence[Block], itemsize: int) -> StepList:
        p = len(members)
        return [[t for i in range(p) for t in moves(members[i], members[(i + 1) % p], blocks[(i - k) % p])] for k in range(p - 1)]

    def broadcast(self, members: Sequence[int], root: int, region: Block, itemsize: int) -> StepList:
        p = len(members)
        return [moves(members[(root + k) % p], members[(root + k + 1) % p], region) for k in range(p - 1)]

    def reduce(self, members: Sequence[int], root: int, region: Block, itemsize: int) -> StepList:
        p = len(members)
        return [moves(members[(root + 1 + k) % p], members[(root + 2 + k) % p], region, True) for k in range(p - 1)]

    def scatter(self, members: Sequence[int], root: int, blocks: Sequence[Block], itemsize: int) -> StepList:
        p = len(members)
        return [[t for j in range(k + 1)
                 for t in moves(members[(root + j) % p], members[(root + j + 1) % p], blocks[(root + p - 1 - k + j) % p])]
                for k in range(p - 1)]

    def gather(self, members: Sequence[int], root: int, blocks: Sequence[Block], itemsize: int) -> StepList:
        p = len(members)
        return [[t for j in range(p - 1 - k)
                 for t in moves(members[(root + j + 1) % p], members[(root + j) % p], blocks[(root + 1 + k + j) % p])]
                for k in range(p - 1)]
