"""Timing laws of the compute ops: a vector instruction's time is linear in its repeats (and splits
at 255 repeats); an mmad takes its blocks (dtype-dependent k) one per ``per_block``; a matmul takes
at least flops / peak, runs its tile ops on AIC cores (vector ops on AIV cores), and reaches the
configured peak within a few percent when data movement is not the limit; double buffering lets
MTE2 / MTE1 overlap the cube."""

import numpy as np
import pytest

import npusim
from npusim import isa, pypto
from npusim.isa.fractal import inner_block, nz_count

from .compute_helpers import run

CLOCK = 1.85e9
FAST_MTE2 = ["die.cores.aic.engines.MTE2.rate=4096 B/cycle", "die.cores.aic.engines.MTE2.setup=1 cycle", "die.cores.aic.engines.MTE2.per_burst=1 cycle"]


def cycles(ps: int) -> float:
    return ps * 1e-12 * CLOCK


@pytest.mark.parametrize("dtype,lanes", [(np.float16, 128), (np.float32, 64)])
def test_vector_time_is_linear_in_repeats_and_splits_at_255(dtype, lanes):
    with npusim.session("a2", data=False):
        p = isa.Kernel("v").aiv(0)
        a = p.alloc(lanes * 600, dtype)
        cost = {r: [i.fixed_ps for i in p.vector("add", a[: r * lanes], a[: r * lanes], a[: r * lanes])] for r in (1, 2, 100, 255, 256, 510, 600)}
    per_repeat = cost[2][0] - cost[1][0]
    assert cycles(per_repeat) == pytest.approx(2.0, abs=0.01)  # die.vector.per_repeat
    for r in (100, 255):
        assert cost[r] == [cost[1][0] + (r - 1) * per_repeat]
    assert cost[256] == [cost[255][0], cost[1][0]]  # 255 + 1 repeats: two instructions
    assert cost[510] == [cost[255][0]] * 2 and cost[600] == [cost[255][0]] * 2 + [cost[1][0] + 89 * per_repeat]


@pytest.mark.parametrize("dtype,k_block", [(np.float16, 16), (np.int8, 32), (np.float32, 8)])
def test_mmad_time_is_its_blocks(dtype, k_block):
    with npusim.session("a2", data=False):
        p = isa.Kernel("c").aic(0)
        block = inner_block(np.dtype(dtype).itemsize)
        acc = np.int32 if dtype == np.int8 else np.float32
        a, b = p.alloc(nz_count(48, 64, block), dtype, "L0A"), p.alloc(nz_count(32, 64, block), dtype, "L0B")
        c = p.alloc(nz_count(48, 32, 16), acc, "L0C")
        mmad = p.mmad(c, a, b, 48, 32, 64)
    assert cycles(mmad.fixed_ps) == pytest.approx(3 * 2 * (64 // k_block), abs=0.01)


def matmul_events(session):
    recorder = session.result.recorder
    columns = recorder.columns()
    names = recorder.names
    tracks = recorder.tracks
    out = []
    for i in range(len(columns["name"])):
        out.append((names[columns["name"][i]], tracks[columns["track"][i]].label, int(columns["start_ps"][i]), int(columns["end_ps"][i])))
    return out


def test_matmul_runs_on_aic_cores_and_the_add_after_it_on_aiv_cores():
    a, b = np.ones((128, 256), np.float16), np.ones((256, 128), np.float16)
    _, session = run(lambda x, y: pypto.add(pypto.matmul(x, y, pypto.DT_FP32), 1.0), a, b, tile=(64, 128),
                     cube=([64, 64], [64, 128], [64, 64]), data=False)
    events = matmul_events(session)
    mmads = {track for name, track, *_ in events if name == "matmul mmad"}
    adds = {track for name, track, *_ in events if name == "add"}
    assert mmads and all("aic" in t and "CUBE" in t for t in mmads)
    assert adds and all("aiv" in t and "VECTOR" in t for t in adds)
    last_mmad_end = max(end for name, _, _, end in events if name == "matmul FIXP L0C->GM")
    first_add = min(start for name, _, start, _ in events if name == "add")
    assert first_add >= last_mmad_end or len({t for t in mmads}) > 1  # an add tile waits for the matmul tiles it reads


@pytest.mark.parametrize("m,n,k", [(256, 256, 512), (512, 1024, 256)])
def test_matmul_takes_at_least_flops_over_peak(m, n, k):
    _, session = run(lambda x, y: pypto.matmul(x, y, pypto.DT_FP16), np.zeros((m, k), np.float16), np.zeros((k, n), np.float16),
                     cube=([128, 128], [64, 256], [128, 128]), data=False)
    peak = 24 * 16 * 16 * 16 * 2 * CLOCK
    assert session.env.now * 1e-12 >= 2 * m * n * k / peak


def test_compute_bound_matmul_reaches_the_configured_peak_within_a_few_percent():
    """One tile of 128 x 256 with k = 16384 on one AIC, MTE2 made fast (so the cube is the limit):
    it runs at >= 95% of the core's configured peak (the rest: the flags around each mmad and the first
    load), thanks to the L0 / L1 ping-pong."""
    m, n, k = 128, 256, 16384
    _, session = run(lambda x, y: pypto.matmul(x, y, pypto.DT_FP16), np.zeros((m, k), np.float16), np.zeros((k, n), np.float16),
                     cube=([128, 128], [64, 256], [256, 256]), overrides=FAST_MTE2, data=False)
    peak_core = 16 * 16 * 16 * 2 * CLOCK
    assert 2 * m * n * k / (session.env.now * 1e-12) >= 0.95 * peak_core


def test_double_buffering_overlaps_the_loads_with_the_cube():
    """With the default engines the next L1 chunk loads while the cube works: the MTE2 and CUBE
    lanes are busy at the same time."""
    m, n, k = 64, 64, 2048
    _, session = run(lambda x, y: pypto.matmul(x, y, pypto.DT_FP16), np.zeros((m, k), np.float16), np.zeros((k, n), np.float16),
                     cube=([64, 64], [64, 256], [64, 64]), data=False)
    events = matmul_events(session)
    loads = [(s, e) for name, _, s, e in events if name == "matmul MTE2 GM->L1"]
    mmads = [(s, e) for name, _, s, e in events if name == "matmul mmad"]
    assert any(ls < me and ms < le for ls, le in loads[2:] for ms, me in mmads)


def test_vector_op_tiles_spread_over_the_aiv_cores():
    _, session = run(lambda x: pypto.exp(x), np.zeros((64, 256), np.float32), tile=(8, 256), data=False)
    tracks = {track for name, track, *_ in matmul_events(session) if name == "exp"}
    assert len(tracks) == 8  # one tile op per core, 8 tiles


def test_timing_is_the_same_with_and_without_data():
    rng = np.random.default_rng(0)
    a, b, bias = rng.standard_normal((96, 64)).astype(np.float16), rng.standard_normal((64, 80)).astype(np.float16), np.ones((1, 80), np.float32)
    runs = []
    for data in (True, False):
        _, session = run(lambda x, y, z: pypto.sum(pypto.add(pypto.matmul(x, y, pypto.DT_FP32), z), 1), a, b, bias, tile=(32, 80),
                         cube=([32, 32], [32, 64], [32, 32]), data=data)
        runs.append((session.env.now, sorted(matmul_events(session))))
    assert runs[0] == runs[1]
