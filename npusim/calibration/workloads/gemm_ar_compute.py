"""The GEMM of pto-isa's gemm_ar example, compute only (hw-native-sys/pto-isa
``kernels/manual/a2a3/gemm_ar/``: README.md, gemm_ar_config.h, gemm_compute_kernel.cpp), as a torch
program: ``C = A @ B`` in fp16 on one Atlas A2 die, A ``[M, K]`` ND, B given as ``[N, K]`` ("DN",
the transpose of the ``[K, N]`` operand), the buffers padded to ``5504 x 1536`` as the kernel's are.

Its tiling is the kernel's own (``gemm_ar_config.h``): output blocks of 128 x 256, k-steps of 64,
L1 chunks of 4 k-steps per operand double buffered, L0A / L0B double buffered, one L0C block; 24 AIC
blocks, each a contiguous run of the 258 output blocks (``GEMM_AR_BLOCK_START_TILE``: 18 cores take
11, 6 take 10), walked in its zigzag order (``SwizzleTileIndex``: odd rows of blocks backwards), a
``pipe_barrier(PIPE_ALL)`` after each block's store (it publishes the block to the communication
kernel). Measured on an 8 x 910B server: 368.1 us (254.5 TFLOPS, 2 x 5416 x 1408 x 6144 flops), timed
with aclrtEvent around the kernel; npusim gives the span of the kernel's instructions.

Run: npusim run --config a2 npusim/calibration/workloads/gemm_ar_compute.py --no-data
"""

from __future__ import annotations

import numpy as np

import npusim

MEASURED_US = 368.1
"""pto-isa gemm_ar README, "Measured Performance": Compute-only."""
M, K, N = 5416, 6144, 1408
M_PADDED, N_PADDED = 5504, 1536
TILING = {"base_m": 128, "base_n": 256, "base_k": 64, "step_ka": 4, "step_kb": 4, "l1_buffers": 2, "l0_buffers": 2, "l0c_buffers": 1,
          "cores": 24, "order": "zigzag", "assignment": "contiguous", "tile_barrier": True}
"""gemm_ar_config.h / gemm_compute_kernel.cpp."""


def run() -> dict:
    """Run the GEMM in the current session; its figures: kernel time (us), TFLOPS (of the unpadded
    flops, as the source counts them), the error against the measurement."""
    import torch

    import npusim.torch_npu as torch_npu
    from npusim.trace.summary import ops, records

    session = npusim.current_session()
    a = torch.empty((M_PADDED, K), dtype=torch.float16, device="npu")
    b = torch.empty((N_PADDED, K), dtype=torch.float16, device="npu")
    if session.with_data:
        rng = np.random.default_rng(0)
        a.copy_(torch.from_numpy((rng.standard_normal((M_PADDED, K)) / 8).astype(np.float16)))
        b.copy_(torch.from_numpy((rng.standard_normal((N_PADDED, K)) / 8).astype(np.float16)))
    with torch_npu.options(matmul_tiling=TILING):
        torch.matmul(a, b.t())
    npusim.synchronize()
    (span,) = [op for op in records(ops(session.system.record())) if op["name"] == "MatMulV3"]
    us = span["end_us"] - span["start_us"]
    return {"kernel_us": us, "tflops": 2 * M * N * K / (us * 1e-6) / 1e12, "measured_us": MEASURED_US, "error": us / MEASURED_US - 1}


def main() -> None:
    figures = run()
    print(f"gemm_ar GEMM (fp16 {M_PADDED} x {N_PADDED} x {K}, 128 x 256 x 64 blocks on 24 AIC): {figures['kernel_us']:.1f} us, "
          f"{figures['tflops']:.1f} TFLOPS; measured {MEASURED_US} us ({figures['error']:+.1%})")


if __name__ == "__main__":
    main()
