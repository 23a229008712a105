"""All-gather with PyPTO's shmem ops, on every die of the config (8 PEs on a2, 16 on a3).

Every PE owns ROWS x COLS fp16 rows. As in the framework's all-gather tests, each PE clears its
shmem tensor, joins a barrier, puts its rows into every PE's shmem tensor at row ``my_pe * ROWS``
and signals that PE (ADD 1 to the slot of each tile); then, for every peer, it waits until the slots
of that peer's rows reach 1 (clearing them), loads those rows from its own shmem tensor into UB
(shmem_load) and writes them to its output. The launch runs on the simulated AICPUs and AIV cores;
puts cross the links (HCCS full mesh on a2, the UB switch fabric on a3).

Parameters (``--param NAME=VALUE``; the defaults are the demo): ``n_pes`` (PEs taking part, one per
die; default every die of the config), ``rows`` and ``cols`` (the fp16 rows each PE owns and their
length), ``tile_rows`` (rows per tile: the vector tile shape is ``[tile_rows, cols]``, loaded into UB
whole, so ``tile_rows x cols x 2`` bytes must fit in UB).

Run: python -m npusim run --config a3 examples/shmem_allgather.py
     python -m npusim sweep --config a2 examples/shmem_allgather.py --param n_pes=4 --grid param.tile_rows=4,8,16 --no-data
"""

import numpy as np

import npusim
from npusim import pypto
from npusim.errors import UsageError

ROWS, COLS = 64, 4096  # per PE: 512 KiB of fp16
TILE_ROWS = 16  # tile [16, 4096]: 128 KiB, loaded into UB whole
GROUP = "world"


def allgather_kernel(x, out, group, n_pes, rows, tile_rows, wait=True, tile_cols=None):
    """One PE's program: out[p * rows:(p + 1) * rows] = x of PE p, for every p."""
    cols = x.shape[1]
    pypto.set_vec_tile_shapes(tile_rows, tile_cols or cols)
    shmem = pypto.distributed.create_shmem_tensor(group, n_pes, pypto.DT_FP16, [rows * n_pes, cols])
    barrier_signal = pypto.distributed.create_shmem_signal(group, n_pes)
    my_pe = pypto.distributed.my_symbolic_pe(group)

    ready = pypto.distributed.shmem_barrier_all(barrier_signal, [x])
    for step in range(n_pes):
        peer = (my_pe + step) % n_pes  # each PE starts with a different peer: no die receives from all at once
        put = pypto.distributed.shmem_put(x, [my_pe * rows, 0], shmem, peer, pred=[ready])
        pypto.distributed.shmem_signal(shmem, peer, 1, [rows, cols], [my_pe * rows, 0], target_pe=peer,
                                       sig_op=pypto.AtomicType.ADD, pred=[put])
    for peer in range(n_pes):
        after = [x]
        if wait:
            after = [pypto.distributed.shmem_wait_until(shmem, my_pe, 1, [rows, cols], [peer * rows, 0],
                                                        cmp=pypto.OpType.EQ, clear_signal=True, pred=[x])]
        rows_of_peer = pypto.experimental.shmem_load(shmem, my_pe, [rows, cols], [peer * rows, 0], pred=after)
        out[peer * rows:, 0:] = rows_of_peer


def run_allgather(n_pes=None, rows=ROWS, cols=COLS, tile_rows=TILE_ROWS, wait=True, seed=0, races="warn", tile_cols=None):
    """Launch the all-gather in the active session (``wait=False`` drops the waits: a racy
    program); returns (inputs, outputs, launch), the inputs None when timing only."""
    session = npusim.current_session()
    dies = session.config.spec.shape.dies
    n_pes = dies if n_pes is None else n_pes
    if not 1 <= n_pes <= dies:
        raise UsageError(f"all-gather: n_pes={n_pes!r} must be between 1 and the {dies} dies of the config "
                         f"{session.config.name!r} (one PE per die); pass --param n_pes=N with N in 1..{dies}")
    rng = np.random.default_rng(seed)
    with_data = session.with_data  # timing only: no values to draw (the tensors are the same GM blocks)
    inputs = [rng.standard_normal((rows, cols)).astype(np.float16) if with_data else None for _ in range(n_pes)]
    xs = [npusim.tensor(inputs[pe], device=pe) if with_data else npusim.zeros((rows, cols), np.float16, device=pe)
          for pe in range(n_pes)]
    outs = [npusim.zeros((rows * n_pes, cols), np.float16, device=pe) for pe in range(n_pes)]
    launch = npusim.launch(allgather_kernel, n_pes, args=lambda pe: (xs[pe], outs[pe], GROUP, n_pes, rows, tile_rows, wait, tile_cols),
                           races=races)
    npusim.synchronize()
    return inputs, outs, launch


def link_bandwidth(session):
    """Per kind of link (HCCS links, UB switch ports tx / rx, SIO): (resources that carried bytes,
    bytes, mean achieved GB/s over the run, peak GB/s of one resource after protocol efficiency)."""
    seconds = session.env.now * 1e-12
    kinds: dict[str, list] = {}
    for resource in session.system.network.resources:
        if resource.kind == "link" and resource.bytes_moved:
            kind = "SIO" if "SIO" in resource.name else " ".join(resource.name.split()[1:])
            kinds.setdefault(kind, []).append(resource)
    return {kind: (len(rs), sum(r.bytes_moved for r in rs), sum(r.bytes_moved for r in rs) / len(rs) / seconds / 1e9,
                   rs[0].capacity * 1e3) for kind, rs in sorted(kinds.items())}


def print_links(session) -> None:
    for kind, (count, moved, mean, peak) in link_bandwidth(session).items():
        print(f"  {kind} links: {count} carried {moved / 2**20:.1f} MiB, {mean:.1f} GB/s each on average "
              f"over the run (peak {peak:.1f} GB/s)")


def check_outputs(session, outs, expected, what: str, failure: str) -> None:
    """Compare every PE's output with ``expected()`` (computed only with data), print the verdict,
    and raise AssertionError(``failure``) on a mismatch."""
    if not session.with_data:
        print("  outputs not checked (timing only)")
        return
    values = expected()
    matches = all(np.array_equal(out.numpy(), values) for out in outs)
    print(f"  outputs match {what}: {'yes' if matches else 'NO'}")
    if not matches:
        raise AssertionError(failure)


def main() -> None:
    session = npusim.current_session()
    n_pes = npusim.param("n_pes", session.config.spec.shape.dies, "PEs taking part, one per die (default: every die)")
    rows = npusim.param("rows", ROWS, "fp16 rows each PE owns")
    cols = npusim.param("cols", COLS, "fp16 elements per row")
    tile_rows = npusim.param("tile_rows", TILE_ROWS, "rows per tile; the vector tile shape is [tile_rows, cols]")
    inputs, outs, launch = run_allgather(n_pes=n_pes, rows=rows, cols=cols, tile_rows=tile_rows)
    print(f"shmem all-gather on {session.config.name}: {launch.n_pes} PEs x {rows}x{cols} fp16 ({rows * cols * 2 // 1024} KiB each), "
          f"tiles [{tile_rows}, {cols}]")
    print(f"  simulated time {session.now_us:.2f} us")
    print_links(session)
    check_outputs(session, outs, lambda: np.concatenate(inputs), "the expected all-gather",
                  "shmem all-gather: an output differs from the concatenated inputs")
