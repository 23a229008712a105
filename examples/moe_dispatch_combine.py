"""MoE dispatch and combine over the expert-parallel ranks, written in PyPTO's API: device-valued
scalars steer the data (which rank, which row, how many rows), as in the framework's distributed
MoE test (hicann/pypto python/tests/st/operator/distributed/test_moe_distributed_dispatch_combine.py).

Every rank holds ``batch`` tokens of ``hidden`` bf16 values, the ``topk`` experts each token goes to
(``experts`` in all, ``experts / ranks`` per rank) with their weights, and a mask of the tokens that
take part (the first ones; the others are neither sent nor combined).

- **dispatch** (one jit kernel): the position of each (token, k) pair among this rank's pairs for
  its expert comes from a cumulative sum of the one-hot expert table; for each active pair the
  kernel reads the expert id on the device, puts the token into the expert's rank (block
  ``(local expert, sender)`` of its inbox), puts ``(sender, token, k)`` beside it and adds 1 to the
  block's count there; once all its puts are done it signals every rank. When every rank has
  signalled, each rank reads its counts, adds them up into row offsets and copies each block's
  valid rows into ``expand_x`` (grouped by expert, then sender), with ``assist`` saying where each
  row came from, ``expert_tokens`` the rows per expert and ``recv_count`` the total.
- **combine** (one jit kernel): each received row goes back to its sender's return tensor at
  ``token * topk + k`` with a signal on the token's slot; each rank waits for the ``topk`` rows of
  each active token, weights them by the token's expert weights and sums them (fp32, then bf16).

Where the time goes, and why: every device-valued scalar the kernels branch or address on (the
mask, each pair's expert id and its position ``seen[pair, expert]``, each block's count and start,
each returned row's ``(sender, token, k)``) is read by the control-flow AICPU (the framework's
GetTensorData: one uncached GM read, ``die.aicpu.control_read``) before the tile ops it steers can
be scheduled: about 580 reads per rank here, one after the other, which is 86% of the critical path
(``CONTROL on die11 aicpu control``). That is how this PyPTO program runs (the framework's test is
written the same way: a loop over the pairs with ``expert_ids[token, k]`` in it), so the example
keeps it. The production ops do none of it on the AICPU: ``torch_npu.npu_moe_distribute_dispatch_v2``
and ``combine_v2`` (:mod:`npusim.kernels.moe_distribute`, ``examples/moe_decode_layer.py``) load the
expert ids into each AIV core's UB, count each pair's predecessors with vector compares, read the
results with the scalar unit, and exchange per-expert counts through status words the receiving
cores poll, so nothing waits on the AICPU (CloudMatrix384 Table 6: 116 us for 128 tokens x 8
experts on 8 ranks).

With no expert layer between the two, the output is each active token times the sum of its weights.
Outputs are checked against numpy: the dispatch exactly, the combine within bf16 rounding. The
timeline (trace.json) and the critical-path report show where the time goes.

Case (the framework's test: MoeCase(8, 5120, 160, 8, DT_BF16, ...) at hicann/pypto 883e7dfb0):
``batch`` 8, ``hidden`` 5120, ``experts`` 160, ``topk`` 8; ``ranks`` every die (16 on a3, 32 with
``--set shape.nodes=2``); ``active`` tokens per rank (default: all but one).

Run: npusim run --config a3 examples/moe_dispatch_combine.py
     npusim run --config a3 --set shape.nodes=2 examples/moe_dispatch_combine.py
"""

import ml_dtypes
import numpy as np

import npusim
from npusim import pypto

BATCH, HIDDEN, EXPERTS, TOPK = 8, 5120, 160, 8
GROUP = "ep"
INFO = 4  # int32 words the inbox keeps per row: sender, token, k (and one spare, 16-byte rows)
COUNT_COLUMNS = 8  # int32 words per count row: 32 bytes, one DMA block


def count_rows(experts: int) -> int:
    """Rows of the count table: row 0 stays 0, row ``1 + j`` counts block ``j``; padded to 256."""
    return -(-(experts + 1) // 256) * 256


@pypto.frontend.jit
def dispatch(x: pypto.Tensor([pypto.DYNAMIC, pypto.DYNAMIC], pypto.DT_BF16),
             expert_ids: pypto.Tensor([pypto.DYNAMIC, pypto.DYNAMIC], pypto.DT_INT32),
             active: pypto.Tensor([pypto.DYNAMIC], pypto.DT_INT32),
             expand_x: pypto.Tensor([pypto.DYNAMIC, pypto.DYNAMIC], pypto.DT_BF16),
             assist: pypto.Tensor([pypto.DYNAMIC, 3], pypto.DT_INT32),
             expert_tokens: pypto.Tensor([pypto.DYNAMIC], pypto.DT_INT32),
             recv_count: pypto.Tensor([1], pypto.DT_INT32),
             ranks, experts):
    batch, hidden = x.shape
    topk = expert_ids.shape[1]
    local_experts = experts // ranks
    pairs = batch * topk
    rows = count_rows(experts)
    me = pypto.distributed.my_symbolic_pe(GROUP)

    inbox = pypto.distributed.create_shmem_tensor(GROUP, ranks, pypto.DT_BF16, [experts * batch, hidden])
    inbox_info = pypto.distributed.create_shmem_tensor(GROUP, ranks, pypto.DT_INT32, [experts * batch, INFO])
    counts = pypto.distributed.create_shmem_tensor(GROUP, ranks, pypto.DT_INT32, [rows, COUNT_COLUMNS])
    barrier = pypto.distributed.create_shmem_signal(GROUP, ranks)
    all_sent = pypto.distributed.create_shmem_signal(GROUP, ranks)  # every rank adds 1 once it has sent all its pairs

    pypto.set_vec_tile_shapes(rows, COUNT_COLUMNS)
    cleared = pypto.distributed.shmem_clear_data(counts, pred=[x])
    ready = pypto.distributed.shmem_barrier_all(barrier, [cleared])

    # seen[i, e]: how many of this rank's pairs 0..i go to expert e
    pypto.set_vec_tile_shapes(pairs)
    flat = pypto.reshape(expert_ids, [pairs])
    pypto.set_vec_tile_shapes(pairs, experts)
    one_hot = pypto.cast(pypto.one_hot(flat, experts), pypto.DT_INT32, pypto.CastMode.CAST_TRUNC)
    seen = pypto.cast(pypto.cumsum(one_hot, 0), pypto.DT_INT32, pypto.CastMode.CAST_TRUNC)

    sent = [ready]
    for pair in pypto.loop(pairs, name="DISPATCH_SEND", idx_name="pair"):
        token, k = pair // topk, pair % topk
        if active[token] == 1:
            expert = expert_ids[token, k]
            target, local = expert // local_experts, expert % local_experts
            block = local * ranks + me
            row = block * batch + seen[pair, expert] - 1
            pypto.set_vec_tile_shapes(1, hidden)
            sent.append(pypto.distributed.shmem_put(x[token:token + 1, :], [row, 0], inbox, target, pred=[ready]))
            info = pypto.tensor([1, INFO], pypto.DT_INT32, "info")
            pypto.set_vec_tile_shapes(1, INFO)
            info[0, 0], info[0, 1], info[0, 2] = me, token, k
            sent.append(pypto.distributed.shmem_put(info, [row, 0], inbox_info, target, pred=[ready]))
            pypto.set_vec_tile_shapes(1, 1)
            one = pypto.full([1, 1], 1, pypto.DT_INT32)
            sent.append(pypto.distributed.shmem_put(one, [1 + block, 0], counts, target, put_op=pypto.AtomicType.ADD, pred=[ready]))
    pypto.set_vec_tile_shapes(1, COUNT_COLUMNS)
    pypto.distributed.shmem_signal(all_sent, 0, 1, target_pe=-1, sig_op=pypto.AtomicType.ADD, pred=sent)
    everyone = pypto.distributed.shmem_wait_until(all_sent, 0, ranks, clear_signal=True, pred=[x])
    pypto.set_vec_tile_shapes(rows, COUNT_COLUMNS)
    got = pypto.distributed.shmem_get(counts, me, pred=[everyone])
    starts = pypto.cast(pypto.cumsum(got, 0), pypto.DT_INT32, pypto.CastMode.CAST_TRUNC)  # starts[j, 0]: rows of blocks before j
    recv_count[0] = starts[local_experts * ranks, 0]
    for local in range(local_experts):
        expert_tokens[local] = starts[(local + 1) * ranks, 0] - starts[local * ranks, 0]
        for sender in range(ranks):
            block = local * ranks + sender
            count = got[1 + block, 0]
            if count:
                at = starts[block, 0]
                pypto.set_vec_tile_shapes(batch, hidden)
                expand_x[at:, :] = pypto.distributed.shmem_get(inbox, me, [batch, hidden], [block * batch, 0], valid_shape=[count, hidden])
                pypto.set_vec_tile_shapes(batch, 3)
                assist[at:, :] = pypto.distributed.shmem_get(inbox_info, me, [batch, 3], [block * batch, 0], valid_shape=[count, 3])


@pypto.frontend.jit
def combine(expand_x: pypto.Tensor([pypto.DYNAMIC, pypto.DYNAMIC], pypto.DT_BF16),
            assist: pypto.Tensor([pypto.DYNAMIC, 3], pypto.DT_INT32),
            recv_count: pypto.Tensor([1], pypto.DT_INT32),
            weights: pypto.Tensor([pypto.DYNAMIC, pypto.DYNAMIC], pypto.DT_FP32),
            active: pypto.Tensor([pypto.DYNAMIC], pypto.DT_INT32),
            out: pypto.Tensor([pypto.DYNAMIC, pypto.DYNAMIC], pypto.DT_BF16),
            ranks):
    batch, topk = weights.shape
    hidden = out.shape[1]
    me = pypto.distributed.my_symbolic_pe(GROUP)
    returned = pypto.distributed.create_shmem_tensor(GROUP, ranks, pypto.DT_BF16, [topk * batch, hidden])

    pypto.set_vec_tile_shapes(1, hidden)
    for row in pypto.loop(recv_count[0], name="COMBINE_SEND", idx_name="row"):
        sender, token, k = assist[row, 0], assist[row, 1], assist[row, 2]
        sent = pypto.distributed.shmem_put(expand_x[row:row + 1, :], [token * topk + k, 0], returned, sender)
        pypto.distributed.shmem_signal(returned, 0, 1, [1, hidden], [token, 0], target_pe=sender, sig_op=pypto.AtomicType.ADD,
                                       pred=[sent])

    for token in pypto.loop(batch, name="COMBINE_RECEIVE", idx_name="token"):
        if active[token] == 1:
            pypto.set_vec_tile_shapes(1, hidden)
            arrived = pypto.distributed.shmem_wait_until(returned, 0, topk, [1, hidden], [token, 0], clear_signal=True, pred=[expand_x])
            pypto.set_vec_tile_shapes(topk, hidden)
            copies = pypto.experimental.shmem_load(returned, me, [topk, hidden], [token * topk, 0], pred=[arrived])
            pypto.set_vec_tile_shapes(topk, hidden // 2)
            weighted = pypto.mul(pypto.cast(copies, pypto.DT_FP32), pypto.reshape(weights[token:token + 1, :], [topk, 1]))
            out[token:token + 1, :] = pypto.cast(pypto.sum(weighted, 0, keepdim=True), pypto.DT_BF16)


def make_inputs(ranks: int, batch: int, hidden: int, experts: int, topk: int, active: int, rng):
    """Per rank: tokens, expert ids (top-k of random scores), their softmax weights, the mask."""
    inputs = []
    for _ in range(ranks):
        x = rng.standard_normal((batch, hidden)).astype(ml_dtypes.bfloat16)
        scores = rng.standard_normal((batch, experts)).astype(np.float32)
        ids = np.argsort(-scores, axis=1, kind="stable")[:, :topk].astype(np.int32)
        top = np.take_along_axis(scores, ids, axis=1)
        weights = (np.exp(top - top.max(axis=1, keepdims=True)) / np.exp(top - top.max(axis=1, keepdims=True)).sum(axis=1, keepdims=True)).astype(np.float32)
        mask = (np.arange(batch) < active).astype(np.int32)
        inputs.append((x, ids, weights, mask))
    return inputs


def expected_dispatch(inputs, ranks: int, experts: int, rows: int):
    """Per rank: expand_x, assist, expert_tokens, recv_count as the algorithm defines them."""
    local_experts = experts // ranks
    blocks = [[[] for _ in range(local_experts * ranks)] for _ in range(ranks)]  # per receiving rank, per block: rows
    for sender, (x, ids, _, mask) in enumerate(inputs):
        for token, k in np.ndindex(ids.shape):
            if mask[token]:
                expert = int(ids[token, k])
                blocks[expert // local_experts][(expert % local_experts) * ranks + sender].append((x[token], (sender, token, k)))
    expected = []
    for rank in range(ranks):
        order = [row for block in blocks[rank] for row in block]
        expand = np.zeros((rows, inputs[0][0].shape[1]), ml_dtypes.bfloat16)
        assist = np.zeros((rows, 3), np.int32)
        for i, (values, where) in enumerate(order):
            expand[i], assist[i] = values, where
        tokens = np.array([sum(len(blocks[rank][e * ranks + s]) for s in range(ranks)) for e in range(local_experts)], np.int32)
        expected.append((expand, assist, tokens, len(order)))
    return expected


def run(ranks: int, batch: int, hidden: int, experts: int, topk: int, active: int, seed: int = 0):
    """Dispatch then combine on ``ranks`` dies; returns (inputs, dispatch outputs, combine outputs),
    the outputs as numpy arrays (None without data), and the simulated us of each kernel."""
    session = npusim.current_session()
    rows = min(topk * batch * ranks, batch * experts)
    inputs = make_inputs(ranks, batch, hidden, experts, topk, active, np.random.default_rng(seed))
    devices = []
    for rank, (x, ids, weights, mask) in enumerate(inputs):
        devices.append(dict(
            x=npusim.tensor(x, device=rank), ids=npusim.tensor(ids, device=rank), weights=npusim.tensor(weights, device=rank),
            mask=npusim.tensor(mask, device=rank), expand_x=npusim.zeros((rows, hidden), ml_dtypes.bfloat16, device=rank),
            assist=npusim.zeros((rows, 3), np.int32, device=rank), tokens=npusim.zeros((experts // ranks,), np.int32, device=rank),
            recv=npusim.zeros((1,), np.int32, device=rank), out=npusim.zeros((batch, hidden), ml_dtypes.bfloat16, device=rank)))
    start = session.now_us
    npusim.launch(dispatch, ranks, args=lambda r: (devices[r]["x"], devices[r]["ids"], devices[r]["mask"], devices[r]["expand_x"],
                                                       devices[r]["assist"], devices[r]["tokens"], devices[r]["recv"], ranks, experts))
    npusim.synchronize()
    dispatched = session.now_us
    npusim.launch(combine, ranks, args=lambda r: (devices[r]["expand_x"], devices[r]["assist"], devices[r]["recv"], devices[r]["weights"],
                                                      devices[r]["mask"], devices[r]["out"], ranks))
    npusim.synchronize()
    times = (dispatched - start, session.now_us - dispatched)
    if not session.with_data:
        return inputs, None, None, times
    dispatch_out = [(d["expand_x"].numpy(), d["assist"].numpy(), d["tokens"].numpy(), int(d["recv"].numpy()[0])) for d in devices]
    return inputs, dispatch_out, [d["out"].numpy() for d in devices], times


def check(inputs, dispatch_out, combine_out, ranks: int, experts: int) -> list[str]:
    """What differs from the expected outputs (empty when all match)."""
    rows = dispatch_out[0][0].shape[0]
    problems = []
    for rank, (got, want) in enumerate(zip(dispatch_out, expected_dispatch(inputs, ranks, experts, rows))):
        n = want[3]
        if got[3] != n or not np.array_equal(got[2], want[2]):
            problems.append(f"rank {rank}: recv_count {got[3]} / expert_tokens {got[2].tolist()}, expected {n} / {want[2].tolist()}")
        elif not (np.array_equal(got[0][:n].view(np.uint16), want[0][:n].view(np.uint16)) and np.array_equal(got[1][:n], want[1][:n])):
            problems.append(f"rank {rank}: expand_x or assist differ in the first {n} rows")
    for rank, (out, (x, _, weights, mask)) in enumerate(zip(combine_out, inputs)):
        want = (x.astype(np.float32) * weights.sum(axis=1, keepdims=True))[mask == 1]
        got = out.astype(np.float32)[mask == 1]
        bound = 3 * np.spacing(np.abs(want).astype(ml_dtypes.bfloat16)).astype(np.float32) + 1e-6
        if not np.all(np.abs(got - want) <= bound):
            problems.append(f"rank {rank}: combined tokens differ from x * sum(weights) beyond bf16 rounding")
    return problems


def main() -> None:
    session = npusim.current_session()
    ranks = npusim.param("ranks", session.config.spec.shape.dies, "expert-parallel ranks, one per die (default: every die)")
    batch = npusim.param("batch", BATCH, "tokens per rank")
    hidden = npusim.param("hidden", HIDDEN, "bf16 values per token")
    experts = npusim.param("experts", EXPERTS, "experts in all (a multiple of ranks)")
    topk = npusim.param("topk", TOPK, "experts per token")
    active = npusim.param("active", batch - 1, "active tokens per rank (the first ones)")
    inputs, dispatch_out, combine_out, (t_dispatch, t_combine) = run(ranks, batch, hidden, experts, topk, active)
    print(f"MoE dispatch + combine on {session.config.name}: {ranks} ranks x {batch} tokens ({active} active) x {hidden} bf16, "
          f"{experts} experts, top-{topk}")
    print(f"  dispatch {t_dispatch:.2f} us, combine {t_combine:.2f} us; simulated time {session.now_us:.2f} us")
    if not session.with_data:
        print("  outputs not checked (timing only)")
        return
    problems = check(inputs, dispatch_out, combine_out, ranks, experts)
    print(f"  outputs match the expected dispatch and combine: {'yes' if not problems else 'NO'}")
    if problems:
        raise AssertionError("moe dispatch + combine: " + "; ".join(problems))
