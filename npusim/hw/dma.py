"""DMA engines: the die-level engines for bulk copies between the GM of two dies, driven the way a
transfer library (HIXL, through HCCL's one-sided BatchPut / BatchGet) drives them. The request
queue every engine keeps is :class:`npusim.hw.queue.EngineQueue` (a core's MTE or FixPipe, an SDMA
channel).

- :class:`SystemDma` is a die's SDMA. A transfer holds one of its ``channels`` and runs its blocks
  on the channel's queue: HCCL puts one SDMA task per block on one runtime stream, and a stream
  starts a task when the previous one has completed (``sdma.queue_depth`` 1). One block costs
  ``setup + source memory latency + path round trip + bytes / rate``. Both directions pay one round
  trip: a put's completion waits for the acknowledgement of its writes, a get sends its read
  requests and waits for the data. The ``setup`` is the engine's own cost per descriptor (fetch and
  decode, completion report).
- :class:`RdmaQueuePair` is the RoCE queue pair from one die to a peer. The NIC keeps many work
  requests of a queue pair in flight, streaming the bytes of one block right after the previous
  one's, so a transfer pays the path latency once, not once per block.

- :class:`VectorCoreWrites` is a die's AIV cores copying straight from its GM into another die's
  (an AIV-expanded HCCL op: HCCL_OP_EXPANSION_MODE=AIV): no descriptor set-up, the cores' GM read
  and write paths instead, at the rate of the cores the copy is given.

A block reads the source die's GM through its L2 (:mod:`npusim.hw.cache`: its resident lines hit,
the others come from HBM) and writes the destination's through its L2 (lines allocated dirty).
All apply each block's bytes (when data is on) at the block's completion: a block is a
:class:`GmBlock` or anything with its ``nbytes`` and ``copy`` (a copy that reduces into the
destination, HCCL's inline reduce), and record each block as a transfer (its fixed part and
bottleneck, as the cores' copies are), with the config keys of its costs told to the recorder (an
SDMA's ``die.sdma`` set-up and rate; the routes' latencies). Times in ps, rates in bytes/ps.

This module is typed to mypy's strict level and compiled with the engine (setup.py: mypyc, in the
engine's shared library; :mod:`npusim.engine` chooses compiled or interpreted for all), so the path
of every block (an engine's loop, :meth:`CopyPath.segments`, the completion) runs as C; interpreted,
it runs the same code with the same results.
"""

from __future__ import annotations

import math
from collections.abc import Generator, Sequence
from dataclasses import dataclass, field
from heapq import heappop, heappush
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol, cast

import simpy

from npusim.engine.flow import FlowClass, Resource
from npusim.engine.loop import Environment, clock, succeed_at
from npusim.hw.memory import Allocation
from npusim.hw.queue import EngineQueue, Request, split_by_hits
from npusim.trace.costs import EngineCosts, Term
from npusim.trace.rows import EventRows

if TYPE_CHECKING:
    from npusim.hw.cache import L2Cache, L2Tally
    from npusim.hw.system import Die, System


SDMA, RDMA = "sdma", "rdma"
"""The units of a die's bulk-copy lanes (``sdma chN``, ``rdma qp dieN``), also their kinds of engine."""


class GmBlock(NamedTuple):
    """One descriptor of a bulk copy: ``nbytes`` contiguous bytes from ``src`` at ``src_offset`` to
    ``dst`` at ``dst_offset`` (offsets in bytes into the allocations)."""

    src: Allocation
    src_offset: int
    dst: Allocation
    dst_offset: int
    nbytes: int

    def copy(self, _event: simpy.Event | None = None) -> None:
        """Move the real bytes (only when data is on; both allocations hold bytes then); a callback
        of the event that completes the block, too."""
        dst, src = self.dst.data, self.src.data
        assert dst is not None and src is not None, "a block's bytes move only with data on"
        dst[self.dst_offset : self.dst_offset + self.nbytes] = src[self.src_offset : self.src_offset + self.nbytes]


class Block(Protocol):
    """One descriptor's bytes and what they do when they land (``copy``, called with data on)."""

    @property
    def nbytes(self) -> int: ...

    def copy(self, _event: simpy.Event | None = None) -> None: ...


class PathEnd(Protocol):
    """What a :class:`CopyPath` reads of the die at either of its ends (a
    :class:`~npusim.hw.system.Die`): its L2, and its system, whose network carries the blocks'
    flows. (A protocol, not ``Die``: compiled, the dataclass's fields are annotated with classes
    that exist when the module is imported, and ``Die``'s module imports this one.)"""

    @property
    def cache(self) -> L2Cache: ...

    @property
    def system(self) -> System: ...


@dataclass(frozen=True)
class CopyPath:
    """What every block of a bulk copy from one die's GM to another's crosses: ``source`` and
    ``destination`` (the dies, whose L2 caches the block reads and writes); the resources of a
    source hit (the source's L2, the fabric or NIC path, the destination's L2) and of a source miss
    (the source's HBM too); the one-way latency of the path; the access latency of the source
    memory on a hit (L2) and on a miss (L2 and HBM), in ps; the path's and the miss's latencies as
    terms by config key."""

    source: PathEnd
    destination: PathEnd
    hit_resources: tuple[Resource, ...]
    miss_resources: tuple[Resource, ...]
    path_latency_ps: int
    hit_latency_ps: int
    miss_latency_ps: int
    path_latency: tuple[Term, ...] = ()
    memory_latency: tuple[Term, ...] = ()
    _flow_classes: dict[float, tuple[FlowClass | None, FlowClass | None]] = field(default_factory=dict, init=False, repr=False, compare=False)
    """The network's flow classes of a hit and of a miss by the cap they were made for (the
    network keeps a class for good once made: the same objects it would return)."""
    _latencies: dict[int, tuple[Term, ...]] = field(default_factory=dict, init=False, repr=False, compare=False)
    """:meth:`latency`'s terms by number of trips, made on first use (an engine tells them to the
    recorder at every transfer)."""

    @property
    def resources(self) -> tuple[Resource, ...]:
        """What a block that misses in the source's L2 crosses (a copy that does not look up the L2)."""
        return self.miss_resources

    @property
    def memory_latency_ps(self) -> int:
        """The source memory's latency of a miss (a copy that does not look up the L2)."""
        return self.miss_latency_ps

    def latency(self, trips: int) -> tuple[Term, ...]:
        """The terms of the source memory's latency (a miss) and ``trips`` crossings of the path."""
        terms = self._latencies.get(trips)
        if terms is None:
            terms = self._latencies[trips] = self.memory_latency + tuple(Term(term.keys, trips * term.ps) for term in self.path_latency)
        return terms

    def segments(self, block: Block, cap: float, ready_ps: int, at_ps: int, tally: L2Tally | None) -> list[tuple[FlowClass | None, int, int]]:
        """The flows of ``block`` (capped at ``cap``): its source bytes looked up in the source's L2
        and its destination lines allocated in the destination's, both reached at ``at_ps``; its hit
        part may start flowing at ``ready_ps`` + the hit latency, its miss part at ``ready_ps`` + the
        miss latency."""
        nbytes = block.nbytes
        hit, lines, arrived = 0.0, 0, 0
        src, dst = getattr(block, "src", None), getattr(block, "dst", None)  # a block of no GM side (a pass's cost) is a miss
        if nbytes and isinstance(src, Allocation):
            hit, lines, arrived = self.source.cache.access(src, cast(Any, block).src_offset, nbytes, nbytes, 1, False, at_ps, tally, nbytes)
        if nbytes and isinstance(dst, Allocation):
            self.destination.cache.access(dst, cast(Any, block).dst_offset, nbytes, nbytes, 1, True, at_ps, tally, nbytes)
        hit_ready = ready_ps + (arrived - at_ps if arrived > at_ps else 0) + self.hit_latency_ps  # an earlier miss may be fetching its lines
        classes = self._flow_classes.get(cap)
        if classes is None:  # made here, after the L2's look-ups, as the network would make them on a first use
            network = self.source.system.network
            classes = self._flow_classes[cap] = (network.flow_class(self.hit_resources, cap), network.flow_class(self.miss_resources, cap))
        return split_by_hits(nbytes, hit, lines, (classes[0], hit_ready), (classes[1], ready_ps + self.miss_latency_ps))


class Channels:
    """The free channels of a die's SDMA, which transfers take in the order they ask for one, the
    lowest free first: SimPy's ``PriorityStore`` of the channel numbers (capacity: all of them),
    with every event at the same moment and in the same order, so every result is the same, without
    its generic put and get events and queues (a transfer takes a channel and gives it back). A get
    is an event whose value is the channel taken. A put returns a channel the caller took (so it
    never waits for room): its event triggers at once, and when that event is processed the oldest
    waiting get takes the lowest free channel, as does any get made before then (as SimPy does:
    a new get, or a put's event processed, serves the oldest waiting get, one at most)."""

    __slots__ = ("env", "free", "waiting")

    def __init__(self, env: Environment, count: int) -> None:
        self.env = env
        self.free: list[int] = []  # a heap
        self.waiting: list[simpy.Event] = []  # the gets not served yet, oldest first
        for channel in range(count):  # as the store was filled: a put, and its event, each
            self.put(channel)

    def get(self) -> simpy.Event:
        """An event that triggers with the channel taken (at once if one is free and no get waits)."""
        taken = simpy.Event(self.env)
        self.waiting.append(taken)
        self._serve()
        return taken

    def put(self, channel: int) -> simpy.Event:
        """Give ``channel`` back: an event, triggered at once."""
        done = simpy.Event(self.env)
        done.callbacks.append(self._serve)
        heappush(self.free, channel)
        succeed_at(self.env, done, 0)
        return done

    def _serve(self, _event: simpy.Event | None = None) -> None:
        if self.waiting and self.free:
            succeed_at(self.env, self.waiting.pop(0), 0, heappop(self.free))


class SystemDma:
    """A die's system DMA engine: ``channels`` channels of ``rate`` each, each with its queue of
    ``sdma.queue_depth`` descriptors; one transfer per channel, its blocks in order, each block
    paying the engine set-up, the source memory latency and the path round trip before its bytes
    (see the module docstring)."""

    def __init__(self, die: Die) -> None:
        spec = die.spec.sdma
        hz = die.spec.clock.hz
        self.die = die
        self.system = die.system
        self.env = die.system.env
        self.channels = spec.channels
        self.rate_bytes_per_ps = spec.rate.bytes_per_ps(hz)
        self.setup_ps = spec.setup.to_ps(hz)
        self.queue_depth = spec.queue_depth
        costs = die.system.recorder.costs
        costs.unit(die.index, SDMA, SDMA)
        costs.engine(SDMA, "", EngineCosts(Term(("die.sdma.setup",), self.setup_ps), Term((), 0), ("die.sdma.rate",)))
        self._free = Channels(self.env, spec.channels)
        self._queues: dict[int, EngineQueue] = {}

    def block_fixed_ps(self, path: CopyPath, hit: bool = False) -> int:
        """The fixed cost of one block before its bytes flow: set-up, source memory (an L2 hit or
        a miss), round trip."""
        return self.setup_ps + (path.hit_latency_ps if hit else path.miss_latency_ps) + 2 * path.path_latency_ps

    def run(self, blocks: Sequence[Block], path: CopyPath, name_id: int, op: int) -> Generator[simpy.Event, object, None]:
        """SimPy generator: take the lowest free channel, run ``blocks`` in order on its queue (each
        one an event on the channel's lane ``sdma chN``), give the channel back."""
        channel = cast(int, (yield self._free.get()))
        system = self.system
        recorder = system.recorder
        env = self.env
        track = recorder.track(self.die.index, SDMA, f"ch{channel}", (2, channel))
        recorder.costs.route(self.die.index, SDMA, "", path.latency(2))
        queue = self._queues.get(channel)
        if queue is None:
            queue = self._queues[channel] = EngineQueue(env, system.network, self.queue_depth)
        tally = system.l2_tally(op, "sdma")
        with_data = system.with_data
        round_trip = self.setup_ps + 2 * path.path_latency_ps
        rows: EventRows = recorder.rows

        def complete(block: Block, start: int, flowed: int, _arrived: int, bottleneck: int) -> None:  # no tail: arrived is now
            if with_data:
                block.copy()
            rows.transfer(rows.record(track, name_id, start, clock(env), block.nbytes, op, -1), flowed - start, bottleneck)

        for block in blocks:
            if queue.in_flight >= queue.depth:
                yield queue.until(queue.depth - 1)
            now: int = clock(env)
            segments = path.segments(block, self.rate_bytes_per_ps, now + round_trip, now + self.setup_ps, tally)
            queue.issue(Request(segments, 0, now, complete, block))
        yield queue.until(0)
        yield self._free.put(channel)


class RdmaQueuePair:
    """The RoCE queue pair of one die to a peer die: transfers run in posting order; inside a
    transfer the NIC streams the blocks back to back and each block completes one path latency after
    its last byte left (see the module docstring). Its lane is ``rdma qp dieN``."""

    def __init__(self, die: Die, peer: int) -> None:
        self.die = die
        self.peer = peer
        self.system = die.system
        self.env = die.system.env
        self._in_order = simpy.Resource(self.env, capacity=1)
        costs = die.system.recorder.costs
        costs.unit(die.index, RDMA, RDMA)
        costs.engine(RDMA, "", EngineCosts(Term((), 0), Term((), 0), ()))  # the NIC has no cap of its own: its ports are resources

    def run(self, blocks: Sequence[Block], path: CopyPath, name_id: int, op: int) -> Generator[simpy.Event, object, None]:
        """SimPy generator: stream ``blocks``; ends when the last block has completed."""
        env, system = self.env, self.system
        recorder = system.recorder
        rows: EventRows = recorder.rows
        tally = system.l2_tally(op, "rdma")
        completions = []
        with self._in_order.request() as turn:
            yield turn
            track = recorder.track(self.die.index, RDMA, f"qp die{self.peer}", (3, self.peer))
            recorder.costs.route(self.die.index, RDMA, "", path.latency(1))
            for index, block in enumerate(blocks):
                start = clock(env)
                flowed, bottleneck, largest = -1, -1, -1
                for flow_class, nbytes, ready in path.segments(block, math.inf, start + path.path_latency_ps, start, tally):
                    now = clock(env)  # the first block's bytes wait for the path and source memory latency; later ones stream at once
                    limit, flowing = cast(tuple[int, int], (yield system.network.start(flow_class, nbytes, ready - now if index == 0 and ready > now else 0)))
                    if flowed < 0:
                        flowed = flowing
                    if nbytes > largest:
                        largest, bottleneck = nbytes, limit
                rows.transfer(rows.record(track, name_id, start, clock(env), block.nbytes, op, -1), max(flowed - start, 0), bottleneck)
                completion = env.timeout(path.path_latency_ps)
                if system.with_data:
                    completion.callbacks.append(block.copy)
                completions.append(completion)
        yield env.all_of(completions)


class VectorCoreWrites:
    """A die's vector (AIV) cores copying from its GM into another die's (or its own): each copy is
    staged through UB by the cores it is given, so it pays the cores' GM read and write set-up
    (MTE2 and MTE3) and the path's latency once, and moves at no more than those cores' write rate.
    Its lane is ``hccl aiv writes``."""

    def __init__(self, die: Die, kind: str) -> None:
        self.die = die
        self.system = die.system
        timing = die.timing.kinds[kind]
        read, write = timing.moves[("GM", "UB")], timing.moves[("UB", "GM")]
        self.setup_ps = timing.engines[read].setup_ps + timing.engines[write].setup_ps
        self.core_rate = min(timing.engines[read].rate_bytes_per_ps(("GM", "UB"), False), timing.engines[write].rate_bytes_per_ps(("UB", "GM"), False))

    def run(self, blocks: Sequence[Block], path: CopyPath, cores: float, name_id: int, op: int) -> Generator[simpy.Event, object, None]:
        """SimPy generator: move ``blocks`` one after the other with ``cores`` cores' worth of rate."""
        system = self.system
        env = system.env
        track = system.recorder.track(self.die.index, "hccl", "aiv writes", (4, 0))
        rows: EventRows = system.recorder.rows
        fixed_ps = self.setup_ps + path.memory_latency_ps + path.path_latency_ps
        for block in blocks:
            start = clock(env)
            yield system.network.transfer(block.nbytes, path.resources, cap=cores * self.core_rate, delay_ps=fixed_ps)
            if system.with_data:
                block.copy()
            rows.record(track, name_id, start, clock(env), block.nbytes, op, -1)
