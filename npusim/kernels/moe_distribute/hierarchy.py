"""``comm_alg`` "hierarchy" on Atlas A3: each token crosses between servers (nodes of 16 dies) once
per server that hosts any of its experts, and is fanned out inside that server; the combine sums a
token's rows inside each server before the sum crosses back (op pages: "先在server内将同一个token数据
汇总求和，再跨机发送，以减少跨机数据量"). ops-transformer holds no A3 kernel of this template; the
route below follows the pages' description and window formula (rows cross in x's dtype with their
expert ids and weights: ``H x sizeof(x) + 4 x Align8(K) x 4`` bytes a row), relaying through the
die with the sender's index in each server, as A2's "hierarchy" does (the same-numbered card).

Dispatch:

1. *cross*: the active tokens' (token, server) pairs split over the cores: the token (x's dtype)
   with its K expert ids, weights and (rank, token) stored into the window of the die with this
   rank's index in that server; SyncAll; each relay's count of tokens out, the counts from every
   server's same-numbered die waited for; SyncAll;
2. *fan out*: the relayed (token, expert) pairs of this server split over the cores: the row loaded,
   quantised (quant_mode 2), its triple and weight filled, stored into the expert's rank's window
   (fullmesh_v1's layout, the weight after the triple); SyncAll; each (sender, expert) count out;
   then each core waits for its share of its rank's counts (SyncCntOnCore); SyncAll;
3. *copy out*: as fullmesh_v1's, with ``expand_scales`` from the rows' weights.

Combine:

1. *to relays*: each received row to the die of this server that relayed its token (the token's
   sender's index), a flag after it carrying the row's weight (``expand_scales``);
2. *server sums*: each relay's tokens with rows here: their rows times their weights summed in
   float32 (in k order) and the float32 sum stored into the token's sender's window, a flag after it;
3. *final sums*: each active token's server sums added in server order, cast to the output dtype.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from npusim.kernels.comm.aiv import ENTRY_WORDS, read_status, signal, split_to_cores, status_address, status_buffer, wait_for, window_address
from npusim.kernels.comm.group import STATUS_BYTES, Area
from npusim.kernels.flags import Flags
from npusim.kernels.moe_distribute import fullmesh, layout
from npusim.kernels.moe_distribute.checks import F32, I32, TRIPLE, align
from npusim.kernels.moe_distribute.kernel import MoeCall, gm_at, sender_plan
from npusim.kernels.moe_distribute.routing import SendPlan, receive_plan
from npusim.kernels.op import AwaitGroup, Run
from npusim.kernels.quantize.dynamic import Quantizer

SERVER = 16
"""Dies of a server (an A3 node: the template needs ep_world_size a multiple of 16)."""


def servers(call: MoeCall) -> int:
    return call.shape.ep_world_size // SERVER


def server_of(rank: int) -> int:
    return rank // SERVER


def relay(server: int, rank: int) -> int:
    """The die of ``server`` that relays ``rank``'s tokens: the one with its index."""
    return server * SERVER + rank % SERVER


# -- the windows ----------------------------------------------------------------------------------


def relay_row(call: MoeCall) -> tuple[int, int, int, int]:
    """(token bytes, ids offset, weights offset, row bytes) of a row crossing servers."""
    shape = call.shape
    token = align(shape.h * call.problem.x_dtype.itemsize, 32)
    tail = align(shape.k, 8) * 4
    return token, token, token + tail, token + 2 * tail + 32


def relay_area(call: MoeCall, rank: int) -> Area:
    """A relay's slots: (source server, token) rows; a count entry per source server."""
    return call.group.area(rank, "hierarchy relay", servers(call) * call.shape.max_bs * relay_row(call)[3], servers(call) * STATUS_BYTES)


def back_area(call: MoeCall, rank: int) -> Area:
    """A relay's combine slots: (source server, token, k) rows coming back from this server's experts."""
    shape = call.shape
    rows = servers(call) * shape.max_bs * shape.k
    return call.group.area(rank, "hierarchy back", rows * align(shape.h * call.problem.dtype.itemsize, 512), rows * STATUS_BYTES)


def sums_area(call: MoeCall, rank: int) -> Area:
    """A sender's slots for its tokens' server sums (float32): (server, token)."""
    shape = call.shape
    rows = servers(call) * shape.max_bs
    return call.group.area(rank, "hierarchy sums", rows * align(shape.h * 4, 512), rows * STATUS_BYTES)


def _server_sets(shape, plan: SendPlan) -> dict[int, list[int]]:
    """Each active token's servers hosting its experts, ascending."""
    out: dict[int, list[int]] = {int(t): [] for t in plan.active}
    for t, r in zip(plan.token.tolist(), plan.rank.tolist()):
        s = server_of(r)
        if s not in out[t]:
            out[t].append(s)
    return {t: sorted(v) for t, v in out.items()}


# -- dispatch -------------------------------------------------------------------------------------


def dispatch_steps(call: MoeCall) -> Iterator:
    shape = call.shape
    yield AwaitGroup(call.group)
    plan = sender_plan(call)
    yield Run((cross_kernel(call, plan),))
    rank = shape.ep_rank_id
    pairs = []  # the pairs this die relays: (source rank, token, k, expert), source by source in server order
    for s in range(servers(call)):
        source = relay(s, rank)
        other: SendPlan = call.group.notes[(source, call.epoch)]
        here = other.rank // SERVER == server_of(rank)
        pairs += [(source, int(t), int(k), int(i)) for t, k, i in zip(other.token[here], other.k[here], np.flatnonzero(here))]
    yield Run((fan_out_kernel(call, pairs),))
    counts = read_status(fullmesh.dispatch_area(call, rank), 0, layout.dispatch_blocks(shape, rank))[:, 1]
    yield Run((fullmesh.copy_out_kernel(call, receive_plan(counts)),))


def cross_kernel(call: MoeCall, plan: SendPlan):
    shape, problem = call.shape, call.problem
    kernel = call.kernel("cross")
    t = call.tensors
    cores, rank = call.plan.cores, shape.ep_rank_id
    n_ids = shape.bs * shape.k
    token_bytes, ids_at, weights_at, width = relay_row(call)
    x_bytes = shape.h * problem.x_dtype.itemsize
    sets = _server_sets(shape, plan)
    items = [(tok, s) for tok, ss in sets.items() for s in ss]
    ids_values, weights = call.values("expert_ids"), call.values("expert_scales")
    sent, counted = kernel.barrier(), kernel.barrier()
    for core in range(cores):
        p = kernel.vector_core(core)
        mine = split_to_cores(len(items), cores, core)
        if mine:
            ids = p.alloc(n_ids, I32)
            p.copy(ids, gm_at(t["expert_ids"], 0), n_ids * 4, name="load expert_ids")
            p.set_flag("MTE2", "SCALAR", 0)
            p.wait_flag("MTE2", "SCALAR", 0)
            rows = [p.alloc(width, np.uint8) for _ in range(2)]
            flags = Flags(p)
            for i, item in enumerate(mine):
                b = i % 2
                token, s = items[item]
                flags.wait("MTE3", "SCALAR", b)
                p.scalar(shape.k * 3, name="servers of the token")
                p.copy(rows[b][0:x_bytes], gm_at(t["x"], token * shape.h), x_bytes, name="load token")
                row_ids = ids_values[token] if ids_values is not None else np.zeros(shape.k, np.int32)
                row_weights = weights[token] if weights is not None else np.zeros(shape.k, np.float32)
                p.write_scalars(rows[b][ids_at : ids_at + shape.k * 4].reinterpret(I32), row_ids, name="expert ids")
                p.write_scalars(rows[b][weights_at : weights_at + shape.k * 4].reinterpret(F32), row_weights, name="weights")
                flags.set("MTE2", "MTE3", b)
                flags.wait("MTE2", "MTE3", b)
                p.set_flag("SCALAR", "MTE3", 0)
                p.wait_flag("SCALAR", "MTE3", 0)
                target = relay(s, rank)
                p.copy(window_address(relay_area(call, target), call.epoch, (server_of(rank) * shape.max_bs + token) * width), rows[b], width,
                       name="put token across")
                flags.set("MTE3", "SCALAR", b)
            flags.drain()
        p.pipe_barrier("ALL")
        p.sync_all(sent)
        relays = split_to_cores(servers(call), cores, core)
        if relays:
            status = status_buffer(p, len(relays))
            for slot, s in enumerate(relays):
                count = sum(1 for ss in sets.values() if s in ss)
                signal(p, status, slot, relay_area(call, relay(s, rank)), server_of(rank), call.epoch, count, name="put count across")
            wait_for(p, relay_area(call, rank), relays.start, len(relays), call.epoch, name="wait relayed counts",
                     waiting_for=f"the counts of the tokens this die relays (dispatch {call.epoch} of group {shape.group_ep!r})")
        p.pipe_barrier("ALL")
        p.sync_all(counted)
    return kernel


def fan_out_kernel(call: MoeCall, pairs: list[tuple[int, int, int, int]]):
    """This die's relayed pairs into their experts' ranks in its server, their counts, the wait for
    its own counts (SyncCntOnCore)."""
    shape, problem = call.shape, call.problem
    kernel = call.kernel("fan out")
    cores, rank, local = call.plan.cores, shape.ep_rank_id, shape.local_experts
    row = fullmesh.dispatch_row(call)
    assert row.triple_offset is not None and row.weight_offset is not None
    triple, weight = row.triple_offset, row.weight_offset
    token_bytes, ids_at, weights_at, width = relay_row(call)
    x_bytes = shape.h * problem.x_dtype.itemsize
    own = relay_area(call, rank)
    plans = {source: call.group.notes[(source, call.epoch)] for source in {p_[0] for p_ in pairs}}
    sent, counted = kernel.barrier(), kernel.barrier()
    entries = []  # (target rank, sender, local expert, count) of the senders this die relays
    for s in range(servers(call)):
        source = relay(s, rank)
        other = plans.get(source) or call.group.notes[(source, call.epoch)]
        for target in range(server_of(rank) * SERVER, (server_of(rank) + 1) * SERVER):
            for j in range(local):
                entries.append((target, source, j, int(other.expert_counts[target * local + j])))
    for core in range(cores):
        p = kernel.vector_core(core)
        mine = split_to_cores(len(pairs), cores, core)
        if mine:
            quant = Quantizer(p, shape.h, False) if problem.quant_mode == 2 else None
            rows_in = [p.alloc(width, np.uint8) for _ in range(2)]
            out = [p.alloc(row.row_bytes, np.uint8) for _ in range(2)]
            flags = Flags(p)
            for i, item in enumerate(mine):
                b = i % 2
                source, token, k, index = pairs[item]
                plan = plans[source]
                target, j, position = int(plan.rank[index]), int(plan.local[index]), int(plan.position[index])
                flags.wait("VECTOR", "MTE2", b)
                p.copy(rows_in[b], window_address(own, call.epoch, (server_of(source) * shape.max_bs + token) * width), width,
                       name="load relayed token")
                flags.set("MTE2", "VECTOR", b)
                flags.wait("MTE2", "VECTOR", b)
                flags.wait("MTE3", "SCALAR", b)
                xin = rows_in[b][0:x_bytes].reinterpret(problem.x_dtype)
                if quant is not None:
                    quant.from_input(xin, out[b], out[b][row.scale_offset : row.scale_offset + 4].reinterpret(F32))
                else:
                    p.vector("copy", out[b][0 : row.data_bytes].reinterpret(problem.out_dtype), xin, name="token into the row")
                p.vector("copy", out[b][weight : weight + 4].reinterpret(F32), rows_in[b][weights_at + 4 * k : weights_at + 4 * k + 4]
                         .reinterpret(F32), name="weight into the row")
                flags.set("VECTOR", "MTE2", b)
                p.write_scalars(out[b][triple : triple + TRIPLE * 4].reinterpret(I32), [source, token, k], name="fill triple")
                p.set_flag("SCALAR", "MTE3", 0)
                p.wait_flag("SCALAR", "MTE3", 0)
                flags.set("VECTOR", "MTE3", b)
                flags.wait("VECTOR", "MTE3", b)
                p.copy(window_address(fullmesh.dispatch_area(call, target), call.epoch,
                                      layout.dispatch_row_offset(shape, row, target, source, j, position)), out[b], row.row_bytes,
                       name="put row in server")
                flags.set("MTE3", "SCALAR", b)
            flags.drain()
        p.pipe_barrier("ALL")
        p.sync_all(sent)
        share = split_to_cores(len(entries), cores, core)
        if share:
            status = status_buffer(p, len(share))
            for slot, e in enumerate(share):
                target, source, j, count = entries[e]
                signal(p, status, slot, fullmesh.dispatch_area(call, target), layout.dispatch_entry(shape, source, j), call.epoch, count,
                       name="put count")
        fullmesh.wait_counts(call, p, core, split_to_cores(layout.dispatch_blocks(shape, rank), cores, core))
        p.pipe_barrier("ALL")
        p.sync_all(counted)
    return kernel


# -- combine --------------------------------------------------------------------------------------


def combine_steps(call: MoeCall) -> Iterator:
    yield AwaitGroup(call.group)
    rows = fullmesh.returned_rows(call)
    yield Run((to_relay_kernel(call, rows),))
    yield Run((server_sum_kernel(call),))
    yield Run((final_kernel(call),))


def back_slot(call: MoeCall, source: int, token: int, k: int) -> int:
    return (server_of(source) * call.shape.max_bs + token) * call.shape.k + k


def to_relay_kernel(call: MoeCall, rows: np.ndarray):
    """Each received row to the relay of its token in this server, a flag after it carrying its weight."""
    shape, problem = call.shape, call.problem
    kernel = call.kernel("to relays")
    t = call.tensors
    cores, rank = call.plan.cores, shape.ep_rank_id
    h, itemsize = shape.h, problem.dtype.itemsize
    stride = align(h * itemsize, 512)
    weights = call.values("expand_scales")
    for core in range(cores):
        mine = split_to_cores(len(rows), cores, core)
        if not mine:
            continue
        p = kernel.vector_core(core)
        buffers = [p.alloc(h, problem.dtype) for _ in range(2)]
        status = status_buffer(p, len(mine))
        flags = Flags(p)
        for i, index in enumerate(mine):
            b = i % 2
            source, token, k = (int(v) for v in rows[index])
            flags.wait("MTE3", "MTE2", b)
            p.copy(buffers[b], gm_at(t["expand_x"], index * h), h * itemsize, name="load expert output")
            flags.set("MTE2", "MTE3", b)
            flags.wait("MTE2", "MTE3", b)
            target = relay(server_of(rank), source)
            slot = back_slot(call, source, token, k)
            p.copy(window_address(back_area(call, target), call.epoch, slot * stride), buffers[b], h * itemsize, name="put row to relay")
            bits = int(np.float32(weights[index]).view(np.int32)) if weights is not None else 0
            signal(p, status, i, back_area(call, target), slot, call.epoch, bits, name="put flag and weight")
            flags.set("MTE3", "MTE2", b)
        flags.drain()
    return kernel


def server_sum_kernel(call: MoeCall):
    """Each relay's tokens with rows in this server: the rows times their weights, summed in float32,
    stored into the token's sender's window."""
    shape, problem = call.shape, call.problem
    kernel = call.kernel("server sums")
    cores, rank = call.plan.cores, shape.ep_rank_id
    h, itemsize = shape.h, problem.dtype.itemsize
    stride = align(h * itemsize, 512)
    here = server_of(rank)
    tokens = []  # (source, token, [k of its pairs in this server])
    for s in range(servers(call)):
        source = relay(s, rank)
        other: SendPlan = call.group.notes[(source, call.epoch)]
        mask = other.rank // SERVER == here
        for token in other.active.tolist():
            ks = sorted(int(k) for k in other.k[mask & (other.token == token)])
            if ks:
                tokens.append((source, int(token), ks))
    own = back_area(call, rank)
    for core in range(cores):
        mine = split_to_cores(len(tokens), cores, core)
        if not mine:
            continue
        p = kernel.vector_core(core)
        row, value, total = p.alloc(h, problem.dtype), p.alloc(h, F32), p.alloc(h, F32)
        words = p.alloc(ENTRY_WORDS, I32)
        status = status_buffer(p, len(mine))
        for i, item in enumerate(mine):
            source, token, ks = tokens[item]
            p.dup(total, 0.0, name="sum = 0")
            for k in ks:
                slot = back_slot(call, source, token, k)
                wait_for(p, own, slot, 1, call.epoch, name="wait row",
                         waiting_for=f"token {token} of rank {source}'s row of k {k} (combine {call.epoch} of group {shape.group_ep!r})")
                p.copy(words, status_address(own, slot), STATUS_BYTES, name="load weight")
                p.copy(row, window_address(own, call.epoch, slot * stride), h * itemsize, name="load row")
                p.set_flag("MTE2", "VECTOR", 0)
                p.wait_flag("MTE2", "VECTOR", 0)
                p.set_flag("MTE2", "SCALAR", 0)
                p.wait_flag("MTE2", "SCALAR", 0)
                weight = p.read_scalar(words.reinterpret(F32), 1, name="read weight")
                p.cast(value, row, name="cast f32")
                p.muls(value, value, weight, name="times weight")
                p.add(total, total, value, name="accumulate")
                p.set_flag("VECTOR", "MTE2", 0)
                p.wait_flag("VECTOR", "MTE2", 0)
            p.set_flag("VECTOR", "MTE3", 0)
            p.wait_flag("VECTOR", "MTE3", 0)
            p.copy(window_address(sums_area(call, source), call.epoch, (here * shape.max_bs + token) * align(h * 4, 512)), total, h * 4,
                   name="put server sum back")
            signal(p, status, i, sums_area(call, source), here * shape.max_bs + token, call.epoch, name="put sum flag")
            p.set_flag("MTE3", "VECTOR", 0)
            p.wait_flag("MTE3", "VECTOR", 0)
    return kernel


def final_kernel(call: MoeCall):
    """Each active token's server sums added in server order, cast, stored."""
    shape, problem = call.shape, call.problem
    kernel = call.kernel("final sums")
    t = call.tensors
    cores, rank = call.plan.cores, shape.ep_rank_id
    h, itemsize = shape.h, problem.dtype.itemsize
    plan: SendPlan = call.group.notes[(rank, call.epoch)]
    sets = _server_sets(shape, plan)
    own = sums_area(call, rank)
    tokens = plan.active.tolist()
    for core in range(cores):
        mine = split_to_cores(len(tokens), cores, core)
        if not mine:
            continue
        p = kernel.vector_core(core)
        part, total, out = p.alloc(h, F32), p.alloc(h, F32), p.alloc(h, problem.dtype)
        for i in mine:
            token = int(tokens[i])
            p.dup(total, 0.0, name="sum = 0")
            for s in sets[token]:
                slot = s * shape.max_bs + token
                wait_for(p, own, slot, 1, call.epoch, name="wait server sum",
                         waiting_for=f"server {s}'s sum of token {token} (combine {call.epoch} of group {shape.group_ep!r})")
                p.copy(part, window_address(own, call.epoch, slot * align(h * 4, 512)), h * 4, name="load server sum")
                p.set_flag("MTE2", "VECTOR", 0)
                p.wait_flag("MTE2", "VECTOR", 0)
                p.add(total, total, part, name="accumulate")
                p.set_flag("VECTOR", "MTE2", 0)
                p.wait_flag("VECTOR", "MTE2", 0)
            p.set_flag("MTE3", "VECTOR", 0)
            p.wait_flag("MTE3", "VECTOR", 0)
            p.cast(out, total, name="cast out")
            p.set_flag("VECTOR", "MTE3", 0)
            p.wait_flag("VECTOR", "MTE3", 0)
            p.copy(gm_at(t["out"], token * h), out, h * itemsize, name="store token")
    return kernel
