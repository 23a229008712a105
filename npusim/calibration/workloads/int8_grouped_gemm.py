"""The INT8 grouped GEMM of the CloudMatrix384 paper (Zuo et al., "Serving Large Language Models
on Huawei CloudMatrix384", arXiv 2506.12708, section 5.5.3, Table 9) on one Atlas A3 die, as a torch
program: ``torch_npu.npu_grouped_matmul`` of G independent ``M x N x K`` products, int8 in, bf16 out
with a per-channel bf16 scale, the groups as the rows of one x (``group_type=0``, counts in
``group_list``), the weights ``[G, N, K]`` read transposed, output blocks of ``BM x BN = 128 x 152``
as the paper states (the rest of the tiling is the op's default: k-steps of 128 bytes, L1 chunks
from its L1 split).

The paper gives, per shape, the compute utilisation (of the die's int8 peak) and the HBM bandwidth
achieved. npusim gives the kernel's span, the utilisation ``2 G M N K / span / peak`` (the peak:
the config's cube rate, ``die.cube``, on every AIC core) and the HBM bytes its memory model moved
over the span, and the compulsory bytes (A, B and C once each) over the span: the paper's figures
equal the latter at its measured times (its kernel's re-reads hit L2).

Parameters (``--param NAME=VALUE``): ``groups``, ``m``, ``n``, ``k`` (a row of :data:`ROWS`).

Run: npusim run --config a3 npusim/calibration/workloads/int8_grouped_gemm.py --no-data --param m=2048 --param n=7168
"""

from __future__ import annotations

import warnings

import numpy as np

import npusim

ROWS = [  # (G, M, N, K, measured HBM GB/s, measured utilisation): Table 9
    (4, 7168, 4096, 4096, 260, 0.794),
    (4, 2048, 7168, 4096, 325, 0.774),
    (4, 7168, 4096, 8192, 195, 0.827),
    (4, 2048, 7168, 8192, 266, 0.811),
    (8, 7168, 4096, 4096, 261, 0.796),
    (8, 2048, 7168, 4096, 327, 0.779),
]
TILING = {"base_m": 128, "base_n": 152}
"""The paper's BM x BN; the other fields keep the op's default."""


def peak_ops(session) -> float:
    """The die's int8 peak (ops/s): two ops per MAC, a cube block of ``m x n x 32 bytes of k`` per
    ``per_block`` on every cube core."""
    timing = session.system.timing
    cube = timing.cube
    cores = timing.kinds["aic"].count
    return 2 * cube.m * cube.n * cube.block_k(1) * cores / (cube.per_block_exact_ps * 1e-12)


def run(groups: int, m: int, n: int, k: int) -> dict:
    """Run one row in the current session; its figures as the paper gives them."""
    import torch

    import npusim.torch_npu as torch_npu
    from npusim.kernels.grouped_matmul.checks import GroupSizesAssumedWarning
    from npusim.trace.summary import ops, records

    session = npusim.current_session()
    x = torch.empty((groups * m, k), dtype=torch.int8, device="npu")
    weight = torch.empty((groups, n, k), dtype=torch.int8, device="npu").transpose(1, 2)
    scale = torch.empty((groups, n), dtype=torch.bfloat16, device="npu")
    group_list = torch.full((groups,), m, dtype=torch.int64, device="npu")
    if session.with_data:
        rng = np.random.default_rng(0)
        x.copy_(torch.from_numpy(rng.integers(-8, 8, (groups * m, k)).astype(np.int8)))
        scale.fill_(0.01)
    with torch_npu.options(matmul_tiling=TILING), warnings.catch_warnings():
        warnings.simplefilter("ignore", GroupSizesAssumedWarning)  # without data the groups are taken as even (the kernel starts in synchronize): they are here
        torch_npu.npu_grouped_matmul([x], [weight], scale=[scale], group_list=group_list, split_item=3, group_type=0, group_list_type=1,
                                     output_dtype=torch.bfloat16)
        npusim.synchronize()
    record = session.system.record()
    (span,) = [op for op in records(ops(record)) if op["name"] == "GroupedMatmul"]
    seconds = (span["end_us"] - span["start_us"]) * 1e-6
    hbm = sum(r.bytes_moved for r in record.resources if r.kind == "hbm" and r.die == 0)
    compulsory = groups * (m * k + n * k + m * n * 2)  # A, B and the bf16 C once each
    return {"kernel_us": seconds * 1e6, "utilisation": 2 * groups * m * n * k / seconds / peak_ops(session), "hbm_GBps": hbm / seconds / 1e9,
            "compulsory_GBps": compulsory / seconds / 1e9}


def main() -> None:
    groups = npusim.param("groups", 4, "G: independent products")
    m = npusim.param("m", 7168, "M of each product")
    n = npusim.param("n", 4096, "N of each product")
    k = npusim.param("k", 4096, "K of each product")
    figures = run(groups, m, n, k)
    measured = {(g, mm, nn, kk): (bw, u) for g, mm, nn, kk, bw, u in ROWS}.get((groups, m, n, k))
    line = (f"INT8 grouped GEMM G={groups} M={m} N={n} K={k} (bf16 out, 128 x 152 blocks): {figures['kernel_us']:.1f} us, "
            f"utilisation {figures['utilisation']:.1%}, HBM {figures['hbm_GBps']:.0f} GB/s (compulsory bytes {figures['compulsory_GBps']:.0f} GB/s)")
    if measured:
        line += f"; measured {measured[1]:.1%}, {measured[0]} GB/s (Table 9)"
    print(line)


if __name__ == "__main__":
    main()
