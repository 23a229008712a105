"""The base of HCCL's collective algorithms (one module each in this package, registered in
:data:`npusim.config.registry.COLLECTIVES`).

An algorithm turns one primitive collective among ``members`` (communicator ranks, in the order the
algorithm numbers them) into steps of transfers (:mod:`~npusim.kernels.hccl.schedule`): the
hierarchical composer (:mod:`~npusim.kernels.hccl.hierarchy`) calls it for each group of a level.
Blocks are regions of the work buffer, the same on every member: ``blocks[i]`` is the block member
``i`` owns (its reduced result, its contribution to a gather). ``root`` is an index into ``members``.

Each algorithm says, per product series, at which HCCL level and for which ops HCCL lets a user
force it (``support``: the HCCL user guide's support tables, ``inter_server_algo_support.md`` and
``inter_superpod_algo_support.md``, hicann/hccl ``docs/zh/user_guide/hccl_env/``), and what HCCL
takes instead when it is forced on an op it does not support (``fallback``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from npusim.kernels.hccl.schedule import Block, StepList, Transfer, moves, split

REDUCE_SCATTER, ALL_GATHER, ALL_REDUCE = "reducescatter", "allgather", "allreduce"
BROADCAST, REDUCE, SCATTER, ALL_TO_ALL = "broadcast", "reduce", "scatter", "alltoall"
SUPPORT_A2_RING = frozenset({REDUCE_SCATTER, ALL_GATHER, ALL_REDUCE, REDUCE, SCATTER})
"""The ops of the guide's ring row (ReduceScatter(V), AllGather(V), AllReduce, Reduce, Scatter); the
same on A2 between servers and on A3 between servers and SuperPoDs."""


class Algorithm:
    """One of HCCL's algorithms: its name as npusim and as HCCL_ALGO write it, where it may be
    forced, and its primitives. The defaults build an all-reduce from a reduce-scatter and an
    all-gather, a broadcast from a scatter and an all-gather, a reduce from a reduce-scatter and a
    gather (HCCL's decompositions, the guide's cost tables), scatter and gather in one step from and
    to the root, and an all-to-all with every pair at once."""

    name: ClassVar[str]
    hccl_name: ClassVar[str]
    support: ClassVar[dict[str, dict[int, frozenset[str]]]] = {}
    """Product series -> HCCL level (1: between servers, 2: between SuperPoDs) -> the ops it may be forced for."""
    fallback: ClassVar[str] = ""
    """What HCCL runs instead when the algorithm is forced on an op it does not support (the guide's 不支持算子处理方法)."""
    spans_levels: ClassVar[bool] = False
    """The algorithm works across two levels at once (pipeline): the composer hands it both."""
    inside_server: ClassVar[bool] = False
    """The algorithm can run inside a server (level 0). HCCL picks level 0 by topology and accepts only
    NA there; npusim also lets a what-if force one of these."""

    # -- the primitives --------------------------------------------------------------------------

    def reduce_scatter(self, members: Sequence[int], blocks: Sequence[Block], itemsize: int) -> StepList:
        raise NotImplementedError(f"{self.name} has no reduce-scatter")

    def all_gather(self, members: Sequence[int], blocks: Sequence[Block], itemsize: int) -> StepList:
        raise NotImplementedError(f"{self.name} has no all-gather")

    def all_reduce(self, members: Sequence[int], region: Block, itemsize: int) -> StepList:
        blocks = split(region, len(members), itemsize)
        return self.reduce_scatter(members, blocks, itemsize) + self.all_gather(members, blocks, itemsize)

    def broadcast(self, members: Sequence[int], root: int, region: Block, itemsize: int) -> StepList:
        blocks = split(region, len(members), itemsize)
        return self.scatter(members, root, blocks, itemsize) + self.all_gather(members, blocks, itemsize)

    def reduce(self, members: Sequence[int], root: int, region: Block, itemsize: int) -> StepList:
        blocks = split(region, len(members), itemsize)
        return self.reduce_scatter(members, blocks, itemsize) + self.gather(members, root, blocks, itemsize)

    def scatter(self, members: Sequence[int], root: int, blocks: Sequence[Block], itemsize: int) -> StepList:
        return [[t for i, (m, b) in enumerate(zip(members, blocks)) if i != root for t in moves(members[root], m, b)]]

    def gather(self, members: Sequence[int], root: int, blocks: Sequence[Block], itemsize: int) -> StepList:
        return [[t for i, (m, b) in enumerate(zip(members, blocks)) if i != root for t in moves(m, members[root], b)]]

    def all_to_all(self, members: Sequence[int], pieces: Sequence[Sequence[tuple[int, int, int]]]) -> StepList:
        """``pieces[i][j]``: (offset in rank i's buffer, offset in rank j's buffer, bytes) that rank i
        sends to rank j. An all-to-all always spans the whole communicator: ``members`` are its ranks
        ``0 .. p - 1``, in order."""
        return [[Transfer(members[i], members[j], *pieces[i][j]) for i in range(len(members)) for j in range(len(members))
                 if i != j and pieces[i][j][2]]]
