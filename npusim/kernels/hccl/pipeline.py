"""Pipeline (HCCL user guide, coll_algo_intro/Pipeline.md): the links inside a server and between
servers used at once. With ``S`` servers of ``L`` ranks, rank ``(s, l)``: an all-gather runs a ring
between the servers' ranks of each local index ``l`` and, in the same step, forwards to its server's
other ranks the block it got in the step before (its own in the first), so the last inter-server
step is followed by one intra-server step only. A reduce-scatter plays it backwards with adds; an
all-reduce is the two; an all-to-all on A2 is staged: first inside the servers (every rank collects
what its local index sends to each server), then between servers pairwise. The guide's cost:
``max(inter, intra step) x (S - 1) + intra step``."""

from __future__ import annotations

from collections.abc import Sequence

from npusim.config.registry import COLLECTIVES
from npusim.kernels.hccl.algorithm import ALL_GATHER, ALL_REDUCE, ALL_TO_ALL, REDUCE_SCATTER, Algorithm
from npusim.kernels.hccl.nhr import backwards
from npusim.kernels.hccl.schedule import Block, StepList, Transfer, moves, split

Grid = Sequence[Sequence[int]]
"""``grid[s][l]``: the rank of local index ``l`` in server ``s``."""


@COLLECTIVES.register("pipeline")
class Pipeline(Algorithm):
    """All-gather step ``t`` (``0 .. S - 1``): rank ``(s, l)`` sends block ``(s - t, l)`` to ``(s + 1, l)``
    (not in the last step) and to every ``(s, l')``."""

    name = "pipeline"
    hccl_name = "pipeline"
    support = {"atlas_a2": {1: frozenset({ALL_REDUCE, ALL_GATHER, REDUCE_SCATTER, ALL_TO_ALL})},
               "atlas_a3": {2: frozenset({ALL_GATHER, REDUCE_SCATTER})}}
    fallback = "NHR, H-D_R or ring (pairwise for an all-to-all)"
    spans_levels = True

    # with one rank per server, the pipeline is a ring between the servers
    def reduce_scatter(self, members: Sequence[int], blocks: Sequence[Block], itemsize: int) -> StepList:
        return self.grid_reduce_scatter([[m] for m in members], [[b] for b in blocks])

    def all_gather(self, members: Sequence[int], blocks: Sequence[Block], itemsize: int) -> StepList:
        return self.grid_all_gather([[m] for m in members], [[b] for b in blocks])

    def grid_all_gather(self, grid: Grid, blocks: Sequence[Sequence[Block]]) -> StepList:
        """``blocks[s][l]``: the block rank ``(s, l)`` owns."""
        servers, local = len(grid), len(grid[0])
        steps: StepList = []
        for t in range(servers):
            step = []
            for s in range(servers):
                for i in range(local):
                    block = blocks[(s - t) % servers][i]
                    if t < servers - 1:
                        step.extend(moves(grid[s][i], grid[(s + 1) % servers][i], block))
                    for m in range(local):
                        if m != i:
                            step.extend(moves(grid[s][i], grid[s][m], block))
            steps.append(step)
        return steps

    def grid_reduce_scatter(self, grid: Grid, blocks: Sequence[Sequence[Block]]) -> StepList:
        return [[t._replace(reduce=True) for t in step] for step in backwards(self.grid_all_gather(grid, blocks))]

    def grid_all_reduce(self, grid: Grid, region: Block, itemsize: int) -> StepList:
        local = len(grid[0])
        flat = split(region, len(grid) * local, itemsize)
        blocks = [flat[s * local:(s + 1) * local] for s in range(len(grid))]
        return self.grid_reduce_scatter(grid, blocks) + self.grid_all_gather(grid, blocks)

    def grid_all_to_all(self, grid: Grid, pieces: Sequence[Sequence[tuple[int, int, int]]], staging: Sequence[int]) -> StepList:
        """``pieces[a][b]`` for ranks ``a, b`` as in :meth:`Algorithm.all_to_all`; ``staging[a]`` is where
        rank ``a``'s buffer has room for what it relays (:func:`staging_bytes`)."""
        servers, local = len(grid), len(grid[0])
        gather_step: list[Transfer] = []
        relay_steps: list[list[Transfer]] = [[] for _ in range(servers - 1)]
        for s in range(servers):
            for i in range(local):
                source = grid[s][i]
                for m in range(local):
                    relay = grid[s][m]
                    cursor = staging[relay] + i * _relayed(pieces, grid, s, m)
                    for k in range(servers):
                        target = grid[(s + k) % servers][m]
                        src_offset, dst_offset, nbytes = pieces[source][target]
                        if not nbytes:
                            continue
                        if k == 0:
                            if relay != source:
                                gather_step.append(Transfer(source, target, src_offset, dst_offset, nbytes))
                            continue
                        if relay != source:
                            gather_step.append(Transfer(source, relay, src_offset, cursor, nbytes))
                            relay_steps[k - 1].append(Transfer(relay, target, cursor, dst_offset, nbytes))
                        else:
                            relay_steps[k - 1].append(Transfer(source, target, src_offset, dst_offset, nbytes))
                        cursor += nbytes
        return [gather_step, *relay_steps]


def _relayed(pieces: Sequence[Sequence[tuple[int, int, int]]], grid: Grid, s: int, m: int) -> int:
    """The room one source of server ``s`` takes in the staging area of its relay ``(s, m)``: the most
    any of them hands it for the other servers (every source gets the same room)."""
    servers, local = len(grid), len(grid[0])
    return max(sum(pieces[grid[s][a]][grid[(s + k) % servers][m]][2] for k in range(1, servers)) for a in range(local))


def staging_bytes(grid: Grid, pieces: Sequence[Sequence[tuple[int, int, int]]]) -> int:
    """The staging room every rank needs to relay a staged all-to-all."""
    return max(len(grid[0]) * _relayed(pieces, grid, s, m) for s in range(len(grid)) for m in range(len(grid[0])))
