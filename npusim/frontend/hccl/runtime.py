"""HCCL's collectives on the simulated machine: communicators of ranks (one per die), and the play
of a collective's schedule over the fabric (docs/collectives.md).

Each rank calls a collective on its own (torch's ranks each call ``dist.all_reduce``); the call joins
the communicator's next collective (matched by order, as HCCL matches them) and queues the rank's
part on its stream. Once every rank has called, the algorithms are chosen and the schedule planned
(:mod:`npusim.kernels.hccl`). Each rank's part then plays its steps in order: a step starts when the
rank has finished its previous one; each transfer of the step waits until its receiver has started
the step too and HCCL's ready notification (``hccl.notify``) has reached the sender, runs on an
engine of the sender's die (SDMA inside a pod, the RoCE queue pair between servers and SuperPoDs,
the AIV cores with AIV expansion), and lands its bytes (reduced into the receiver's with an inline
reduce); the step ends once its outgoing transfers are done and its incoming ones have been
announced (another ``hccl.notify``). A reduction the engines cannot apply inline (prod, int64)
lands in scratch and is reduced by a local pass. Each rank has an ``hccl`` lane per communicator
with one event per step: algorithm, phase, step, peer, bytes.

A collective that a rank never calls leaves the others waiting: the session's deadlock report names
the ranks that did not arrive.
"""

from __future__ import annotations

import itertools
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
import simpy

from npusim.config.products import PRODUCTS
from npusim.engine.loop import clock
from npusim.errors import OpArgumentError, UsageError
from npusim.frontend.tensor import DeviceTensor
from npusim.hw.dma import CopyPath, GmBlock, VectorCoreWrites
from npusim.hw.memory import Allocation
from npusim.hw.stream import Stream
from npusim.hw.topology import Direction
from npusim.kernels.hccl.algorithm import ALL_GATHER, ALL_REDUCE, ALL_TO_ALL, BROADCAST, REDUCE, REDUCE_SCATTER, SCATTER
from npusim.kernels.hccl.hierarchy import Layout
from npusim.kernels.hccl.plan import SEND, Collective, plan
from npusim.kernels.hccl.reduce import check_reduction, combiner, divide, inline
from npusim.kernels.hccl.schedule import INPUT, OUTPUT, RankStep, Schedule, Step, Transfer
from npusim.kernels.hccl.selection import Choice, choose, hccl_spec, series_of

API_NAMES = {ALL_REDUCE: "HcclAllReduce", ALL_GATHER: "HcclAllGather", REDUCE_SCATTER: "HcclReduceScatter",
             BROADCAST: "HcclBroadcast", REDUCE: "HcclReduce", ALL_TO_ALL: "HcclAlltoAllV", SCATTER: "HcclScatter",
             SEND: "HcclSend"}
"""The HCCL API each op is (the trace's op names)."""
_communicator_serials = itertools.count()
_DMA, _RDMA = "dma", "rdma"
_point_to_point: weakref.WeakKeyDictionary[Stream, list[simpy.Event]] = weakref.WeakKeyDictionary()
"""Per stream, the sends and receives started on it and not yet waited for by a later collective."""


@dataclass
class Request:
    """One rank's call: the op, its tensors (contiguous, on the rank's die), the reduction and root,
    for an all-to-all the elements the rank sends to and gets from each rank, for a send its peer."""

    op: str
    input: DeviceTensor | None
    output: DeviceTensor | None
    stream: Stream
    reduce_op: str | None = None
    root: int = 0
    send_counts: tuple[int, ...] = ()
    recv_counts: tuple[int, ...] = ()
    peer: int = -1
    gate: Callable[[Stream], object] | None = None
    """Called with the stream before the rank's part is queued (a torch program's host launch)."""

    @property
    def dtype(self) -> np.dtype:
        tensor = self.input if self.input is not None else self.output
        assert tensor is not None
        return tensor.dtype


class _Buffers(NamedTuple):
    work: Allocation
    input: DeviceTensor | None
    output: DeviceTensor | None


class Communicator:
    """The ``size`` ranks of a communication group and the collectives they call, by order; rank
    ``r`` runs on die ``dies[r]``, known from the start or from its first call's tensors (torch_npu
    creates its HCCL communicator on the device of the first collective's tensors). ``name`` labels
    its trace lanes."""

    def __init__(self, session, size: int, name: str, dies: Sequence[int] | None = None) -> None:
        system = session.system
        self.session = session
        self.system = system
        self.spec = system.spec
        self.hccl = hccl_spec(self.spec)
        series_of(self.spec)
        self.name = name
        self.index = next(_communicator_serials)
        self.dies: list[int | None] = [None] * size
        self._layout: Layout | None = None
        for rank, die in enumerate(dies or ()):
            self.bind(rank, die)
        self.calls: list[Run] = []
        self.made: list[int] = [0] * size  # collectives each rank has called
        self.pairs: dict[tuple[int, int], list[Run]] = {}  # (sender, receiver) -> their point-to-point runs, by order
        self.pair_made: dict[tuple[int, int, int], int] = {}  # (rank, sender, receiver) -> that rank's calls of the pair
        self.work: list[Allocation | None] = [None] * size
        self.vector_kind = PRODUCTS.get(self.spec.product).vector_cores
        self.aiv_engines: dict[int, VectorCoreWrites] = {}
        self.paths: dict[tuple[int, int], tuple[str, CopyPath]] = {}
        session.deadlock_reporters.append(self._waiting)

    @property
    def size(self) -> int:
        return len(self.dies)

    def bind(self, rank: int, die: int) -> None:
        """Rank ``rank`` runs on die ``die`` (checked against an earlier binding and the other ranks')."""
        known = self.dies[rank]
        if known == die:
            return
        if known is not None:
            raise OpArgumentError(f"communicator {self.name!r}: rank {rank}'s tensors are on npu:{die}, but its earlier collectives ran "
                                  f"on npu:{known}; a rank keeps its device (torch.npu.set_device once, at the start)")
        if die in self.dies:
            other = self.dies.index(die)
            raise OpArgumentError(f"communicator {self.name!r}: ranks {other} and {rank} both run on npu:{die}; HCCL runs one rank per "
                                  "device: give each rank its own (torch.npu.set_device(rank))")
        self.system.die(die)
        self.dies[rank] = die

    def die_of(self, rank: int) -> int:
        die = self.dies[rank]
        assert die is not None, "a rank's die is known once it has called"
        return die

    @property
    def layout(self) -> Layout:
        """Where the ranks sit (known once every rank has called: asked only then)."""
        if self._layout is None:
            self._layout = self.layout_of(list(range(self.size)))
        return self._layout

    def layout_of(self, ranks: list[int]) -> Layout:
        """Where ``ranks`` sit, as a layout of their own (ranks numbered in that order)."""
        shape = self.spec.shape
        return Layout.of([(shape.pod_of(d), shape.node_of(d)) for d in map(self.die_of, ranks)])

    def _rank(self, rank: object, what: str) -> int:
        if not isinstance(rank, int) or isinstance(rank, bool) or not 0 <= rank < self.size:
            raise OpArgumentError(f"{what} = {rank!r}: communicator {self.name!r} has ranks 0..{self.size - 1}; name one of them")
        return rank

    def call(self, rank: int, request: Request) -> Run:
        """Rank ``rank`` calls ``request``: it joins the matching collective, and its part is queued
        on its stream (it runs once every rank has called)."""
        self._rank(rank, "rank")
        api = API_NAMES[request.op]
        for name, tensor in (("input", request.input), ("output", request.output)):
            if tensor is None:
                continue
            if self.dies[rank] is None:
                self.bind(rank, tensor.device)
            if tensor.device != self.dies[rank]:
                raise OpArgumentError(f"{api}: rank {rank}'s {name} is on npu:{tensor.device}, but rank {rank} of communicator "
                                      f"{self.name!r} runs on npu:{self.dies[rank]}; create it there")
            if not tensor.is_contiguous():
                raise OpArgumentError(f"{api}: rank {rank}'s {name} {tensor!r} is not contiguous; HCCL moves contiguous buffers: "
                                      "pass tensor.contiguous()")
        if request.reduce_op is not None:
            check_reduction(request.reduce_op, request.dtype, api)
        if request.op == SEND:
            run = self._pair(rank, request)
        else:
            sequence = self.made[rank]
            self.made[rank] += 1
            if sequence == len(self.calls):
                self.calls.append(Run(self, sequence, list(range(self.size))))
            run = self.calls[sequence]
        run.join(rank, request)
        return run

    def _pair(self, rank: int, request: Request) -> Run:
        """The point-to-point run ``request`` (a send when ``request.peer`` receives from ``rank``, a
        receive when ``request.root`` sends to it) joins: the pair's next one, by order."""
        sender, receiver = (rank, self._rank(request.peer, "dst")) if request.root == rank else (self._rank(request.root, "src"), rank)
        if sender == receiver:
            raise OpArgumentError(f"HcclSend: rank {rank} sends to itself; send to another rank of communicator {self.name!r}")
        runs = self.pairs.setdefault((sender, receiver), [])
        key = (rank, sender, receiver)
        index = self.pair_made.get(key, 0)
        self.pair_made[key] = index + 1
        if index == len(runs):
            runs.append(Run(self, index, [sender, receiver], pair=(sender, receiver)))
        return runs[index]

    def path(self, src: int, dst: int) -> tuple[str, CopyPath]:
        """How a copy goes from die ``src``'s GM to die ``dst``'s: by SDMA inside a die or over the
        load/store fabric, else by RDMA (kept per pair of dies)."""
        key = (src, dst)
        found = self.paths.get(key)
        if found is None:
            system = self.system
            if src == dst:
                found = (_DMA, system.local_copy_path(src))
            elif system.topology.joins(src, dst):
                found = (_DMA, system.copy_path(src, dst, Direction.WRITE, rdma=False))
            else:
                found = (_RDMA, system.copy_path(src, dst, Direction.WRITE, rdma=True))
            self.paths[key] = found
        return found

    def aiv(self, die: int) -> VectorCoreWrites:
        """The AIV cores of die ``die`` as the engine of an AIV-expanded op."""
        engine = self.aiv_engines.get(die)
        if engine is None:
            engine = self.aiv_engines[die] = VectorCoreWrites(self.system.die(die), self.vector_kind)
        return engine

    def work_buffer(self, rank: int, nbytes: int) -> Allocation:
        """Rank ``rank``'s communication buffer, at least ``nbytes`` (grown when an op needs more)."""
        work = self.work[rank]
        if work is None or work.size_bytes < nbytes:
            work = self.work[rank] = self.system.die(self.die_of(rank)).memory.allocate(max(nbytes, 1), f"hccl buffer ({self.name})")
        return work

    def _waiting(self) -> list[str]:
        """Deadlock report lines: the collectives some ranks called and others did not."""
        lines = []
        for run in [*self.calls, *itertools.chain.from_iterable(self.pairs.values())]:
            if run.ready.triggered:
                continue
            arrived = sorted(run.requests)
            missing = [r for r in run.ranks if r not in run.requests]
            what = f"{API_NAMES[run.op or SEND]} #{run.sequence + 1}" + (f" from rank {run.pair[0]} to rank {run.pair[1]}" if run.pair else "")
            known = [f"rank {r} on npu:{self.dies[r]}" for r in missing if self.dies[r] is not None]
            lines.append(f"  communicator {self.name!r}: {what}: rank(s) {_ranks(arrived)} called it and wait; rank(s) "
                         f"{_ranks(missing)} never did" + (f" ({', '.join(known)})" if known else ""))
        return lines


def _ranks(ranks: Sequence[int]) -> str:
    return ", ".join(map(str, ranks)) if ranks else "none"


class Run:
    """One collective of a communicator (or one point-to-point pair): the ranks' requests as they
    arrive, then its choice of algorithms, schedule and play."""

    def __init__(self, communicator: Communicator, sequence: int, ranks: list[int], pair: tuple[int, int] | None = None) -> None:
        self.communicator = communicator
        self.sequence = sequence
        self.ranks = ranks
        self.pair = pair
        self.requests: dict[int, Request] = {}
        self.finished: dict[int, simpy.Event] = {}  # rank -> its part has ended
        self.op: str | None = None
        self.ready = simpy.Event(communicator.system.env)
        self.started: dict[tuple[int, int], simpy.Event] = {}  # (rank, step) -> the rank has started the step
        self.announced: dict[tuple[int, int, int], simpy.Event] = {}  # (sender, receiver, step) -> the receiver knows its data landed
        self.captures: dict[tuple[int, int], dict[Transfer, np.ndarray]] = {}  # (receiver, step) -> contributions set aside
        self.cancelled = False
        self.schedule: Schedule | None = None
        self.choice: Choice | None = None
        self.call: Collective | None = None

    # -- arrival -----------------------------------------------------------------------------------

    def join(self, rank: int, request: Request) -> None:
        comm = self.communicator
        api = API_NAMES[request.op]
        if rank in self.requests:
            raise UsageError(f"{api}: rank {rank} joined collective #{self.sequence + 1} of communicator {comm.name!r} twice")
        if self.requests:
            first_rank, first = next(iter(self.requests.items()))
            self._same(rank, request, first_rank, first)
            if request.op == ALL_TO_ALL:
                self._splits_agree(rank, request)
        self.op = request.op
        self.requests[rank] = request
        self.finished[rank] = simpy.Event(comm.system.env)
        if request.gate is not None:
            request.gate(request.stream)
        comm.session.track(request.stream.submit(self._start_point_to_point if self.pair else self._rank_task, rank))
        comm.session.track(self.finished[rank])
        if len(self.requests) == len(self.ranks):
            try:
                self._plan()
            except BaseException:
                self.cancelled = True  # the ranks' parts end at once: the error is the caller's
                self.ready.succeed()
                raise
            self.ready.succeed()

    def _same(self, rank: int, request: Request, first_rank: int, first: Request) -> None:
        """The calls of one collective must agree (HCCL checks the same; a mismatch would hang or
        corrupt the data on the device)."""
        comm = self.communicator
        where = f"communicator {comm.name!r}, collective #{self.sequence + 1}"
        if self.pair is not None:
            if request.dtype != first.dtype or _count(request) != _count(first):
                raise OpArgumentError(f"HcclSend/HcclRecv ({where}): rank {first_rank} moves {_count(first)} x {first.dtype} but rank "
                                      f"{rank} {_count(request)} x {request.dtype}; a send and its receive take the same size and dtype")
            return
        if request.op != first.op:
            raise OpArgumentError(f"{where}: rank {rank} calls {API_NAMES[request.op]} where rank {first_rank} called "
                                  f"{API_NAMES[first.op]}: every rank must call the same collectives in the same order")
        for what, mine, theirs in (("dtype", request.dtype, first.dtype), ("reduction", request.reduce_op, first.reduce_op),
                                   ("root", request.root, first.root)):
            if mine != theirs:
                raise OpArgumentError(f"{API_NAMES[request.op]} ({where}): rank {rank} passes {what} {mine} but rank {first_rank} "
                                      f"{theirs}; every rank must pass the same")
        if request.op != ALL_TO_ALL and _count(request) != _count(first):
            raise OpArgumentError(f"{API_NAMES[request.op]} ({where}): rank {rank} passes {_count(request)} elements per rank but rank "
                                  f"{first_rank} {_count(first)}; every rank must pass tensors of the same size")

    def _splits_agree(self, rank: int, request: Request) -> None:
        """An all-to-all's pieces: what each rank sends another is what that one expects from it."""
        comm = self.communicator
        size = comm.size
        for counts, what in ((request.send_counts, "send_counts"), (request.recv_counts, "recv_counts")):
            if len(counts) != size:
                raise OpArgumentError(f"HcclAlltoAllV: rank {rank}'s {what} has {len(counts)} entries; give one per rank ({size})")
        for other, theirs in self.requests.items():
            for i, j, sent, expected in ((rank, other, request.send_counts[other], theirs.recv_counts[rank]),
                                         (other, rank, theirs.send_counts[rank], request.recv_counts[other])):
                if sent != expected:
                    raise OpArgumentError(
                        f"HcclAlltoAllV (communicator {comm.name!r}, collective #{self.sequence + 1}): rank {i} sends {sent} elements to "
                        f"rank {j}, but rank {j} expects {expected} from rank {i}; the split sizes must agree (input_split_sizes of the "
                        "sender, output_split_sizes of the receiver)")
        if request.send_counts[rank] != request.recv_counts[rank]:
            raise OpArgumentError(f"HcclAlltoAllV: rank {rank} sends itself {request.send_counts[rank]} elements but expects "
                                  f"{request.recv_counts[rank]}; the split sizes must agree")

    def _plan(self) -> None:
        comm = self.communicator
        requests = self.requests
        first = requests[self.ranks[0]]
        itemsize = first.dtype.itemsize
        if self.pair is not None:
            call = Collective(SEND, itemsize, _count(requests[self.pair[0]]), root=self.pair[0], peer=self.pair[1])
        elif first.op == ALL_TO_ALL:
            call = Collective(ALL_TO_ALL, itemsize, counts=tuple(requests[r].send_counts for r in self.ranks))
        else:
            call = Collective(first.op, itemsize, _count(first), root=first.root)
        self.call = call
        layout = comm.layout if self.pair is None else comm.layout_of(list(self.pair))
        self.choice = choose(comm.spec, layout, call, first.reduce_op, first.dtype)
        self.schedule = plan(call, layout, self.choice.algorithms, comm.hccl.buffer.bytes)
        self._prepare()

    def _prepare(self) -> None:
        """Per rank: its buffers, its steps, its op record; per (rank, step): when it starts."""
        comm, schedule = self.communicator, self.schedule
        assert schedule is not None and self.call is not None and self.choice is not None
        system = comm.system
        recorder = system.recorder
        first = self.requests[self.ranks[0]]
        self.buffers = {r: _Buffers(comm.work_buffer(r, schedule.work_bytes), self.requests[r].input, self.requests[r].output)
                        for r in self.ranks}
        self.plays = schedule.by_rank(comm.size)
        api = API_NAMES[self.call.op]
        described = self.choice.describe() if self.pair is None else {"transport": self.choice.transport}
        self.op_ids = {r: recorder.op(api, comm.die_of(r), communicator=comm.name, rank=r, ranks=comm.size, dtype=first.dtype.name,
                                      bytes=self.call.bytes_per_rank, **({"reduce": first.reduce_op} if first.reduce_op else {}),
                                      **described) for r in self.ranks}
        self.track = {r: recorder.track(comm.die_of(r), "hccl", comm.name, (1, comm.index)) for r in self.ranks}
        self.engine_name = recorder.name_id(api)
        reduce_op = first.reduce_op
        self.inline = reduce_op is None or inline(reduce_op, first.dtype)
        self.combine = combiner(reduce_op, first.dtype) if reduce_op is not None else None
        self.deterministic = comm.hccl.deterministic
        hz = comm.spec.die.clock.hz
        self.notify_ps = (comm.hccl.aiv_sync if self.choice.transport == "aiv" else comm.hccl.notify).to_ps(hz)

    def event(self, rank: int, step: int) -> simpy.Event:
        """The event of ``rank`` starting step ``step``."""
        key = (rank, step)
        event = self.started.get(key)
        if event is None:
            event = self.started[key] = simpy.Event(self.communicator.system.env)
        return event

    # -- play ------------------------------------------------------------------------------------

    def _start_point_to_point(self, rank: int):
        """A send or receive on its stream: started, not waited for, so that a rank's consecutive
        sends and receives run side by side (a batch_isend_irecv); the stream's next collective waits
        for them."""
        env = self.communicator.system.env
        env.process(self._part(rank))
        _point_to_point.setdefault(self.requests[rank].stream, []).append(self.finished[rank])
        yield env.timeout(0)

    def _rank_task(self, rank: int):
        """A rank's part of a collective, on its stream, after the sends and receives started there."""
        started = _point_to_point.pop(self.requests[rank].stream, None)
        if started:
            yield self.communicator.system.env.all_of(started)
        yield from self._part(rank)

    def _part(self, rank: int):
        """A rank's steps in order, then AVG's division; ends its ``finished`` event."""
        if not self.ready.processed:
            yield self.ready
        if self.cancelled:
            self.finished[rank].succeed()
            return
        assert self.schedule is not None and self.call is not None
        for part in self.plays[rank]:
            yield from self._step(rank, part)
        request = self.requests[rank]
        if request.reduce_op == "avg" and request.output is not None and (self.call.op != REDUCE or rank == self.call.root):
            yield from self._local_pass(rank, _Divide(request.output, self.communicator.size), "avg: divide by the group size")
        self.finished[rank].succeed()

    def _step(self, rank: int, part: RankStep):
        comm = self.communicator
        env = comm.system.env
        start = clock(env)
        index, step, outgoing, incoming = part
        self.event(rank, index).succeed()
        waits = [env.process(self._job(rank, peer, transfers, index, step, len(outgoing))) for peer, transfers in outgoing.items()]
        senders = sorted({t.src for t in incoming})
        # a sender's job announces its data to this rank (a notify) once it has landed
        waits.extend(self._landed(sender, rank, index) for sender in senders)
        if waits:
            yield env.all_of(waits)
        if self.deterministic or not self.inline:
            self._apply_captured(rank, index, incoming)
        sent = sum(t.nbytes for transfers in outgoing.values() for t in transfers)
        name = f"{step.label} {_peers(rank, outgoing, senders)}"
        recorder = comm.system.recorder
        recorder.record(self.track[rank], recorder.name_id(name), start, clock(env), sent, self.op_ids[rank], -1)

    def _landed(self, sender: int, receiver: int, index: int) -> simpy.Event:
        """The event of ``receiver`` learning that ``sender``'s data of step ``index`` has landed."""
        key = (sender, receiver, index)
        event = self.announced.get(key)
        if event is None:
            event = self.announced[key] = simpy.Event(self.communicator.system.env)
        return event

    def _job(self, rank: int, peer: int, transfers: list[Transfer], index: int, step: Step, fanout: int):
        """The transfers of one step from ``rank`` to ``peer``: after the peer has started the step
        and its ready notification has arrived, on the sender's engine; then the landing is
        announced to the peer."""
        comm = self.communicator
        system = comm.system
        env = system.env
        remote = peer != rank
        if remote:
            ready = self.event(peer, index)
            if not ready.processed:
                yield ready
            yield env.timeout(self.notify_ps)
        blocks = [self._block(t, index) for t in transfers]
        src_die, dst_die = comm.die_of(rank), comm.die_of(peer)
        die = system.die(src_die)
        op = self.op_ids[rank]
        kind, path = comm.path(src_die, dst_die)
        if kind == _DMA:
            if self.choice.transport == "aiv" and step.level >= 0 and remote:  # type: ignore[union-attr]
                yield from comm.aiv(src_die).run(blocks, path, comm.hccl.aiv_cores / fanout, self.engine_name, op)
            else:
                yield from die.sdma.run(blocks, path, self.engine_name, op)
        else:
            yield from die.queue_pair(dst_die).run(blocks, path, self.engine_name, op)
        if remote and any(t.reduce for t in transfers) and not self.inline:
            # the bytes landed in scratch; the receiver's local pass reduces them into its buffer
            yield from self._local_pass(peer, None, "reduce", nbytes=sum(t.nbytes for t in transfers))
        if remote:
            yield env.timeout(self.notify_ps)
            self._landed(rank, peer, index).succeed()

    def _local_pass(self, rank: int, block, purpose: str, nbytes: int | None = None):
        """A pass over the GM of ``rank``'s die (a separate reduction, AVG's division): one local SDMA
        copy of the bytes' cost, applying ``block`` at its end."""
        comm = self.communicator
        system = comm.system
        die = comm.die_of(rank)
        pass_block = block if block is not None else _Nothing(nbytes or 0)
        yield from system.die(die).sdma.run([pass_block], system.local_copy_path(die), system.recorder.name_id(purpose), self.op_ids[rank])

    # -- bytes -----------------------------------------------------------------------------------

    def _where(self, rank: int, buffer: str, offset: int) -> tuple[Allocation, int]:
        buffers = self.buffers[rank]
        if buffer == INPUT:
            assert buffers.input is not None
            return buffers.input.allocation, buffers.input.offset_bytes + offset
        if buffer == OUTPUT:
            assert buffers.output is not None
            return buffers.output.allocation, buffers.output.offset_bytes + offset
        return buffers.work, offset

    def _block(self, t: Transfer, index: int):
        src, src_offset = self._where(t.src, t.src_buffer, t.src_offset)
        dst, dst_offset = self._where(t.dst, t.dst_buffer, t.dst_offset)
        if not t.reduce:
            return GmBlock(src, src_offset, dst, dst_offset, t.nbytes)
        if self.deterministic or not self.inline:
            return _Capture(src, src_offset, t.nbytes, self._captured(t.dst, index), t)
        assert self.combine is not None
        return _Reduce(src, src_offset, dst, dst_offset, t.nbytes, self.requests[self.ranks[0]].dtype, self.combine)

    def _captured(self, rank: int, index: int) -> dict[Transfer, np.ndarray]:
        return self.captures.setdefault((rank, index), {})

    def _apply_captured(self, rank: int, index: int, incoming: list[Transfer]) -> None:
        """Reduce the captured contributions into ``rank``'s buffer in the order the step lists them."""
        captures = self.captures.pop((rank, index), None)
        if not captures:
            return
        dtype = self.requests[self.ranks[0]].dtype
        assert self.combine is not None
        for t in incoming:
            values = captures.get(t)
            if values is None:
                continue
            dst, offset = self._where(t.dst, t.dst_buffer, t.dst_offset)
            assert dst.data is not None
            target = dst.data[offset:offset + t.nbytes].view(dtype)
            target[...] = self.combine(target, values.view(dtype))


def _peers(rank: int, outgoing: dict[int, list[Transfer]], senders: list[int]) -> str:
    """``->r5``, ``<-r3``, ``->r5 <-r3``, ``->7 peers`` ...: where a rank's step sends and receives."""
    to = [p for p in outgoing if p != rank]
    parts = []
    if to:
        parts.append(f"->r{to[0]}" if len(to) == 1 else f"->{len(to)} peers")
    if senders:
        parts.append(f"<-r{senders[0]}" if len(senders) == 1 else f"<-{len(senders)} peers")
    return " ".join(parts) or "local"


def _count(request: Request) -> int:
    """The elements per rank the op's sizes key on (module Collective)."""
    op = request.op
    if op in (ALL_REDUCE, BROADCAST, REDUCE, SEND):
        tensor = request.input if request.input is not None else request.output
    elif op == ALL_GATHER:
        tensor = request.input
    else:
        tensor = request.output
    assert tensor is not None
    return tensor.size


class _Reduce(NamedTuple):
    """A block that reduces its bytes into the destination's when it lands (an inline reduce)."""

    src: Allocation
    src_offset: int
    dst: Allocation
    dst_offset: int
    nbytes: int
    dtype: np.dtype
    combine: Callable

    def copy(self, _event: simpy.Event | None = None) -> None:
        assert self.src.data is not None and self.dst.data is not None
        values = self.src.data[self.src_offset:self.src_offset + self.nbytes].view(self.dtype)
        target = self.dst.data[self.dst_offset:self.dst_offset + self.nbytes].view(self.dtype)
        target[...] = self.combine(target, values)


class _Capture(NamedTuple):
    """A block whose bytes land aside (a scratch buffer) to be reduced later, in order."""

    src: Allocation
    src_offset: int
    nbytes: int
    store: dict
    transfer: Transfer

    def copy(self, _event: simpy.Event | None = None) -> None:
        assert self.src.data is not None
        self.store[self.transfer] = self.src.data[self.src_offset:self.src_offset + self.nbytes].copy()


class _Nothing(NamedTuple):
    """A pass's bytes with no effect of their own."""

    nbytes: int

    def copy(self, _event: simpy.Event | None = None) -> None:
        pass


class _Divide(NamedTuple):
    """AVG's division of the output by the group size."""

    tensor: DeviceTensor
    ranks: int

    @property
    def nbytes(self) -> int:
        return self.tensor.nbytes

    def copy(self, _event: simpy.Event | None = None) -> None:
        values = self.tensor.host_view()
        values[...] = divide(values, self.ranks)
