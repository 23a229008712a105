"""A whole simulated machine built from a :class:`~npusim.config.schema.SystemSpec`.

``System`` owns the SimPy environment, the bandwidth network, the topology and the dies; a
``Die`` owns its HBM and L2 bandwidth, its GM, its AICPUs, its SDMA and RDMA queue pairs, and its AI
cores (created on first use, so that a 768-die SuperPoD is cheap until work lands on it).
"""

from __future__ import annotations

from collections.abc import Callable

import simpy
from mypy_extensions import mypyc_attr

from npusim.config.schema import SystemSpec
from npusim.engine.flow import FlowNetwork, Resource
from npusim.engine.loop import Environment, clock
from npusim.errors import NoRouteError, UsageError
from npusim.hw.cache import L2Cache, L2Tally
from npusim.hw.core import AICore, CoreKind, DmaRoute
from npusim.hw.dma import CopyPath, RdmaQueuePair, SystemDma
from npusim.hw.memory import AtomicUnit, DeviceMemory
from npusim.hw.pipes import PIPE_NAMES
from npusim.hw.stream import Stream
from npusim.hw.timing import DieTiming
from npusim.hw.topology import Direction, Route, Topology, delay
from npusim.trace.record import L2Record, ResourceRecord, RunRecord
from npusim.trace.recorder import Recorder


class Die:
    """One die: one device / rank, with the cores of each kind its spec lists (``die.cores``)."""

    def __init__(self, system: System, index: int, timing: DieTiming) -> None:
        spec = system.spec.die
        self.system = system
        self.index = index
        self.spec = spec
        self.timing = timing
        hz = spec.clock.hz
        network = system.network
        self.hbm = network.add_resource(Resource(f"die{index} {spec.hbm.technology}", spec.hbm.bandwidth.bytes_per_ps(hz), kind="hbm", die=index))
        self.l2 = network.add_resource(Resource(f"die{index} L2", spec.l2.bandwidth.bytes_per_ps(hz), kind="l2", die=index))
        costs = system.recorder.costs
        costs.resource(self.hbm.name, ("die.hbm.bandwidth",))
        costs.resource(self.l2.name, ("die.l2.bandwidth",))
        self.l2_atomics: Resource | None = None  # the rate its L2 applies atomic adds at (die.l2.atomic_rate), None: not limited
        if spec.l2.atomic_rate is not None:
            self.l2_atomics = network.add_resource(Resource(f"die{index} L2 atomic adds", spec.l2.atomic_rate.bytes_per_ps(hz), kind="atomic", die=index))
            costs.resource(self.l2_atomics.name, ("die.l2.atomic_rate",))
        self.l2_latency = timing.memory_latency[:1]  # an access that hits in L2, by config key
        self.l2_latency_ps = spec.l2.latency.to_ps(hz)
        self.memory_latency = timing.memory_latency  # one that misses: L2, then HBM
        self.memory_latency_ps = timing.memory_latency_ps
        self.cache = L2Cache(index, spec.l2.line.bytes, spec.l2.size.bytes, spec.l2.initial_hit_rate, network, self.hbm, spec.hbm.latency.to_ps(hz))
        self.memory = DeviceMemory(index, spec.hbm.size.bytes, system.with_data)
        self.memory.before_bytes = system.before_bytes
        self.aicpus = simpy.Resource(system.env, capacity=spec.aicpu.count)
        self.sdma = SystemDma(self)
        self._queue_pairs: dict[int, RdmaQueuePair] = {}
        atomic_add = spec.l2.atomic_add
        self.atomics = AtomicUnit(atomic_add.to_ps(hz)) if atomic_add is not None else None  # None: no atomic adds configured
        if atomic_add is not None:
            costs.atomic_adds(("die.l2.atomic_add",))
        self._cores: dict[tuple[str, int], AICore] = {}
        self.dma_routes: dict[str, dict[tuple[object, ...], DmaRoute]] = {}  # per core kind: what its cores' DMAs take (AICore.dma_route)

    def queue_pair(self, peer: int) -> RdmaQueuePair:
        """The RDMA queue pair from this die to die ``peer``, created on first use."""
        queue_pair = self._queue_pairs.get(peer)
        if queue_pair is None:
            queue_pair = self._queue_pairs[peer] = RdmaQueuePair(self, peer)
        return queue_pair

    def core_count(self, kind: str) -> int:
        """How many cores of ``kind`` the die has (0 for a kind it does not have)."""
        kind_timing = self.timing.kinds.get(kind)
        return 0 if kind_timing is None else kind_timing.count

    def core(self, kind: str, index: object) -> AICore:
        """The ``index``-th core of ``kind`` (a name under ``die.cores``: ``'aiv'``, ``'aic'`` ...),
        created on first use; a UsageError for an index that is not one (``index`` is typed
        ``object`` so that, compiled, a wrong type gets that error too, not a TypeError)."""
        if isinstance(index, int):  # a core made before: nothing to check
            core = self._cores.get((kind, index))
            if core is not None:
                return core
        kinds = self.timing.kinds
        if kind not in kinds:
            raise UsageError(f"die {self.index} has no {kind!r} cores; its core kinds are {', '.join(kinds)} (die.cores)")
        count = kinds[kind].count
        if not isinstance(index, int) or not 0 <= index < count:
            raise UsageError(f"die {self.index} has {count} {kind.upper()} cores ({kind}0..{kind}{count - 1}); {kind}{index} does not exist")
        key = (kind, index)
        core = self._cores.get(key)
        if core is None:
            core = self._cores[key] = AICore(self, self.system.core_kinds[kind], index)
        return core

    @property
    def cores(self) -> list[AICore]:
        """The cores created so far, in a stable order."""
        kinds = self.timing.kinds
        return [self._cores[key] for key in sorted(self._cores, key=lambda k: (kinds[k[0]].order, k[1]))]


@mypyc_attr(native_class=False)  # a Python class, its methods compiled: sessions and AICPU coordinators keep it in weak-keyed tables (weak references)
class System:
    """The machine: environment, bandwidth network, topology, dies and the event recorder."""

    def __init__(self, spec: SystemSpec, *, with_data: bool = True, recorder: Recorder | None = None, network_quantum_ps: int = 0) -> None:
        self.spec = spec
        self.env = Environment()
        self.with_data = with_data
        self.race_check = "warn"  # what kernel launches do with the races npusim.isa.racecheck finds: warn, error or off
        self.before_bytes: Callable[[int, str], None] | None = None  # each die's DeviceMemory.before_bytes, from its creation
        self.recorder = recorder or Recorder()
        self.network = FlowNetwork(self.env, quantum_ps=network_quantum_ps)
        self.topology = Topology(spec, self.network, self.recorder.costs)
        self.timing = DieTiming.from_spec(spec.die)
        for kind in self.timing.kinds.values():  # the keys of each copy engine's costs, for the analysis
            for pipe, engine in kind.engines.items():
                self.recorder.costs.engine(kind.name, PIPE_NAMES[pipe], engine.costs())
        # what the cores of each kind share (their lanes, buffers, engines), by the kind's name: every die's cores are built from it
        self.core_kinds = {name: CoreKind(kind) for name, kind in self.timing.kinds.items()}
        self._dies: dict[int, Die] = {}
        self._gm_routes: dict[tuple[int, int, bool, bool], tuple[Route, Route]] = {}  # gm_routes: (hit, miss) by (core's die, GM's die, to GM, atomic)
        self._streams: dict[int, Stream] = {}
        self.l2_tallies: dict[tuple[int, str], L2Tally] = {}  # per (op, kind of unit: aic, aiv, sdma ...): its L2 lines (l2_tally)

    def record(self) -> RunRecord:
        """The frozen record of the run so far (at its end: everything the trace and the analysis read)."""
        dies = self.dies
        l2 = L2Record(self.spec.die.l2.line.bytes, {die.index: die.cache.tally.as_list() for die in dies},
                      {key: tally.as_list() for key, tally in sorted(self.l2_tallies.items())},
                      {die.index: die.cache.hit_log() for die in dies})
        return RunRecord(self.spec, clock(self.env), self.with_data, self.recorder, tuple(ResourceRecord.of(r) for r in self.network.resources), l2)

    def stream(self, die: int) -> Stream:
        """The default stream of die ``die``."""
        stream = self._streams.get(die)
        if stream is None:
            self.die(die)
            stream = self._streams[die] = Stream(self.env, die)
        return stream

    @property
    def streams(self) -> list[Stream]:
        return [self._streams[d] for d in sorted(self._streams)]

    @property
    def die_count(self) -> int:
        return self.spec.shape.dies

    def die(self, index: object) -> Die:
        """Die ``index`` (0 .. dies-1), created on first use; a UsageError for an index that is not
        one (typed ``object``, as :meth:`Die.core`'s)."""
        if isinstance(index, int):  # a die made before: nothing to check
            die = self._dies.get(index)
            if die is not None:
                return die
        if not isinstance(index, int) or not 0 <= index < self.die_count:
            raise UsageError(f"device {index!r} does not exist: the config {self.spec.name!r} has {self.die_count} dies (0..{self.die_count - 1})")
        die = self._dies.get(index)
        if die is None:
            die = self._dies[index] = Die(self, index, self.timing)
        return die

    @property
    def dies(self) -> list[Die]:
        """The dies created so far, by index."""
        return [self._dies[i] for i in sorted(self._dies)]

    def l2_tally(self, op: int, unit_kind: str) -> L2Tally:
        """The L2 counters of op ``op``'s accesses from units of ``unit_kind`` (``aic``, ``aiv``,
        ``sdma`` ...), on whichever die's L2 they land; made on first use."""
        key = (op, unit_kind)
        tally = self.l2_tallies.get(key)
        if tally is None:
            tally = self.l2_tallies[key] = L2Tally()
        return tally

    def gm_route(self, core_die: int, gm_die: int, to_gm: bool, hit: bool = False, atomic: bool = False) -> Route:
        """Memory side of a core's DMA (:class:`~npusim.errors.NoRouteError` when no load/store level
        joins the dies): the fabric when remote, then the L2 of ``gm_die`` and, for a read that misses
        (not ``hit``), its HBM. A write allocates its lines in L2 and never crosses the HBM (a dirty
        line's write-back is the L2's own flow, :mod:`npusim.hw.cache`); an ``atomic`` (atomic-add)
        store also crosses the L2's atomic unit where ``die.l2.atomic_rate`` gives it a rate.

        A remote read pays the route latency twice (request out, data back); a write is posted and
        pays it once, and crosses the write credits of the links (see :mod:`npusim.hw.topology`)."""
        hit_route, miss_route = self.gm_routes(core_die, gm_die, to_gm, atomic)
        return hit_route if hit else miss_route

    def gm_routes(self, core_die: int, gm_die: int, to_gm: bool, atomic: bool = False) -> tuple[Route, Route]:
        """The :meth:`gm_route` of a core's DMA that hits in L2 and the one of a DMA that misses,
        built together (one look-up of the fabric, its latency taken once) and kept per (die pair,
        direction, atomic): a core's first DMA along a path takes both. A write's two are one route
        (it never crosses the HBM)."""
        key = (core_die, gm_die, to_gm, atomic)
        routes = self._gm_routes.get(key)
        if routes is None:
            memory = self.die(gm_die)
            topology = self.topology
            try:
                fabric = topology.route(core_die, gm_die, Direction.WRITE) if to_gm else topology.route(gm_die, core_die, Direction.READ)
            except NoRouteError as error:
                access = "store to" if to_gm else "load from"
                raise NoRouteError(f"the cores of die {core_die} cannot {access} the GM of die {gm_die} (an MTE copy): {error}") from None
            trips = fabric.latency_times(1 if to_gm else 2)
            at_l2 = (memory.l2, memory.l2_atomics) if atomic and memory.l2_atomics is not None else (memory.l2,)  # atomic: a store's only
            hit = Route(fabric.resources + at_l2) + delay(memory.l2_latency) + trips
            miss = hit if to_gm else Route(fabric.resources + (memory.l2, memory.hbm)) + delay(memory.memory_latency) + trips
            routes = self._gm_routes[key] = (hit, miss)
        return routes

    def copy_path(self, src_die: int, dst_die: int, direction: Direction, *, rdma: bool) -> CopyPath:
        """What a bulk copy from the GM of ``src_die`` to the GM of ``dst_die`` crosses: the source's
        L2 (and its HBM for what misses there), the load/store route (its write credits too when the
        data are posted writes) or with ``rdma`` the NICs, and the destination's L2."""
        source, destination = self.die(src_die), self.die(dst_die)
        topology = self.topology
        route = topology.rdma_route(src_die, dst_die, direction) if rdma else topology.route(src_die, dst_die, direction)
        return CopyPath(source, destination, (source.l2,) + route.resources + (destination.l2,),
                        (source.l2, source.hbm) + route.resources + (destination.l2,), route.latency_ps, source.l2_latency_ps,
                        source.memory_latency_ps, route.latency_terms, source.memory_latency)

    def local_copy_path(self, die: int) -> CopyPath:
        """What a copy inside the GM of die ``die`` crosses: its L2 on a hit, and its HBM on a miss
        (once each: the engine's reads and writes share them; the network takes a resource once per flow)."""
        memory = self.die(die)
        return CopyPath(memory, memory, (memory.l2,), (memory.l2, memory.hbm), 0, memory.l2_latency_ps, memory.memory_latency_ps, (),
                        memory.memory_latency)
