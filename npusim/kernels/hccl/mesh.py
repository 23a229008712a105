"""Mesh: in a full mesh every pair of ranks has its own link, so each rank writes to (or reads from)
all its peers at once and a reduce-scatter or an all-gather is one step (HCCL user guide,
coll_algo_intro/Mesh.md: O(1) steps; broadcast = scatter + all-gather, reduce = reduce-scatter +
gather). HCCL runs it inside an A2 server (the 8 NPUs' HCCS full mesh); with each peer on its own
stream (hcomm ``ReduceScatterMeshDirect``: one sub-stream per peer, inline reduce into the peer's
buffer)."""

from __future__ import annotations

from collections.abc import Sequence

from npusim.config.registry import COLLECTIVES
from npusim.kernels.hccl.algorithm import Algorithm
from npusim.kernels.hccl.schedule import Block, StepList, moves


@COLLECTIVES.register("mesh")
class Mesh(Algorithm):
    """Reduce-scatter: every rank adds its part of block ``j`` into rank ``j``'s at once; the adds
    land in the order the writes complete (in rank order with ``hccl.deterministic``). All-gather:
    every rank writes its block into every peer."""

    name = "mesh"
    hccl_name = "mesh"
    inside_server = True

    def reduce_scatter(self, members: Sequence[int], blocks: Sequence[Block], itemsize: int) -> StepList:
        p = len(members)
        return [[t for j in range(p) for d in range(1, p) for t in moves(members[(j + d) % p], members[j], blocks[j], True)]]

    def all_gather(self, members: Sequence[int], blocks: Sequence[Block], itemsize: int) -> StepList:
        p = len(members)
        return [[t for i in range(p) for d in range(1, p) for t in moves(members[i], members[(i + d) % p], blocks[i])]]
