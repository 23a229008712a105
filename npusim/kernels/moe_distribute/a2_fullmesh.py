"""``comm_alg`` "fullmesh" on Atlas A2 (its default, and the first op pair's A2 kernels): the AIV
cores lay every token out, per destination rank, in a staging window of their own GM, and the
die's AICPU writes each rank's part to it in one RDMA write over the RoCE NICs (HCCL's
``BatchWrite``), as hicann/ops-transformer ``moe_distribute_dispatch_a2.h`` and
``moe_distribute_combine_a2.h`` (c29bc10) do, and as the ops' design note describes it
(``mc2/moe_distribute_dispatch_v2/docs``: one write per rank because the AICPU takes 1-2 us to post
each, ``die.aicpu.rdma_post``).

Dispatch:

1. *reorder* (every core): the expert ids, each pair's position among this rank's pairs of its
   expert and the per-rank counts (scalar work every core repeats; the last core stores the
   positions as ``expand_idx`` / ``assist_info_for_combine`` and each destination's header:
   per-expert counts, a flag, and a flag after the data); then the pairs split over the cores, each
   token loaded, quantised (quant_mode 2) and stored into the staging slot of its destination rank
   (``expert offset + position``); each core fills its share of the batch's items; SyncAll;
2. the AICPU posts one write per other rank (its header, rows and flags), while the last core copies
   this rank's own part locally;
3. *wait and copy out*: each core spins, for its share of the source ranks, on the header's flag,
   then on the flag after the data; SyncAll; then the counts' prefix sums (``ep_recv_counts``,
   ``expert_token_nums`` from the last core) and each core's source ranks' rows, expert by expert,
   into ``expand_x`` (their scales into ``dynamic_scales``); SyncAll; the first core clears the
   headers.

Combine:

1. *send back* (cores split the destination ranks): each destination's rows from ``expand_x``,
   expert by expert, into its staging slot, a flag after them, the batch item; SyncAll; the AICPU
   posts one write per other rank; the core of this rank's own part copies it locally;
2. *sum*: the per-expert counts of this rank's pairs, summed across the cores with atomic adds in
   GM, their offsets per rank; each core spins on the flags of its share of the ranks; SyncAll; each
   core's tokens: for each of the K pairs the row read back from its expert's rank's slot (at the
   expert's offset plus the pair's position), times its weight, summed in float32.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from npusim.hw.dma import GmBlock
from npusim.isa.instructions import GmAddress
from npusim.kernels.comm.aiv import ENTRY_WORDS, read_status, split_to_cores, status_address, wait_for, window_address
from npusim.kernels.comm.group import STATUS_BYTES, Area
from npusim.kernels.comm.rdma import RdmaWrite, batch_write
from npusim.kernels.flags import Flags
from npusim.kernels.moe_distribute.checks import F32, I32, I64, CombineProblem
from npusim.kernels.moe_distribute.kernel import MoeCall, gm_at, sender_plan
from npusim.kernels.moe_distribute.routing import SendPlan
from npusim.kernels.op import AwaitGroup, Detached, Run
from npusim.kernels.quantize.dynamic import Quantizer

SCALAR_PER_PAIR = 6
"""Scalar instructions per (token, k) pair of IndexSort: load the id, its rank and local expert,
read, write and bump the count (moe_distribute_dispatch_a2.h)."""
SCALAR_PER_EXPERT = 4
"""Scalar instructions per expert of the counts' prefix sum."""
SCALAR_PER_ITEM = 8
"""Scalar instructions per batch item (addresses, size, type, rank)."""
BATCH_ITEM_BYTES = 32
"""One BatchWrite item: local and remote addresses, count (u64 each), type and rank (u32 each)."""


# -- the windows ----------------------------------------------------------------------------------


def kind_of(call: MoeCall) -> str:
    return "combine" if isinstance(call.problem, CombineProblem) else "dispatch"


def row_bytes(call: MoeCall) -> int:
    """A staged row: the token (int8 with quant_mode 2, else its dtype) and its float32 scale, 32-byte aligned."""
    problem, shape = call.problem, call.shape
    if kind_of(call) == "combine":
        return shape.h * problem.dtype.itemsize
    data = shape.h * problem.out_dtype.itemsize + (4 if problem.quant_mode == 2 else 0)
    return -(-data // 32) * 32


def slot_rows(call: MoeCall) -> int:
    """The most rows one rank sends another: each token to at most min(local experts, K) of its experts."""
    shape = call.shape
    return shape.bs * min(shape.local_experts, shape.k)


def header_entries(call: MoeCall) -> int:
    """A slot's status entries: one count per local expert, the header's flag, the flag after the data."""
    return call.shape.local_experts + 2


def area(call: MoeCall, rank: int, which: str) -> Area:
    """Rank ``rank``'s staging (``out``) or receiving (``in``) window: a slot per peer rank."""
    ep = call.shape.ep_world_size
    return call.group.area(rank, f"a2 {kind_of(call)} {which}", ep * slot_rows(call) * row_bytes(call), ep * header_entries(call) * STATUS_BYTES)


def slot_address(call: MoeCall, rank: int, which: str, peer: int, row: int) -> GmAddress:
    return window_address(area(call, rank, which), call.epoch, (peer * slot_rows(call) + row) * row_bytes(call))


def header_entry(call: MoeCall, peer: int, index: int) -> int:
    return peer * header_entries(call) + index


def _block(src: GmAddress, dst: GmAddress, nbytes: int) -> GmBlock:
    assert isinstance(src.offset, int) and isinstance(dst.offset, int)  # window addresses are known on the host
    return GmBlock(src.allocation, src.offset, dst.allocation, dst.offset, nbytes)


def _write_to(call: MoeCall, peer: int, rows: int, data_bytes: int) -> RdmaWrite:
    """This rank's slot for ``peer``: its rows, then its header, then the flag after the data."""
    rank, entries = call.shape.ep_rank_id, header_entries(call)
    src, dst = area(call, rank, "out"), area(call, peer, "in")
    data = (_block(slot_address(call, rank, "out", peer, 0), slot_address(call, peer, "in", rank, 0), rows * data_bytes),) if rows else ()
    header = _block(status_address(src, header_entry(call, peer, 0)), status_address(dst, header_entry(call, rank, 0)),
                    (entries - 1) * STATUS_BYTES)
    flag = _block(status_address(src, header_entry(call, peer, entries - 1)), status_address(dst, header_entry(call, rank, entries - 1)),
                  STATUS_BYTES)
    return RdmaWrite(peer, data, (header, flag))


# -- dispatch -------------------------------------------------------------------------------------


def dispatch_steps(call: MoeCall) -> Iterator:
    shape = call.shape
    yield AwaitGroup(call.group)
    plan = sender_plan(call)
    ep, local, rank = shape.ep_world_size, shape.local_experts, shape.ep_rank_id
    to_rank = np.bincount(plan.rank, minlength=ep)
    yield Run((reorder_kernel(call, plan),))
    writes = [_write_to(call, peer, int(to_rank[peer]), row_bytes(call)) for peer in range(ep) if peer != rank]
    yield Detached(lambda: batch_write(call.system, call.die, writes, call.op))
    yield Run((wait_kernel(call, int(to_rank[rank])),))
    # the counts as the cores read them from the headers (control memory): rows from each sender, per local expert
    words = read_status(area(call, rank, "in"), 0, ep * header_entries(call)).reshape(ep, header_entries(call), 2)
    yield Run((copy_out_kernel(call, words[:, :local, 1].astype(np.int64)),))


def reorder_kernel(call: MoeCall, plan: SendPlan):
    shape, problem = call.shape, call.problem
    kernel = call.kernel("reorder")
    t = call.tensors
    cores, rank, ep, local = call.plan.cores, shape.ep_rank_id, shape.ep_world_size, shape.local_experts
    n_ids = shape.bs * shape.k
    pairs = len(plan.token)
    width = row_bytes(call)
    out_bytes = shape.h * problem.out_dtype.itemsize
    token_bytes = shape.h * problem.x_dtype.itemsize
    quant = problem.quant_mode == 2
    offset = np.zeros(shape.moe_expert_num, np.int64)  # an expert's first row in its rank's slot
    for r in range(ep):
        experts = slice(r * local, (r + 1) * local)
        offset[experts] = np.concatenate(([0], np.cumsum(plan.expert_counts[experts])[:-1]))
    slot_row = offset[plan.expert] + plan.position
    barrier = kernel.barrier()
    for core in range(cores):
        p = kernel.vector_core(core)
        ids = p.alloc(n_ids, I32)
        p.copy(ids, gm_at(t["expert_ids"], 0), n_ids * 4, name="load expert_ids")
        p.set_flag("MTE2", "SCALAR", 0)
        p.wait_flag("MTE2", "SCALAR", 0)
        p.scalar(n_ids * SCALAR_PER_PAIR + shape.moe_expert_num * SCALAR_PER_EXPERT, name="index sort")
        if core == cores - 1:
            _store_headers(call, p, plan, n_ids)
        mine = split_to_cores(pairs, cores, core)
        if mine:
            quantizer = Quantizer(p, shape.h, problem.smooth_scales) if quant else None
            xin = [p.alloc(shape.h, problem.x_dtype) for _ in range(2)]
            rows = [p.alloc(width, np.uint8) for _ in range(2)]
            flags = Flags(p)
            for i, item in enumerate(mine):
                b = i % 2
                token, expert = int(plan.token[item]), int(plan.expert[item])
                destination = slot_address(call, rank, "out", int(plan.rank[item]), int(slot_row[item]))
                if quantizer is not None:
                    flags.wait("VECTOR", "MTE2", b)
                    p.copy(xin[b], gm_at(t["x"], token * shape.h), token_bytes, name="load token")
                    if quantizer.smooth is not None:
                        flags.wait("VECTOR", "MTE2", 2)
                        p.copy(quantizer.smooth[0 : shape.h], gm_at(t["scales"], expert * shape.h), shape.h * 4, name="load smooth scales")
                        flags.set("MTE2", "VECTOR", 2)
                    flags.set("MTE2", "VECTOR", b)
                    flags.wait("MTE2", "VECTOR", b)
                    quantizer.quantize(xin[b], flags, b, rows[b], rows[b][out_bytes : out_bytes + 4].reinterpret(F32),
                                       lambda b=b, flags=flags: flags.wait("MTE3", "VECTOR", b))
                    flags.set("VECTOR", "MTE3", b)
                    flags.wait("VECTOR", "MTE3", b)
                    p.copy(destination, rows[b], width, name="stage row")
                    flags.set("MTE3", "VECTOR", b)
                else:
                    flags.wait("MTE3", "MTE2", b)
                    p.copy(rows[b][0:token_bytes], gm_at(t["x"], token * shape.h), token_bytes, name="load token")
                    flags.set("MTE2", "MTE3", b)
                    flags.wait("MTE2", "MTE3", b)
                    p.copy(destination, rows[b], width, name="stage row")
                    flags.set("MTE3", "MTE2", b)
            flags.drain()
        items = split_to_cores(ep, cores, core)
        if items:  # ConstructBatchWriteInfo: this core's share of the items, into the workspace
            info = p.alloc(len(items) * BATCH_ITEM_BYTES // 4, I32)
            p.scalar(len(items) * SCALAR_PER_ITEM, name="batch items")
            p.set_flag("SCALAR", "MTE3", 0)
            p.wait_flag("SCALAR", "MTE3", 0)
            p.copy(window_address(workspace(call), call.epoch, items.start * BATCH_ITEM_BYTES), info, len(items) * BATCH_ITEM_BYTES,
                   name="batch items")
        p.pipe_barrier("ALL")
        p.sync_all(barrier)
    return kernel


def workspace(call: MoeCall) -> Area:
    """The rank's BatchWrite item area (local GM the AICPU reads)."""
    return call.group.area(call.shape.ep_rank_id, f"a2 {kind_of(call)} batch", call.shape.ep_world_size * BATCH_ITEM_BYTES, 0)


def _store_headers(call: MoeCall, p, plan: SendPlan, n_ids: int) -> None:
    """The last core: ``expand_idx`` (each pair's position), each destination's header and the
    flag after its data, in the staging window (the own rank's straight into its receiving one)."""
    shape = call.shape
    ep, local, rank, entries = shape.ep_world_size, shape.local_experts, shape.ep_rank_id, header_entries(call)
    positions = np.zeros(n_ids, np.int32)
    positions[plan.token * shape.k + plan.k] = plan.position
    index = p.alloc(n_ids, I32)
    p.write_scalars(index, positions, name="expand_idx")
    words = np.zeros((ep, entries, ENTRY_WORDS), np.int32)
    words[:, :, 0] = call.epoch
    words[:, :local, 1] = plan.expert_counts.reshape(ep, local)
    words[:, local, 1] = words[:, :local, 1].sum(axis=1)
    header = p.alloc(ep * entries * ENTRY_WORDS, I32)
    p.write_scalars(header, words.reshape(-1), control=True, name="headers")
    p.set_flag("SCALAR", "MTE3", 1)
    p.wait_flag("SCALAR", "MTE3", 1)
    assist = "expand_idx" if call.problem.version == 1 else "assist_info_for_combine"
    p.copy(gm_at(call.tensors[assist], 0), index, n_ids * 4, name="expand_idx")
    out, own = area(call, rank, "out"), area(call, rank, "in")
    for peer in range(ep):
        target, slot = (own, header_entry(call, rank, 0)) if peer == rank else (out, header_entry(call, peer, 0))
        first = peer * entries * ENTRY_WORDS
        p.copy(status_address(target, slot), header[first : first + (entries - 1) * ENTRY_WORDS], (entries - 1) * STATUS_BYTES,
               name="header", control=True)
        if peer != rank:  # the own rank's flag is set once its rows are copied
            flag = header[first + (entries - 1) * ENTRY_WORDS : first + entries * ENTRY_WORDS]
            p.copy(status_address(out, slot + entries - 1), flag, STATUS_BYTES, name="data flag", control=True)


def wait_kernel(call: MoeCall, own_rows: int):
    """The own rank's rows copied locally (last core), then each core's waits for its source ranks'
    headers and data; SyncAll."""
    shape = call.shape
    kernel = call.kernel("wait")
    cores, rank, ep, local = call.plan.cores, shape.ep_rank_id, shape.ep_world_size, shape.local_experts
    width = row_bytes(call)
    entries = header_entries(call)
    own = area(call, rank, "in")
    arrived = kernel.barrier()
    for core in range(cores):
        p = kernel.vector_core(core)
        buffers = [p.alloc(width, np.uint8) for _ in range(2)]
        flags = Flags(p)
        if core == cores - 1:  # the own rank's part: staging -> receiving window, then its flag
            for j in range(own_rows):
                b = j % 2
                flags.wait("MTE3", "MTE2", b)
                p.copy(buffers[b], slot_address(call, rank, "out", rank, j), width, name="load own row")
                flags.set("MTE2", "MTE3", b)
                flags.wait("MTE2", "MTE3", b)
                p.copy(slot_address(call, rank, "in", rank, j), buffers[b], width, name="own row")
                flags.set("MTE3", "MTE2", b)
            flags.drain()
            flag = p.alloc(ENTRY_WORDS, I32)
            p.write_scalars(flag, [call.epoch], control=True, name="own flag")
            p.set_flag("SCALAR", "MTE3", 0)
            p.wait_flag("SCALAR", "MTE3", 0)
            p.copy(status_address(own, header_entry(call, rank, entries - 1)), flag, STATUS_BYTES, name="own data flag", control=True)
        senders = split_to_cores(ep, cores, core)
        for sender in senders:
            wait_for(p, own, header_entry(call, sender, local), 1, call.epoch, name="wait header",
                     waiting_for=f"rank {sender}'s header (dispatch {call.epoch} of group {shape.group_ep!r})")
            p.scalar(local, name="sum counts")
            wait_for(p, own, header_entry(call, sender, entries - 1), 1, call.epoch, name="wait data",
                     waiting_for=f"rank {sender}'s rows (dispatch {call.epoch} of group {shape.group_ep!r})")
        p.sync_all(arrived)
    return kernel


def copy_out_kernel(call: MoeCall, counts: np.ndarray):
    """The counts' prefix sums and each core's source ranks' rows into the outputs (``counts``: rows
    from each sender per local expert, as the headers hold them); SyncAll; the headers cleared."""
    shape, problem = call.shape, call.problem
    kernel = call.kernel("copy out")
    t = call.tensors
    cores, rank, ep, local = call.plan.cores, shape.ep_rank_id, shape.ep_world_size, shape.local_experts
    width = row_bytes(call)
    out_bytes = shape.h * problem.out_dtype.itemsize
    own = area(call, rank, "in")
    starts = np.concatenate(([0], np.cumsum(counts.T.reshape(-1))[:-1])).reshape(local, ep)  # block (expert, sender)'s first row
    prefix = np.cumsum(counts.T.reshape(-1))
    copied = kernel.barrier()
    for core in range(cores):
        p = kernel.vector_core(core)
        buffers = [p.alloc(width, np.uint8) for _ in range(2)]
        flags = Flags(p)
        senders = split_to_cores(ep, cores, core)
        # GetStatusCumSum: every header in, the prefix sums over (expert, sender)
        headers = p.alloc(ep * local * ENTRY_WORDS, I32)
        p.copy(headers, status_address(own, 0), burst_count=ep, burst_bytes=local * STATUS_BYTES, src_gap=2 * STATUS_BYTES,
               name="load headers")
        p.set_flag("MTE2", "VECTOR", 0)
        p.wait_flag("MTE2", "VECTOR", 0)
        p.vector_time([("add", local, I32)] * (ep - 1) + [("copy", ep * local, I32), ("add", ep, I32)] * local, "counts prefix sums")
        p.set_flag("VECTOR", "SCALAR", 0)
        p.wait_flag("VECTOR", "SCALAR", 0)
        if core == cores - 1:
            per_expert = counts.sum(axis=0)
            tokens = p.alloc(local, I64)
            p.write_scalars(tokens, np.cumsum(per_expert) if problem.expert_token_nums_type == 0 else per_expert, control=True,
                            name="expert_token_nums")
            received = p.alloc(ep * local, I32)
            p.write_scalars(received, prefix, control=True, name="ep_recv_counts")
            p.set_flag("SCALAR", "MTE3", 0)
            p.wait_flag("SCALAR", "MTE3", 0)
            p.copy(gm_at(t["expert_token_nums"], 0), tokens, local * 8, name="expert_token_nums", control=True)
            p.copy(gm_at(t["ep_recv_counts"], 0), received, ep * local * 4, name="ep_recv_counts", control=True)
        scales = p.alloc(max(1, int(counts.max(initial=0))), F32) if problem.quant_mode == 2 else None
        for sender in senders:
            row = 0
            for j in range(local):
                n, first = int(counts[sender, j]), int(starts[j, sender])
                for i in range(n):
                    b = i % 2
                    flags.wait("MTE3", "MTE2", b)
                    flags.wait("VECTOR", "MTE2", b)
                    p.copy(buffers[b], slot_address(call, rank, "in", sender, row + i), width, name="load row")
                    flags.set("MTE2", "MTE3", b)
                    flags.wait("MTE2", "MTE3", b)
                    if scales is not None:  # the scalar unit moves the row's scale aside (GetValue / SetValue)
                        p.set_flag("MTE2", "VECTOR", b)
                        p.wait_flag("MTE2", "VECTOR", b)
                        p.adds(scales[i : i + 1], buffers[b][out_bytes : out_bytes + 4].reinterpret(F32), 0.0, name="scale aside")
                        flags.set("VECTOR", "MTE2", b)
                    p.copy(gm_at(t["expand_x"], (first + i) * shape.h), buffers[b][0:out_bytes], out_bytes, name="expand_x row")
                    flags.set("MTE3", "MTE2", b)
                flags.drain()
                if scales is not None and n:
                    p.pipe_barrier("ALL")
                    p.copy(gm_at(t["dynamic_scales"], first), scales[0:n], n * 4, name="dynamic_scales")
                    p.pipe_barrier("ALL")
                row += n
        p.pipe_barrier("ALL")
        p.sync_all(copied)
        if core == 0:
            _clear_headers(call, p)
    return kernel


def _clear_headers(call: MoeCall, p) -> None:
    """The first core zeroes the receiving window's headers for the next call, as the kernel does:
    a vector fill and one strided store. The flags here carry the call's epoch, so nothing needs
    them zeroed; the store goes to a scratch area of the same shape (the time is the kernel's)."""
    ep, entries = call.shape.ep_world_size, header_entries(call)
    clear = p.alloc(ep * (entries - 1) * ENTRY_WORDS, I32)
    p.dup(clear, 0, name="clear headers")
    p.set_flag("VECTOR", "MTE3", 0)
    p.wait_flag("VECTOR", "MTE3", 0)
    scratch = call.group.area(call.shape.ep_rank_id, f"a2 {kind_of(call)} cleared", ep * entries * STATUS_BYTES, 0)
    p.copy(window_address(scratch, call.epoch, 0), clear, burst_count=ep, burst_bytes=(entries - 1) * STATUS_BYTES, dst_gap=STATUS_BYTES,
           name="clear headers")


# -- combine --------------------------------------------------------------------------------------


def combine_steps(call: MoeCall) -> Iterator:
    shape = call.shape
    yield AwaitGroup(call.group)
    ep, local, rank = shape.ep_world_size, shape.local_experts, shape.ep_rank_id
    counts = np.zeros((local, ep), np.int64)  # rows this rank holds per (local expert, sender): what it sends back
    for sender in range(ep):
        other: SendPlan = call.group.notes[(sender, call.epoch)]
        counts[:, sender] = np.bincount(other.local[other.rank == rank], minlength=local)
    plan: SendPlan = call.group.notes[(rank, call.epoch)]
    yield Run((send_back_kernel(call, counts),))
    writes = [_write_to(call, peer, int(counts[:, peer].sum()), row_bytes(call)) for peer in range(ep) if peer != rank]
    yield Detached(lambda: batch_write(call.system, call.die, writes, call.op))
    yield Run((sum_kernel(call, plan),))


def send_back_kernel(call: MoeCall, counts: np.ndarray):
    """Each core's share of the destination ranks: their rows, expert by expert, into the staging
    slots, the flag after them and the batch items; SyncAll; this rank's own part copied locally."""
    shape = call.shape
    kernel = call.kernel("send back")
    t = call.tensors
    cores, rank, ep, local = call.plan.cores, shape.ep_rank_id, shape.ep_world_size, shape.local_experts
    width = row_bytes(call)
    entries = header_entries(call)
    starts = np.concatenate(([0], np.cumsum(counts.reshape(-1))[:-1])).reshape(local, ep)
    out, own = area(call, rank, "out"), area(call, rank, "in")
    barrier = kernel.barrier()
    for core in range(cores):
        p = kernel.vector_core(core)
        ranks = split_to_cores(ep, cores, core)
        if not ranks:
            p.sync_all(barrier)
            continue
        sent = p.alloc(-(-shape.moe_expert_num // 8) * 8, I32)
        p.copy(sent, gm_at(t["ep_send_counts"], 0), shape.moe_expert_num * 4, name="load ep_send_counts")
        p.set_flag("MTE2", "SCALAR", 0)
        p.wait_flag("MTE2", "SCALAR", 0)
        buffers = [p.alloc(width, np.uint8) for _ in range(2)]
        flags = Flags(p)
        words = np.zeros((len(ranks), entries, ENTRY_WORDS), np.int32)
        words[:, :, 0] = call.epoch
        header = p.alloc(words.size, I32)
        p.write_scalars(header, words.reshape(-1), control=True, name="flags")
        n = 0
        for i, dst in enumerate(ranks):
            p.scalar(local * SCALAR_PER_EXPERT, name="rows of rank")
            row = 0
            for j in range(local):
                for r in range(int(counts[j, dst])):
                    b = n % 2
                    n += 1
                    flags.wait("MTE3", "MTE2", b)
                    p.copy(buffers[b], gm_at(t["expand_x"], (int(starts[j, dst]) + r) * shape.h), width, name="load expert output")
                    flags.set("MTE2", "MTE3", b)
                    flags.wait("MTE2", "MTE3", b)
                    p.copy(slot_address(call, rank, "out", dst, row), buffers[b], width, name="stage row")
                    flags.set("MTE3", "MTE2", b)
                    row += 1
            flags.drain()
            first = i * entries * ENTRY_WORDS
            p.set_flag("SCALAR", "MTE3", 1)
            p.wait_flag("SCALAR", "MTE3", 1)
            target = own if dst == rank else out
            slot = header_entry(call, rank if dst == rank else dst, entries - 1)
            if dst != rank:
                p.copy(status_address(target, slot), header[first + (entries - 1) * ENTRY_WORDS : first + entries * ENTRY_WORDS],
                       STATUS_BYTES, name="data flag", control=True)
        info = p.alloc(len(ranks) * BATCH_ITEM_BYTES // 4, I32)
        p.scalar(len(ranks) * SCALAR_PER_ITEM, name="batch items")
        p.set_flag("SCALAR", "MTE3", 0)
        p.wait_flag("SCALAR", "MTE3", 0)
        p.copy(window_address(workspace(call), call.epoch, ranks.start * BATCH_ITEM_BYTES), info, len(ranks) * BATCH_ITEM_BYTES,
               name="batch items")
        p.pipe_barrier("ALL")
        p.sync_all(barrier)
        if rank in ranks:  # this rank's own part: staging -> receiving window, then its flag
            for r in range(int(counts[:, rank].sum())):
                b = r % 2
                flags.wait("MTE3", "MTE2", b)
                p.copy(buffers[b], slot_address(call, rank, "out", rank, r), width, name="load own row")
                flags.set("MTE2", "MTE3", b)
                flags.wait("MTE2", "MTE3", b)
                p.copy(slot_address(call, rank, "in", rank, r), buffers[b], width, name="own row")
                flags.set("MTE3", "MTE2", b)
            flags.drain()
            i = rank - ranks.start
            first = i * entries * ENTRY_WORDS
            p.copy(status_address(own, header_entry(call, rank, entries - 1)),
                   header[first + (entries - 1) * ENTRY_WORDS : first + entries * ENTRY_WORDS], STATUS_BYTES, name="own data flag",
                   control=True)
    return kernel


def sum_kernel(call: MoeCall, plan: SendPlan):
    """Preload (the per-expert counts across the cores, atomic adds in GM), the waits for every
    rank's rows, then each core's tokens summed in float32 (see the module docstring)."""
    shape, problem = call.shape, call.problem
    kernel = call.kernel("sum")
    t = call.tensors
    cores, rank, ep, local = call.plan.cores, shape.ep_rank_id, shape.ep_world_size, shape.local_experts
    h, k_max = shape.h, shape.k
    itemsize = problem.dtype.itemsize
    entries = header_entries(call)
    own = area(call, rank, "in")
    n_ids, experts = shape.bs * k_max, shape.moe_expert_num
    offset = np.zeros(experts, np.int64)
    for r in range(ep):
        block = slice(r * local, (r + 1) * local)
        offset[block] = np.concatenate(([0], np.cumsum(plan.expert_counts[block])[:-1]))
    slot = {(int(t_), int(k_)): (int(r), int(offset[e] + pos)) for t_, k_, e, r, pos in zip(plan.token, plan.k, plan.expert, plan.rank, plan.position)}
    counts_gm = call.group.area(rank, "a2 combine counts", experts * 4, 0)
    zeroed, added, placed, arrived = (kernel.barrier() for _ in range(4))
    for core in range(cores):
        p = kernel.vector_core(core)
        ids = p.alloc(n_ids, I32)
        p.copy(ids, gm_at(t["expert_ids"], 0), n_ids * 4, name="load expert_ids")
        counts = p.alloc(-(-experts // 8) * 8, I32)
        p.dup(counts, 0, name="zero counts")
        p.set_flag("VECTOR", "MTE3", 0)
        p.wait_flag("VECTOR", "MTE3", 0)
        if core == cores - 1:
            p.copy(window_address(counts_gm, call.epoch, 0), counts[0:experts], experts * 4, name="zero expert counts")
        p.pipe_barrier("ALL")
        p.sync_all(zeroed)
        pairs = split_to_cores(n_ids, cores, core)
        p.scalar(len(pairs) * 3, name="count pairs")
        p.set_flag("SCALAR", "MTE3", 0)
        p.wait_flag("SCALAR", "MTE3", 0)
        p.copy(window_address(counts_gm, call.epoch, 0), counts[0:experts], experts * 4, name="add expert counts", atomic="add")
        p.pipe_barrier("ALL")
        p.sync_all(added)
        p.copy(counts[0:experts], window_address(counts_gm, call.epoch, 0), experts * 4, name="load expert counts")
        p.set_flag("MTE2", "SCALAR", 0)
        p.wait_flag("MTE2", "SCALAR", 0)
        p.scalar(len(split_to_cores(ep, cores, core)) * local * SCALAR_PER_EXPERT, name="expert offsets")
        p.pipe_barrier("ALL")
        p.sync_all(placed)
        for sender in split_to_cores(ep, cores, core):
            wait_for(p, own, header_entry(call, sender, entries - 1), 1, call.epoch, name="wait rows",
                     waiting_for=f"rank {sender}'s rows back (combine {call.epoch} of group {shape.group_ep!r})")
        p.sync_all(arrived)
        tokens = [int(plan.active[i]) for i in split_to_cores(len(plan.active), cores, core)]
        if not tokens:
            continue
        scales = p.alloc(n_ids, F32)
        index = p.alloc(n_ids, I32)
        p.copy(index, gm_at(t["expand_idx" if problem.version == 1 else "assist_info_for_combine"], 0), n_ids * 4, name="load expand_idx")
        p.copy(scales, gm_at(t["expert_scales"], 0), n_ids * 4, name="load expert_scales")
        p.set_flag("MTE2", "SCALAR", 1)
        p.wait_flag("MTE2", "SCALAR", 1)
        total, value = p.alloc(h, F32), p.alloc(h, F32)
        row, out = p.alloc(h, problem.dtype), p.alloc(h, problem.dtype)
        for token in tokens:
            p.dup(total, 0.0, name="sum = 0")
            for k in range(k_max):
                if (token, k) not in slot:
                    continue
                source, position = slot[(token, k)]
                weight = p.read_scalar(scales, token * k_max + k, name="read weight")
                p.scalar(4, name="row address")
                p.set_flag("VECTOR", "MTE2", 0)
                p.wait_flag("VECTOR", "MTE2", 0)
                p.copy(row, slot_address(call, rank, "in", source, position), h * itemsize, name="load returned row")
                p.set_flag("MTE2", "VECTOR", 0)
                p.wait_flag("MTE2", "VECTOR", 0)
                p.cast(value, row, name="cast f32")
                p.muls(value, value, weight, name="times weight")
                p.add(total, total, value, name="accumulate")
            p.set_flag("MTE3", "VECTOR", 0)
            p.wait_flag("MTE3", "VECTOR", 0)
            p.cast(out, total, name="cast out")
            p.set_flag("VECTOR", "MTE3", 0)
            p.wait_flag("VECTOR", "MTE3", 0)
            p.copy(gm_at(t["out"], token * h), out, h * itemsize, name="store token")
    return kernel
