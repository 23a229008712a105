"""Timing laws of the shmem ops on a2 (HCCS full mesh): a remote load runs at the link's rate after
its fixed costs; two loads over one link share it; loads over two links do not slow each other; a
wait ends at least one poll interval (and less than two) after its signal lands."""

import math

import numpy as np
import pytest

import npusim
from npusim import pypto

D = pypto.distributed
X = pypto.experimental
ROWS, COLS = 32, 2048  # one tile: 128 KiB of fp16


def events(session, name: str) -> list[tuple[int, int, int, str]]:
    """(die, start ps, end ps, op name) of the recorded events called ``name``."""
    recorder = session.result.recorder
    columns = recorder.columns()
    wanted = recorder.names.index(name)
    rows = np.flatnonzero(columns["name"] == wanted)
    return [(recorder.tracks[columns["track"][i]].die, int(columns["start_ps"][i]), int(columns["end_ps"][i]),
             recorder.ops[columns["op"][i]].name) for i in rows]


def loads(peers_by_op: list[int], tiles: int = 1):
    """PE 0 loads ``tiles`` tiles from each listed peer (one shmem_load per entry), all at once."""

    def kernel(x, pe):
        pypto.set_vec_tile_shapes(ROWS, COLS)
        data = D.create_shmem_tensor("g", 3, pypto.DT_FP16, [ROWS * tiles, COLS])
        if pe == 0:
            for peer in peers_by_op:
                X.shmem_load(data, peer, pred=[x])

    with npusim.session("a2") as session:
        xs = [npusim.tensor(np.zeros((2, 8), np.float16), device=pe) for pe in range(3)]
        npusim.launch(kernel, 3, args=lambda pe: (xs[pe], pe))
    return session


def link_of(session, src: int, dst: int):
    return next(r for r in session.system.network.resources if r.name == f"die{src}->die{dst} HCCS")


def alone_ps(session, nbytes: int) -> tuple[int, float]:
    """Fixed cost (ps: the engine's set-up and its one burst, the route latency of a read that
    misses in die 1's cold L2) and link rate (bytes/ps) of one remote MTE2 read from die 1 by die 0."""
    route = session.system.die(0).core("aiv", 0).dma_route((npusim.isa.Pipe.MTE2, 1, False, ("GM", "UB"), False))
    return route.setup_ps + route.per_burst_ps + route.miss_latency_ps, link_of(session, 1, 0).capacity


def test_one_remote_load_runs_at_the_link_rate_after_its_fixed_costs():
    session = loads([1])
    [(die, start, end, _)] = events(session, "shmem_load MTE2")
    nbytes = ROWS * COLS * 2
    fixed, rate = alone_ps(session, nbytes)
    assert end - start == fixed + math.ceil(nbytes / rate)
    assert link_of(session, 1, 0).bytes_moved == nbytes


def test_a_large_remote_load_approaches_the_link_bandwidth():
    session = loads([1], tiles=8)  # 1 MiB in 8 tiles, on 8 cores at once
    spans = events(session, "shmem_load MTE2")
    assert len(spans) == 8
    first, last = min(s for _, s, _, _ in spans), max(e for _, _, e, _ in spans)
    rate = link_of(session, 1, 0).capacity
    achieved = 8 * ROWS * COLS * 2 / (last - first)
    assert 0.95 * rate < achieved < rate
    assert max(r for _, r in link_of(session, 1, 0).rate_log) == pytest.approx(rate)


def test_two_loads_over_the_same_link_share_it():
    nbytes = ROWS * COLS * 2
    session = loads([1, 1])
    fixed, rate = alone_ps(session, nbytes)
    spans = events(session, "shmem_load MTE2")
    assert len(spans) == 2
    for _, start, end, _ in spans:
        assert end - start > fixed + 1.9 * nbytes / rate  # about half the link each
    assert max(r for _, r in link_of(session, 1, 0).rate_log) == pytest.approx(rate)


def test_loads_over_different_links_do_not_slow_each_other():
    nbytes = ROWS * COLS * 2
    session = loads([1, 2])
    fixed, rate = alone_ps(session, nbytes)
    spans = events(session, "shmem_load MTE2")
    assert [end - start for _, start, end, _ in spans] == [fixed + math.ceil(nbytes / rate)] * 2
    assert link_of(session, 1, 0).bytes_moved == link_of(session, 2, 0).bytes_moved == nbytes


@pytest.mark.parametrize("work_before_signal", [0, 3, 17])
def test_a_wait_ends_between_one_and_two_poll_intervals_after_its_signal_lands(work_before_signal):
    def kernel(x, pe):
        pypto.set_vec_tile_shapes(1, 8)
        flag = D.create_shmem_signal("g", 2)
        if pe == 1:
            pred = [x]
            for _ in range(work_before_signal):  # shifts the signal against the poll passes of PE 0
                pred = [D.shmem_clear_signal(flag, pred=pred)]
            D.shmem_signal(flag, 0, 1, target_pe=0, pred=pred)
        else:
            D.shmem_wait_until(flag, 0, 1, pred=[x])

    with npusim.session("a2") as session:
        xs = [npusim.tensor(np.zeros((2, 8), np.float16), device=pe) for pe in range(2)]
        npusim.launch(kernel, 2, args=lambda pe: (xs[pe], pe))
    [(_, _, landed, _)] = events(session, "shmem_signal MTE3")
    ended = [start for die, start, _, op in events(session, "complete") if die == 0 and op == "shmem_wait_until"]
    poll = session.config.spec.die.aicpu.poll_interval.to_ps(session.config.spec.die.clock.hz)
    assert len(ended) == 1
    assert poll <= ended[0] - landed < 2 * poll
