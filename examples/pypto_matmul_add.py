"""A PyPTO kernel that computes: y = cast(x @ w + bias, fp16) on one die, checked against numpy.

``x`` [M, K] and ``w`` [K, N] are fp16 in GM, ``bias`` [1, N] fp32. ``pypto.matmul`` runs on the AIC
cores (tiles of ``set_cube_tile_shapes``: MTE2 GM -> L1, MTE1 L1 -> L0A / L0B in NZ fractals, CUBE
mmad accumulating in fp32, FIXP L0C -> GM), the bias add (broadcast along the rows) and the cast on
the AIV cores (tiles of ``set_vec_tile_shapes``); each add tile waits only for the matmul tiles it
reads, so adds start while the matmul's later tiles still run.

Parameters (``--param NAME=VALUE``): ``m``, ``k``, ``n`` (the problem), ``tile_m``, ``tile_n``
(the matmul's output tile, also the vector tile), ``tile_k`` (kL0; kL1 is 4 x tile_k).

Run: npusim run --config a2 examples/pypto_matmul_add.py
     npusim run --config a2 examples/pypto_matmul_add.py --param m=1024 --param n=1024 --no-data
"""

import numpy as np

import npusim
from npusim import pypto

M, K, N = 256, 512, 512
TILE_M, TILE_N, TILE_K = 128, 128, 64


def matmul_add_kernel(x, w, bias, results, tile_m, tile_n, tile_k):
    """One PE's program: results.append(cast(x @ w + bias, fp16))."""
    pypto.set_cube_tile_shapes([tile_m, tile_m], [tile_k, 4 * tile_k], [tile_n, tile_n])
    product = pypto.matmul(x, w, pypto.DT_FP32)
    pypto.set_vec_tile_shapes(tile_m, tile_n)
    results.append(pypto.cast(pypto.add(product, bias), pypto.DT_FP16))


def main() -> None:
    session = npusim.current_session()
    m = npusim.param("m", M, "rows of x")
    k = npusim.param("k", K, "columns of x, rows of w")
    n = npusim.param("n", N, "columns of w")
    tile_m = npusim.param("tile_m", TILE_M, "matmul output tile rows (mL0) and vector tile rows")
    tile_n = npusim.param("tile_n", TILE_N, "matmul output tile columns (nL0) and vector tile columns")
    tile_k = npusim.param("tile_k", TILE_K, "kL0 of the matmul (kL1 = 4 x kL0)")
    rng = np.random.default_rng(0)
    x_host = (rng.standard_normal((m, k)) / 4).astype(np.float16)
    w_host = (rng.standard_normal((k, n)) / 4).astype(np.float16)
    bias_host = rng.standard_normal((1, n)).astype(np.float32)
    x, w, bias = npusim.tensor(x_host), npusim.tensor(w_host), npusim.tensor(bias_host)
    results = []
    npusim.launch(matmul_add_kernel, 1, args=lambda pe: (x, w, bias, results, tile_m, tile_n, tile_k))
    npusim.synchronize()
    seconds = session.env.now * 1e-12
    print(f"matmul + bias add + cast on {session.config.name}: x [{m}, {k}] @ w [{k}, {n}] fp16, tiles m {tile_m} n {tile_n} k {tile_k}")
    print(f"  simulated time {session.now_us:.2f} us: {2 * m * n * k / seconds / 1e12:.1f} TFLOPS for the matmul's flops")
    if not session.with_data:
        print("  outputs not checked (timing only)")
        return
    exact = x_host.astype(np.float64) @ w_host.astype(np.float64) + bias_host
    magnitude = np.abs(x_host.astype(np.float64)) @ np.abs(w_host.astype(np.float64)) + np.abs(bias_host)
    # fp32 accumulation (one rounding per 16-wide k block and per add) then one fp16 rounding
    bound = np.spacing(np.abs(exact).astype(np.float16)).astype(np.float64) + (k / 16 + 1) * 2.0**-24 * magnitude
    error = np.abs(results[0].numpy().astype(np.float64) - exact)
    ok = bool(np.all(error <= bound))
    print(f"  outputs match numpy within one fp16 ulp plus the fp32 accumulation bound: {'yes' if ok else 'NO'} "
          f"(largest difference {error.max():.2e}, largest of its bound {bound.max():.2e})")
    if not ok:
        raise AssertionError("pypto matmul + add: the output differs from numpy beyond the rounding bound")
