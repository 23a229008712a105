"""Writes: which tile ops wrote which part of a tensor. Its index (writes sorted by their first row,
the widest seen, covered writes dropped, the index rebuilt after many drops) must find what a look
at every live write finds (issue 32, point 11: each tile op waits only for the writers its box meets)."""

import functools

from hypothesis import given, settings
from hypothesis import strategies as st

import npusim
from npusim.kernels.shmem.tiling import Region
from npusim.runtime.launch import ShmemLaunch
from npusim.runtime.program import PeProgram
from npusim.runtime.tasks import OpNode, Task
from npusim.runtime.writes import Writes, region_covers, regions_meet


@functools.cache
def pe_program() -> PeProgram:
    """The program of PE 0 of a launch on one die, made once (a tile op asks its program for its
    control read and its list of new tile ops, nothing else)."""
    with npusim.session("a3", data=False) as session:
        return ShmemLaunch(session.system, "writes", [0], "off", host=session).programs[0]


def tile_op(tile: int) -> Task:
    """A tile op of an op of a PE program that has no control read."""
    return Task(OpNode(pe_program(), "op", 0), tile)


boxes = st.builds(lambda r, c, h, w: Region((r, c), (h, w)), st.integers(0, 12), st.integers(0, 12), st.integers(0, 6), st.integers(0, 6))
regions = st.one_of(st.none(), boxes)


def _meets(a: Region | None, b: Region | None) -> bool:
    return a is None or b is None or regions_meet(a, b)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.booleans(), regions), max_size=120), boxes)
def test_the_writes_a_box_meets_are_those_a_look_at_every_live_write_finds(steps, probe):
    """Appends (no waiting) and writes (waiting, dropping what they cover) in any order: the writes
    a box meets, and their tile ops, are the live writes that share an element with it, in order."""
    writes, live = Writes(), []
    for serial, (waits, region) in enumerate(steps):
        task = tile_op(serial)
        if waits and region is not None:
            earlier = [t for t, r in live if _meets(region, r)]
            writes.write(task, region)
            assert list(task.deps.values()) == earlier  # it waits for every earlier writer of its box, in order
            live = [(t, r) for t, r in live if not (_meets(region, r) and r is not None and region_covers(region, r))]
        else:
            writes.append((task, region))
        live.append((task, region))
    assert list(writes) == live and len(writes) == len(live)
    expected = [(t, r) for t, r in live if _meets(probe, r)]
    assert writes.meeting(probe) == expected
    assert writes.tasks(probe) == [t for t, _ in expected]
    assert writes.meeting(None) == live


def test_a_task_that_wrote_twice_is_one_of_the_tasks_of_a_box():
    task, other = tile_op(0), tile_op(1)
    writes = Writes([(task, Region((0, 0), (2, 2))), (other, None), (task, Region((1, 1), (2, 2)))])
    assert writes.tasks(Region((1, 1), (1, 1))) == [task, other]
    assert writes.tasks(Region((5, 5), (1, 1))) == [other]
