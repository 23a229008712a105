"""HCCL's executors read the input and write the output where they are (staging.direct): only what a
reduction needs passes through the communication buffer, and the results are unchanged (the
algorithm tests play every rewritten schedule)."""

from __future__ import annotations

from npusim.config.registry import COLLECTIVES
from npusim.kernels.hccl.hierarchy import Layout
from npusim.kernels.hccl.plan import STAGE_IN, STAGE_OUT, Collective, plan
from npusim.kernels.hccl.schedule import INPUT, OUTPUT, WORK
from npusim.kernels.hccl.staging import Where
from tests.kernels.hccl.test_algorithms import places


def staged(op: str, name: str, ranks: int = 8, count: int = 800):
    schedule = plan(Collective(op, 4, count), Layout.of(places(1, 1, ranks)), {0: COLLECTIVES.get(name)()}, 1 << 30)
    stage_in = [t for s in schedule.steps if s.level == STAGE_IN for t in s.transfers]
    stage_out = [t for s in schedule.steps if s.level == STAGE_OUT for t in s.transfers]
    moves = [t for s in schedule.steps if s.level >= 0 for t in s.transfers]
    return stage_in, moves, stage_out


def test_mesh_all_reduce_copies_only_its_own_slice() -> None:
    """As hcomm's AllReduceMeshDirect: each rank copies its own slice into the buffer (the peers add into
    it), reads its other slices from its input, writes the peers' outputs, copies its slice out."""
    stage_in, moves, stage_out = staged("allreduce", "mesh")
    assert sorted((t.src, t.nbytes) for t in stage_in) == [(r, 400) for r in range(8)]
    assert sorted((t.src, t.nbytes) for t in stage_out) == [(r, 400) for r in range(8)]
    reduce_scatter = [t for t in moves if t.reduce]
    assert {(t.src_buffer, t.dst_buffer) for t in reduce_scatter} == {(INPUT, WORK)}
    assert {(t.src_buffer, t.dst_buffer) for t in moves if not t.reduce} == {(WORK, OUTPUT)}


def test_ring_all_gather_forwards_from_the_output() -> None:
    """A block received into the output is read from there when passed on; only the own block is copied locally."""
    stage_in, moves, stage_out = staged("allgather", "ring", count=100)
    assert stage_in == [] and all(t.src_buffer == INPUT and t.dst_buffer == OUTPUT for t in stage_out)
    assert {t.dst_buffer for t in moves} == {OUTPUT}
    assert {t.src_buffer for t in moves} == {INPUT, OUTPUT}


def test_where_follows_byte_ranges() -> None:
    where = Where()
    where.place(0, 100, INPUT, 1000)
    where.place(40, 60, OUTPUT, 7)
    assert list(where.pieces(30, 70)) == [(30, 40, INPUT, 1030), (40, 60, OUTPUT, 7), (60, 70, INPUT, 1060)]
    where.place(0, 50, WORK, 0)
    assert list(where.pieces(0, 100)) == [(0, 50, WORK, 0), (50, 60, OUTPUT, 17), (60, 100, INPUT, 1060)]
