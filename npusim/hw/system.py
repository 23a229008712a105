"""A whole simulated machine built from a :class:`~npusim.config.schema.SystemSpec`.

``System`` owns the SimPy environment, the bandwidth network, the topology and the dies; a
``Die`` owns its HBM and L2 bandwidth, its GM, its AICPUs, its SDMA and RDMA queue pairs, and its AI
cores (created on first use, so that a 768-die SuperPoD is cheap until work lands on it).
"""

from __future__ import annotations

import simpy

from npusim.config.schema import SystemSpec
from npusim.engine.flow import FlowNetwork, Resource
from npusim.errors import UsageError
from npusim.hw.core import AICore
from npusim.hw.dma import CopyPath, RdmaQueuePair, SystemDma
from npusim.hw.memory import AtomicUnit, DeviceMemory
from npusim.hw.pipes import CoreKind
from npusim.hw.stream import Stream
from npusim.hw.timing import DieTiming
from npusim.hw.topology import Route, Topology
from npusim.trace.recorder import Recorder


class Die:
    """One die: one device / rank, with ``aic_count`` cube and ``aiv_count`` vector cores."""

    def __init__(self, system: "System", index: int, timing: DieTiming) -> None:
        spec = system.spec.die
        self.system = system
        self.index = index
        self.spec = spec
        self.timing = timing
        hz = spec.clock.hz
        network = system.network
        self.hbm = network.add_resource(Resource(f"die{index} HBM", spec.hbm.bandwidth.bytes_per_ps(hz), kind="hbm", die=index))
        self.l2 = network.add_resource(Resource(f"die{index} L2", spec.l2.bandwidth.bytes_per_ps(hz), kind="l2", die=index))
        self.memory_latency_ps = spec.l2.latency.to_ps(hz) + spec.hbm.latency.to_ps(hz)
        self.memory = DeviceMemory(index, spec.hbm.size.bytes, system.with_data)
        self.aicpus = simpy.Resource(system.env, capacity=spec.aicpu.count)
        self.sdma = SystemDma(self)
        self._queue_pairs: dict[int, RdmaQueuePair] = {}
        atomic_add = spec.l2.atomic_add
        self.atomics = AtomicUnit(atomic_add.to_ps(hz)) if atomic_add is not None else None  # None: no atomic adds configured
        self._cores: dict[tuple[CoreKind, int], AICore] = {}

    def queue_pair(self, peer: int) -> RdmaQueuePair:
        """The RDMA queue pair from this die to die ``peer``, created on first use."""
        queue_pair = self._queue_pairs.get(peer)
        if queue_pair is None:
            queue_pair = self._queue_pairs[peer] = RdmaQueuePair(self, peer)
        return queue_pair

    def core_count(self, kind: CoreKind) -> int:
        return self.spec.aic_count if kind is CoreKind.AIC else self.spec.aiv_count

    def core(self, kind: CoreKind | str, index: int) -> AICore:
        """The ``index``-th core of ``kind`` (``'aiv'`` or ``'aic'``), created on first use."""
        kind = CoreKind(kind) if isinstance(kind, str) else kind
        if not 0 <= index < self.core_count(kind):
            raise UsageError(
                f"die {self.index} has {self.core_count(kind)} {kind.value.upper()} cores "
                f"({kind.value}0..{kind.value}{self.core_count(kind) - 1}); {kind.value}{index} does not exist"
            )
        key = (kind, index)
        core = self._cores.get(key)
        if core is None:
            core = self._cores[key] = AICore(self, kind, index)
        return core

    @property
    def cores(self) -> list[AICore]:
        """The cores created so far, in a stable order."""
        return [self._cores[key] for key in sorted(self._cores, key=lambda k: (k[0].value, k[1]))]


class System:
    """The machine: environment, bandwidth network, topology, dies and the event recorder."""

    def __init__(self, spec: SystemSpec, *, with_data: bool = True, recorder: Recorder | None = None, network_quantum_ps: int = 0) -> None:
        self.spec = spec
        self.env = simpy.Environment()
        self.with_data = with_data
        self.recorder = recorder or Recorder()
        self.network = FlowNetwork(self.env, quantum_ps=network_quantum_ps)
        self.topology = Topology(spec, self.network)
        self.timing = DieTiming.from_spec(spec.die)
        self._dies: dict[int, Die] = {}
        self._gm_routes: dict[tuple[int, int, bool], Route] = {}
        self._streams: dict[int, Stream] = {}
        self.session = None  # the frontend session driving this system, if any
        self.deadlock_reporters: list = []  # callables returning report lines (e.g. unsatisfied waits)

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

    def die(self, index: int) -> Die:
        """Die ``index`` (0 .. dies-1), created on first use."""
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

    def gm_route(self, core_die: int, gm_die: int, to_gm: bool) -> Route:
        """Memory side of a core's DMA: L2 and HBM of ``gm_die`` and, when remote, the fabric.

        A remote read pays the route latency twice (request out, data back); a write is posted and
        pays it once, and crosses the write credits of the links (see :mod:`npusim.hw.topology`)."""
        key = (core_die, gm_die, to_gm)
        route = self._gm_routes.get(key)
        if route is None:
            memory = self.die(gm_die)
            fabric = self.topology.route(core_die, gm_die, writes=True) if to_gm else self.topology.route(gm_die, core_die)
            trips = 1 if to_gm else 2
            route = Route(fabric.resources + (memory.l2, memory.hbm), memory.memory_latency_ps + trips * fabric.latency_ps)
            self._gm_routes[key] = route
        return route


    def copy_path(self, src_die: int, dst_die: int, *, rdma: bool, writes: bool) -> CopyPath:
        """What a bulk copy from the GM of ``src_die`` to the GM of ``dst_die`` crosses: the source
        memory, the scale-up route (its write credits too when the data are posted ``writes``) or
        with ``rdma`` the NICs, and the destination memory."""
        source, destination = self.die(src_die), self.die(dst_die)
        route = self.topology.rdma_route(src_die, dst_die) if rdma else self.topology.route(src_die, dst_die, writes=writes)
        resources = (source.l2, source.hbm) + route.resources + (destination.l2, destination.hbm)
        return CopyPath(resources, route.latency_ps, source.memory_latency_ps)


_ACTIVE: list[System] = []


def active_system() -> System:
    """The system of the innermost active session (``with npusim.session(...)`` or ``npusim run``)."""
    if not _ACTIVE:
        raise UsageError("no npusim session is active: wrap the code in `with npusim.session('a3'):` or run the file with `npusim run`")
    return _ACTIVE[-1]


def push_active(system: System) -> None:
    """Make ``system`` the active one (done by the session)."""
    _ACTIVE.append(system)


def pop_active(system: System) -> None:
    """End ``system``'s activity (done by the session)."""
    if _ACTIVE and _ACTIVE[-1] is system:
        _ACTIVE.pop()
