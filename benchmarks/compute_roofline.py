"""The compute roofline of a die, measured on the simulator in the spirit of AIBench (Xiao and Wang,
"AIbench: a tool for benchmarking Huawei Ascend AI processors", CCF THPC 2024): achieved cube TFLOPS
(fp16, bf16, int8) and vector GFLOPS (fp16, fp32) on one core and on the whole die against the size
of the work, and the roofline knee of a matmul fed from GM.

    python benchmarks/compute_roofline.py [--config a2] [--quick]

Sections (all figures are simulated time, deterministic; the machine running this does not matter):

- ``cube``: one AIC (and every AIC of the die at once) issuing ``ITERATIONS`` accumulating ``mmad``
  of ``s x s x s`` on L0-resident operands (AIBench's matrix-unit measurement: no data movement);
- ``vector``: one AIV (and every AIV) issuing ``ITERATIONS`` ``add`` instructions over ``n``
  UB-resident elements (one flop per element);
- ``matmul``: ``pypto.matmul`` of ``M x N x K`` fp16 from GM on the whole die (the framework's tiling,
  MTE2 GM -> L1, MTE1 L1 -> L0, CUBE, FIXP), against the tile's arithmetic intensity, with the
  two knees of the roofline: the die's (peak / HBM bandwidth) and one core's (its cube peak / its
  MTE2 rate).
- ``gemm``: the torch ops on the cube kernels (kernels/cube: one launch on every AIC, MatMulV3's
  default tiling, L1 and L0 double buffered): ``torch.matmul`` in fp16 and ``npu_quant_matmul`` in
  int8 (bf16 out), ``M x N x K`` from GM, against the die's peak of the dtype: the kernel's span
  (first to last instruction), its TFLOPS (TOPS for int8), the HBM bytes it moved and what bounds
  it (docs/calibration.md, "Compute and memory").
"""

from __future__ import annotations

import argparse

import numpy as np
from running_on import running_on

import npusim
from npusim import isa, pypto
from npusim.hw.pipes import Pipe
from npusim.isa.fractal import inner_block, nz_count

ITERATIONS = 64
DTYPES = {"fp16": (np.float16, np.float32), "bf16": (pypto.DT_BF16.numpy, np.float32), "int8": (np.int8, np.int32)}


def peaks(config: str) -> dict[str, float]:
    """The configured physical peaks of a die: cube TFLOPS per input dtype, vector GFLOPS per dtype."""
    with npusim.session(config, data=False) as s:
        die = s.config.spec.die
        timing = s.system.timing
        hz = timing.clock_hz
        cube, vector = timing.cube, timing.vector
        aic, aiv = timing.kinds["aic"], timing.kinds["aiv"]
        macs = cube.m * cube.n * cube.k / (cube.per_block_exact_ps * hz / 1e12)  # fp16 MACs per cycle per AIC
        per_repeat = vector.per_repeat_ps * hz / 1e12  # cycles
        return {
            "clock_hz": hz, "aic": aic.count, "aiv": aiv.count,
            "fp16": 2 * macs * hz * aic.count / 1e12, "bf16": 2 * macs * hz * aic.count / 1e12,
            "int8": 4 * macs * hz * aic.count / 1e12,
            "vec_fp16": vector.repeat_bytes / 2 / per_repeat * hz * aiv.count / 1e9,
            "vec_fp32": vector.repeat_bytes / 4 / per_repeat * hz * aiv.count / 1e9,
            "hbm_bytes_per_s": die.hbm.bandwidth.value,
            "mte2_bytes_per_cycle": aic.engines[Pipe.MTE2].rate_bytes_per_ps(("GM", "L1"), remote=False) * 1e12 / hz,
        }


def cube_rate(config: str, dtype: str, size: int, cores: int) -> float:
    """TFLOPS of ``cores`` AICs each issuing ITERATIONS mmads of size^3 on L0-resident data."""
    in_dtype, acc = DTYPES[dtype]
    with npusim.session(config, data=False) as s:
        kernel = isa.Kernel(f"mmad {dtype} {size}")
        for core in range(cores):
            p = kernel.aic(core)
            block = inner_block(np.dtype(in_dtype).itemsize)
            a = p.alloc(nz_count(size, size, block), in_dtype, "L0A")
            b = p.alloc(nz_count(size, size, block), in_dtype, "L0B")
            c = p.alloc(nz_count(size, size, 16), acc, "L0C")
            for i in range(ITERATIONS):
                p.mmad(c, a, b, size, size, size, accumulate=i > 0)
        kernel.launch()
        npusim.synchronize()
        seconds = s.env.now * 1e-12
    return 2 * size ** 3 * ITERATIONS * cores / seconds / 1e12


def vector_rate(config: str, dtype, elements: int, cores: int) -> float:
    """GFLOPS of ``cores`` AIVs each issuing ITERATIONS adds over ``elements`` UB-resident elements."""
    with npusim.session(config, data=False) as s:
        kernel = isa.Kernel(f"vadd {np.dtype(dtype)} {elements}")
        for core in range(cores):
            p = kernel.aiv(core)
            a = p.alloc(elements, dtype)
            b = p.alloc(elements, dtype)
            for _ in range(ITERATIONS):
                p.add(a, a, b)
        kernel.launch()
        npusim.synchronize()
        seconds = s.env.now * 1e-12
    return elements * ITERATIONS * cores / seconds / 1e9


def matmul_rate(config: str, m: int, n: int, k: int, tile_m: int, tile_n: int, tile_k: int) -> tuple[float, float]:
    """(TFLOPS, flops per byte of GM traffic) of pypto.matmul fp16 M x N x K on the whole die."""

    def kernel(a, b):
        pypto.set_cube_tile_shapes([tile_m, tile_m], [tile_k, 4 * tile_k], [tile_n, tile_n])
        pypto.matmul(a, b, pypto.DT_FP16)

    with npusim.session(config, data=False) as s:
        a, b = npusim.zeros((m, k), np.float16), npusim.zeros((k, n), np.float16)
        npusim.launch(kernel, 1, args=lambda pe: (a, b))
        npusim.synchronize()
        seconds = s.env.now * 1e-12
    tiles = -(-m // tile_m) * -(-n // tile_n)
    moved = tiles * (tile_m + tile_n) * k * 2 + m * n * 2  # every tile loads its rows of A and columns of B
    return 2 * m * n * k / seconds / 1e12, 2 * m * n * k / moved


def gemm_rate(config: str, dtype: str, m: int, n: int, k: int) -> tuple[float, float]:
    """(TFLOPS or TOPS, HBM GB/s) of one cube-kernel GEMM ``M x N x K`` on the whole die: torch.matmul
    (fp16) or npu_quant_matmul (int8 in, bf16 out, per-channel scale), default tiling."""
    import torch

    import npusim.torch_npu as torch_npu
    from npusim.trace.summary import ops, records

    with npusim.session(config, data=False) as s:
        if dtype == "fp16":
            a = torch.empty((m, k), dtype=torch.float16, device="npu")
            b = torch.empty((k, n), dtype=torch.float16, device="npu")
            a @ b
        else:
            x = torch.empty((m, k), dtype=torch.int8, device="npu")
            w = torch.empty((n, k), dtype=torch.int8, device="npu").t()
            scale = torch.empty(n, dtype=torch.bfloat16, device="npu")
            torch_npu.npu_quant_matmul(x, w, scale, output_dtype=torch.bfloat16)
        npusim.synchronize()
        record = s.system.record()
        (span,) = [op for op in records(ops(record)) if op["name"] in ("MatMulV3", "QuantBatchMatmulV3")]
        seconds = (span["end_us"] - span["start_us"]) * 1e-6
        hbm = sum(r.bytes_moved for r in record.resources if r.kind == "hbm" and r.die == 0)
    return 2 * m * n * k / seconds / 1e12, hbm / seconds / 1e9


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default="a2")
    parser.add_argument("--quick", action="store_true", help="fewer sizes (for a smoke run)")
    args = parser.parse_args()
    print(running_on())
    peak = peaks(args.config)
    cores = peak["aic"], peak["aiv"]
    print(f"config {args.config}: {peak['aic']} AIC / {peak['aiv']} AIV at {peak['clock_hz'] / 1e6:.0f} MHz; configured peak "
          f"cube fp16 {peak['fp16']:.1f} / bf16 {peak['bf16']:.1f} TFLOPS, int8 {peak['int8']:.1f} TOPS; vector fp16 "
          f"{peak['vec_fp16']:.0f} / fp32 {peak['vec_fp32']:.0f} GFLOPS")

    sizes = (16, 64, 128) if args.quick else (16, 32, 64, 128)
    print("\ncube (L0-resident mmad loop): TFLOPS   [fraction of the configured peak]")
    print(f"{'dtype':>6} {'size':>5} {'one AIC':>16} {'whole die':>18}")
    for dtype in DTYPES:
        for size in sizes:
            one, die = cube_rate(args.config, dtype, size, 1), cube_rate(args.config, dtype, size, cores[0])
            print(f"{dtype:>6} {size:>5} {one:9.2f} [{one * cores[0] / peak[dtype]:.3f}] {die:10.1f} [{die / peak[dtype]:.3f}]")

    counts = (128, 4096, 16384) if args.quick else (64, 128, 1024, 4096, 16384)
    print("\nvector (UB-resident add loop): GFLOPS   [fraction of the configured peak]")
    print(f"{'dtype':>6} {'elems':>6} {'one AIV':>16} {'whole die':>18}")
    for name, dtype in (("fp16", np.float16), ("fp32", np.float32)):
        for count in counts:
            one, die = vector_rate(args.config, dtype, count, 1), vector_rate(args.config, dtype, count, cores[1])
            key = f"vec_{name}"
            print(f"{name:>6} {count:>6} {one:9.2f} [{one * cores[1] / peak[key]:.3f}] {die:10.1f} [{die / peak[key]:.3f}]")

    knee_die = peak["fp16"] * 1e12 / peak["hbm_bytes_per_s"]
    knee_core = 2 * 16 * 16 * 16 / peak["mte2_bytes_per_cycle"]
    print(f"\nmatmul fp16 from GM on the whole die (pypto.matmul); roofline knees: die {knee_die:.0f} flop/B "
          f"(peak / HBM), one core {knee_core:.0f} flop/B (cube / MTE2 rate)")
    print(f"{'M x N x K':>18} {'tile m x n':>11} {'flop/B':>7} {'TFLOPS':>8} {'of peak':>8}")
    shapes = [(1024, 1024, 1024)] if args.quick else [(512, 512, 1024), (1024, 1024, 1024), (2048, 2048, 2048), (3072, 3072, 4096)]
    tiles = [(64, 64), (128, 128), (128, 256)]
    for m, n, k in shapes:
        for tm, tn in tiles:
            rate, intensity = matmul_rate(args.config, m, n, k, tm, tn, 64)
            print(f"{f'{m}x{n}x{k}':>18} {f'{tm}x{tn}':>11} {intensity:7.1f} {rate:8.1f} {rate / peak['fp16']:8.3f}")

    print("\ngemm from GM on the whole die (torch.matmul fp16, npu_quant_matmul int8 -> bf16; cube kernels, default tiling)")
    print(f"{'dtype':>6} {'M x N x K':>18} {'T(FL)OPS':>9} {'of peak':>8} {'HBM GB/s':>9} {'of HBM':>7}")
    gemms = [(1024, 1024, 1024)] if args.quick else [(1024, 1024, 1024), (2048, 2048, 2048), (4096, 1024, 4096), (4096, 4096, 2048)]
    for dtype in ("fp16", "int8"):
        for m, n, k in gemms:
            rate, hbm = gemm_rate(args.config, dtype, m, n, k)
            print(f"{dtype:>6} {f'{m}x{n}x{k}':>18} {rate:9.1f} {rate / peak[dtype]:8.3f} {hbm:9.0f} {hbm * 1e9 / peak['hbm_bytes_per_s']:7.3f}")


if __name__ == "__main__":
    main()
