"""``comm_alg`` "fullmesh_v2" on Atlas A3, as hicann/ops-transformer ``moe_distribute_dispatch_v2_full_mesh.h``
(c29bc10) runs it; its combine is fullmesh_v1's (:mod:`.fullmesh`: the ops share one combine kernel).

Dispatch, one kernel with no SyncAll:

- the last core counts, expert by expert, this rank's pairs of each expert (vector compares over
  the expert ids) and stores each count into its expert's rank's status words; then it spins until
  every sender's counts of this rank's experts are in, takes their prefix sums (``ep_recv_counts``,
  ``expert_token_nums``), copies them into the workspace once per core and raises each core's
  "counts ready" flag;
- the other cores take the experts, a share each (the rank's first expert rotated by its rank id),
  find each expert's pairs (a vector compare and gather over the ids) and send them one by one: the
  token loaded, quantised (quant_mode 2), its triple filled, spread into 480-byte blocks each with a
  flag (two vector copies), and stored into the expert's rank's window;
- then every core waits for its "counts ready" flag, takes a share of the (expert, sender) blocks
  and copies each block's rows out, a UB-full at a time, once the rows' flags say they have arrived
  (one strided load of the flags, a compare), with one load and three stores per UB-full
  (``expand_x``, ``dynamic_scales``, the triples); a finished block's flags are cleared.

The flags inside each row (one per 480-byte block) are modelled as one status entry per UB-full a
receiving core takes at a time, stored after those rows (the receiver's UB-full is known to the
sender: the same sizes); the time of the rows' bytes counts the flag blocks. Each core takes whole
experts (the kernel splits the last, leftover experts' tokens over groups of cores), and a receiving
core copies its blocks in order (the kernel polls them round robin).
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from npusim.errors import UsageError
from npusim.kernels.comm.aiv import ENTRY_WORDS, read_status, signal, split_to_cores, status_address, status_buffer, wait_for, window_address
from npusim.kernels.comm.group import STATUS_BYTES, Area
from npusim.kernels.flags import Flags
from npusim.kernels.moe_distribute import fullmesh, layout
from npusim.kernels.moe_distribute.checks import F32, I32, I64, TRIPLE
from npusim.kernels.moe_distribute.kernel import CountCalc, MoeCall, gm_at, sender_plan
from npusim.kernels.moe_distribute.routing import SendPlan, receive_plan
from npusim.kernels.op import AwaitGroup, Run
from npusim.kernels.quantize.dynamic import Quantizer

SPLIT_BLOCK = 512
SPLIT_BLOCK_DATA = 480
"""A row travels in 512-byte blocks of 480 bytes of data and a 32-byte flag (SPLIT_BLOCK_DATA_SIZE)."""
UB_BYTES_FOR_ROWS = 180 * 1024
"""What a receiving core's UB holds of rows at once (the kernel's tBuf: UB less its small buffers)."""

combine_steps = fullmesh.combine_steps


def row_layout(call: MoeCall) -> layout.RowLayout:
    """fullmesh_v1's row (token, scale slot, triple) spread over 512-byte blocks of 480 data bytes."""
    base = fullmesh.dispatch_row(call)
    size = -(-base.row_bytes // SPLIT_BLOCK_DATA) * SPLIT_BLOCK
    return layout.RowLayout(base.data_bytes, base.scale_offset, base.triple_offset, size, size)


def batch_rows(call: MoeCall) -> int:
    """Rows a receiving core copies at once (a UB-full)."""
    return max(1, UB_BYTES_FOR_ROWS // row_layout(call).row_bytes)


def data_area(call: MoeCall, rank: int) -> Area:
    shape = call.shape
    blocks = layout.dispatch_blocks(shape, rank)
    return call.group.area(rank, "dispatch v2", blocks * shape.max_bs * row_layout(call).row_stride, blocks * STATUS_BYTES)


def flag_area(call: MoeCall, rank: int) -> Area:
    """The rows' arrival flags: one entry per (block, UB-full), and one "counts ready" entry per core."""
    shape = call.shape
    batches = -(-shape.max_bs // batch_rows(call))
    return call.group.area(rank, "dispatch v2 flags", 0, (layout.dispatch_blocks(shape, rank) * batches + call.plan.cores) * STATUS_BYTES)


def row_flag_entry(call: MoeCall, block: int, batch: int) -> int:
    return block * -(-call.shape.max_bs // batch_rows(call)) + batch


def ready_entry(call: MoeCall, core: int) -> int:
    return layout.dispatch_blocks(call.shape, call.shape.ep_rank_id) * -(-call.shape.max_bs // batch_rows(call)) + core


def dispatch_steps(call: MoeCall) -> Iterator:
    shape = call.shape
    if shape.shared_expert_rank_num:
        raise UsageError(f"torch_npu.{call.problem.api}: comm_alg 'fullmesh_v2' with shared_expert_rank_num="
                         f"{shape.shared_expert_rank_num}: the template's shared-expert sends are not modelled by npusim; "
                         "use comm_alg 'fullmesh_v1' for shared experts")
    yield AwaitGroup(call.group)
    plan = sender_plan(call)
    yield Run((send_kernel(call, plan),))
    counts = read_status(data_area(call, shape.ep_rank_id), 0, layout.dispatch_blocks(shape, shape.ep_rank_id))[:, 1]
    yield Run((copy_out_kernel(call, counts.astype(np.int64)),))


def send_kernel(call: MoeCall, plan: SendPlan):
    shape, problem = call.shape, call.problem
    kernel = call.kernel("send")
    t = call.tensors
    cores, rank = call.plan.cores, shape.ep_rank_id
    n_ids = shape.bs * shape.k
    row = row_layout(call)
    batch = batch_rows(call)
    token_bytes = shape.h * problem.x_dtype.itemsize
    senders = cores - 1
    triple = row.triple_offset
    assert triple is not None  # the second op pair's rows carry the triple
    by_expert = [np.flatnonzero(plan.expert == e) for e in range(shape.moe_expert_num)]  # in token order
    for core in range(cores):
        p = kernel.vector_core(core)
        ids = p.alloc(n_ids, I32)
        p.copy(ids, gm_at(t["expert_ids"], 0), n_ids * 4, name="load expert_ids")
        p.set_flag("MTE2", "SCALAR", 0)
        p.wait_flag("MTE2", "SCALAR", 0)
        if core == cores - 1:
            _counts(call, p, plan, ids)
        else:
            experts = split_to_cores(shape.moe_expert_num, senders, core)
            quant = Quantizer(p, shape.h, problem.smooth_scales) if problem.quant_mode == 2 else None
            xin = [p.alloc(shape.h, problem.x_dtype) for _ in range(2)]
            out = [p.alloc(row.row_bytes, np.uint8) for _ in range(2)]
            status = status_buffer(p, 2)
            flags = Flags(p)
            n = 0
            for i in range(len(experts)):
                expert = experts.start + (i + rank % max(1, len(experts))) % len(experts)
                p.vector_time([("compare", n_ids, I32), ("gather", n_ids, I32)], "find the expert's pairs")
                p.set_flag("VECTOR", "SCALAR", 0)
                p.wait_flag("VECTOR", "SCALAR", 0)
                p.scalar(4, name="pair count")
                target, local = expert // shape.local_experts, expert % shape.local_experts
                block = rank * shape.local_experts + local
                for j, item in enumerate(by_expert[expert]):
                    b = n % 2
                    n += 1
                    token, k = int(plan.token[item]), int(plan.k[item])
                    flags.wait("VECTOR", "MTE2", b)
                    p.copy(xin[b], gm_at(t["x"], token * shape.h), token_bytes, name="load token")
                    if quant is not None and quant.smooth is not None:
                        flags.wait("VECTOR", "MTE2", 2)
                        p.copy(quant.smooth[0 : shape.h], gm_at(t["scales"], expert * shape.h), shape.h * 4, name="load smooth scales")
                        flags.set("MTE2", "VECTOR", 2)
                    flags.set("MTE2", "VECTOR", b)
                    flags.wait("MTE2", "VECTOR", b)
                    if quant is not None:
                        quant.quantize(xin[b], flags, b, out[b], out[b][row.scale_offset : row.scale_offset + 4].reinterpret(F32),
                                       lambda b=b, flags=flags: flags.wait("MTE3", "SCALAR", b))
                    else:  # the first of the two copies into 480-byte blocks carries the token
                        flags.wait("MTE3", "SCALAR", b)
                        p.vector("copy", out[b][0 : row.data_bytes].reinterpret(problem.out_dtype), xin[b], name="token into the blocks")
                        flags.set("VECTOR", "MTE2", b)
                    p.write_scalars(out[b][triple : triple + TRIPLE * 4].reinterpret(I32), [rank, token, k], name="fill triple")
                    p.set_flag("SCALAR", "VECTOR", 0)
                    p.wait_flag("SCALAR", "VECTOR", 0)
                    copies = 2 if quant is not None else 1
                    p.vector_time([("copy", row.row_bytes // 4, I32)] * copies, "into 480-byte blocks with flags")
                    flags.set("VECTOR", "MTE3", b)
                    flags.wait("VECTOR", "MTE3", b)
                    position = int(plan.position[item])
                    p.copy(window_address(data_area(call, target), call.epoch,
                                          layout.dispatch_row_offset(shape, row, target, rank, local, position)), out[b], row.row_bytes,
                           name="put row")
                    last = j == len(by_expert[expert]) - 1
                    if last or (position + 1) % batch == 0:  # the flags of the receiver's UB-full of rows
                        signal(p, status, b, flag_area(call, target), row_flag_entry(call, block, position // batch), call.epoch,
                               name="row flags")
                    flags.set("MTE3", "SCALAR", b)  # the row buffer is free: the scalar unit issues what writes it next
            flags.drain()
        wait_for(p, flag_area(call, rank), ready_entry(call, core), 1, call.epoch, name="wait counts ready",
                 waiting_for=f"the last core's prefix sums of the counts (dispatch {call.epoch} of group {shape.group_ep!r})")
    return kernel


def _counts(call: MoeCall, p, plan: SendPlan, ids) -> None:
    """The last core: each expert's count out, every sender's in, their prefix sums, the workspace
    and the cores' "counts ready" flags."""
    shape = call.shape
    cores, rank, local = call.plan.cores, shape.ep_rank_id, shape.local_experts
    n_ids = shape.bs * shape.k
    count = CountCalc(p, p.alloc(8, I32))
    status = status_buffer(p, shape.moe_expert_num)
    for expert in range(shape.moe_expert_num):
        count(n_ids)
        target = expert // local
        signal(p, status, expert, data_area(call, target), layout.dispatch_entry(shape, rank, expert % local), call.epoch,
               int(plan.expert_counts[expert]), name="put count")
    blocks = layout.dispatch_blocks(shape, rank)
    own = data_area(call, rank)
    wait_for(p, own, 0, blocks, call.epoch, name="wait counts",
             waiting_for=f"the counts of senders to rank {rank} of group {shape.group_ep!r} (dispatch {call.epoch})")
    sums = p.alloc(-(-blocks // 8) * 8, F32)
    p.vector_time([("gather", blocks * ENTRY_WORDS, I32), ("add", blocks, F32)], "counts prefix sums")
    p.set_flag("VECTOR", "MTE3", 0)
    p.wait_flag("VECTOR", "MTE3", 0)
    workspace = call.group.area(rank, "dispatch v2 counts", cores * blocks * 4, 0)
    for core in range(cores):
        p.copy(window_address(workspace, call.epoch, core * blocks * 4), sums[0:blocks], blocks * 4, name="counts to workspace")
    ready = p.alloc(cores * ENTRY_WORDS, I32)
    words = np.zeros((cores, ENTRY_WORDS), np.int32)
    words[:, 0] = call.epoch
    p.write_scalars(ready, words.reshape(-1), control=True, name="counts ready")
    p.set_flag("SCALAR", "MTE3", 0)
    p.wait_flag("SCALAR", "MTE3", 0)
    p.copy(status_address(flag_area(call, rank), ready_entry(call, 0)), ready, cores * STATUS_BYTES, name="counts ready", control=True)


def copy_out_kernel(call: MoeCall, counts: np.ndarray):
    """Each core's share of the (expert, sender) blocks, a UB-full of rows at a time once their flags
    are in; the last core stores the outputs of the counts (``ep_recv_counts``, ``expert_token_nums``:
    the kernel's last core does in its count phase, with the prefix sums timed there)."""
    shape, problem = call.shape, call.problem
    kernel = call.kernel("copy out")
    t = call.tensors
    cores, rank, ep = call.plan.cores, shape.ep_rank_id, shape.ep_world_size
    row = row_layout(call)
    batch = batch_rows(call)
    blocks = layout.dispatch_blocks(shape, rank)
    received = receive_plan(counts)
    prefix = np.cumsum(received.counts)
    quant = problem.quant_mode == 2
    for core in range(cores):
        mine = split_to_cores(blocks, cores, core)
        p = kernel.vector_core(core)
        if core == cores - 1:  # the outputs the counts give (ep_recv_counts' values, expert_token_nums)
            values = p.alloc(-(-blocks // 8) * 8, I32)
            p.write_scalars(values[0:blocks], prefix, control=True, name="ep_recv_counts")
            experts = layout.hosted_experts(shape, rank)
            per_expert = received.counts.reshape(experts, -1).sum(axis=1)
            tokens = p.alloc(experts, I64)
            p.write_scalars(tokens, np.cumsum(per_expert) if problem.expert_token_nums_type == 0 else per_expert, control=True,
                            name="expert_token_nums")
            p.set_flag("SCALAR", "MTE3", 0)
            p.wait_flag("SCALAR", "MTE3", 0)
            p.copy(gm_at(t["ep_recv_counts"], 0), values[0:blocks], blocks * 4, name="ep_recv_counts", control=True)
            p.copy(gm_at(t["expert_token_nums"], 0), tokens, experts * 8, name="expert_token_nums", control=True)
        if not mine:
            continue
        sums = p.alloc(-(-blocks // 8) * 8, I32)
        workspace = call.group.area(rank, "dispatch v2 counts", cores * blocks * 4, 0)
        p.copy(sums[0:blocks], window_address(workspace, call.epoch, core * blocks * 4), blocks * 4, name="load counts")
        p.set_flag("MTE2", "SCALAR", 0)
        p.wait_flag("MTE2", "SCALAR", 0)
        p.scalar(4 * len(mine), name="blocks to copy")
        rows = p.alloc(batch * row.row_bytes, np.uint8)
        for entry in mine:
            local, sender = divmod(entry, ep)
            block = sender * shape.local_experts + local
            n, first = int(received.counts[entry]), int(received.starts[entry])
            for start in range(0, n, batch):
                m = min(batch, n - start)
                wait_for(p, flag_area(call, rank), row_flag_entry(call, block, start // batch), 1, call.epoch, name="wait rows",
                         waiting_for=f"rank {sender}'s rows of expert {local} (dispatch {call.epoch} of group {shape.group_ep!r})")
                p.pipe_barrier("ALL")
                p.copy(rows[0 : m * row.row_bytes],
                       window_address(data_area(call, rank), call.epoch, layout.dispatch_row_offset(shape, row, rank, sender, local, start)),
                       m * row.row_bytes, name="load rows")
                p.set_flag("MTE2", "MTE3", 0)
                p.wait_flag("MTE2", "MTE3", 0)
                if quant:
                    p.copy(gm_at(t["dynamic_scales"], first + start), rows[row.scale_offset :], burst_count=m, burst_bytes=4,
                           src_gap=row.row_bytes - 4, name="dynamic_scales")
                p.copy(gm_at(t["expand_x"], (first + start) * shape.h), rows[0:], burst_count=m, burst_bytes=row.data_bytes,
                       src_gap=row.row_bytes - row.data_bytes, name="expand_x rows")
                p.copy(gm_at(t["assist_info_for_combine"], (first + start) * TRIPLE), rows[row.triple_offset :], burst_count=m,
                       burst_bytes=TRIPLE * 4, src_gap=row.row_bytes - TRIPLE * 4, name="assist triples")
            if n:  # the block's flags cleared (a scratch area: the flags here carry the call's epoch)
                clear = p.alloc(ENTRY_WORDS, I32)
                p.dup(clear, 0, name="clear flags")
                p.set_flag("VECTOR", "MTE3", 1)
                p.wait_flag("VECTOR", "MTE3", 1)
                scratch = call.group.area(rank, "dispatch v2 cleared", 0, cores * STATUS_BYTES)
                p.copy(status_address(scratch, core), clear, STATUS_BYTES, name="clear flags")
        p.pipe_barrier("ALL")
    return kernel
