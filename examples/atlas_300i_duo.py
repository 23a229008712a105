"""The Atlas 300I Duo card (configs/atlas-300i-duo.yaml): two Ascend 310P3 chips over PCIe.

1. Streaming z = x / 2 + y in fp16 on chip 0 over both of its core kinds: the 8 AI cores (cube and
   vector in one core) and the 7 vector-only cores, all sharing the chip's LPDDR4X. One buffer set
   per core, so a core's next loads wait for its store (the fixed DMA costs show).
2. A matmul tile on one AI core along the 310P's coupled data path: GM -> L1 (MTE2) -> L0A / L0B
   (MTE1) -> cube -> L0C -> UB on the vector pipe (the 310P has no FixPipe) -> GM (MTE3).
3. The streamed result copied to chip 1 over the card's PCIe by chip 0's SDMA (``npusim.transfer``).
4. A decode step's KV-cache write with ``torch_npu.npu_quant_scatter_`` on chip 1, in the Atlas
   inference series' dtypes (fp16 updates, fp32 scales, int32 zero points; bf16 is refused there),
   on the 310P build of the kernel (its output chain through int32).

With data, every result is checked against numpy.

Run: npusim run --config atlas-300i-duo examples/atlas_300i_duo.py      (--no-data: timing only)
"""

import numpy as np

import npusim
from npusim import isa, torch_npu
from npusim.isa.fractal import FRACTAL_ROWS, nz_unpack

TILE = 8192  # fp16 elements per tile and buffer: 3 buffers of 16 KiB per core
M, N, K = 64, 64, 128  # the matmul tile: C[M, N] = A[M, K] @ W[K, N], fp16 in, fp32 out
CACHE = (24, 4096, 128)  # the KV cache of the op page's example: 24 sequences of 4096 slots of 128, int8


def stream_kernel(x, y, z, tile: int) -> isa.Kernel:
    """z = x / 2 + y on every core of die 0 that has a vector unit, one tile after the other."""
    kernel = isa.Kernel("scale_add", die=0)
    programs = [kernel.core(kind, i) for kind in ("aicore", "vectorcore") for i in range(kernel.die.core_count(kind))]
    tiles = x.size // tile
    for core, p in enumerate(programs):
        xb, yb = p.alloc(tile, np.float16), p.alloc(tile, np.float16)
        first, last = core * tiles // len(programs), (core + 1) * tiles // len(programs)
        for t in range(last - first):
            offset = (first + t) * tile
            with p.tile(t):
                if t:
                    p.wait_flag("MTE3", "MTE2", 0)  # the previous tile's store has left the buffers
                p.copy(xb, isa.gm(x, offset), name="load x")
                p.copy(yb, isa.gm(y, offset), name="load y")
                p.set_flag("MTE2", "VECTOR", 0)
                p.wait_flag("MTE2", "VECTOR", 0)
                p.muls(xb, xb, 0.5)
                p.add(xb, xb, yb)
                p.set_flag("VECTOR", "MTE3", 0)
                p.wait_flag("VECTOR", "MTE3", 0)
                p.copy(isa.gm(z, offset), xb, name="store z")
                p.set_flag("MTE3", "MTE2", 0)
    return kernel


def matmul_tile_kernel(a, w, c) -> isa.Kernel:
    """C = A @ W on AI core 0 of die 0; C leaves L0C for UB on the vector pipe, then UB for GM."""
    kernel = isa.Kernel("matmul_tile", die=0)
    p = kernel.core("aicore", 0)
    a_l1, w_l1 = p.alloc(M * K, np.float16, "L1"), p.alloc(K * N, np.float16, "L1")
    a_l0, w_l0, c_l0 = p.alloc(M * K, np.float16, "L0A"), p.alloc(N * K, np.float16, "L0B"), p.alloc(M * N, np.float32, "L0C")
    c_ub = p.alloc(M * N, np.float32)
    p.copy(a_l1, isa.gm(a), name="load A")
    p.copy(w_l1, isa.gm(w), name="load W")
    p.set_flag("MTE2", "MTE1", 0)
    p.wait_flag("MTE2", "MTE1", 0)
    p.load_nz(a_l0, a_l1, M, K)
    p.load_nz(w_l0, w_l1, K, N, transpose=True)  # L0B holds W^T [N, K]
    p.set_flag("MTE1", "CUBE", 0)
    p.wait_flag("MTE1", "CUBE", 0)
    p.mmad(c_l0, a_l0, w_l0, M, N, K)
    p.set_flag("CUBE", "VECTOR", 0)
    p.wait_flag("CUBE", "VECTOR", 0)
    p.copy(c_ub, c_l0, name="L0C -> UB")  # the vector pipe's move (die.cores.aicore.engines.VECTOR)
    p.set_flag("VECTOR", "MTE3", 0)
    p.wait_flag("VECTOR", "MTE3", 0)
    p.copy(isa.gm(c), c_ub, name="store C (NZ)")
    return kernel


def kv_cache_expected(cache, slots, token, scales, zero_points):
    """The op with numpy: int8(clip(rint(u / s + zp))) into cache[b, slots[b]]."""
    value = token.astype(np.float32) / scales.reshape(-1) + zero_points.reshape(-1).astype(np.float32)
    out = cache.copy()
    out[np.arange(len(slots)), slots] = np.clip(np.rint(value[:, 0]), -128, 127).astype(np.int8)
    return out


def main() -> None:
    session = npusim.current_session()
    spec = session.config.spec
    elements = npusim.param("elements", 15 * 16 * TILE, "fp16 elements of x, y and z")
    tile = npusim.param("tile", TILE, "fp16 elements per tile")
    rng = np.random.default_rng(0)
    x_host, y_host = (rng.standard_normal(elements).astype(np.float16) for _ in range(2))
    a_host, w_host = rng.standard_normal((M, K)).astype(np.float16), rng.standard_normal((K, N)).astype(np.float16)
    x, y, z = npusim.tensor(x_host), npusim.tensor(y_host), npusim.zeros(elements, np.float16)
    a, w, c = npusim.tensor(a_host), npusim.tensor(w_host), npusim.zeros(M * N, np.float32)
    peer = npusim.zeros(elements, np.float16, device=1)

    start = session.now_us
    stream_kernel(x, y, z, tile).launch()
    npusim.synchronize()
    stream_us = session.now_us - start
    dram = spec.die.hbm.bandwidth.bytes_per_second(spec.die.clock.hz)
    moved = 3 * elements * 2
    cores = {kind: spec.die.cores[kind].count for kind in ("aicore", "vectorcore")}
    print(f"scale_add: {elements} fp16 on chip 0's {cores['aicore']} AI cores and {cores['vectorcore']} vector cores in "
          f"{stream_us:.2f} us: {moved / stream_us / 1e3:.1f} GB/s = {moved / stream_us / 1e-6 / dram:.0%} of the "
          f"{dram / 1e9:.0f} GB/s LPDDR4X")

    start = session.now_us
    matmul_tile_kernel(a, w, c).launch()
    npusim.synchronize()
    print(f"matmul tile {M}x{N}x{K} on one AI core (L0C -> UB -> GM): {session.now_us - start:.2f} us")

    start = session.now_us
    npusim.transfer("write", z, peer)
    npusim.synchronize()
    copy_us = session.now_us - start
    print(f"copy of z to chip 1 over PCIe: {elements * 2 / 2**20:.1f} MiB in {copy_us:.2f} us = {elements * 2 / copy_us / 1e3:.1f} GB/s")

    slots = rng.integers(0, CACHE[1], CACHE[0]).astype(np.int32)
    token = rng.normal(0, 3, (CACHE[0], 1, CACHE[2])).astype(np.float16)
    scales = rng.uniform(0.01, 0.05, (1, 1, CACHE[2])).astype(np.float32)
    zero_points = rng.integers(-4, 5, (1, 1, CACHE[2])).astype(np.int32)
    cache_host = rng.integers(-128, 128, CACHE, dtype=np.int8) if session.with_data else None
    cache = npusim.tensor(cache_host, device=1) if session.with_data else npusim.empty(CACHE, np.int8, device=1)
    start = session.now_us
    torch_npu.npu_quant_scatter_(cache, *(npusim.tensor(a, device=1) for a in (slots, token, scales, zero_points)), axis=-2, quant_axis=-1)
    npusim.synchronize()
    print(f"KV-cache write (npu_quant_scatter_, {CACHE[0]} tokens of {CACHE[2]} fp16) on chip 1: {session.now_us - start:.2f} us")

    if session.with_data:
        expected = ((x_host.astype(np.float32) * 0.5).astype(np.float16).astype(np.float32)
                    + y_host.astype(np.float32)).astype(np.float16)
        product = nz_unpack(c.numpy(), M, N, FRACTAL_ROWS)
        checks = {
            "z": np.array_equal(z.numpy(), expected),
            "C": np.allclose(product, a_host.astype(np.float32) @ w_host.astype(np.float32), rtol=1e-3, atol=1e-3),
            "chip 1's copy": np.array_equal(peer.numpy(), expected),
            "the KV cache": np.array_equal(cache.numpy(), kv_cache_expected(cache_host, slots, token, scales, zero_points)),
        }
        failed = [name for name, ok in checks.items() if not ok]
        if failed:
            raise AssertionError(f"atlas_300i_duo: {', '.join(failed)} differ from numpy")
        print("results match numpy: yes")
