"""All-gather of activations with PyPTO's shmem ops, then a matmul on every PE: with and without
overlapping the compute with the communication.

Every PE owns ``rows`` x ``k`` fp16 activations and the same ``k`` x ``n`` fp16 weight. As in the
framework's all-gather + matmul test, each PE puts its rows into every PE's shmem tensor and signals;
for each peer it waits for that peer's rows, loads them (shmem_load) and assembles them into its
gathered activations; then it multiplies the gathered ``(n_pes x rows) x k`` activations by the weight
on the AIC cores of its die.

- without overlap: the all-gather as one launch, then the matmul of all the gathered rows as a second
  launch (a collective, then a GEMM, as separate kernels);
- with overlap: one kernel that multiplies each peer's block of rows as soon as it is assembled (a
  matmul per block, whose tile ops wait only for that block), so the cube works on the rows already
  here while the others are still on the links.

Both run in the same session, one after the other; the times of both are printed and the outputs
checked against numpy.

Parameters (``--param NAME=VALUE``): ``n_pes`` (default: every die), ``rows``, ``k``, ``n``.

Run: npusim run --config a2 examples/allgather_matmul.py
"""

import numpy as np

import npusim
from npusim import pypto

ROWS, K, N = 64, 1024, 1024
GROUP = "world"
CUBE_TILES = ([64, 64], [128, 256], [128, 128])


def matmul_kernel(gathered, w, results):
    """One PE's program of the second launch without overlap: results = gathered @ w."""
    pypto.set_cube_tile_shapes(*CUBE_TILES)
    results[0] = pypto.matmul(gathered, w, pypto.DT_FP16)


def allgather_matmul_kernel(x, w, gathered, results, n_pes, rows, overlap):
    """One PE's program: gathered = all PEs' x; with ``overlap`` also results[peer] = its block @ w."""
    k = x.shape[1]
    pypto.set_vec_tile_shapes(rows, k)
    pypto.set_cube_tile_shapes(*CUBE_TILES)
    shmem = pypto.distributed.create_shmem_tensor(GROUP, n_pes, pypto.DT_FP16, [rows * n_pes, k])
    barrier = pypto.distributed.create_shmem_signal(GROUP, n_pes)
    my_pe = pypto.distributed.my_symbolic_pe(GROUP)
    ready = pypto.distributed.shmem_barrier_all(barrier, [x])
    for step in range(n_pes):
        peer = (my_pe + step) % n_pes
        put = pypto.distributed.shmem_put(x, [my_pe * rows, 0], shmem, peer, pred=[ready])
        pypto.distributed.shmem_signal(shmem, peer, 1, [rows, k], [my_pe * rows, 0], target_pe=peer,
                                       sig_op=pypto.AtomicType.ADD, pred=[put])
    for step in range(n_pes):
        peer = (my_pe + n_pes - step) % n_pes  # my own rows first, then the peers' as their puts come round
        wait = pypto.distributed.shmem_wait_until(shmem, my_pe, 1, [rows, k], [peer * rows, 0], cmp=pypto.OpType.EQ,
                                                  clear_signal=True, pred=[x])
        block = pypto.experimental.shmem_load(shmem, my_pe, [rows, k], [peer * rows, 0], pred=[wait])
        gathered[peer * rows:, 0:] = block
        if overlap:
            results[peer.concrete(x.pe)] = pypto.matmul(pypto.view(gathered, [rows, k], [peer * rows, 0]), w, pypto.DT_FP16)


def run_allgather_matmul(n_pes: int, rows: int, k: int, n: int, overlap: bool, xs, w_host):
    """One launch; returns (simulated us it took, per PE the [n_pes x rows, n] result or None)."""
    session = npusim.current_session()
    start = session.now_us
    x_dev = [npusim.tensor(xs[pe], device=pe) for pe in range(n_pes)]
    w_dev = [npusim.tensor(w_host, device=pe) for pe in range(n_pes)]
    gathered = [npusim.zeros((rows * n_pes, k), np.float16, device=pe) for pe in range(n_pes)]
    results = [{} for _ in range(n_pes)]
    npusim.launch(allgather_matmul_kernel, n_pes, args=lambda pe: (x_dev[pe], w_dev[pe], gathered[pe], results[pe], n_pes, rows, overlap))
    npusim.synchronize()
    if not overlap:
        npusim.launch(matmul_kernel, n_pes, args=lambda pe: (gathered[pe], w_dev[pe], results[pe]))
        npusim.synchronize()
    took = session.now_us - start
    if not session.with_data:
        return took, None
    outs = []
    for per_pe in results:
        blocks = [per_pe[key].numpy() for key in sorted(per_pe)]
        outs.append(np.concatenate(blocks) if overlap else blocks[0])
    return took, outs


def main() -> None:
    session = npusim.current_session()
    n_pes = npusim.param("n_pes", session.config.spec.shape.dies, "PEs taking part, one per die (default: every die)")
    rows = npusim.param("rows", ROWS, "activation rows each PE owns")
    k = npusim.param("k", K, "activation columns (the matmul's k)")
    n = npusim.param("n", N, "weight columns")
    rng = np.random.default_rng(0)
    xs = [(rng.standard_normal((rows, k)) / 8).astype(np.float16) for _ in range(n_pes)]
    w_host = (rng.standard_normal((k, n)) / 8).astype(np.float16)
    serial, serial_out = run_allgather_matmul(n_pes, rows, k, n, False, xs, w_host)
    overlapped, overlap_out = run_allgather_matmul(n_pes, rows, k, n, True, xs, w_host)
    print(f"all-gather + matmul on {session.config.name}: {n_pes} PEs x [{rows}, {k}] fp16 activations, weight [{k}, {n}]")
    print(f"  without overlap: {serial:.2f} us; with overlap (a matmul per arrived block): {overlapped:.2f} us "
          f"({serial / overlapped:.2f}x)")
    print(f"  simulated time {session.now_us:.2f} us (both runs)")
    if not session.with_data:
        print("  outputs not checked (timing only)")
        return
    x_all = np.concatenate(xs).astype(np.float64)
    exact = x_all @ w_host.astype(np.float64)
    bound = np.spacing(np.abs(exact).astype(np.float16)).astype(np.float64) + (k / 16) * 2.0**-24 * (np.abs(x_all) @ np.abs(w_host.astype(np.float64)))
    ok = all(np.all(np.abs(out.astype(np.float64) - exact) <= bound) for out in serial_out + overlap_out)
    print(f"  outputs match the expected all-gather + matmul: {'yes' if ok else 'NO'}")
    if not ok:
        raise AssertionError("all-gather + matmul: an output differs from numpy beyond the rounding bound")
