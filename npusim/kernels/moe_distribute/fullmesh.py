"""``comm_alg`` "fullmesh_v1" (A3's default, and the first op pair's A3 kernels): every AIV core of
a rank writes its tokens straight into the windows of the ranks hosting their experts, with MTE3
stores over the UB fabric, as hicann/ops-transformer ``moe_distribute_dispatch_v2.h`` and
``moe_distribute_combine_v2.h`` (c29bc10) do.

Dispatch, three phases with a SyncAll of the cores between them:

1. *send*: the valid (token, k) pairs split over the cores (``SplitToCore``), the last cores
   sending each active token to its shared experts; per pair a core counts the earlier pairs of
   the same expert (vector compares over the expert ids: the row's position), loads the token
   (MTE2), quantises it (quant_mode 2), puts its scale and (rank, token, k) beside it and stores the
   row into the destination's window (MTE3), two rows in flight (double buffers); then it counts
   the pairs of each expert of its share of the status entries;
2. *counts*: each core stores the status entries (flag, count) of its share of the experts into
   the destinations' windows, then spins on its share of the entries it receives until every sender's
   has arrived (:func:`~npusim.kernels.comm.aiv.wait_for`);
3. *copy out*: each core copies the rows of its blocks from the window into ``expand_x``, the
   triples into ``assist_info_for_combine``, the scales into ``dynamic_scales``, and its share of
   ``ep_recv_counts``; the last core writes ``expert_token_nums``.

Combine, one phase: each core takes a share of the received rows and stores each back into the
window of the rank it came from (row ``token * (K + shared) + k``), then a status entry after it;
then each core takes a share of its rank's active tokens, spins until the token's rows have come
back, and sums them in float32 weighted by ``expert_scales`` (copy and constant experts from
``ori_x``, shared experts and ``shared_expert_x`` unweighted), cast to the output dtype.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from npusim.kernels.comm.aiv import read_status, signal, split_to_cores, status_address, status_buffer, wait_for, window_address
from npusim.kernels.comm.group import Area
from npusim.kernels.flags import Flags
from npusim.kernels.moe_distribute import layout
from npusim.kernels.moe_distribute.checks import F32, I32, I64, TRIPLE
from npusim.kernels.moe_distribute.kernel import CountCalc, MoeCall, gm_at, sender_plan
from npusim.kernels.moe_distribute.routing import ReceivePlan, SendPlan, receive_plan, send_plan, synthetic_expert_ids
from npusim.kernels.op import AwaitGroup, Run
from npusim.kernels.quantize.dynamic import Quantizer

# -- the windows --------------------------------------------------------------------------------


def dispatch_area(call: MoeCall, rank: int) -> Area:
    shape = call.shape
    half, status = layout.dispatch_area_bytes(shape, dispatch_row(call), rank)
    return call.group.area(rank, "dispatch", half, status)


def dispatch_row(call: MoeCall) -> layout.RowLayout:
    problem = call.problem
    if call.shape.comm_alg == "hierarchy":
        return layout.hierarchy_row(call.shape, problem.out_dtype.itemsize)
    return layout.dispatch_row(call.shape, problem.out_dtype.itemsize, problem.version, problem.quant_mode == 2)


def combine_area(call: MoeCall, rank: int, itemsize: int) -> Area:
    half, status = layout.combine_area_bytes(call.shape, itemsize)
    return call.group.area(rank, "combine", half, status)


# -- dispatch -----------------------------------------------------------------------------------


def dispatch_steps(call: MoeCall) -> Iterator:
    """The steps of a fullmesh_v1 dispatch (see the module docstring)."""
    shape = call.shape
    yield AwaitGroup(call.group)
    plan = sender_plan(call)
    yield Run((send_kernel(call, plan),))
    yield Run((counts_kernel(call, plan),))
    own = dispatch_area(call, shape.ep_rank_id)
    counts = read_status(own, 0, layout.dispatch_blocks(shape, shape.ep_rank_id))[:, 1]
    yield Run((copy_out_kernel(call, receive_plan(counts)),))


def _shared_cores(call: MoeCall) -> int:
    """Cores that send to the shared experts (the last ones): cores x shared / (K + shared), at least 1."""
    shape = call.shape
    if not shape.shared_experts:
        return 0
    return max(1, call.plan.cores * shape.shared_experts // (shape.k + shape.shared_experts))


def send_kernel(call: MoeCall, plan: SendPlan):
    shape, problem = call.shape, call.problem
    kernel = call.kernel("send")
    row = dispatch_row(call)
    cores = call.plan.cores
    shared_cores = _shared_cores(call)
    moe_cores = cores - shared_cores
    x, ids_tensor, scales = call.tensors["x"], call.tensors["expert_ids"], call.tensors.get("scales")
    rank = shape.ep_rank_id
    n_ids = shape.bs * shape.k
    barrier = kernel.barrier()
    for core in range(cores):
        shared = core >= moe_cores
        work = (split_to_cores(len(plan.active) * shape.shared_experts, shared_cores, core - moe_cores) if shared
                else split_to_cores(plan.pairs, moe_cores, core))
        statuses = split_to_cores(shape.shared_expert_rank_num + shape.moe_expert_num, cores, core)
        p = kernel.vector_core(core)
        if not work and not statuses:
            p.sync_all(barrier)
            continue
        ids = p.alloc(n_ids, I32)
        quant = Quantizer(p, shape.h, problem.smooth_scales) if problem.quant_mode == 2 else None
        count = CountCalc(p, p.alloc(8, I32))
        xin = [p.alloc(shape.h, problem.x_dtype) for _ in range(2)] if quant is not None else []
        rows = [p.alloc(row.row_bytes, np.uint8) for _ in range(2)]
        p.copy(ids, gm_at(ids_tensor, 0), n_ids * 4, name="load expert_ids")
        p.set_flag("MTE2", "SCALAR", 0)
        p.wait_flag("MTE2", "SCALAR", 0)
        flags = Flags(p)
        positions = p.alloc(len(work), I32) if problem.version == 1 and work and not shared else None
        token_bytes = shape.h * problem.x_dtype.itemsize
        for i, item in enumerate(work):
            b = i % 2
            if shared:
                token, j = int(plan.active[item % len(plan.active)]), item // len(plan.active)
                target, k, local, position, scales_row = plan.shared_rank[j], shape.k + j, 0, item % len(plan.active), j
            else:
                token, k = int(plan.token[item]), int(plan.k[item])
                target, local, position = int(plan.rank[item]), int(plan.local[item]), int(plan.position[item])
                scales_row = int(plan.expert[item]) + shape.shared_experts
                count(item)
            destination = window_address(dispatch_area(call, target), call.epoch,
                                         layout.dispatch_row_offset(shape, row, target, rank, local, position))
            out = rows[b]
            if quant is not None:
                flags.wait("VECTOR", "MTE2", b)
                p.copy(xin[b], gm_at(x, token * shape.h), token_bytes, name="load token")
                if quant.smooth is not None:
                    flags.wait("VECTOR", "MTE2", 2)
                    p.copy(quant.smooth[0 : shape.h], gm_at(scales, scales_row * shape.h), shape.h * 4, name="load smooth scales")
                    flags.set("MTE2", "VECTOR", 2)
                flags.set("MTE2", "VECTOR", b)
                flags.wait("MTE2", "VECTOR", b)
                quant.quantize(xin[b], flags, b, out, out[row.scale_offset : row.scale_offset + 4].reinterpret(F32),
                               lambda b=b, flags=flags: flags.wait("MTE3", "VECTOR", b))
            else:  # the token is loaded into the row buffer that goes out
                flags.wait("MTE3", "MTE2", b)
                p.copy(out[0:token_bytes], gm_at(x, token * shape.h), token_bytes, name="load token")
                flags.set("MTE2", "VECTOR", b)
                flags.wait("MTE2", "VECTOR", b)
            if row.triple_offset is not None:
                triple = out[row.triple_offset : row.triple_offset + TRIPLE * 4].reinterpret(I32)
                for w, value in enumerate((rank, token, k)):
                    p.dup(triple[w : w + 1], value, name="fill triple")
            if positions is not None:  # expand_idx: the pair's position, kept by the scalar unit
                p.write_scalar(positions, position, i)
            flags.set("VECTOR", "MTE3", b)
            flags.wait("VECTOR", "MTE3", b)
            p.copy(destination, out, row.row_bytes, name="put row")
            flags.set("MTE3", "VECTOR" if quant is not None else "MTE2", b)
        if positions is not None:
            p.copy(gm_at(call.tensors["expand_idx"], work.start), positions, 4 * len(work), name="expand_idx")
        for expert in statuses:
            if expert >= shape.shared_expert_rank_num:
                count(n_ids)
        flags.drain()
        p.pipe_barrier("ALL")
        p.sync_all(barrier)
    return kernel


def counts_kernel(call: MoeCall, plan: SendPlan):
    """Phase 2: the status entries out, then the wait for the entries in."""
    shape = call.shape
    kernel = call.kernel("counts")
    cores, rank = call.plan.cores, shape.ep_rank_id
    received = layout.dispatch_blocks(shape, rank)
    shared_ranks, local = shape.shared_expert_rank_num, shape.local_experts
    barrier = kernel.barrier()
    for core in range(cores):
        statuses = split_to_cores(shared_ranks + shape.moe_expert_num, cores, core)
        entries = split_to_cores(received, cores, core)
        p = kernel.vector_core(core)
        if not statuses and not entries:
            p.sync_all(barrier)
            continue
        buffer = status_buffer(p, len(statuses))
        for slot, expert in enumerate(statuses):
            if expert < shared_ranks:  # a shared-expert rank: one entry per sender, the active tokens if it is this sender's replica
                target, entry = expert, layout.dispatch_entry(shape, rank, 0)
                count = len(plan.active) if expert % shape.ranks_per_shared_expert == rank % shape.ranks_per_shared_expert else 0
            else:
                moe_expert = expert - shared_ranks
                target, entry = shared_ranks + moe_expert // local, layout.dispatch_entry(shape, rank, moe_expert % local)
                count = int(plan.expert_counts[moe_expert])
            signal(p, buffer, slot, dispatch_area(call, target), entry, call.epoch, count, name="put count")
        wait_counts(call, p, core, entries)
        p.pipe_barrier("ALL")
        p.sync_all(barrier)
    return kernel


def wait_counts(call: MoeCall, p, core: int, entries: range) -> None:
    """A core's wait for its share of the status entries of its rank's dispatch area, then
    SyncCntOnCore: the sum of the counts it read, copied to every core's slot of the workspace."""
    shape = call.shape
    cores, rank = call.plan.cores, shape.ep_rank_id
    wait_for(p, dispatch_area(call, rank), entries.start, len(entries), call.epoch, name="wait counts",
             waiting_for=f"the counts of senders to rank {rank} of group {shape.group_ep!r} (dispatch {call.epoch})")
    shares = p.alloc(cores * 8, I32)
    p.vector_time([("reduce_sum", max(1, len(entries)), I32), ("dup", cores * 8, I32)], "sum counts")
    p.set_flag("VECTOR", "MTE3", 0)
    p.wait_flag("VECTOR", "MTE3", 0)
    p.copy(window_address(workspace(call), call.epoch, core * WORKSPACE_SLOT), shares[0:8], burst_count=cores, burst_bytes=32,
           dst_gap=cores * WORKSPACE_SLOT - 32, name="counts to workspace")


WORKSPACE_SLOT = 512
"""Bytes between two cores' entries in the dispatch's count workspace (``WORKSPACE_ELEMENT_OFFSET`` int32 apart)."""


def workspace(call: MoeCall) -> Area:
    """The rank's workspace of per-core count sums (local GM): a slot per (reader, writer) core."""
    cores = call.plan.cores
    return call.group.area(call.shape.ep_rank_id, "workspace", cores * cores * WORKSPACE_SLOT, 0)


def copy_out_kernel(call: MoeCall, received: ReceivePlan):
    """Phase 3: the received rows from the window into the outputs, block by block."""
    shape, problem = call.shape, call.problem
    kernel = call.kernel("copy out")
    row = dispatch_row(call)
    cores, rank, ep = call.plan.cores, shape.ep_rank_id, shape.ep_world_size
    own = dispatch_area(call, rank)
    blocks = layout.dispatch_blocks(shape, rank)
    t = call.tensors
    quant = problem.quant_mode == 2
    prefix = np.cumsum(received.counts)
    working = [core for core in range(cores) if split_to_cores(blocks, cores, core)]
    for core in working:
        mine = split_to_cores(blocks, cores, core)
        p = kernel.vector_core(core)
        # GetCumSum: the counts of the cores before this one, from the workspace
        sums = p.alloc(max(core, 1) * 8, I32)
        if core:
            p.copy(sums, window_address(workspace(call), call.epoch, core * cores * WORKSPACE_SLOT), burst_count=core, burst_bytes=32,
                   src_gap=WORKSPACE_SLOT - 32, name="load core sums")
            p.set_flag("MTE2", "VECTOR", 0)
            p.wait_flag("MTE2", "VECTOR", 0)
            p.vector_time([("copy", core * 8, I32), ("add", core, I32)], "sum earlier cores")
            p.set_flag("VECTOR", "SCALAR", 0)
            p.wait_flag("VECTOR", "SCALAR", 0)
            p.read_scalar(sums, 0, name="read first row")
        buffers = [p.alloc(row.row_bytes, np.uint8) for _ in range(2)]
        flags = Flags(p)
        n = 0
        for entry in mine:
            local, sender = divmod(entry, ep)
            first = int(received.starts[entry])
            for j in range(int(received.counts[entry])):
                b = n % 2
                n += 1
                flags.wait("MTE3", "MTE2", b)
                source = window_address(own, call.epoch, layout.dispatch_row_offset(shape, row, rank, sender, local, j))
                p.copy(buffers[b], source, row.row_bytes, name="load row")
                flags.set("MTE2", "MTE3", b)
                flags.wait("MTE2", "MTE3", b)
                out = first + j
                if row.triple_offset is not None:
                    p.copy(gm_at(t["assist_info_for_combine"], out * TRIPLE),
                           buffers[b][row.triple_offset : row.triple_offset + TRIPLE * 4], TRIPLE * 4, name="assist triple")
                if quant:
                    p.copy(gm_at(t["dynamic_scales"], out), buffers[b][row.scale_offset : row.scale_offset + 4], 4, name="dynamic scale")
                if row.weight_offset is not None:
                    p.copy(gm_at(t["expand_scales"], out), buffers[b][row.weight_offset : row.weight_offset + 4], 4, name="expand scale")
                p.copy(gm_at(t["expand_x"], out * shape.h), buffers[b][0 : row.data_bytes], row.data_bytes, name="expand_x row")
                flags.set("MTE3", "MTE2", b)
        flags.drain()
        counts = p.alloc(len(mine), I32)
        for i, entry in enumerate(mine):
            p.write_scalar(counts, int(prefix[entry]), i, control=True)
        p.copy(gm_at(t["ep_recv_counts"], mine.start), counts, 4 * len(mine), name="ep_recv_counts", control=True)
        if core == working[-1]:
            experts = layout.hosted_experts(shape, rank)
            per_expert = received.counts.reshape(experts, -1).sum(axis=1)
            values = np.cumsum(per_expert) if problem.expert_token_nums_type == 0 else per_expert
            tokens = p.alloc(experts, I64)
            for i, value in enumerate(values):
                p.write_scalar(tokens, int(value), i, control=True)
            p.copy(gm_at(t["expert_token_nums"], 0), tokens, 8 * experts, name="expert_token_nums", control=True)
    return kernel


# -- combine ------------------------------------------------------------------------------------


def combine_steps(call: MoeCall) -> Iterator:
    """The steps of a fullmesh combine (see the module docstring): one kernel; the first op pair's
    (:func:`combine_v1_steps`) returns rows block by block, a flag per rank."""
    yield AwaitGroup(call.group)
    if call.problem.version == 1:
        yield from combine_v1_steps(call)
        return
    yield Run((combine_kernel(call),))


def returned_rows(call: MoeCall) -> np.ndarray:
    """(sender, token, k) of each row this rank received in the matching dispatch, in expand_x
    order: the assist entries as the device holds them, or, with data off, what the senders' send
    plans put where."""
    shape = call.shape
    counts = call.values("ep_send_counts")
    assist = call.values("assist_info_for_combine")
    if counts is not None and assist is not None:
        rows = int(counts[layout.dispatch_blocks(shape, shape.ep_rank_id) - 1])
        return assist[: rows * TRIPLE].reshape(rows, TRIPLE).astype(np.int64)
    return rows_sent_to(call, shape.ep_rank_id)


def rows_sent_to(call: MoeCall, rank: int) -> np.ndarray:
    """From the senders' send plans (kept by their dispatches): the (sender, token, k) rows rank
    ``rank`` received, block by block as it stored them."""
    shape = call.shape
    rows = []
    experts = layout.hosted_experts(shape, rank)
    for local in range(experts):
        for sender in range(shape.ep_world_size):
            plan: SendPlan = call.group.notes[(sender, call.epoch)]
            if rank < shape.shared_expert_rank_num:
                j = next((j for j, r in enumerate(plan.shared_rank) if r == rank), None)
                if j is not None:
                    rows += [(sender, int(token), shape.k + j) for token in plan.active]
                continue
            chosen = np.flatnonzero((plan.rank == rank) & (plan.local == local))
            chosen = chosen[np.argsort(plan.position[chosen], kind="stable")]
            rows += [(sender, int(plan.token[i]), int(plan.k[i])) for i in chosen]
    return np.array(rows, np.int64).reshape(-1, TRIPLE)


def combine_kernel(call: MoeCall):
    shape, problem = call.shape, call.problem
    kernel = call.kernel("combine")
    t = call.tensors
    cores, rank = call.plan.cores, shape.ep_rank_id
    itemsize, h = problem.dtype.itemsize, shape.h
    row_bytes = h * itemsize
    slots = layout.combine_slots(shape)
    stride = layout.combine_row_stride(shape, itemsize)
    rows = returned_rows(call)
    ids, mask = call.values("expert_ids"), call.values("x_active_mask")
    if ids is None:
        ids = synthetic_expert_ids(shape, call.epoch)
    plan = send_plan(shape, ids, mask)
    own = combine_area(call, rank, itemsize)
    expected = np.zeros((shape.bs, slots), bool)
    expected[plan.token, plan.k] = True
    expected[plan.active, shape.k:] = True
    for core in range(cores):
        sends = split_to_cores(len(rows), cores, core)
        tokens = split_to_cores(len(plan.active), cores, core)
        if not sends and not tokens:
            continue
        p = kernel.vector_core(core)
        flags = Flags(p)
        buffers = [p.alloc(h, problem.dtype) for _ in range(2)]
        if sends:
            triples = p.alloc(len(sends) * TRIPLE, I32)
            p.copy(triples, gm_at(t["assist_info_for_combine"], sends.start * TRIPLE), len(sends) * TRIPLE * 4, name="load assist")
            p.set_flag("MTE2", "SCALAR", 0)
            p.wait_flag("MTE2", "SCALAR", 0)
            status = status_buffer(p, len(sends))
            for loop in range(len(sends)):
                index = sends.start + (loop + rank) % len(sends)  # staggered: the cores of all ranks start at different peers
                sender, token, k = (int(v) for v in rows[index])
                b = loop % 2
                flags.wait("MTE3", "MTE2", b)
                p.copy(buffers[b], gm_at(t["expand_x"], index * h), row_bytes, name="load expert output")
                flags.set("MTE2", "MTE3", b)
                flags.wait("MTE2", "MTE3", b)
                slot = token * slots + k
                back = combine_area(call, sender, itemsize)
                p.copy(window_address(back, call.epoch, slot * stride), buffers[b], row_bytes, name="put row back")
                signal(p, status, loop, back, slot, call.epoch, name="put flag")
                flags.set("MTE3", "MTE2", b)
            flags.drain()
        if tokens:
            _sum_tokens(call, p, flags, buffers, [int(plan.active[i]) for i in tokens], ids, mask, expected, own)
    return kernel


def _sum_tokens(call: MoeCall, p, flags: Flags, buffers, tokens: list[int], ids: np.ndarray, mask, expected: np.ndarray,
                own: Area) -> None:
    """A core's share of the combine's sums (see the module docstring)."""
    shape, problem = call.shape, call.problem
    t = call.tensors
    h, itemsize, k_max = shape.h, problem.dtype.itemsize, shape.k
    slots = layout.combine_slots(shape)
    stride = layout.combine_row_stride(shape, itemsize)
    row_bytes = h * itemsize
    scales = p.alloc(shape.bs * k_max, F32)
    p.copy(scales, gm_at(t["expert_scales"], 0), shape.bs * k_max * 4, name="load expert_scales")
    p.set_flag("MTE2", "SCALAR", 0)
    p.wait_flag("MTE2", "SCALAR", 0)
    total = p.alloc(h, F32)
    value = p.alloc(h, F32)
    out = p.alloc(h, problem.dtype)
    const = [p.alloc(h, F32) for _ in range(2)] if shape.const_expert_num else []
    first_const = shape.moe_expert_num + shape.zero_expert_num + shape.copy_expert_num
    n = 0

    def load(source, name: str) -> int:
        """MTE2 a row into the next buffer; returns the buffer, its load waited for on the vector pipe."""
        nonlocal n
        b = n % 2
        n += 1
        flags.wait("VECTOR", "MTE2", b)
        p.copy(buffers[b], source, row_bytes, name=name)
        flags.set("MTE2", "VECTOR", b)
        flags.wait("MTE2", "VECTOR", b)
        return b

    def add_row(source, name: str, scale=None) -> None:
        b = load(source, name)
        p.cast(value, buffers[b], name="cast f32")
        flags.set("VECTOR", "MTE2", b)
        if scale is not None:
            p.muls(value, value, scale, name="times weight")
        p.add(total, total, value, name="accumulate")

    for token in tokens:
        need = int(expected[token].sum())
        p.poll(status_address(own, token * slots), slots, call.epoch, need=need, name="wait rows back",
               waiting_for=f"the {need} rows of token {token} coming back to rank {shape.ep_rank_id} (combine {call.epoch})")
        p.dup(total, 0.0, name="zero sum")
        for k in range(k_max):
            p.scalar(1, name="read expert id")
            expert = int(ids[token, k])
            if (mask is not None and mask.ndim == 2 and not mask[token, k]) or shape.moe_expert_num <= expert < shape.moe_expert_num + shape.zero_expert_num:
                continue
            weight = p.read_scalar(scales, token * k_max + k, name="read weight")
            if expert < shape.moe_expert_num:
                add_row(window_address(own, call.epoch, (token * slots + k) * stride), "load returned row", weight)
            elif expert < first_const:
                add_row(gm_at(t["ori_x"], token * h), "load ori_x", weight)
            else:
                c = expert - first_const
                for target, name in ((const[0], "const_expert_alpha_1"), (const[1], "ori_x")):
                    b = load(gm_at(t[name], (c if name != "ori_x" else token) * h), f"load {name}")
                    p.cast(target, buffers[b], name="cast f32")
                    flags.set("VECTOR", "MTE2", b)
                p.mul(const[0], const[0], const[1], name="alpha_1 x ori_x")
                for target, name in ((const[1], "const_expert_alpha_2"), (value, "const_expert_v")):
                    b = load(gm_at(t[name], c * h), f"load {name}")
                    p.cast(target, buffers[b], name="cast f32")
                    flags.set("VECTOR", "MTE2", b)
                p.mul(value, value, const[1], name="alpha_2 x v")
                p.add(value, value, const[0], name="constant expert")
                p.muls(value, value, weight, name="times weight")
                p.add(total, total, value, name="accumulate")
        for j in range(shape.shared_experts):
            add_row(window_address(own, call.epoch, (token * slots + k_max + j) * stride), "load shared row")
        if call.problem.shared_expert_x:
            add_row(gm_at(t["shared_expert_x"], token * h), "load shared_expert_x")
        flags.wait("MTE3", "VECTOR", 3)
        p.cast(out, total, "rint", name="cast out")
        flags.set("VECTOR", "MTE3", 3)
        flags.wait("VECTOR", "MTE3", 3)
        p.copy(gm_at(t["out"], token * h), out, row_bytes, name="store token")
        flags.set("MTE3", "VECTOR", 3)
    flags.drain()



# -- the first op pair's combine ------------------------------------------------------------------


def combine_v1_steps(call: MoeCall) -> Iterator:
    """``npu_moe_distribute_combine`` as ``moe_distribute_combine.h`` runs it: the cores split the
    ranks; for each local expert and each rank of its share a core stores that block of expand_x
    rows into the rank's window (expert ``e``'s region, row by row), then a status entry per rank;
    then it spins until every rank of its share of the senders has flagged, and after a SyncAll
    each core sums its tokens (with fewer tokens than cores, cores share a token's H), reading each
    (token, k) at ``(expert, expand_idx)`` of its window."""
    shape, problem = call.shape, call.problem
    kernel = call.kernel("send back")
    t = call.tensors
    cores, rank, ep, local = call.plan.cores, shape.ep_rank_id, shape.ep_world_size, shape.local_experts
    itemsize, h = problem.dtype.itemsize, shape.h
    row_bytes = h * itemsize
    counts = call.values("ep_send_counts")
    if counts is None:
        counts = np.cumsum([len(rows_of_block(call, rank, e, s)) for e in range(local) for s in range(ep)])
    counts = np.asarray(counts[: local * ep], np.int64)
    starts = np.concatenate(([0], counts[:-1]))
    area_of = {}

    def area(target: int) -> Area:
        if target not in area_of:
            half = shape.moe_expert_num * shape.max_bs * row_bytes
            area_of[target] = call.group.area(target, "combine v1", half, ep * 32)
        return area_of[target]

    barrier = kernel.barrier()
    for core in range(cores):
        peers = split_to_cores(ep, cores, core)
        p = kernel.vector_core(core)
        if not peers:
            p.sync_all(barrier)
            continue
        flags = Flags(p)
        buffers = [p.alloc(h, problem.dtype) for _ in range(2)]
        n = 0
        for e in range(local):
            expert = (rank - shape.shared_expert_rank_num) * local + e
            for peer in peers:
                block = e * ep + peer
                for j in range(int(counts[block] - starts[block])):
                    b = n % 2
                    n += 1
                    flags.wait("MTE3", "MTE2", b)
                    p.copy(buffers[b], gm_at(t["expand_x"], (int(starts[block]) + j) * h), row_bytes, name="load expert output")
                    flags.set("MTE2", "MTE3", b)
                    flags.wait("MTE2", "MTE3", b)
                    offset = (expert * shape.max_bs + j) * row_bytes
                    p.copy(window_address(area(peer), call.epoch, offset), buffers[b], row_bytes, name="put row back")
                    flags.set("MTE3", "MTE2", b)
        flags.drain()
        status = status_buffer(p, len(peers))
        for slot, peer in enumerate(peers):
            signal(p, status, slot, area(peer), rank, call.epoch, name="put flag")
        wait_for(p, area(rank), peers.start, len(peers), call.epoch, name="wait ranks",
                 waiting_for=f"the flags of the ranks returning rows to rank {rank} of group {shape.group_ep!r} (combine {call.epoch})")
        p.pipe_barrier("ALL")
        p.sync_all(barrier)
    yield Run((kernel,))
    yield Run((sum_v1_kernel(call, area(rank)),))


def rows_of_block(call: MoeCall, rank: int, local: int, sender: int) -> np.ndarray:
    """The pairs of ``sender`` rank ``rank``'s expert ``local`` received (its send plan's)."""
    plan: SendPlan = call.group.notes[(sender, call.epoch)]
    return np.flatnonzero((plan.rank == rank) & (plan.local == local))


def sum_v1_kernel(call: MoeCall, own: Area):
    shape, problem = call.shape, call.problem
    kernel = call.kernel("sum")
    t = call.tensors
    cores, h, k_max = call.plan.cores, shape.h, shape.k
    itemsize = problem.dtype.itemsize
    ids, where = call.values("expert_ids"), call.values("expand_idx")
    if ids is None:
        plan: SendPlan = call.group.notes[(shape.ep_rank_id, call.epoch)]
        ids = synthetic_expert_ids(shape, call.epoch)
        where = np.zeros(shape.bs * k_max, np.int64)
        where[plan.token * k_max + plan.k] = plan.position
    assert where is not None  # with data both are the device's values
    pieces = []  # (core, token, first element, elements)
    if shape.bs < cores:
        per = cores // shape.bs
        width = (h // 32 // per) * 32
        for core in range(shape.bs * per):
            token, part = divmod(core, per)
            first = width * part
            pieces.append((core, token, first, width if part < per - 1 else h - first))
    else:
        for core in range(cores):
            for token in split_to_cores(shape.bs, cores, core):
                pieces.append((core, token, 0, h))
    by_core: dict[int, list] = {}
    for piece in pieces:
        by_core.setdefault(piece[0], []).append(piece[1:])
    for core, work in by_core.items():
        p = kernel.vector_core(core)
        flags = Flags(p)
        scales = p.alloc(shape.bs * k_max, F32)
        p.copy(scales, gm_at(t["expert_scales"], 0), shape.bs * k_max * 4, name="load expert_scales")
        p.set_flag("MTE2", "SCALAR", 0)
        p.wait_flag("MTE2", "SCALAR", 0)
        width = max(n for _, _, n in work)
        buffers = [p.alloc(width, problem.dtype) for _ in range(2)]
        total, value, out = p.alloc(width, F32), p.alloc(width, F32), p.alloc(width, problem.dtype)
        n = 0
        for token, first, count in work:
            p.dup(total[0:count], 0.0, name="zero sum")
            for k in range(k_max):
                b = n % 2
                n += 1
                expert = int(ids[token, k])
                weight = p.read_scalar(scales, token * k_max + k, name="read weight")
                offset = (expert * shape.max_bs + int(where[token * k_max + k])) * h * itemsize + first * itemsize
                flags.wait("VECTOR", "MTE2", b)
                p.copy(buffers[b][0:count], window_address(own, call.epoch, offset), count * itemsize, name="load returned row")
                flags.set("MTE2", "VECTOR", b)
                flags.wait("MTE2", "VECTOR", b)
                p.cast(value[0:count], buffers[b][0:count], name="cast f32")
                flags.set("VECTOR", "MTE2", b)
                p.muls(value[0:count], value[0:count], weight, name="times weight")
                p.add(total[0:count], total[0:count], value[0:count], name="accumulate")
            flags.wait("MTE3", "VECTOR", 3)
            p.cast(out[0:count], total[0:count], "rint", name="cast out")
            flags.set("VECTOR", "MTE3", 3)
            flags.wait("VECTOR", "MTE3", 3)
            p.copy(gm_at(t["out"], token * h + first), out[0:count], count * itemsize, name="store token")
            flags.set("MTE3", "VECTOR", 3)
        flags.drain()
    return kernel
