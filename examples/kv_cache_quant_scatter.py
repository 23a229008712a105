"""Writing new tokens into an int8 KV cache with torch_npu.npu_quant_scatter_, as a model would.

1. The op's documentation: a [24, 4096, 128] int8 cache, one new token of 128 bf16 per sequence
   (updates [24, 1, 128]), scales and zero points [1, 1, 128] bf16, axis=-2, quant_axis=-1.
2. Decoding at scale: a [1024, 128, 1024] int8 cache (1024 sequences of 128 slots of 1024), one new
   token for each of 256 sequences.
3. Prefill: 16 sequences of 128 new tokens of 1024 into a [16, 4096, 1024] cache, with the what-if of
   a double-buffered kernel (``torch_npu.options(double_buffer=True)``).

For each call: the op's simulated latency, the bytes its DMAs moved, the HBM bandwidth it achieved
and its roofline (bytes moved / HBM peak). With data, the cache is checked against numpy.

Run: python -m npusim run --config a2 examples/kv_cache_quant_scatter.py   (--no-data: timing only)
"""

import ml_dtypes
import numpy as np

import npusim
from npusim import torch_npu
from npusim.trace.summary import ops, records

BF16 = ml_dtypes.bfloat16


def numpy_quant_scatter(cache, indices, updates, scales, zero_points):
    """The op with plain numpy (1-D indices, axis=-2): int8(clip(rint(u / s + zp))) into cache[b, idx[b]:...]."""
    value = updates.astype(np.float32) / scales.reshape(-1).astype(np.float32) + zero_points.reshape(-1).astype(np.float32)
    quantized = np.clip(np.rint(value), -128, 127).astype(np.int8)
    out = cache.copy()
    for b, row in enumerate(indices):
        out[b, row:row + updates.shape[1]] = quantized[b]
    return out


def kv_cache_write(title, cache_shape, tokens, new_per_sequence, rng, double_buffer=False):
    """One npu_quant_scatter_ call; prints its figures and returns its latency in us."""
    session = npusim.current_session()
    hidden = cache_shape[-1]
    host = dict(
        indices=rng.integers(0, cache_shape[1] - new_per_sequence + 1, tokens).astype(np.int32),
        updates=rng.normal(0, 3, (tokens, new_per_sequence, hidden)).astype(BF16),
        scales=rng.uniform(0.01, 0.05, (1, 1, hidden)).astype(BF16),
        zero_points=rng.integers(-4, 5, (1, 1, hidden)).astype(BF16),
    )
    if session.with_data:
        cache_host = rng.integers(-128, 128, cache_shape, dtype=np.int8)
        cache = npusim.tensor(cache_host)
    else:
        cache = npusim.empty(cache_shape, np.int8)
    tensors = {name: npusim.tensor(array) for name, array in host.items()}
    with torch_npu.options(double_buffer=double_buffer):
        torch_npu.npu_quant_scatter_(cache, tensors["indices"], tensors["updates"], tensors["scales"],
                                     tensors["zero_points"], axis=-2, quant_axis=-1)
    npusim.synchronize()

    row = [r for r in records(ops(session.system)) if r["name"] == "QuantUpdateScatter"][-1]
    die = session.config.spec.die
    peak = die.hbm.bandwidth.bytes_per_second(die.clock.hz)
    seconds = row["duration_us"] * 1e-6
    moved = row["dma_bytes"]
    roofline_us = moved / peak * 1e6
    print(f"{title}: cache {list(cache_shape)} int8, updates {[tokens, new_per_sequence, hidden]} bf16"
          + (" (double-buffered what-if)" if double_buffer else ""))
    print(f"  latency {row['duration_us']:.2f} us simulated; DMAs moved {moved / 2**10:.1f} KiB: "
          f"{moved / seconds / 1e9:.1f} GB/s = {moved / seconds / peak:.1%} of the {peak / 1e12:.2f} TB/s HBM peak "
          f"(roofline {roofline_us:.2f} us)")
    if session.with_data:
        expected = numpy_quant_scatter(cache_host, host["indices"], host["updates"], host["scales"], host["zero_points"])
        if not np.array_equal(cache.numpy(), expected):
            raise AssertionError(f"{title}: the cache differs from numpy's result")
        print("  cache matches numpy: yes")
    return row["duration_us"]


def main() -> None:
    rng = np.random.default_rng(0)
    kv_cache_write("documentation example", (24, 4096, 128), 24, 1, rng)
    kv_cache_write("decode, 256 sequences", (1024, 128, 1024), 256, 1, rng)
    plain = kv_cache_write("prefill, 16 x 128 tokens", (16, 4096, 1024), 16, 128, rng)
    double = kv_cache_write("prefill, 16 x 128 tokens", (16, 4096, 1024), 16, 128, rng, double_buffer=True)
    print(f"double buffering would make the prefill write {plain / double:.2f}x faster")
