"""The identity of HCCL's schedules: every registered algorithm (``npusim.config.registry.COLLECTIVES``)
planned for the ops it runs over one level, over hierarchies of levels, in passes, flat, and at a
SuperPoD's scale (768 ranks), each schedule digested whole: its algorithms and work buffer, every
step's label, level and transfers, and each rank's part of it (``Schedule.by_rank``, the order the
runtime plays). The example cases (:mod:`tests.golden.cases`) play HCCL's collectives end to end;
these pin the planner itself at sizes the examples cannot reach.

The digests are in schedule_digests.json, written by ``make golden`` with the others.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

from npusim.config.registry import COLLECTIVES
from npusim.kernels.hccl.algorithm import ALL_GATHER, ALL_REDUCE, ALL_TO_ALL, BROADCAST, REDUCE, REDUCE_SCATTER, SCATTER
from npusim.kernels.hccl.hierarchy import Layout
from npusim.kernels.hccl.plan import SEND, Collective, plan
from npusim.kernels.hccl.schedule import Schedule

SCHEDULE_DIGESTS = Path(__file__).with_name("schedule_digests.json")
WHOLE = 1 << 30
"""A communication buffer every case's data fits (one pass)."""


@dataclass(frozen=True)
class ScheduleCase:
    """``op`` of ``count`` elements of ``itemsize`` bytes per rank (module Collective) on ``local``
    ranks in each of ``nodes`` servers in each of ``pods`` SuperPoDs (``uneven``: the servers hold
    ``local`` ranks and one fewer by turns, a flat communicator), level ``k`` run by ``levels[k]``,
    passes of ``buffer`` bytes, rooted at ``root``; an all-to-all sends rank ``j`` a number of
    elements that varies with the pair (zero for some)."""

    op: str
    levels: tuple[str, ...]
    local: int
    nodes: int = 1
    pods: int = 1
    count: int = 37
    itemsize: int = 2
    buffer: int = WHOLE
    root: int = 0
    uneven: bool = False

    @property
    def name(self) -> str:
        shape = f"{self.local}x{self.nodes}x{self.pods}" + ("-uneven" if self.uneven else "")
        extra = (f"-buffer{self.buffer}" if self.buffer != WHOLE else "") + (f"-root{self.root}" if self.root else "")
        return f"{self.op}-{'+'.join(self.levels)}-{shape}-{self.count}x{self.itemsize}{extra}"

    def places(self) -> list[tuple[int, int]]:
        """``(pod, node)`` of each rank."""
        servers = [(p, p * self.nodes + n) for p in range(self.pods) for n in range(self.nodes)]
        return [place for index, place in enumerate(servers)
                for _ in range(self.local - (index % 2 if self.uneven else 0))]

    def call(self, ranks: int) -> Collective:
        if self.op == ALL_TO_ALL:
            counts = tuple(tuple((i * 7 + j * 3) % 5 * self.count for j in range(ranks)) for i in range(ranks))
            return Collective(ALL_TO_ALL, self.itemsize, counts=counts)
        if self.op == SEND:
            return Collective(SEND, self.itemsize, self.count, root=0, peer=1)
        return Collective(self.op, self.itemsize, self.count, root=self.root)

    def schedule(self) -> tuple[Schedule, int]:
        """The plan, and its ranks."""
        layout = Layout.of(self.places())
        ranks = len(layout.coords)
        levels = [1] if layout.flat else layout.levels
        chosen = {level: COLLECTIVES.get(name)() for level, name in zip(levels, self.levels)}
        return plan(self.call(ranks), layout, chosen, self.buffer), ranks


def schedule_digest(case: ScheduleCase) -> str:
    """SHA-256 of ``case``'s schedule: algorithms, work bytes, steps, and each rank's part."""
    schedule, ranks = case.schedule()
    digest = hashlib.sha256(repr((sorted(schedule.algorithms.items()), schedule.work_bytes)).encode())
    for step in schedule.steps:
        digest.update(repr((step.label, step.level, [tuple(t) for t in step.transfers])).encode())
    for rank, parts in enumerate(schedule.by_rank(ranks)):
        for part in parts:
            outgoing = [(peer, [tuple(t) for t in transfers]) for peer, transfers in part.outgoing.items()]
            digest.update(repr((rank, part.position, part.step.label, outgoing, [tuple(t) for t in part.incoming])).encode())
    return digest.hexdigest()


ROOTED = (BROADCAST, REDUCE, SCATTER)
ONE_LEVEL = {"ring": (ALL_REDUCE, ALL_GATHER, REDUCE_SCATTER, *ROOTED, ALL_TO_ALL), "mesh": (ALL_REDUCE, ALL_GATHER, REDUCE_SCATTER, *ROOTED, ALL_TO_ALL),
             "double_ring": (ALL_REDUCE, ALL_GATHER, REDUCE_SCATTER, *ROOTED), "rhd": (ALL_REDUCE, ALL_GATHER, REDUCE_SCATTER, *ROOTED),
             "nhr": (ALL_REDUCE, ALL_GATHER, REDUCE_SCATTER, *ROOTED), "nb": (ALL_REDUCE, ALL_GATHER, REDUCE_SCATTER, *ROOTED),
             "pairwise": (ALL_TO_ALL,), "pipeline": (ALL_REDUCE, ALL_GATHER, REDUCE_SCATTER, ALL_TO_ALL)}
"""Per algorithm, the ops it plans over one level."""
HIERARCHIES = ((("mesh", "ring"), 8, 3, 1), (("mesh", "nhr"), 8, 4, 1), (("mesh", "rhd"), 8, 3, 1), (("mesh", "nb"), 4, 5, 1),
               (("mesh", "pipeline"), 4, 3, 1), (("double_ring", "nhr", "rhd"), 4, 3, 3), (("double_ring", "ring", "ring"), 2, 2, 3),
               (("double_ring", "nhr", "nb"), 4, 2, 2), (("double_ring", "nhr"), 16, 8, 1))
"""``(levels, local, nodes, pods)`` of the hierarchical cases, every op each runs."""

SCHEDULE_CASES = (
    *(ScheduleCase(op, (name,), ranks, root=ranks - 2 if op in ROOTED else 0)
      for name, ops in ONE_LEVEL.items() for ranks in (6, 8) for op in ops),
    *(ScheduleCase(op, levels, local, nodes, pods, count=53, root=local * nodes * pods // 2 + 1 if op in ROOTED else 0)
      for levels, local, nodes, pods in HIERARCHIES
      for op in (ALL_REDUCE, ALL_GATHER, REDUCE_SCATTER, *(() if "pipeline" in levels else ROOTED))),
    ScheduleCase(ALL_GATHER, ("double_ring", "nhr", "pipeline"), 4, 3, 2, count=11),
    ScheduleCase(REDUCE_SCATTER, ("double_ring", "nhr", "pipeline"), 4, 3, 2, count=11),
    *(ScheduleCase(ALL_TO_ALL, ("mesh", level1), 4, 3, count=3) for level1 in ("pairwise", "pipeline", "mesh")),
    *(ScheduleCase(op, ("mesh", "nhr"), 4, 2, count=40, itemsize=4, buffer=4 * 5) for op in (ALL_REDUCE, ALL_GATHER, REDUCE_SCATTER, BROADCAST)),
    *(ScheduleCase(op, (level1,), 3, 3, uneven=True, count=11) for level1 in ("nhr", "ring") for op in (ALL_REDUCE, ALL_GATHER, REDUCE_SCATTER)),
    ScheduleCase(SEND, ("nhr",), 1, 2, count=100),
    ScheduleCase(ALL_REDUCE, ("double_ring", "nhr"), 16, 48, count=1 << 20),
)
"""The cases (module docstring); the last, an A3 SuperPoD of 768 dies (the all-reduce the
benchmarks time at 256 MiB, here one pass of 2 MiB)."""


def schedule_digests() -> dict[str, str]:
    """Every case's digest, by case name (the content of schedule_digests.json)."""
    return {case.name: schedule_digest(case) for case in SCHEDULE_CASES}
