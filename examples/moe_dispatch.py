"""MoE dispatch all-to-all with PyPTO's shmem ops: in each expert-parallel (EP) group, every PE sends
one chunk of tokens to every PE of the group (itself included), as the dispatch before the experts.

The dies are split into ``groups`` EP groups of ``ep`` consecutive dies (one PE per die; on a3 a node
is 16 dies, so ``ep=16`` keeps a group inside a node and ``ep=32`` spans two). Each PE holds
``ep x tokens`` tokens of ``hidden`` fp16 values, sorted by destination: rows ``q * tokens`` onward go
to the group's PE ``q``. Each group is one launch: its PEs join a barrier, put each chunk into the
destination's shmem receive buffer at row ``my_pe * tokens`` and signal it (ADD 1 to the slot of each
tile); then every PE waits for each sender's slots, loads that chunk into UB and writes it to its
output (rows ``p * tokens`` onward come from PE ``p``). The groups run at once and share nothing but
the fabric's switches (non-blocking), so each is its own component of the bandwidth network.

Parameters (``--param NAME=VALUE``): ``ep`` (PEs per EP group), ``groups`` (EP groups; default all
the dies: dies // ep), ``tokens`` (tokens per chunk, i.e. per destination), ``hidden`` (fp16 values
per token), ``tile_tokens`` (tokens per tile, default ``tokens``: the vector tile is
``[tile_tokens, hidden]``, loaded into UB whole).

Run: python -m npusim run --config a3 examples/moe_dispatch.py --no-data
     python -m npusim run --config a3 --set shape.nodes=48 examples/moe_dispatch.py --no-data --trace none   (768 dies)
"""

import numpy as np
from shmem_allgather import print_links

import npusim
from npusim import pypto
from npusim.errors import UsageError

EP = 16  # PEs per expert-parallel group: one a3 node
TOKENS, HIDDEN = 16, 4096  # per destination: 16 tokens x 4096 fp16 = 128 KiB, one tile in UB


def dispatch_kernel(x, out, group, ep, tokens, tile_tokens):
    """One PE's program: send rows ``q * tokens`` of x to PE q of the group, for every q; out gets,
    at rows ``p * tokens``, what PE p sent."""
    hidden = x.shape[1]
    pypto.set_vec_tile_shapes(tile_tokens, hidden)
    received = pypto.distributed.create_shmem_tensor(group, ep, pypto.DT_FP16, [ep * tokens, hidden])
    barrier_signal = pypto.distributed.create_shmem_signal(group, ep)
    my_pe = pypto.distributed.my_symbolic_pe(group)

    ready = pypto.distributed.shmem_barrier_all(barrier_signal, [x])
    for step in range(ep):
        peer = (my_pe + step) % ep  # each PE starts with a different peer: no die receives from all at once
        chunk = pypto.view(x, [tokens, hidden], [peer * tokens, 0])
        put = pypto.distributed.shmem_put(chunk, [my_pe * tokens, 0], received, peer, pred=[ready])
        pypto.distributed.shmem_signal(received, peer, 1, [tokens, hidden], [my_pe * tokens, 0], target_pe=peer,
                                       sig_op=pypto.AtomicType.ADD, pred=[put])
    for sender in range(ep):
        arrived = pypto.distributed.shmem_wait_until(received, my_pe, 1, [tokens, hidden], [sender * tokens, 0],
                                                     cmp=pypto.OpType.EQ, clear_signal=True, pred=[x])
        out[sender * tokens:, 0:] = pypto.experimental.shmem_load(received, my_pe, [tokens, hidden], [sender * tokens, 0],
                                                                  pred=[arrived])


def run_dispatch(ep=EP, groups=None, tokens=TOKENS, hidden=HIDDEN, tile_tokens=None, seed=0):
    """Launch one dispatch per EP group in the active session; returns (inputs, outputs, launches),
    inputs and outputs indexed by die."""
    session = npusim.current_session()
    dies = session.config.spec.shape.dies
    groups = dies // ep if groups is None else groups
    tile_tokens = tokens if tile_tokens is None else tile_tokens
    if ep < 1 or groups < 1 or ep * groups > dies:
        raise UsageError(f"moe dispatch: ep={ep} x groups={groups} PEs must be at least 1 and at most the {dies} dies of "
                         f"the config {session.config.name!r}; lower --param ep or --param groups")
    rng = np.random.default_rng(seed)
    with_data = session.with_data
    inputs = [rng.standard_normal((ep * tokens, hidden)).astype(np.float16) if with_data else None for _ in range(ep * groups)]
    xs = [npusim.tensor(inputs[die], device=die) if with_data else npusim.zeros((ep * tokens, hidden), np.float16, device=die)
          for die in range(ep * groups)]
    outs = [npusim.zeros((ep * tokens, hidden), np.float16, device=die) for die in range(ep * groups)]
    launches = []
    for g in range(groups):
        members = list(range(g * ep, (g + 1) * ep))
        launches.append(npusim.launch(dispatch_kernel, ep, group_dies=members, args=lambda pe, members=members, g=g: (
            xs[members[pe]], outs[members[pe]], f"ep{g}", ep, tokens, tile_tokens)))
    npusim.synchronize()
    return inputs, outs, launches


def expected_outputs(inputs, ep, groups, tokens):
    """What each die should hold: rows ``p * tokens`` from the chunk PE p of its group sent it."""
    expected = []
    for die in range(ep * groups):
        base, rank = die - die % ep, die % ep
        expected.append(np.concatenate([inputs[base + p][rank * tokens:(rank + 1) * tokens] for p in range(ep)]))
    return expected


def main() -> None:
    session = npusim.current_session()
    dies = session.config.spec.shape.dies
    ep = npusim.param("ep", min(EP, dies), "PEs per expert-parallel group (consecutive dies)")
    groups = npusim.param("groups", dies // ep, "EP groups (default: as many as the dies hold)")
    tokens = npusim.param("tokens", TOKENS, "tokens each PE sends to each PE of its group")
    hidden = npusim.param("hidden", HIDDEN, "fp16 values per token")
    tile_tokens = npusim.param("tile_tokens", tokens, "tokens per tile; the vector tile shape is [tile_tokens, hidden] (default: a chunk)")
    inputs, outs, _ = run_dispatch(ep=ep, groups=groups, tokens=tokens, hidden=hidden, tile_tokens=tile_tokens)
    print(f"MoE dispatch on {session.config.name}: {groups} EP groups of {ep} PEs, {tokens} tokens x {hidden} fp16 "
          f"({tokens * hidden * 2 // 1024} KiB) per destination, tiles [{tile_tokens}, {hidden}]")
    print(f"  simulated time {session.now_us:.2f} us")
    print_links(session)
    if not session.with_data:
        print("  outputs not checked (timing only)")
        return
    expected = expected_outputs(inputs, ep, groups, tokens)
    matches = all(np.array_equal(out.numpy(), want) for out, want in zip(outs, expected))
    print(f"  outputs match the expected dispatch: {'yes' if matches else 'NO'}")
    if not matches:
        raise AssertionError("moe dispatch: an output differs from the chunks its group sent it")
