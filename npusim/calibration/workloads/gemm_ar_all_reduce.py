"""The all-reduce of pto-isa's gemm_ar example (hw-native-sys/pto-isa ``kernels/manual/a2a3/gemm_ar/``:
README.md, gemm_ar_config.h, comm_kernel.cpp, main.cpp), communication only, written with npusim's
ISA as the example's own AIV kernel (``GemmCommAllKernel``) moves the bytes: 8 x 910B of one A2
server, each rank holding the fp16 GEMM result ``C_i`` of ``5504 x 1536`` (258 tiles of 128 x 256),
summed over the ranks into every rank's ``reduced_output`` (in the HCCL window) over HCCS.

One launch of 24 AIV blocks per rank. Block ``b`` runs two phases (``GemmCommAllImpl``: its loop
tries the all-gather only in a pass where the reduce-scatter found no tile, so with every ready
queue full, as in the measurement, the block's reduce-scatter runs to its end first):

- **Reduce-scatter**: the tiles of compute block ``b``'s ready queue (the GEMM's contiguous run of
  tiles ``GEMM_AR_BLOCK_START_TILE``, 18 blocks take 11 and 6 take 10, in its zigzag order), each as
  two subtiles of 64 x 256 (``G_COMM_SUB_M``): a TLOAD of the subtile into UB (MTE2, 64 rows of
  512 B), a TSTORE with atomic add into the owner's ``reduced_output`` (MTE3; the owner of tile
  ``t`` is rank ``t % 8``, so 7 in 8 go over HCCS), ping-pong buffered (the load of the next
  subtile beside the store of the one before), then, per subtile stored, ``pipe_barrier(ALL)`` and
  two TNOTIFY atomic adds into the owner's signal words (its subtile-ready counter and the
  AG-summary counter of the block that gathers it), each ending with ``pipe_barrier(ALL)``
  (``TNotify.hpp``).
- **All-gather**: the owner's subtiles (its 33 or 32 tiles, 66 or 64 subtiles) dealt to the blocks
  with a stride of 24 from ``23 - b`` (``AgInitAssignedState``), after one ``pipe_barrier(ALL)``
  (the drain pass's acquire); each, once its ready counter holds 8 (every rank has added), is sent
  to the 7 peers one after the other, starting at a peer rotated by the subtile
  (``AgTransferSubtileToAll``): a TLOAD into UB and a TSTORE into the peer's ``reduced_output``,
  the next load after the store (one UB buffer).

What the static programs approximate: the kernel picks its work as it becomes ready (TTEST of the
ready queue's count and of the subtile-ready counters, non-blocking, a TWAIT when nothing is
ready). Here each block takes its all-gather subtiles in their assigned order, waiting for each
one's counter (the kernel would skip a subtile not ready yet and come back to it), and each dequeue
and probe is one poll of a word of local GM (``CoreProgram.poll``: what npusim charges a core for
reading a status word). The TNOTIFYs (a scalar ``st_atomic``) are 4-byte MTE3 atomic-add stores
(control data). The launch is not race-checked: its cores hand subtiles to each other through the
counters they poll, which the launch's check (it knows the flags and barriers inside a core) cannot
see, so it would report every reduce-scatter add and all-gather load of the same bytes; with the
check on, it reports no race inside a core. The measurement (main.cpp, "Sequential") is the host's
wall clock on rank 0 from the end of its GEMM (all queues full, everything reset by aclrtMemset
before) to the end of the stream's synchronisation after the launch; each rank launches its kernel
when its own GEMM has ended. npusim launches every rank's kernel at once and gives rank 0's span, so
the launch, the synchronisation and the ranks' skew (a few microseconds each) are not in it.

Measured: 437.3 us (README "Measured Performance" of hw-native-sys/pto-isa at 3186c381, of "the
current subtile-ready / AG-summary overlap implementation": Sequential, comm 437.3 us @ 63.6 GB/s,
GB meaning 2^30 B there, counting the tiles sent to other ranks: 225 reduce-scatter and 33 x 7
all-gather tiles of 64 KiB). Simulated on a2: 447.9 us (+2.4%), the owners' L2s applying the
reduce-scatter's atomic adds bounding it (``die.l2.atomic_rate``, fitted to this row alone; without
it the HCCS links' write credits bound it at 277.4 us: docs/calibration.md, "The all-reduce").

Parameters (``--param NAME=VALUE``): ``ranks`` (8), ``blocks`` (24 AIV blocks per rank).

Run: npusim run --config a2 npusim/calibration/workloads/gemm_ar_all_reduce.py --no-data
"""

from __future__ import annotations

import numpy as np

import npusim
from npusim import isa
from npusim.kernels.comm.aiv import split_to_cores

MEASURED_US = 437.3
"""pto-isa gemm_ar README, "Measured Performance": Sequential, comm."""
M_PADDED, N_PADDED = 5504, 1536
BASE_M, BASE_N = 128, 256
SUB_M = 64
"""gemm_ar_config.h: G_COMM_SUB_M, the rows of a communication subtile."""
N_TILES = N_PADDED // BASE_N
TILES = (M_PADDED // BASE_M) * N_TILES
SUBTILES_PER_TILE = BASE_M // SUB_M
READY_OFFSET = 8 + 2
"""Signal words: 8 legacy barrier slots and two legacy flags before the subtile-ready counters."""
SUMMARY_STRIDE = 16
"""Words between two AG-summary counters (one 64-byte line each)."""
QUEUE_STRIDE = 16
"""Words between two ready queues' counts (64-byte aligned queues)."""
ELEMENT = np.dtype(np.float16).itemsize


def zigzag(linear: int) -> int:
    """The tile the GEMM computes at position ``linear`` of its order (``SwizzleTileIndex``: odd rows
    of tiles backwards)."""
    mi, local = divmod(linear, N_TILES)
    return mi * N_TILES + (N_TILES - 1 - local if mi % 2 else local)


def owned_tiles(rank: int, ranks: int) -> int:
    """The tiles rank ``rank`` owns (tiles ``rank, rank + ranks, ...``)."""
    return len(range(rank, TILES, ranks))


def subtile_offset(tile: int, stripe: int) -> int:
    """Element offset of subtile ``stripe`` of ``tile`` in a ``M_PADDED x N_PADDED`` row-major matrix."""
    mi, ni = divmod(tile, N_TILES)
    return (mi * BASE_M + stripe * SUB_M) * N_PADDED + ni * BASE_N


def build_rank(rank: int, ranks: int, blocks: int, gemm_out, reduced, signals, queues) -> isa.Kernel:
    """The communication kernel of ``rank``: one program per AIV block, not race-checked (see the
    module doc)."""
    kernel = isa.Kernel("GemmCommAllKernel", die=rank)
    kernel.race_checked = False
    row_gap = (N_PADDED - BASE_N) * ELEMENT
    summary_offset = READY_OFFSET + TILES * SUBTILES_PER_TILE
    mine = owned_tiles(rank, ranks) * SUBTILES_PER_TILE
    for b in range(blocks):
        p = kernel.aiv(b)
        ping, pong = p.alloc(SUB_M * BASE_N, np.float16), p.alloc(SUB_M * BASE_N, np.float16)
        gather_ub = p.alloc(SUB_M * BASE_N, np.float16)
        one = p.alloc(8, np.int32)
        p.write_scalar(one, 1, 0, control=True)

        def notify(owner: int, word: int, p=p, one=one) -> None:
            p.copy(isa.gm(signals[owner], word), one, 4, atomic="add", control=True, name="TNOTIFY")
            p.pipe_barrier("ALL")

        def store_and_publish(buffer, event: int, owner: int, tile: int, stripe: int, load=None, p=p) -> None:
            p.wait_flag("MTE2", "MTE3", event)
            p.copy(isa.gm(reduced[owner], subtile_offset(tile, stripe)), buffer, burst_count=SUB_M, dst_gap=row_gap, atomic="add",
                   name="RS TSTORE atomic add")
            if load is not None:
                load()
            p.set_flag("MTE3", "MTE2", event)
            p.wait_flag("MTE3", "MTE2", event)
            p.pipe_barrier("ALL")
            local = (tile // ranks) * SUBTILES_PER_TILE + stripe
            notify(owner, READY_OFFSET + local)
            notify(owner, summary_offset + (blocks - 1 - local % blocks) * SUMMARY_STRIDE)

        # reduce-scatter: the tiles of queue b, two subtiles each, ping-pong
        queue = [zigzag(linear) for linear in split_to_cores(TILES, blocks, b)]
        pending: tuple[isa.LocalTensor, int, int, int, int] | None = None  # (buffer, event, owner, tile, stripe) of the subtile loaded and not yet stored
        count = 0
        for tile in queue:
            p.poll(isa.gm(queues[rank], b * QUEUE_STRIDE), 1, len(queue), name="TTEST ready queue", waiting_for="the GEMM's tiles")
            for stripe in range(SUBTILES_PER_TILE):
                buffer, event = (ping, 0) if count % 2 == 0 else (pong, 1)
                source = isa.gm(gemm_out[rank], subtile_offset(tile, stripe))

                def load(buffer=buffer, source=source, event=event, p=p) -> None:
                    p.copy(buffer, source, burst_count=SUB_M, src_gap=row_gap, name="RS TLOAD")
                    p.set_flag("MTE2", "MTE3", event)

                if pending is None:
                    load()
                else:
                    store_and_publish(*pending, load=load)
                pending = (buffer, event, tile % ranks, tile, stripe)
                count += 1
        if pending is not None:
            store_and_publish(*pending)

        # all-gather: this block's subtiles of the rank's own tiles, each to the 7 peers
        gather = range(blocks - 1 - b, mine, blocks)
        if gather:
            p.pipe_barrier("ALL")
        for i in gather:
            tile, stripe = rank + (i // SUBTILES_PER_TILE) * ranks, i % SUBTILES_PER_TILE
            p.poll(isa.gm(signals[rank], READY_OFFSET + i), 1, ranks, name="TTEST subtile ready", waiting_for="every rank's add")
            offset = subtile_offset(tile, stripe)
            first = 1 + i % (ranks - 1)
            for step in range(ranks - 1):
                peer = (rank + 1 + (first - 1 + step) % (ranks - 1)) % ranks
                p.copy(gather_ub, isa.gm(reduced[rank], offset), burst_count=SUB_M, src_gap=row_gap, name="AG TLOAD")
                p.set_flag("MTE2", "MTE3", 2)
                p.wait_flag("MTE2", "MTE3", 2)
                p.copy(isa.gm(reduced[peer], offset), gather_ub, burst_count=SUB_M, dst_gap=row_gap, name="AG TSTORE")
                p.set_flag("MTE3", "MTE2", 2)
                p.wait_flag("MTE3", "MTE2", 2)
        p.pipe_barrier("ALL")
    return kernel


def all_reduce(ranks: int = 8, blocks: int = 24) -> tuple[list, list, float]:
    """Launch the kernel on ``ranks`` dies in the current session after the GEMM (every ready queue
    full; with data on, each rank's ``C_i`` random normal) and wait for it: every rank's ``C_i``,
    its ``reduced_output`` and rank 0's kernel span (us)."""
    from npusim.trace.summary import ops, records

    session = npusim.current_session()
    gemm_out = [npusim.empty((M_PADDED, N_PADDED), np.float16, device=r) for r in range(ranks)]
    reduced = [npusim.zeros((M_PADDED, N_PADDED), np.float16, device=r) for r in range(ranks)]
    signal_words = READY_OFFSET + TILES * SUBTILES_PER_TILE + blocks * SUMMARY_STRIDE
    signals = [npusim.empty(signal_words, np.int32, device=r, control=True) for r in range(ranks)]
    queues = [npusim.empty(blocks * QUEUE_STRIDE, np.int32, device=r, control=True) for r in range(ranks)]
    for r in range(ranks):
        queues[r].host_view()[::QUEUE_STRIDE] = [len(split_to_cores(TILES, blocks, q)) for q in range(blocks)]  # the GEMM has run
        if session.with_data:
            gemm_out[r].host_view()[...] = np.random.default_rng(r).standard_normal((M_PADDED, N_PADDED)).astype(np.float16)
    start = session.now_us
    for r in range(ranks):
        build_rank(r, ranks, blocks, gemm_out, reduced, signals, queues).launch()
    npusim.synchronize()
    spans = [op for op in records(ops(session.system.record())) if op["name"] == "GemmCommAllKernel"]
    return gemm_out, reduced, max(op["end_us"] for op in spans if op["die"] == 0) - start


def run(ranks: int = 8, blocks: int = 24) -> dict:
    """Run the all-reduce in the current session; its figures: rank 0's kernel span (us), the
    bandwidth the source prints (the tiles sent to other ranks over the span, GiB/s), the error
    against the measurement."""
    us = all_reduce(ranks, blocks)[2]
    tile_bytes = BASE_M * BASE_N * ELEMENT
    owned = owned_tiles(0, ranks)
    sent = (TILES - owned + owned * (ranks - 1)) * tile_bytes
    return {"comm_us": us, "gibps": sent / (us * 1e-6) / 2**30, "measured_us": MEASURED_US, "error": us / MEASURED_US - 1}


def main() -> None:
    ranks = npusim.param("ranks", 8, "ranks (one 910B each)")
    blocks = npusim.param("blocks", 24, "AIV blocks per rank")
    figures = run(ranks, blocks)
    print(f"gemm_ar all-reduce (fp16 {M_PADDED} x {N_PADDED} per rank, {ranks} ranks, {blocks} AIV blocks each): "
          f"{figures['comm_us']:.1f} us, {figures['gibps']:.1f} GiB/s; measured {MEASURED_US} us ({figures['error']:+.1%})")


if __name__ == "__main__":
    main()
