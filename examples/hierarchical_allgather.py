"""Hierarchical all-gather with PyPTO's shmem ops: within each node first, then across nodes.

PE ``p`` (one per die) is rank ``r = p % L`` of node ``n = p // L`` (``L`` PEs per node: the config's
dies per node, 16 on a3). Every PE owns ``rows x cols`` fp16 values and ends with all of them, PE
``q``'s at rows ``q * rows`` of its output.

1. Within the node: each PE puts its rows into every PE of its node (itself included) at row
   ``p * rows`` of their shmem tensor and signals them: ADD 1 to the one slot of the node block
   (tiled ``[L x rows, cols]``), which each PE waits to see reach ``L``.
2. Across nodes: once its node's ``L`` blocks have arrived, each PE loads that node block into UB
   (one tile: ``L x rows`` rows) and stores it, with a signal, into rank ``r`` of every other node
   (``shmem_store``: one remote write per destination from the one load). Each node-to-node
   exchange thus crosses the second-tier switches once per rank instead of once per PE pair.
3. Each PE waits for the node block of every other node, loads it and writes its output.

There is no barrier before the puts: the shmem tensors are fresh at the launch (a barrier over all
the PEs of a SuperPoD costs ``n_pes^2`` signals and is not what this example measures).

Parameters (``--param NAME=VALUE``): ``n_pes`` (PEs taking part, a multiple of ``local``; default
every die), ``local`` (PEs per node group; default the config's dies per node), ``rows`` and
``cols`` (the fp16 rows each PE owns and their length). The tile of a node block is
``[local x rows, cols]``, loaded into UB whole, so ``local x rows x cols x 2`` bytes must fit in UB.

Each node block has one signal slot per PE, so a group needs ``n_pes x nodes x 32`` bytes of signal
window: on 768 dies (48 nodes) that is 1.1 MiB, above PyPTO's 1 MiB default; raise it as the
SuperPoD command below does (``shmem.signal_window``, as HCCL's buffer size is raised on hardware).

Run: python -m npusim run --config a3 --set shape.nodes=2 examples/hierarchical_allgather.py
     python -m npusim run --config a3 --set shape.nodes=48 --set shmem.signal_window=2MiB examples/hierarchical_allgather.py --no-data --trace none
"""

import numpy as np
from shmem_allgather import check_outputs, print_links

import npusim
from npusim import pypto
from npusim.errors import UsageError

ROWS, COLS = 4, 1024  # per PE: 8 KiB of fp16; a node block of 16 PEs is [64, 1024]: 128 KiB in UB
GROUP = "world"


def hierarchical_kernel(x, out, group, n_pes, local, rows):
    """One PE's program: out[q * rows:(q + 1) * rows] = x of PE q, for every q."""
    cols = x.shape[1]
    nodes = n_pes // local
    block = local * rows  # rows of one node block
    gathered = pypto.distributed.create_shmem_tensor(group, n_pes, pypto.DT_FP16, [n_pes * rows, cols])
    my_pe = pypto.distributed.my_symbolic_pe(group)
    node, rank = my_pe // local, my_pe % local

    for step in range(local):
        peer = node * local + (rank + step) % local
        pypto.set_vec_tile_shapes(rows, cols)  # a put: one tile of this PE's rows
        put = pypto.distributed.shmem_put(x, [my_pe * rows, 0], gathered, peer, pred=[x])
        pypto.set_vec_tile_shapes(block, cols)  # its signal: ADD 1 to the one slot of the node block
        pypto.distributed.shmem_signal(gathered, peer, 1, [block, cols], [node * block, 0], target_pe=peer,
                                       sig_op=pypto.AtomicType.ADD, pred=[put])

    # phases 2 and 3: one tile per node block (the tile shape set last)
    mine = pypto.distributed.shmem_wait_until(gathered, my_pe, local, [block, cols], [node * block, 0], cmp=pypto.OpType.EQ,
                                              clear_signal=True, pred=[x])
    own_block = pypto.experimental.shmem_load(gathered, my_pe, [block, cols], [node * block, 0], pred=[mine])
    for step in range(1, nodes):
        peer = ((node + step) % nodes) * local + rank  # each node starts with a different one
        stored = pypto.experimental.shmem_store(own_block, [node * block, 0], gathered, peer)
        pypto.distributed.shmem_signal(gathered, peer, 1, [block, cols], [node * block, 0], target_pe=peer,
                                       sig_op=pypto.AtomicType.ADD, pred=[stored])
    out[node * block:, 0:] = own_block
    for step in range(1, nodes):
        other = (node + step) % nodes
        arrived = pypto.distributed.shmem_wait_until(gathered, my_pe, 1, [block, cols], [other * block, 0],
                                                     cmp=pypto.OpType.EQ, clear_signal=True, pred=[x])
        out[other * block:, 0:] = pypto.experimental.shmem_load(gathered, my_pe, [block, cols], [other * block, 0],
                                                                pred=[arrived])


def run_hierarchical(n_pes=None, local=None, rows=ROWS, cols=COLS, seed=0):
    """Launch the hierarchical all-gather in the active session; returns (inputs, outputs, launch)."""
    session = npusim.current_session()
    shape = session.config.spec.shape
    n_pes = shape.dies if n_pes is None else n_pes
    local = shape.dies_per_node if local is None else local
    if not 1 <= n_pes <= shape.dies or local < 1 or n_pes % local:
        raise UsageError(f"hierarchical all-gather: n_pes={n_pes} must be a multiple of local={local} and at most the "
                         f"{shape.dies} dies of the config {session.config.name!r}; change --param n_pes or --param local")
    rng = np.random.default_rng(seed)
    with_data = session.with_data
    inputs = [rng.standard_normal((rows, cols)).astype(np.float16) if with_data else None for _ in range(n_pes)]
    xs = [npusim.tensor(inputs[pe], device=pe) if with_data else npusim.zeros((rows, cols), np.float16, device=pe)
          for pe in range(n_pes)]
    outs = [npusim.zeros((rows * n_pes, cols), np.float16, device=pe) for pe in range(n_pes)]
    launch = npusim.launch(hierarchical_kernel, n_pes, args=lambda pe: (xs[pe], outs[pe], GROUP, n_pes, local, rows))
    npusim.synchronize()
    return inputs, outs, launch


def main() -> None:
    session = npusim.current_session()
    shape = session.config.spec.shape
    n_pes = npusim.param("n_pes", shape.dies, "PEs taking part, one per die (default: every die)")
    local = npusim.param("local", min(shape.dies_per_node, n_pes), "PEs per node group (default: the config's dies per node)")
    rows = npusim.param("rows", ROWS, "fp16 rows each PE owns")
    cols = npusim.param("cols", COLS, "fp16 elements per row")
    inputs, outs, launch = run_hierarchical(n_pes=n_pes, local=local, rows=rows, cols=cols)
    print(f"hierarchical all-gather on {session.config.name}: {n_pes // local} node groups of {local} PEs x {rows}x{cols} fp16 "
          f"({rows * cols * 2 // 1024} KiB each)")
    print(f"  simulated time {session.now_us:.2f} us")
    print_links(session)
    check_outputs(session, outs, lambda: np.concatenate(inputs), "the expected all-gather",
                  "hierarchical all-gather: an output differs from the concatenated inputs")
