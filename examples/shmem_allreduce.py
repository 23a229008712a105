"""All-reduce (sum) with PyPTO's shmem ops: every PE adds its data into every PE's shmem tensor.

One-shot all-reduce as in the framework's tests: each PE joins a barrier, then puts its ROWS x COLS
fp16 input into every PE's FP32 shmem tensor with ``put_op=ADD`` (the tile op casts fp16 to fp32 on
VECTOR and stores with atomic add; adds to the same blocks serialise at the target's L2) and
signals that PE (ADD 1 to one slot per tile). Each PE waits until its slots reach n_pes, then loads
the sums into UB and writes them to its fp32 output.

The inputs are small integers, so every order of the fp32 additions gives the same exact sum.

Run: python -m npusim run --config a2 examples/shmem_allreduce.py
"""

import numpy as np
from shmem_allgather import check_outputs, print_links

import npusim
from npusim import pypto

ROWS, COLS = 64, 2048  # per PE: 256 KiB of fp16, summed into 512 KiB of fp32
TILE_ROWS = 16  # tile [16, 2048]: 128 KiB of fp32 in UB
GROUP = "world"


def allreduce_kernel(x, out, group, n_pes, tile_rows):
    """One PE's program: out = the sum of x over the PEs (in fp32)."""
    rows, cols = x.shape
    pypto.set_vec_tile_shapes(tile_rows, cols)
    sums = pypto.distributed.create_shmem_tensor(group, n_pes, pypto.DT_FP32, [rows, cols])
    barrier_signal = pypto.distributed.create_shmem_signal(group, n_pes)
    my_pe = pypto.distributed.my_symbolic_pe(group)

    ready = pypto.distributed.shmem_barrier_all(barrier_signal, [x])
    for step in range(n_pes):
        peer = (my_pe + step) % n_pes  # each PE starts with a different peer (no incast on one die)
        put = pypto.distributed.shmem_put(x, [0, 0], sums, peer, put_op=pypto.AtomicType.ADD, pred=[ready])
        pypto.distributed.shmem_signal(sums, peer, 1, [rows, cols], [0, 0], target_pe=peer,
                                       sig_op=pypto.AtomicType.ADD, pred=[put])
    summed = pypto.distributed.shmem_wait_until(sums, my_pe, n_pes, [rows, cols], [0, 0], clear_signal=True, pred=[x])
    out[0:, 0:] = pypto.experimental.shmem_load(sums, my_pe, [rows, cols], [0, 0], pred=[summed])


def run_allreduce(n_pes=None, rows=ROWS, cols=COLS, tile_rows=TILE_ROWS, seed=0, races="warn"):
    """Launch the all-reduce in the active session; returns (inputs, outputs, launch)."""
    session = npusim.current_session()
    n_pes = n_pes or session.config.spec.shape.dies
    rng = np.random.default_rng(seed)
    inputs = [rng.integers(-8, 9, size=(rows, cols)).astype(np.float16) for _ in range(n_pes)]
    xs = [npusim.tensor(inputs[pe], device=pe) for pe in range(n_pes)]
    outs = [npusim.zeros((rows, cols), np.float32, device=pe) for pe in range(n_pes)]
    launch = npusim.launch(allreduce_kernel, n_pes, args=lambda pe: (xs[pe], outs[pe], GROUP, n_pes, tile_rows), races=races)
    npusim.synchronize()
    return inputs, outs, launch


def main() -> None:
    session = npusim.current_session()
    inputs, outs, launch = run_allreduce()
    print(f"shmem all-reduce on {session.config.name}: {launch.n_pes} PEs x {ROWS}x{COLS} fp16 summed into fp32, "
          f"tiles [{TILE_ROWS}, {COLS}]")
    print(f"  simulated time {session.now_us:.2f} us")
    print_links(session)
    check_outputs(session, outs, lambda: np.sum([x.astype(np.float32) for x in inputs], axis=0), "the expected sums",
                  "shmem all-reduce: an output differs from the sum of the inputs")
