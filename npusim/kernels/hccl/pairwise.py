"""Pairwise (HCCL user guide, coll_algo_intro/Pairwise.md): an all-to-all in ``p - 1`` steps; at step
``k`` rank ``i`` sends only to ``i + k`` (and receives only from ``i - k``), so no port ever sends to
several peers at once (the guide's 一打多) at the cost of ``p - 1`` latencies."""

from __future__ import annotations

from collections.abc import Sequence

from npusim.config.registry import COLLECTIVES
from npusim.kernels.hccl.algorithm import ALL_TO_ALL, Algorithm
from npusim.kernels.hccl.schedule import StepList, Transfer


@COLLECTIVES.register("pairwise")
class Pairwise(Algorithm):
    name = "pairwise"
    hccl_name = "pairwise"
    support = {"atlas_a2": {1: frozenset({ALL_TO_ALL})}}

    def all_to_all(self, members: Sequence[int], pieces: Sequence[Sequence[tuple[int, int, int]]]) -> StepList:
        p = len(members)
        return [[Transfer(members[i], members[(i + k) % p], *pieces[i][(i + k) % p]) for i in range(p) if pieces[i][(i + k) % p][2]]
                for k in range(1, p)]
