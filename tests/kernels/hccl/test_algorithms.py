"""Every algorithm and every hierarchy of levels computes its op (on integers, exactly), and the
floating sums follow the order each algorithm's docstring states (tests/kernels/hccl/player.py plays
the schedules on numpy)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from npusim.config.registry import COLLECTIVES
from npusim.kernels.hccl.hierarchy import Layout
from npusim.kernels.hccl.plan import Collective, plan
from tests.kernels.hccl.player import play

FLAT = ("ring", "mesh", "double_ring", "rhd", "nhr", "nb")


def places(pods: int, nodes: int, local: int) -> list[tuple[int, int]]:
    return [(p, p * nodes + n) for p in range(pods) for n in range(nodes) for _ in range(local)]


def algorithms(level0: str = "mesh", level1: str = "ring", level2: str = "ring"):
    return {0: COLLECTIVES.get(level0)(), 1: COLLECTIVES.get(level1)(), 2: COLLECTIVES.get(level2)()}


def check_ops(layout: Layout, chosen, count: int, rng, buffer: int = 1 << 30, rooted: bool = True, roots=None) -> None:
    """All-reduce, all-gather, reduce-scatter (and broadcast, reduce, scatter from each root, every
    one by default) equal numpy's."""
    p = len(layout.coords)
    xs = [rng.integers(-50, 50, count).astype(np.int64) for _ in range(p)]
    ys = [rng.integers(-50, 50, count * p).astype(np.int64) for _ in range(p)]
    out = play(plan(Collective("allreduce", 8, count), layout, chosen, buffer), xs, [count] * p)
    assert all(np.array_equal(o, sum(xs)) for o in out)
    out = play(plan(Collective("allgather", 8, count), layout, chosen, buffer), xs, [count * p] * p)
    assert all(np.array_equal(o, np.concatenate(xs)) for o in out)
    out = play(plan(Collective("reducescatter", 8, count), layout, chosen, buffer), ys, [count] * p)
    assert all(np.array_equal(out[r], sum(ys)[r * count:(r + 1) * count]) for r in range(p))
    if not rooted:
        return
    for root in range(p) if roots is None else roots(p):
        out = play(plan(Collective("broadcast", 8, count, root=root), layout, chosen, buffer), xs, [count] * p)
        assert all(np.array_equal(out[r], xs[root]) for r in range(p) if r != root)
        out = play(plan(Collective("reduce", 8, count, root=root), layout, chosen, buffer), xs, [count] * p)
        assert np.array_equal(out[root], sum(xs))
        out = play(plan(Collective("scatter", 8, count, root=root), layout, chosen, buffer), ys, [count] * p)
        assert all(np.array_equal(out[r], ys[root][r * count:(r + 1) * count]) for r in range(p))


@pytest.mark.parametrize("name", FLAT)
@pytest.mark.parametrize("ranks", [1, 2, 3, 5, 8, 13])
def test_each_algorithm_inside_one_level(name: str, ranks: int) -> None:
    layout = Layout.of(places(1, 1, ranks))
    for count in (1, 7, 37):  # fewer elements than ranks, uneven, several per rank
        check_ops(layout, {0: COLLECTIVES.get(name)()}, count, np.random.default_rng(ranks))


@settings(deadline=None, max_examples=60)
@given(st.integers(1, 2), st.integers(1, 3), st.integers(1, 4), st.sampled_from(["mesh", "ring", "double_ring"]),
       st.sampled_from(["ring", "rhd", "nhr", "nb"]), st.sampled_from(["ring", "rhd", "nhr"]), st.integers(1, 9))
def test_hierarchies_of_levels(pods: int, nodes: int, local: int, level0: str, level1: str, level2: str, count: int) -> None:
    """HCCL's phases per level (hierarchy.py) over any symmetric layout and choice of algorithms (the
    rooted ops from the first and the last rank)."""
    check_ops(Layout.of(places(pods, nodes, local)), algorithms(level0, level1, level2), count, np.random.default_rng(count),
              roots=lambda p: sorted({0, p - 1}))


@pytest.mark.parametrize("shape", [(1, 2, 2), (1, 3, 4), (1, 4, 1), (2, 2, 3)])
def test_pipeline_spans_two_levels(shape) -> None:
    """Pipeline: A2's all-reduce, all-gather, reduce-scatter over servers (level 1), A3's all-gather and
    reduce-scatter over SuperPoDs (level 2)."""
    pods, nodes, local = shape
    chosen = algorithms("mesh", "pipeline") if pods == 1 else algorithms("double_ring", "nhr", "pipeline")
    check_ops(Layout.of(places(pods, nodes, local)), chosen, 5, np.random.default_rng(0), rooted=False) if pods == 1 else None
    if pods > 1:
        layout, rng, p = Layout.of(places(pods, nodes, local)), np.random.default_rng(1), pods * nodes * local
        xs = [rng.integers(-9, 9, 5) for _ in range(p)]
        out = play(plan(Collective("allgather", 8, 5), layout, chosen, 1 << 30), xs, [5 * p] * p)
        assert all(np.array_equal(o, np.concatenate(xs)) for o in out)


def test_passes_when_the_buffer_is_small() -> None:
    """An op larger than the communication buffer runs in passes of what fits (HCCL_BUFFSIZE)."""
    layout = Layout.of(places(1, 2, 4))
    check_ops(layout, algorithms("mesh", "nhr"), 40, np.random.default_rng(2), buffer=8 * 5)
    assert sum(1 for step in plan(Collective("allreduce", 8, 40), layout, algorithms("mesh", "nhr"), 8 * 5).steps
               if step.label == "stage in") == 8


def test_an_asymmetric_communicator_runs_flat() -> None:
    """Servers holding different numbers of the ranks: one level over every rank (hcomm AllReduceComm)."""
    layout = Layout.of([(0, 0), (0, 0), (0, 0), (0, 1)])
    assert layout.flat and layout.levels == [1]
    check_ops(layout, algorithms(level1="nhr"), 11, np.random.default_rng(3))


@pytest.mark.parametrize("shape,level1", [((1, 1, 4), "pairwise"), ((1, 3, 4), "pairwise"), ((1, 3, 4), "pipeline"), ((2, 2, 2), "mesh"),
                                          ((1, 2, 4), "mesh")])
@pytest.mark.parametrize("equal", [True, False])
def test_all_to_all(shape, level1: str, equal: bool) -> None:
    """Equal and uneven pieces; flat (pairwise, mesh) and staged (A2 pipeline: inside servers, then between)."""
    layout = Layout.of(places(*shape))
    p = len(layout.coords)
    rng = np.random.default_rng(p)
    counts = [[3] * p for _ in range(p)] if equal else rng.integers(0, 5, (p, p)).tolist()
    xs = [rng.integers(0, 99, sum(counts[i])) for i in range(p)]
    call = Collective("alltoall", 8, counts=tuple(map(tuple, counts)))
    received = [sum(counts[i][j] for i in range(p)) for j in range(p)]
    out = play(plan(call, layout, algorithms("mesh", level1, level1), 1 << 30), xs, received)
    for j in range(p):
        assert np.array_equal(out[j], np.concatenate([xs[i][sum(counts[i][:j]):sum(counts[i][:j + 1])] for i in range(p)]))


def test_pairwise_sends_to_one_peer_per_step() -> None:
    """Pairwise's point: no rank sends to two peers in one step (the guide's 一打多)."""
    layout = Layout.of(places(1, 1, 6))
    call = Collective("alltoall", 4, counts=((2,) * 6,) * 6)
    for step in plan(call, layout, {0: COLLECTIVES.get("pairwise")()}, 1 << 30).steps:
        if step.level >= 0:
            senders = [t.src for t in step.transfers if t.src != t.dst]
            assert len(senders) == len(set(senders))


def ordered_sum(values, order):
    total = values[order[0]]
    for i in order[1:]:
        total = np.float16(np.float32(total) + np.float32(values[i]))
    return total


@pytest.mark.parametrize("ranks", [2, 4, 7, 8])
def test_ring_sums_in_the_documented_order(ranks: int) -> None:
    """Ring: block ``i`` accumulates ranks ``i + 1, i + 2, ..., i`` (each add rounded in fp16)."""
    rng = np.random.default_rng(ranks)
    xs = [rng.standard_normal(ranks).astype(np.float16) for _ in range(ranks)]

    def fp16_add(dst, src):
        return (dst.astype(np.float32) + src.astype(np.float32)).astype(np.float16)

    out = play(plan(Collective("allreduce", 2, ranks), Layout.of(places(1, 1, ranks)), {0: COLLECTIVES.get("ring")()}, 1 << 20),
               xs, [ranks] * ranks, fp16_add)
    for block in range(ranks):
        order = [(block + 1 + k) % ranks for k in range(ranks)]
        expected = ordered_sum([x[block] for x in xs], order)
        assert all(o[block] == expected for o in out)


def test_nhr_sums_pairwise() -> None:
    """NHR on 4 ranks: block ``x`` is ``(x + x+1) + (x+2 + x+3)``."""
    rng = np.random.default_rng(5)
    xs = [rng.standard_normal(4).astype(np.float32) * 1e3 for _ in range(4)]
    out = play(plan(Collective("allreduce", 4, 4), Layout.of(places(1, 1, 4)), {0: COLLECTIVES.get("nhr")()}, 1 << 20), xs, [4] * 4)
    for x in range(4):
        first = np.float32(xs[x][x] + xs[(x + 1) % 4][x])
        second = np.float32(xs[(x + 2) % 4][x] + xs[(x + 3) % 4][x])
        assert all(o[x] == np.float32(first + second) for o in out)


def test_step_counts_match_the_guide() -> None:
    """Ring p - 1 steps per phase, RHD / NHR / NB ceil(log2 p) (+2 folding steps for RHD off powers of two), mesh 1."""
    def phases(name: str, p: int) -> int:
        schedule = plan(Collective("reducescatter", 4, 4), Layout.of(places(1, 1, p)), {0: COLLECTIVES.get(name)()}, 1 << 20)
        return sum(1 for step in schedule.steps if step.level == 0)

    for p, (name, steps) in itertools.product([4, 5, 8, 12], [("ring", lambda p: p - 1), ("mesh", lambda p: 1),
                                                               ("nhr", lambda p: (p - 1).bit_length()), ("nb", lambda p: (p - 1).bit_length()),
                                                               ("rhd", lambda p: (p.bit_length() - 1) + (2 if p & (p - 1) else 0))]):
        assert phases(name, p) == steps(p), (name, p)
