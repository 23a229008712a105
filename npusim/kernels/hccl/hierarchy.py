"""HCCL's hierarchical collectives: an op over the ranks of several servers and SuperPoDs runs as
primitives of each level's algorithm (the HCCL user guide's 分级通信原理, coll_algo_intro/algo_intro.md
and hierarchical_comm_principle.md):

| op | phases |
|---|---|
| all-reduce | reduce-scatter inside the servers, all-reduce between them (recursively: a reduce-scatter between servers, an all-reduce between SuperPoDs, an all-gather between servers), all-gather inside the servers |
| reduce-scatter | between SuperPoDs, between servers, then inside the servers (so the blocks crossing servers are contiguous) |
| all-gather | inside the servers, then between servers, then between SuperPoDs |
| broadcast | scatter inside the root's server, broadcast between servers, all-gather inside the servers |
| reduce | reduce-scatter inside the servers, reduce between them, gather to the root inside its server |
| scatter | between servers (to the ranks of the root's local index), then inside the servers |

A rank's coordinates are ``(local, node, pod)``: its index among the communicator's ranks of its
server, its server's index among the communicator's servers of its pod, its pod's index. Axis ``k``
is HCCL level ``k``. A level whose algorithm spans two levels (pipeline) takes the level inside it
along.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from npusim.kernels.hccl.algorithm import Algorithm
from npusim.kernels.hccl.pipeline import Pipeline
from npusim.kernels.hccl.schedule import Block, StepList, concurrent, join, split

Coords = tuple[int, int, int]
Segment = tuple[str, int, StepList]
"""A phase of a collective: its label, its HCCL level, its steps."""
LEVEL_NAMES = {0: "server", 1: "inter-server", 2: "inter-SuperPoD"}


@dataclass(frozen=True)
class Layout:
    """Where a communicator's ranks sit: the size of each axis and each rank's coordinates. A layout
    is symmetric when every server holds as many of the ranks and every pod as many servers; HCCL
    runs an asymmetric communicator flat (every rank on one level, hcomm ``AllReduceComm``), and so
    does npusim: ``flat`` puts every rank on level 1."""

    dims: tuple[int, int, int]
    coords: tuple[Coords, ...]
    flat: bool = False

    @classmethod
    def of(cls, places: Sequence[tuple[int, int]]) -> Layout:
        """The layout of ranks at ``places[rank] = (pod, node)`` (node numbers global)."""
        pods = sorted({pod for pod, _ in places})
        nodes_of = {pod: sorted({node for p, node in places if p == pod}) for pod in pods}
        ranks_of: dict[int, list[int]] = {}
        for rank, (_, node) in enumerate(places):
            ranks_of.setdefault(node, []).append(rank)
        locals_ = {len(ranks) for ranks in ranks_of.values()}
        servers = {len(nodes) for nodes in nodes_of.values()}
        if len(locals_) > 1 or len(servers) > 1:
            return cls((1, len(places), 1), tuple((0, rank, 0) for rank in range(len(places))), flat=True)
        coords = tuple((ranks_of[node].index(rank), nodes_of[pod].index(node), pods.index(pod)) for rank, (pod, node) in enumerate(places))
        return cls((locals_.pop(), servers.pop(), len(pods)), coords)

    @property
    def levels(self) -> list[int]:
        """The HCCL levels with more than one member per group, inside out."""
        return [axis for axis in range(3) if self.dims[axis] > 1]

    def rank_at(self) -> dict[Coords, int]:
        return {c: rank for rank, c in enumerate(self.coords)}

    def lines(self, axis: int, fixed: Mapping[int, int]) -> list[list[int]]:
        """Every group along ``axis`` (its ranks in coordinate order) whose coordinates on the axes of
        ``fixed`` are those."""
        groups: dict[Coords, list[tuple[int, int]]] = {}
        for rank, c in enumerate(self.coords):
            if all(c[a] == i for a, i in fixed.items()):
                key = tuple(-1 if a == axis else c[a] for a in range(3))
                groups.setdefault(key, []).append((c[axis], rank))  # type: ignore[arg-type]
        return [[rank for _, rank in sorted(group)] for _, group in sorted(groups.items())]

    def line_through(self, axis: int, coords: Coords) -> list[int]:
        """The group along ``axis`` through the rank at ``coords``."""
        return self.lines(axis, {a: coords[a] for a in range(3) if a != axis})[0]


def side_by_side(parts: Iterable[list[Segment]]) -> list[Segment]:
    """Phases of groups that share no rank, run together: the ``k``-th phases (the same labels) merged."""
    merged: list[Segment] = []
    for segments in parts:
        for k, (label, level, steps) in enumerate(segments):
            if k == len(merged):
                merged.append((label, level, []))
            merged[k] = (label, level, concurrent([merged[k][2], steps]))
    return merged


class Composer:
    """The phases of each op over ``layout``, each level run by ``algorithms[level]`` (every level of
    the layout has one), on elements of ``itemsize`` bytes."""

    def __init__(self, layout: Layout, algorithms: Mapping[int, Algorithm], itemsize: int) -> None:
        self.layout = layout
        self.algorithms = algorithms
        self.itemsize = itemsize

    def _pairs_with_pipeline(self, axes: Sequence[int]) -> bool:
        return len(axes) == 2 and self.algorithms[axes[1]].spans_levels

    def _grids(self, inner: int, outer: int, fixed: Mapping[int, int]) -> list[list[list[int]]]:
        """For the pipeline: every grid ``[outer index][inner index] -> rank`` matching ``fixed``."""
        at = self.layout.rank_at()
        grids: dict[tuple[int, ...], list[list[int]]] = {}
        other = next(a for a in range(3) if a not in (inner, outer))
        for c in sorted(at):
            if all(c[a] == i for a, i in fixed.items()):
                grid = grids.setdefault((c[other],), [[-1] * self.layout.dims[inner] for _ in range(self.layout.dims[outer])])
                grid[c[outer]][c[inner]] = at[c]
        return [grids[key] for key in sorted(grids)]

    def _segment(self, phase: str, axis: int, steps: StepList) -> list[Segment]:
        return [(f"{self.algorithms[axis].name} {phase}", axis, steps)]

    # -- the ops ---------------------------------------------------------------------------------

    def all_reduce(self, region: Block) -> list[Segment]:
        return self._all_reduce(self.layout.levels, {}, region) if self.layout.levels else []

    def _all_reduce(self, axes: Sequence[int], fixed: dict[int, int], region: Block) -> list[Segment]:
        a, size = axes[0], self.itemsize
        algorithm = self.algorithms[a]
        if self._pairs_with_pipeline(axes):
            pipe = self.algorithms[axes[1]]
            assert isinstance(pipe, Pipeline)
            return self._segment("AR", axes[1], concurrent(pipe.grid_all_reduce(g, region, size) for g in self._grids(a, axes[1], fixed)))
        lines = self.layout.lines(a, fixed)
        if len(axes) == 1:
            return self._segment("AR", a, concurrent(algorithm.all_reduce(line, region, size) for line in lines))
        blocks = split(region, self.layout.dims[a], size)
        inner = side_by_side(self._all_reduce(axes[1:], {**fixed, a: i}, blocks[i]) for i in range(len(blocks)))
        return (self._segment("RS", a, concurrent(algorithm.reduce_scatter(line, blocks, size) for line in lines)) + inner
                + self._segment("AG", a, concurrent(algorithm.all_gather(line, blocks, size) for line in lines)))

    def all_gather(self, blocks: Sequence[Block]) -> list[Segment]:
        """``blocks[rank]``: the block each rank contributes."""
        return self._all_gather(self.layout.levels, {}, list(blocks)) if self.layout.levels else []

    def _all_gather(self, axes: Sequence[int], fixed: dict[int, int], blocks: list[Block]) -> list[Segment]:
        a, size = axes[0], self.itemsize
        if self._pairs_with_pipeline(axes):
            pipe = self.algorithms[axes[1]]
            assert isinstance(pipe, Pipeline)
            return self._segment("AG", axes[1], concurrent(pipe.grid_all_gather(g, [[blocks[r] for r in row] for row in g])
                                                         for g in self._grids(a, axes[1], fixed)))
        lines = self.layout.lines(a, fixed)
        here = self._segment("AG", a, concurrent(self.algorithms[a].all_gather(line, [blocks[r] for r in line], size) for line in lines))
        if len(axes) == 1:
            return here
        gathered = list(blocks)
        for line in lines:
            whole = join(blocks[r] for r in line)
            for r in line:
                gathered[r] = whole
        return here + self._all_gather(axes[1:], fixed, gathered)

    def reduce_scatter(self, blocks: Sequence[Block]) -> list[Segment]:
        """``blocks[rank]``: the block each rank ends up holding, reduced."""
        return self._reduce_scatter(self.layout.levels, {}, list(blocks)) if self.layout.levels else []

    def _reduce_scatter(self, axes: Sequence[int], fixed: dict[int, int], blocks: list[Block]) -> list[Segment]:
        a, size = axes[0], self.itemsize
        if self._pairs_with_pipeline(axes):
            pipe = self.algorithms[axes[1]]
            assert isinstance(pipe, Pipeline)
            return self._segment("RS", axes[1], concurrent(pipe.grid_reduce_scatter(g, [[blocks[r] for r in row] for row in g])
                                                         for g in self._grids(a, axes[1], fixed)))
        lines = self.layout.lines(a, fixed)
        here = self._segment("RS", a, concurrent(self.algorithms[a].reduce_scatter(line, [blocks[r] for r in line], size)
                                                  for line in lines))
        if len(axes) == 1:
            return here
        grouped = list(blocks)
        for line in lines:
            whole = join(blocks[r] for r in line)
            for r in line:
                grouped[r] = whole
        return self._reduce_scatter(axes[1:], fixed, grouped) + here

    def broadcast(self, root: int, region: Block) -> list[Segment]:
        return self._rooted("broadcast", self.layout.levels, {}, self.layout.coords[root], region) if self.layout.levels else []

    def reduce(self, root: int, region: Block) -> list[Segment]:
        return self._rooted("reduce", self.layout.levels, {}, self.layout.coords[root], region) if self.layout.levels else []

    def _rooted(self, op: str, axes: Sequence[int], fixed: dict[int, int], root: Coords, region: Block) -> list[Segment]:
        """Broadcast (scatter inside, broadcast outside, all-gather inside) or reduce (reduce-scatter
        inside, reduce outside, gather inside) from the rank at ``root``."""
        a, size = axes[0], self.itemsize
        algorithm = self.algorithms[a]
        root_line = self.layout.line_through(a, root)
        position = root[a]
        if len(axes) == 1:
            label = "BC" if op == "broadcast" else "reduce"
            steps = algorithm.broadcast(root_line, position, region, size) if op == "broadcast" else algorithm.reduce(root_line, position, region, size)
            return self._segment(label, a, steps)
        blocks = split(region, self.layout.dims[a], size)
        lines = self.layout.lines(a, fixed)
        outer = side_by_side(self._rooted(op, axes[1:], {**fixed, a: i}, _moved(root, a, i), blocks[i]) for i in range(len(blocks)))
        if op == "broadcast":
            return (self._segment("scatter", a, algorithm.scatter(root_line, position, blocks, size)) + outer
                    + self._segment("AG", a, concurrent(algorithm.all_gather(line, blocks, size) for line in lines)))
        return (self._segment("RS", a, concurrent(algorithm.reduce_scatter(line, blocks, size) for line in lines)) + outer
                + self._segment("gather", a, algorithm.gather(root_line, position, blocks, size)))

    def scatter(self, root: int, blocks: Sequence[Block]) -> list[Segment]:
        """``blocks[rank]``: the block the root sends each rank."""
        return self._scatter(self.layout.levels, {}, self.layout.coords[root], list(blocks)) if self.layout.levels else []

    def _scatter(self, axes: Sequence[int], fixed: dict[int, int], root: Coords, blocks: list[Block]) -> list[Segment]:
        a, size = axes[0], self.itemsize
        algorithm = self.algorithms[a]
        if len(axes) == 1:
            line = self.layout.line_through(a, root)
            return self._segment("scatter", a, algorithm.scatter(line, root[a], [blocks[r] for r in line], size))
        lines = self.layout.lines(a, fixed)
        grouped = list(blocks)
        for line in lines:
            whole = join(blocks[r] for r in line)
            for r in line:
                grouped[r] = whole
        outer = self._scatter(axes[1:], {**fixed, a: root[a]}, root, grouped)
        return outer + self._segment("scatter", a, concurrent(algorithm.scatter(line, root[a], [blocks[r] for r in line], size) for line in lines))


def _moved(coords: Coords, axis: int, index: int) -> Coords:
    c = list(coords)
    c[axis] = index
    return (c[0], c[1], c[2])
