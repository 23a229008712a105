"""RHD, recursive halving-doubling (HCCL_ALGO ``H-D_R``; HCCL user guide, coll_algo_intro/RHD.md):
``log2 p`` steps that exchange half, a quarter ... of the data with the partner at a halving (or
doubling) distance. For ``p`` not a power of two, ``r = p - 2^floor(log2 p)`` ranks first merge into
a neighbour (member ``2v + 1`` into ``2v``, ``v < r``), the remaining ``2^k`` run halving-doubling
(a merged pair holding both members' blocks), and the merged ranks get their result back at the
end: the extra traffic the guide warns of."""

from __future__ import annotations

from collections.abc import Sequence

from npusim.config.registry import COLLECTIVES
from npusim.kernels.hccl.algorithm import ALL_GATHER, ALL_REDUCE, BROADCAST, REDUCE, REDUCE_SCATTER, Algorithm
from npusim.kernels.hccl.schedule import Block, StepList, join, moves, split


def _fold(p: int) -> tuple[int, int]:
    """``(r, 2^k)``: the ranks merged away and the power of two that runs halving-doubling."""
    power = 1 << (p.bit_length() - 1)
    return p - power, power


def _survivor(v: int, r: int) -> int:
    """The member position of survivor ``v``."""
    return 2 * v if v < r else v + r


def _owned(v: int, r: int) -> list[int]:
    """The member positions whose blocks survivor ``v`` holds."""
    return [2 * v, 2 * v + 1] if v < r else [v + r]


def _halving(members: Sequence[int], virtual: Sequence[Block], reduce: bool) -> StepList:
    """Recursive halving over ``len(virtual)`` (a power of two) survivors ``members``: at distance
    ``d`` (halving from ``P / 2``) each keeps the half of its range holding itself and sends the
    other half, reduced into the partner's when ``reduce`` (a reduce-scatter)."""
    power = len(virtual)
    steps: StepList = []
    d = power // 2
    while d >= 1:
        step = []
        for v in range(power):
            lo = v & ~(2 * d - 1)
            give = range(lo, lo + d) if v & d else range(lo + d, lo + 2 * d)
            step.extend(moves(members[v], members[v ^ d], join(virtual[i] for i in give), reduce))
        steps.append(step)
        d //= 2
    return steps


def _doubling(members: Sequence[int], virtual: Sequence[Block]) -> StepList:
    """Recursive doubling over the survivors: at distance ``d`` (doubling from 1) each sends the range
    it holds (``d`` virtual blocks) to its partner."""
    power = len(virtual)
    steps: StepList = []
    d = 1
    while d < power:
        step = []
        for v in range(power):
            lo = v & ~(d - 1)
            step.extend(moves(members[v], members[v ^ d], join(virtual[i] for i in range(lo, lo + d))))
        steps.append(step)
        d *= 2
    return steps


@COLLECTIVES.register("rhd")
class RecursiveHalvingDoubling(Algorithm):
    """Reduce-scatter by distance halving (the guide's Vector Doubling + Distance Halving, which keeps
    the blocks in rank order), all-gather by distance doubling, all-reduce by halving then doubling
    over equal blocks of the survivors, broadcast down a binomial tree (``ceil(log2 p)`` steps of the
    whole buffer)."""

    name = "rhd"
    hccl_name = "H-D_R"
    support = {"atlas_a2": {1: frozenset({REDUCE_SCATTER, ALL_GATHER, ALL_REDUCE, BROADCAST, REDUCE})},
               "atlas_a3": {2: frozenset({ALL_REDUCE, BROADCAST, REDUCE})}}
    fallback = "NHR or ring"

    def reduce_scatter(self, members: Sequence[int], blocks: Sequence[Block], itemsize: int) -> StepList:
        p = len(members)
        r, power = _fold(p)
        whole = join(blocks)
        merge = [[t for v in range(r) for t in moves(members[2 * v + 1], members[2 * v], whole, True)]]
        survivors = [members[_survivor(v, r)] for v in range(power)]
        virtual = [join(blocks[i] for i in _owned(v, r)) for v in range(power)]
        give_back = [[t for v in range(r) for t in moves(members[2 * v], members[2 * v + 1], blocks[2 * v + 1])]]
        return merge + _halving(survivors, virtual, True) + give_back

    def all_gather(self, members: Sequence[int], blocks: Sequence[Block], itemsize: int) -> StepList:
        p = len(members)
        r, power = _fold(p)
        whole = join(blocks)
        merge = [[t for v in range(r) for t in moves(members[2 * v + 1], members[2 * v], blocks[2 * v + 1])]]
        survivors = [members[_survivor(v, r)] for v in range(power)]
        virtual = [join(blocks[i] for i in _owned(v, r)) for v in range(power)]
        give_back = [[t for v in range(r) for t in moves(members[2 * v], members[2 * v + 1], whole)]]
        return merge + _doubling(survivors, virtual) + give_back

    def all_reduce(self, members: Sequence[int], region: Block, itemsize: int) -> StepList:
        p = len(members)
        r, power = _fold(p)
        merge = [[t for v in range(r) for t in moves(members[2 * v + 1], members[2 * v], region, True)]]
        survivors = [members[_survivor(v, r)] for v in range(power)]
        virtual = split(region, power, itemsize)
        give_back = [[t for v in range(r) for t in moves(members[2 * v], members[2 * v + 1], region)]]
        return merge + _halving(survivors, virtual, True) + _doubling(survivors, virtual) + give_back

    def broadcast(self, members: Sequence[int], root: int, region: Block, itemsize: int) -> StepList:
        p = len(members)
        steps: StepList = []
        reach = 1
        while reach < p:
            steps.append([t for q in range(reach) if q + reach < p for t in moves(members[(root + q) % p], members[(root + q + reach) % p], region)])
            reach *= 2
        return steps
