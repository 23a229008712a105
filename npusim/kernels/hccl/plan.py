"""A whole collective as HCCL runs it in single-op mode (torch's eager calls): each pass runs the
algorithm's phases in the ranks' communication buffer (HCCL's CCL buffer) as if the input had been
copied in and the result were copied out, then reads the input and writes the output where they are
(:func:`~npusim.kernels.hccl.staging.direct`, HCCL's DMA elimination), so only what a reduction
needs is staged; an op whose data does not fit the buffer (``hccl.buffer``, HCCL_BUFFSIZE) runs in
passes of what fits, one after the other (hcomm's ``*OpbaseLoopExecutor``s).

:func:`plan` gives the :class:`~npusim.kernels.hccl.schedule.Schedule`; the runtime plays it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from npusim.kernels.hccl.algorithm import ALL_GATHER, ALL_REDUCE, ALL_TO_ALL, BROADCAST, REDUCE, REDUCE_SCATTER, SCATTER, Algorithm
from npusim.kernels.hccl.hierarchy import Composer, Layout, Segment
from npusim.kernels.hccl.pipeline import Pipeline, staging_bytes
from npusim.kernels.hccl.schedule import INPUT, OUTPUT, WORK, Region, Schedule, Transfer, concurrent
from npusim.kernels.hccl.staging import direct

SEND = "send"
"""A point-to-point transfer (torch's send / recv, one pair of a batch_isend_irecv), from the sender's
tensor straight into the receiver's: a rank's sends and receives run side by side, so they cannot
share its one communication buffer."""
STAGE_IN, STAGE_OUT = -1, -2
"""The levels of the staging copies (into and out of the communication buffer)."""


@dataclass(frozen=True)
class Collective:
    """One collective call, the same on every rank: ``op`` (an HCCL_ALGO op name, or ``send``), the
    element size, ``count`` elements per rank (all-reduce, broadcast, reduce: the tensor; all-gather:
    each rank's input; reduce-scatter and scatter: each rank's output), the root rank (broadcast,
    reduce, scatter; the sender of a send, whose receiver is ``peer``), and for an all-to-all
    ``counts[i][j]``, the elements rank ``i`` sends rank ``j``."""

    op: str
    itemsize: int
    count: int = 0
    root: int = 0
    peer: int = 0
    counts: tuple[tuple[int, ...], ...] = ()

    @property
    def bytes_per_rank(self) -> int:
        """The message size HCCL's choices key on: a rank's data (an all-to-all: the most any rank sends)."""
        if self.op == ALL_TO_ALL:
            return max(sum(row) for row in self.counts) * self.itemsize
        return self.count * self.itemsize


def _stage(rank: int, src_offset: int, dst_offset: int, nbytes: int, into_work: bool) -> list[Transfer]:
    if not nbytes:
        return []
    if into_work:
        return [Transfer(rank, rank, src_offset, dst_offset, nbytes, src_buffer=INPUT, dst_buffer=WORK)]
    return [Transfer(rank, rank, src_offset, dst_offset, nbytes, src_buffer=WORK, dst_buffer=OUTPUT)]


def plan(call: Collective, layout: Layout, algorithms: Mapping[int, Algorithm], buffer_bytes: int) -> Schedule:
    """The schedule of ``call`` on ``layout``'s ranks, level ``k`` run by ``algorithms[k]``, passes of
    at most ``buffer_bytes`` of work buffer each (a send: ``layout`` of its two ranks, sender first)."""
    schedule = Schedule(algorithms={level: a.name for level, a in algorithms.items() if level in layout.levels})
    ranks = len(layout.coords)
    composer = Composer(layout, algorithms, call.itemsize)
    size = call.itemsize
    if call.op == SEND:  # ``layout``: the sender's and the receiver's places only (ranks 0 and 1)
        nbytes = call.count * size  # straight from the input to the output: a rank's sends and receives run side by side
        schedule.add("send", _level_between(layout, 0, 1),
                     [[Transfer(call.root, call.peer, 0, 0, nbytes, src_buffer=INPUT, dst_buffer=OUTPUT)] if nbytes else []])
        return schedule
    if call.op == ALL_TO_ALL:
        return _all_to_all(call, layout, algorithms, schedule)
    scaled = call.op in (ALL_GATHER, REDUCE_SCATTER, SCATTER)  # the work buffer holds every rank's share
    per_pass = max(size, (buffer_bytes // (ranks if scaled else 1)) // size * size)
    total = call.count * size
    for start in range(0, max(total, 1), per_pass):
        chunk = min(per_pass, total - start)
        if scaled:
            _scaled_pass(call, composer, ranks, start, chunk, schedule)
        else:
            _whole_pass(call, composer, ranks, start, chunk, schedule)
        schedule.work_bytes = max(schedule.work_bytes, chunk * (ranks if scaled else 1))
    return schedule


def _add(schedule: Schedule, stage_in: list[Transfer], segments: list[Segment], stage_out: list[Transfer], ranks: int) -> None:
    """One pass: its staging and phases, the tensors read and written where they are (staging.direct)."""
    kept_in, steps, kept_out = direct(stage_in, [step for _, _, phase in segments for step in phase], stage_out, ranks)
    schedule.add("stage in", STAGE_IN, [kept_in])
    first = 0
    for label, level, phase in segments:
        schedule.add(label, level, steps[first:first + len(phase)])
        first += len(phase)
    schedule.add("stage out", STAGE_OUT, [kept_out])


def _whole_pass(call: Collective, composer: Composer, ranks: int, start: int, chunk: int, schedule: Schedule) -> None:
    """All-reduce, broadcast, reduce: bytes ``start .. start + chunk`` of the tensor at offset 0 of the buffer."""
    region = (Region(0, chunk),)
    root = call.root
    senders = [root] if call.op == BROADCAST else range(ranks)
    receivers = [root] if call.op == REDUCE else [r for r in range(ranks) if not (call.op == BROADCAST and r == root)]
    if call.op == ALL_REDUCE:
        segments = composer.all_reduce(region)
    elif call.op == BROADCAST:
        segments = composer.broadcast(root, region)
    else:
        segments = composer.reduce(root, region)
    _add(schedule, [t for r in senders for t in _stage(r, start, 0, chunk, True)], segments,
         [t for r in receivers for t in _stage(r, 0, start, chunk, False)], ranks)


def _scaled_pass(call: Collective, composer: Composer, ranks: int, start: int, chunk: int, schedule: Schedule) -> None:
    """All-gather, reduce-scatter, scatter: bytes ``start .. start + chunk`` of each rank's share; the
    buffer holds the shares in rank order, ``chunk`` bytes each."""
    per_rank = call.count * call.itemsize
    blocks = [(Region(r * chunk, chunk),) for r in range(ranks)]
    if call.op == ALL_GATHER:
        _add(schedule, [t for r in range(ranks) for t in _stage(r, start, r * chunk, chunk, True)], composer.all_gather(blocks),
             [t for r in range(ranks) for q in range(ranks) for t in _stage(r, q * chunk, q * per_rank + start, chunk, False)], ranks)
        return
    senders = [call.root] if call.op == SCATTER else range(ranks)
    _add(schedule, [t for r in senders for q in range(ranks) for t in _stage(r, q * per_rank + start, q * chunk, chunk, True)],
         composer.reduce_scatter(blocks) if call.op == REDUCE_SCATTER else composer.scatter(call.root, blocks),
         [t for r in range(ranks) for t in _stage(r, r * chunk, start, chunk, False)], ranks)


def _all_to_all(call: Collective, layout: Layout, algorithms: Mapping[int, Algorithm], schedule: Schedule) -> Schedule:
    """Rank ``i``'s input holds its pieces for ranks ``0 .. p - 1`` in order, its output what it gets
    from them in order (torch's all_to_all_single layout); the buffer holds the input, then the
    output, then the staging room of a staged (pipeline) all-to-all."""
    ranks, size = len(layout.coords), call.itemsize
    counts = call.counts
    sent = [[c * size for c in row] for row in counts]
    in_offsets = [[sum(row[:j]) for j in range(ranks)] for row in sent]
    got = [[sent[i][j] for i in range(ranks)] for j in range(ranks)]
    out_offsets = [[sum(col[:i]) for i in range(ranks)] for col in got]
    inbox = max(sum(row) for row in sent)
    pieces = [[(in_offsets[i][j], inbox + out_offsets[j][i], sent[i][j]) for j in range(ranks)] for i in range(ranks)]
    stage_in = [t for r in range(ranks) for t in _stage(r, 0, 0, sum(sent[r]), True)]
    stage_out = [t for r in range(ranks) for t in _stage(r, inbox, 0, sum(got[r]), False)]
    local = [[t for r in range(ranks) if sent[r][r] for t in [Transfer(r, r, in_offsets[r][r], inbox + out_offsets[r][r], sent[r][r])]]]
    top = max(layout.levels, default=0)
    algorithm = algorithms.get(top)
    work = inbox + max(sum(col) for col in got)
    if isinstance(algorithm, Pipeline) and len(layout.levels) == 2:
        at = layout.rank_at()
        local_size, servers = layout.dims[0], layout.dims[1]
        grid = [[at[(i, s, 0)] for i in range(local_size)] for s in range(servers)]
        staging = staging_bytes(grid, pieces)
        phases = algorithm.grid_all_to_all(grid, pieces, [work] * ranks)
        segment = (f"{algorithm.name} A2A", top, concurrent([local, phases]))
        work += staging
    elif algorithm is not None:
        segment = (f"{algorithm.name} A2A", top, concurrent([local, algorithm.all_to_all(list(range(ranks)), pieces)]))
    else:
        segment = ("local A2A", 0, local)
    _add(schedule, stage_in, [segment], stage_out, ranks)
    schedule.work_bytes = work
    return schedule


def _level_between(layout: Layout, a: int, b: int) -> int:
    """The HCCL level that joins ranks ``a`` and ``b``: the outermost axis their coordinates differ on."""
    ca, cb = layout.coords[a], layout.coords[b]
    differ = [axis for axis in range(3) if ca[axis] != cb[axis]]
    return max(differ, default=0)
