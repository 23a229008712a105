"""Sanity laws of the kernel's simulated time (timing only: it does not depend on data)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

import npusim
from npusim import torch_npu
from npusim.trace.summary import ops, records

from .cases import dtypes
from .test_kernel import overrides, plan_of


def timed(input_shape, updates_shape, *, double_buffer=False, ub_kib=192, cores=48, bf16=True):
    """(duration in ps, bytes its copies moved, HBM peak in bytes/ps) of one call without data."""
    u, s, z = dtypes(bf16)
    with npusim.session("a2", overrides=overrides(ub_kib, cores), data=False) as session:
        last = updates_shape[-1]
        with torch_npu.options(double_buffer=double_buffer):
            torch_npu.npu_quant_scatter_(npusim.empty(input_shape, np.int8), npusim.empty((updates_shape[0],), np.int32),
                                         npusim.empty(updates_shape, u), npusim.empty((last,), s), npusim.empty((last,), z),
                                         axis=-2, quant_axis=-1)
    (row,) = [r for r in records(ops(session.result.record)) if r["name"] == "QuantUpdateScatter"]
    return round(row["duration_us"] * 1e6), row["dma_bytes"], session.system.die(0).hbm.capacity


@pytest.mark.parametrize("input_shape, updates_shape", [
    ((24, 4096, 128), (24, 1, 128)),      # the documentation's KV-cache write
    ((1024, 128, 1024), (256, 1, 1024)),  # 256 new tokens of 1024
    ((96, 16, 1024), (96, 16, 1024)),     # one iteration per bs row (mode 101)
    ((1, 20000, 64), (1, 20000, 64)),     # the axis split over cores (mode 102)
])
def test_time_is_never_below_the_hbm_roofline(input_shape, updates_shape):
    duration, moved, peak = timed(input_shape, updates_shape)
    assert moved >= 2 * np.prod(updates_shape) + np.prod(updates_shape)  # updates read, int8 written
    assert duration >= moved / peak


def test_time_grows_with_the_number_of_tokens():
    durations = [timed((384, 64, 128), (tokens, 1, 128))[0] for tokens in (1, 24, 48, 96, 192, 384)]
    assert durations == sorted(durations) and durations[2] < durations[3] < durations[4] < durations[5]


def test_small_last_dims_are_issue_bound():
    """The same updates bytes in rows of T elements: one divide (+ a masked tail) per row, so the
    time per byte moved rises as T shrinks."""
    per_byte = []
    for t in (32, 64, 128, 256, 512, 1024):
        duration, moved, _ = timed((48, 8192 // t, t), (48, 4096 // t, t))
        per_byte.append(duration / moved)
    assert per_byte == sorted(per_byte, reverse=True) and len(set(per_byte)) == len(per_byte)


@pytest.mark.parametrize("input_shape, updates_shape, ub_kib, cores, kept", [
    ((24, 3, 64), (24, 3, 64), 12, 3, True),           # mode 101: ping-pong on the real tiling
    ((1024, 128, 1024), (256, 1, 1024), 192, 8, True),  # mode 101, 32 tokens per core
    ((1, 20000, 64), (1, 20000, 64), 192, 48, True),    # mode 102, the axis split over cores
    ((2, 40, 64), (1, 40, 64), 10, 3, False),           # mode 102, column-wise divide: smaller chunks, still a gain
    ((48, 20, 1024), (48, 20, 1024), 192, 24, False),   # mode 101 -> 104: a bs row is split in two chunks
])
def test_double_buffering_is_faster_on_multi_iteration_cases(input_shape, updates_shape, ub_kib, cores, kept):
    single, double = (plan_of(input_shape, updates_shape, 1, True, ub_kib, cores, db) for db in (False, True))
    assert max(len(c.iterations) for c in single.cores) > 1 and double.double_buffer
    assert ((single.mode, single.chunk_elements) == (double.mode, double.chunk_elements)) == kept
    plain = timed(input_shape, updates_shape, ub_kib=ub_kib, cores=cores)[0]
    assert timed(input_shape, updates_shape, ub_kib=ub_kib, cores=cores, double_buffer=True)[0] < plain


@st.composite
def problems(draw):
    last = 32 * draw(st.sampled_from([1, 2, 3, 4, 8, 16]))
    batches = draw(st.integers(1, 40))
    rows = draw(st.integers(1, 12))
    heads = draw(st.integers(1, 3))
    return dict(input_shape=(batches, heads, rows + draw(st.integers(0, 3)), last), updates_shape=(batches, heads, rows, last),
                ub_kib=draw(st.sampled_from([192, 24, 16, 12])), cores=draw(st.sampled_from([48, 7, 2])),
                bf16=draw(st.booleans()))


@settings(max_examples=60, deadline=None)
@given(problems())
def test_double_buffering_is_never_slower_when_it_keeps_the_tiling(case):
    """Ping-pong buffers on the same tiling only remove waits (each iteration waits for the one two
    before instead of the one before), so the time cannot grow."""
    single, double = (plan_of(case["input_shape"], case["updates_shape"], 1, case["bf16"], case["ub_kib"], case["cores"], db)
                      for db in (False, True))
    assume((single.mode, single.chunk_elements) == (double.mode, double.chunk_elements))
    kwargs = {k: case[k] for k in ("ub_kib", "cores", "bf16")}
    assert (timed(case["input_shape"], case["updates_shape"], double_buffer=True, **kwargs)[0]
            <= timed(case["input_shape"], case["updates_shape"], **kwargs)[0])


def test_double_buffering_that_must_shrink_the_chunks_gains_little():
    """Where the real tiling does not fit the UB twice, the what-if takes smaller chunks; in the
    large-quant modes every iteration loads updates, scales and zero points (three DMA set-ups).
    With MTE2 keeping requests in flight (queue_depth) the extra set-ups of the halved chunks overlap
    the streaming of the loads before them, so the what-if neither loses much (it lost 0.59x when
    each set-up was paid serially) nor gains much: within 5% of the real kernel. Documented in
    docs/quant_scatter.md."""
    single, double = (plan_of((1, 4, 512), (1, 4, 512), 1, True, 12, 3, db) for db in (False, True))
    assert single.mode == double.mode == 103 and double.chunk_elements < single.chunk_elements
    plain = timed((1, 4, 512), (1, 4, 512), ub_kib=12, cores=3)[0]
    assert 0.95 * plain < timed((1, 4, 512), (1, 4, 512), ub_kib=12, cores=3, double_buffer=True)[0] < 1.05 * plain
