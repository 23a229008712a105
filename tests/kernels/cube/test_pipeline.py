"""The cube pipeline (kernels/cube/pipeline.py) on hand-computable cases: in steady state the
blocks' k-steps follow one another at the pace of the slowest pipe (the cube, or the copy engine
that feeds it); consecutive blocks overlap (the next block's loads run while this one computes; its
first mmad waits for this one's store only with one L0C buffer); a tile barrier drains the core
between blocks; single buffers serialise. Results are bit-exact against the documented
accumulation (tests/kernels/cube/reference.py), and building a block from its reused piece gives
the same run as building it anew."""

from __future__ import annotations

import dataclasses

import ml_dtypes
import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import npusim
from npusim import isa
from npusim.isa.program import CoreProgram
from npusim.kernels.cube.kernel import Gemm, gemm_kernel
from npusim.kernels.cube.op import matrix, vector
from npusim.kernels.cube.pipeline import GemmShape
from npusim.kernels.cube.tiling import CubeSchedule, CubeTiling

from . import reference

CLOCK = 1.85e9
FAST = ["die.hbm.bandwidth=1000 TB/s", "die.l2.bandwidth=1000000 B/cycle", "die.l2.latency=1 cycle", "die.hbm.latency=1 cycle",
        "die.cores.aic.engines.MTE2.rate=65536 B/cycle", "die.cores.aic.engines.MTE2.setup=1 cycle", "die.cores.aic.engines.MTE2.per_burst=1 ps",
        "die.cores.aic.engines.MTE1.rate=65536 B/cycle", "die.cores.aic.engines.MTE1.setup=1 cycle",
        "die.cores.aic.engines.FIXP.rate=65536 B/cycle", "die.cores.aic.engines.FIXP.setup=1 cycle"]
"""Every copy nearly free: the cube is the slowest pipe."""


def ps(cycles: float) -> int:
    return round(cycles * 1e12 / CLOCK)


def run_gemm(m, n, k, tiling, *, overrides=(), schedule=None, dtype=np.float16, blocks=None, data=False, a_trans=False, b_trans=False,
             bias=False, seed=0):
    """C = A @ B on one die with the cube kernel; returns (events [(name, start, end)], C, A, B, bias)."""
    rng = np.random.default_rng(seed)
    with npusim.session("a2", list(overrides), data=data) as session:
        if np.issubdtype(np.dtype(dtype), np.integer):
            a_host, b_host = rng.integers(-8, 8, (m, k)).astype(dtype), rng.integers(-8, 8, (k, n)).astype(dtype)
        else:
            a_host = rng.standard_normal((m, k)).astype(np.float32).astype(dtype)
            b_host = rng.standard_normal((k, n)).astype(np.float32).astype(dtype)
        a = npusim.tensor(np.ascontiguousarray(a_host.T)).T if a_trans else npusim.tensor(a_host)  # [m, k] with its columns contiguous
        b = npusim.tensor(np.ascontiguousarray(b_host.T)).T if b_trans else npusim.tensor(b_host)
        out_dtype = np.dtype(dtype) if not np.issubdtype(np.dtype(dtype), np.integer) else np.dtype(np.int32)
        c = npusim.zeros((m, n), out_dtype)
        bias_host = rng.standard_normal(n).astype(np.float32) if bias else None
        vectors = (vector(npusim.tensor(bias_host)),) if bias else ()
        shape = GemmShape(np.dtype(dtype), out_dtype, a_trans, b_trans, (("bias", np.dtype(np.float32)),) if bias else ())
        gemm = Gemm(matrix(a, transposed=a_trans), matrix(b, transposed=b_trans), matrix(c), m, n, k, vectors)
        kernel = gemm_kernel("gemm", 0, shape, tiling, schedule or CubeSchedule(1), [gemm])
        kernel.launch()
        npusim.synchronize()
        recorder = session.result.recorder if session.result is not None else session.system.recorder
        columns = recorder.columns()
        names = recorder.names
        events = sorted((names[columns["name"][i]], int(columns["start_ps"][i]), int(columns["end_ps"][i]))
                        for i in range(len(columns["name"])))
        result = c.numpy() if data else None
    return events, result, a_host, b_host, bias_host


def starts(events, name):
    return sorted(start for n, start, _ in events if n == name)


def spans(events, name):
    return sorted((start, end) for n, start, end in events if n == name)


def test_steady_state_follows_the_cube_when_copies_are_fast():
    """64 x 64 blocks, k-steps of 64: an mmad is 4 x 4 x 4 = 64 cube blocks of one cycle; the
    cube's pipe also takes its two flags per k-step (wait MTE1 -> CUBE, set CUBE -> MTE1)."""
    events, *_ = run_gemm(64, 64, 64 * 40, CubeTiling(64, 64, 64, 2, 2), overrides=FAST + ["die.scalar.flag=3 cycles"])
    mmads = starts(events, "matmul mmad")
    intervals = {b - a for a, b in zip(mmads[5:-5], mmads[6:-5])}
    assert intervals == {ps(64) + 2 * ps(3)}


def test_steady_state_follows_the_copy_engine_when_it_is_slowest():
    """MTE2 at 16 B/cycle moves a k-step's two 8 KiB slices in 1024 cycles, far more than the
    cube's 64: the mmads come one per MTE2 k-step, no faster than its bytes, no slower than its
    bytes and fixed costs (set-up, latency, bursts, flags) together."""
    slow = [o for o in FAST if "MTE2.rate" not in o] + ["die.cores.aic.engines.MTE2.rate=16 B/cycle"]
    events, *_ = run_gemm(64, 64, 64 * 40, CubeTiling(64, 64, 64, 1, 1), overrides=slow)
    mmads = starts(events, "matmul mmad")
    intervals = [b - a for a, b in zip(mmads[5:-5], mmads[6:-5])]
    per_step_bytes = 2 * 64 * 64 * 2
    fixed = 2 * (1 + 2 + 63 * 1) + 4 * 5  # per load: set-up, L2 + HBM latency, per-burst after the first; four flags of 5 cycles
    assert all(ps(per_step_bytes / 16) <= i <= ps(per_step_bytes / 16 + fixed) for i in intervals)
    loads = spans(events, "matmul MTE2 GM->L1")
    busy = sum(end - start for start, end in loads)
    assert busy / (loads[-1][1] - loads[0][0]) > 0.95  # MTE2 never waits: the double buffers keep it fed


def test_the_next_block_loads_while_this_one_computes_and_waits_only_for_its_store():
    events, *_ = run_gemm(128, 64, 64 * 8, CubeTiling(64, 64, 64, 2, 2), overrides=FAST)
    mmads, stores = spans(events, "matmul mmad"), spans(events, "matmul FIXP L0C->GM")
    loads = spans(events, "matmul MTE2 GM->L1")
    first_block_end = mmads[7][1]
    assert any(start < first_block_end for start, _ in loads[8:])  # block 2's chunks load before block 1's cube is done
    assert mmads[8][0] >= stores[0][1]  # one L0C buffer: block 2's first mmad waits for block 1's store
    double = run_gemm(128, 64, 64 * 8, CubeTiling(64, 64, 64, 2, 2, l0c_buffers=2), overrides=FAST)[0]
    assert spans(double, "matmul mmad")[8][0] < spans(double, "matmul FIXP L0C->GM")[0][1]  # dbL0C: the cube runs on during the store


def test_a_tile_barrier_drains_the_core_between_blocks():
    events, *_ = run_gemm(128, 64, 64 * 8, CubeTiling(64, 64, 64, 2, 2), overrides=FAST, schedule=CubeSchedule(1, tile_barrier=True))
    loads, stores = spans(events, "matmul MTE2 GM->L1"), spans(events, "matmul FIXP L0C->GM")
    assert min(start for start, _ in loads[8:]) >= stores[0][1]


def test_single_buffers_serialise_the_loads_and_the_cube():
    single = run_gemm(64, 64, 64 * 16, CubeTiling(64, 64, 64, 1, 1, 1, 1, 1), overrides=FAST)[0]
    double = run_gemm(64, 64, 64 * 16, CubeTiling(64, 64, 64, 1, 1, 2, 2, 1), overrides=FAST)[0]
    mmads, extracts = spans(single, "matmul mmad"), spans(single, "matmul MTE1 L1->L0A")
    assert all(extracts[i + 1][0] >= mmads[i][1] for i in range(len(mmads) - 1))  # one L0 buffer: the next slice waits for the mmad
    assert max(e for _, _, e in single) > max(e for _, _, e in double)


@settings(max_examples=12, deadline=None)
@given(st.integers(1, 70), st.integers(1, 70), st.integers(1, 200), st.sampled_from([np.float16, ml_dtypes.bfloat16, np.float32, np.int8]),
       st.booleans(), st.booleans(), st.integers(0, 3))
def test_results_are_bit_exact_to_the_documented_accumulation(m, n, k, dtype, a_trans, b_trans, seed):
    itemsize = np.dtype(dtype).itemsize
    base_k = max(32 // itemsize, 16)
    tiling = CubeTiling(32, 48, base_k, 2, 3)
    bias = not np.issubdtype(np.dtype(dtype), np.integer) and seed % 2 == 1
    _, got, a, b, bias_host = run_gemm(m, n, k, tiling, dtype=dtype, data=True, a_trans=a_trans, b_trans=b_trans, bias=bias, seed=seed)
    if np.issubdtype(np.dtype(dtype), np.integer):
        want = reference.accumulate(a, b)
    else:
        want = reference.to_dtype(reference.accumulate(a, b, bias_host), dtype)
    assert np.array_equal(got.view(np.uint8), want.view(np.uint8))


def test_reused_pieces_run_as_blocks_built_anew(monkeypatch):
    tiling = CubeTiling(32, 32, 64, 2, 2)
    reused = run_gemm(100, 70, 300, tiling, schedule=CubeSchedule(2), data=True)
    monkeypatch.setattr(CoreProgram, "extend", lambda self, template, bases: False)
    built = run_gemm(100, 70, 300, tiling, schedule=CubeSchedule(2), data=True)
    assert reused[0] == built[0]
    assert np.array_equal(reused[1], built[1])


def test_kernel_blocks_are_spread_as_the_schedule_says():
    with npusim.session("a2", data=False):
        a, b, c = npusim.zeros((256, 64), np.float16), npusim.zeros((64, 256), np.float16), npusim.zeros((256, 256), np.float16)
        shape = GemmShape(np.dtype(np.float16), np.dtype(np.float16), False, False)
        kernel = gemm_kernel("g", 0, shape, CubeTiling(64, 64, 64, 1, 1), CubeSchedule(3, "zigzag", "contiguous"),
                             [Gemm(matrix(a), matrix(b), matrix(c), 256, 256, 64)])
        tiles = {core: sorted({i.tile for i in program.instructions if i.tile >= 0}) for (_, core), program in kernel.programs.items()}
    assert tiles == {0: [0, 1, 2, 3, 4, 5], 1: [6, 7, 8, 9, 10], 2: [11, 12, 13, 14, 15]}


def test_a_kernel_of_no_blocks_on_a_core_leaves_it_out():
    with npusim.session("a2", data=False):
        a, b, c = npusim.zeros((16, 16), np.float16), npusim.zeros((16, 16), np.float16), npusim.zeros((16, 16), np.float16)
        shape = GemmShape(np.dtype(np.float16), np.dtype(np.float16), False, False)
        kernel = gemm_kernel("g", 0, shape, dataclasses.replace(CubeTiling(16, 16, 16, 1, 1)), CubeSchedule(24),
                             [Gemm(matrix(a), matrix(b), matrix(c), 16, 16, 16)])
        assert list(kernel.programs) == [("aic", 0)]
        assert isinstance(kernel, isa.Kernel)


def test_a_dequantising_store_does_not_hold_the_next_blocks_loads():
    """The scale of a block's epilogue loads after its chunks: with a slow FixPipe, the next block's
    chunks still load while this block's dequantised store runs."""
    slow_store = [o for o in FAST if "FIXP.rate" not in o] + ["die.cores.aic.engines.FIXP.rate=1 B/cycle"]
    with npusim.session("a2", slow_store, data=False) as session:
        x, w = npusim.zeros((128, 256), np.int8), npusim.zeros((256, 64), np.int8)
        y, scale = npusim.zeros((128, 64), ml_dtypes.bfloat16), npusim.zeros(64, np.float32)
        shape = GemmShape(np.dtype(np.int8), np.dtype(ml_dtypes.bfloat16), False, False, (("scale", np.dtype(np.float32)),))
        gemm_kernel("q", 0, shape, CubeTiling(64, 64, 128, 1, 1), CubeSchedule(1), [Gemm(matrix(x), matrix(w), matrix(y), 128, 64, 256,
                                                                                          (vector(scale),))]).launch()
        npusim.synchronize()
        recorder = session.system.recorder
        columns, names = recorder.columns(), recorder.names
        events = [(names[columns["name"][i]], int(columns["start_ps"][i]), int(columns["end_ps"][i])) for i in range(len(columns["name"]))]
    first_store = spans(events, "matmul FIXP L0C->GM")[0]
    second_block_loads = spans(events, "matmul MTE2 GM->L1")[4:]  # two chunks of A and B per block
    assert second_block_loads[0][0] < first_store[1]
