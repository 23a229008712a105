"""Double ring: the intra-server algorithm HCCL takes on an Atlas A3 node (hcomm
``GetDefaultAlgoLevel0Module``: ALG_LEVEL0_NP_DOUBLE_RING when each die reaches every other die of
the node over the UB switches and its package partner over SIO). The data is split in two halves,
each going round its own ring, the rings running in opposite directions, so both directions of
every die's links carry data; dies of one package are neighbours on both rings (the SIO link)."""

from __future__ import annotations

from collections.abc import Sequence

from npusim.config.registry import COLLECTIVES
from npusim.kernels.hccl.algorithm import Algorithm
from npusim.kernels.hccl.ring import Ring
from npusim.kernels.hccl.schedule import Block, StepList, concurrent, split

_RING = Ring()


def _halves(regions: Sequence[Block], itemsize: int) -> tuple[list[Block], list[Block]]:
    cut = [split(r, 2, itemsize) for r in regions]
    return [c[0] for c in cut], [c[1] for c in cut]


@COLLECTIVES.register("double_ring")
class DoubleRing(Algorithm):
    """Ring's primitives on the first half of every block in member order and on the second half in
    the reverse order, their steps side by side."""

    name = "double_ring"
    hccl_name = "double_ring"
    inside_server = True

    def _both(self, members: Sequence[int], blocks: Sequence[Block], itemsize: int, primitive: str) -> StepList:
        first, second = _halves(blocks, itemsize)
        run = getattr(_RING, primitive)
        return concurrent([run(list(members), first, itemsize), run(list(members)[::-1], second[::-1], itemsize)])

    def reduce_scatter(self, members: Sequence[int], blocks: Sequence[Block], itemsize: int) -> StepList:
        return self._both(members, blocks, itemsize, "reduce_scatter")

    def all_gather(self, members: Sequence[int], blocks: Sequence[Block], itemsize: int) -> StepList:
        return self._both(members, blocks, itemsize, "all_gather")
