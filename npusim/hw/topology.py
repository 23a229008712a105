"""Who is connected to whom: the levels of a system's interconnect (``fabrics`` of the config)
composed into routes between dies.

The levels, innermost first: ``package`` (the die-to-die link of a package: SIO on 910C), ``node``
(the dies of one node: HCCS full mesh in an A2 server, first-tier UB switches in an A3 node), ``pod``
(the nodes of a pod: second-tier UB switches of an A3 SuperPoD; ``shape.pods`` SuperPoDs are joined
by the scale-out network only) and ``scale_out`` (the RoCE NICs
of every die, joined by a switch). Each level is a fabric kind registered in
:data:`npusim.config.registry.FABRICS` (the modules of :mod:`npusim.hw.fabrics`), its config section
validated by the kind's ``Spec``. A load/store route (a core's MTE access to another die's GM, an SDMA
copy) takes the innermost of package, node and pod that holds both dies; a level may cross its
members through the level inside it (the pod's second-tier switches through each node's first
tier). RDMA takes ``scale_out`` (a system whose dies have no NIC has none). Dies of two nodes that
no pod joins have no load/store route.

A :class:`Route` lists the bandwidth resources a transfer from one die to another crosses and its
one-way latency. Link resources are created on first use, so a 768-die SuperPoD costs nothing for
the links no transfer touches.

Posted writes (a core's MTE3 / FixPipe store to another die's GM, an SDMA put) also cross the
write credits of every link on their path (``LinkSpec.write_credits``): link-level credit flow
control lets a sender have at most that many bytes of write data unacknowledged on a link, and a
credit comes back one link round trip after use, so all writes crossing a link share at most
``write_credits / (2 x latency)``. Read data returns as completions, which a requester has reserved
buffer for before asking, so reads are limited by the link bandwidth alone (as in PCIe, where
requesters advertise unlimited completion credits). The credit limit is per hop, so a longer path
adds latency but not a lower rate.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from enum import Enum
from typing import ClassVar, Final, Protocol, final

from mypy_extensions import mypyc_attr

from npusim.config.registry import FABRICS
from npusim.config.schema import FabricSpec, LinkSpec, SystemShape, SystemSpec
from npusim.engine.flow import FlowNetwork, Resource
from npusim.errors import NoRouteError
from npusim.trace.costs import CostSources, Term
from npusim.units import Quantity


class Direction(Enum):
    """What crosses a route: read data (completions, limited by the links' bandwidth) or posted
    writes (which also cross the links' write credits)."""

    READ = "read"
    WRITE = "write"


@final
class Route:
    """The resources (in order) a transfer crosses and its one-way latency in ps; ``latency_terms``
    say which config keys that latency comes from (:func:`delay`; they add up to ``latency_ps``
    when given: a route built without them leaves its latency unattributed). Immutable (``Final``
    fields); a class of its own, not a frozen dataclass, whose compiled construction sets each field
    through ``object.__setattr__`` (0.42 us against 0.15: every die pair's first DMA builds several)."""

    __slots__ = ("resources", "latency_ps", "latency_terms")

    def __init__(self, resources: tuple[Resource, ...], latency_ps: int = 0, latency_terms: tuple[Term, ...] = ()) -> None:
        self.resources: Final = resources
        self.latency_ps: Final = latency_ps
        self.latency_terms: Final = latency_terms

    def __repr__(self) -> str:
        return f"Route(resources={self.resources!r}, latency_ps={self.latency_ps!r}, latency_terms={self.latency_terms!r})"

    def __eq__(self, other: object) -> bool:
        """Routes are equal when their resources, latency and its terms are (a value, as the dataclass was)."""
        return isinstance(other, Route) and (self.resources, self.latency_ps, self.latency_terms) == (
            other.resources, other.latency_ps, other.latency_terms)

    def __hash__(self) -> int:
        return hash((self.resources, self.latency_ps, self.latency_terms))

    def __add__(self, other: Route) -> Route:
        """This route followed by ``other``."""
        return Route(self.resources + other.resources, self.latency_ps + other.latency_ps, self.latency_terms + other.latency_terms)

    def latency_times(self, count: int) -> Route:
        """Its latency ``count`` times, without resources (a read's request out and data back; once:
        a posted write's, its terms as they are, not made again)."""
        if count == 1:
            return Route((), self.latency_ps, self.latency_terms)
        return Route((), count * self.latency_ps, tuple(Term(term.keys, count * term.ps) for term in self.latency_terms))


def delay(terms: tuple[Term, ...]) -> Route:
    """A route of no resources whose latency is ``terms`` (ps by config key)."""
    return Route((), sum(term.ps for term in terms), terms)


LOCAL = Route((), 0)


class Wiring:
    """The bandwidth resources of a system's links and NICs, created on first use in the flow
    network and shared by every route that names them; converts config times to ps. A level's
    fabric gets the wiring of its level (:meth:`at`), which names the config keys of what it builds
    (``fabrics.<level>.<key>``) to the recorder's cost sources: each resource's capacity and each
    latency of a route."""

    def __init__(self, network: FlowNetwork, clock_hz: float, costs: CostSources | None = None, level: str = "") -> None:
        self.network = network
        self.clock_hz = clock_hz
        self.costs = costs if costs is not None else CostSources()
        self.level = level
        self._resources: dict[str, Resource] = {}

    def at(self, level: str) -> Wiring:
        """The wiring of the fabric at ``level`` (the same resources, its keys under ``fabrics.<level>``)."""
        wiring = Wiring(self.network, self.clock_hz, self.costs, level)
        wiring._resources = self._resources
        return wiring

    def key(self, at: str) -> str:
        """The config key of ``at`` (``link.latency``) in this level's section: ``fabrics.node.link.latency``."""
        return f"fabrics.{self.level}.{at}" if self.level else at

    def ps(self, quantity: Quantity) -> int:
        """``quantity`` (a time) in ps of the die clock."""
        return quantity.to_ps(self.clock_hz)

    def delay(self, at: str, quantity: Quantity, count: int = 1) -> Route:
        """A route of no resources whose latency is ``count`` times ``quantity``, the value of the
        key ``at`` of this level's section (``link.latency``, ``switch.latency``)."""
        ps = count * self.ps(quantity)
        return Route((), ps, (Term((self.key(at),), ps),))

    def resource(self, name: str, capacity: float, kind: str, die: int, keys: tuple[str, ...] = ()) -> Resource:
        """The resource ``name`` (``capacity`` bytes/ps, of ``kind``, accounted to ``die``), whose
        capacity comes from the keys ``keys`` of this level's section (``bandwidth``, ``efficiency``)."""
        resource = self._resources.get(name)
        if resource is None:
            resource = self._resources[name] = self.network.add_resource(Resource(name, capacity, kind=kind, die=die))
            self.costs.resource(name, tuple(self.key(at) for at in keys))
        return resource

    def hop(self, name: str, link: LinkSpec, die: int, direction: Direction, at: str = "link", also: tuple[str, ...] = ()) -> tuple[Resource, ...]:
        """One direction of ``link`` (the key ``at`` of this level's section, ``link`` by default;
        ``also``: other keys its rates scale with, e.g. ``planes``): its payload bandwidth and, for
        posted writes, its write credits."""
        bandwidth = self.resource(name, link.bandwidth.bytes_per_ps(self.clock_hz) * link.efficiency, "link", die,
                                  (f"{at}.bandwidth", f"{at}.efficiency", *also))
        if direction is Direction.READ or link.write_credits is None:
            return (bandwidth,)
        credit_rate = link.write_credits.bytes / (2 * self.ps(link.latency))
        return (bandwidth, self.resource(f"{name} write credits", credit_rate, "credits", die, (f"{at}.write_credits", f"{at}.latency", *also)))


@mypyc_attr(allow_interpreted_subclasses=True)  # a fabric kind is a module of its own (hw/fabrics), interpreted
class Fabric(ABC):
    """Base of a fabric kind's implementation: one level of the interconnect, built from its config
    section ``spec``. ``inner`` is the level inside it (None for the innermost and for scale-out), for
    a level that crosses its members through the inner one's switches. A kind registers its class
    with ``@FABRICS.register(name)`` and names its config model ``Spec``."""

    Spec: ClassVar[type[FabricSpec]]

    def __init__(self, spec: FabricSpec, shape: SystemShape, wiring: Wiring, inner: Fabric | None) -> None:
        self.spec = spec
        self.shape = shape
        self.wiring = wiring
        self.inner = inner

    @abstractmethod
    def route(self, src: int, dst: int, direction: Direction) -> Route:
        """The route of data from die ``src`` to die ``dst``: two different dies this level joins (any two
        dies for scale-out, LOCAL when they share its port)."""


class Uplinks(Protocol):
    """A level whose switches reach a level above it: the part of a route from a die up to where
    the outer level takes over, and from there down to a die."""

    def uplink(self, src: int, direction: Direction) -> Route: ...

    def downlink(self, dst: int, direction: Direction) -> Route: ...


class Topology:
    """Routes between the dies of a system, composed from the levels of ``spec.fabrics``."""

    def __init__(self, spec: SystemSpec, network: FlowNetwork, costs: CostSources | None = None) -> None:
        self.spec = spec
        self.network = network
        self.clock_hz = spec.die.clock.hz
        self.dies = spec.shape.dies
        self.wiring = Wiring(network, self.clock_hz, costs)
        self.levels: dict[str, Fabric] = {}
        inner: Fabric | None = None
        for level in ("package", "node", "pod"):
            built = self._build_level(level, inner)
            if built is not None:
                inner = self.levels[level] = built
        self.scale_out = self._build_level("scale_out", None)
        self._routes: dict[tuple[int, int, Direction], Route] = {}
        self._rdma_routes: dict[tuple[int, int, Direction], Route] = {}
        self._places: dict[int, tuple[int, int, int]] = {}  # place: (package, node, pod) by die

    def _build_level(self, level: str, inner: Fabric | None) -> Fabric | None:
        spec = getattr(self.spec.fabrics, level)
        return None if spec is None else FABRICS.get(spec.kind)(spec, self.spec.shape, self.wiring.at(level), inner)

    # -- where a die is ------------------------------------------------------------------------

    def package_of(self, die: int) -> int:
        return self.spec.shape.package_of(die)

    def node_of(self, die: int) -> int:
        return self.spec.shape.node_of(die)

    def pod_of(self, die: int) -> int:
        return self.spec.shape.pod_of(die)

    def place(self, die: int) -> tuple[int, int, int]:
        """Where die ``die`` is: its package, node and pod, as the shape numbers them, worked out
        once per die (the first route of every die pair compares two: :meth:`level_joining`)."""
        place = self._places.get(die)
        if place is None:
            place = self._places[die] = (self.package_of(die), self.node_of(die), self.pod_of(die))
        return place

    def level_joining(self, src: int, dst: int) -> str | None:
        """The innermost load/store level that holds both dies (package, node or pod; None for one
        die, or for dies of two nodes that no pod fabric joins)."""
        if src == dst:
            return None
        src_package, src_node, src_pod = self.place(src)
        dst_package, dst_node, dst_pod = self.place(dst)
        if "package" in self.levels and src_package == dst_package:
            return "package"
        if src_node == dst_node:
            return "node"
        return "pod" if "pod" in self.levels and src_pod == dst_pod else None

    def joins(self, src: int, dst: int) -> bool:
        """Whether a load/store route joins two different dies (else only RDMA reaches across)."""
        return self.level_joining(src, dst) is not None

    # -- routes --------------------------------------------------------------------------------

    def route(self, src: int, dst: int, direction: Direction) -> Route:
        """The load/store route carrying data from die ``src`` to die ``dst`` (:class:`NoRouteError`
        when no level joins them)."""
        key = (src, dst, direction)
        route = self._routes.get(key)
        if route is None:
            route = self._routes[key] = self._build_route(src, dst, direction)
        return route

    def rdma_route(self, src: int, dst: int, direction: Direction) -> Route:
        """The scale-out route (through the NICs) from die ``src`` to die ``dst``; LOCAL when they
        share one NIC."""
        key = (src, dst, direction)
        route = self._rdma_routes.get(key)
        if route is None:
            if self.scale_out is None:
                raise NoRouteError(
                    f"RDMA from die {src} to die {dst}: the system {self.spec.name!r} has no scale-out network "
                    "(fabrics.scale_out): its dies have no NIC; move the data over the load/store fabric "
                    "(npusim.transfer(..., protocol='hccs')) between dies that one joins"
                )
            route = self._rdma_routes[key] = self.scale_out.route(src, dst, direction)
        return route

    def _build_route(self, src: int, dst: int, direction: Direction) -> Route:
        if src == dst:
            return LOCAL
        level = self.level_joining(src, dst)
        if level is None and "pod" in self.levels:
            raise NoRouteError(
                f"die {src} and die {dst} are in different pods ({self.pod_of(src)} and {self.pod_of(dst)}): the pod fabric "
                "joins the nodes of one pod only, so the dies reach each other only through their NICs; move the data by RDMA, "
                "npusim.transfer(..., protocol='rdma')"
            )
        if level is None:
            raise NoRouteError(
                f"die {src} and die {dst} are in different nodes ({self.node_of(src)} and {self.node_of(dst)}) and no pod "
                "fabric joins the nodes (fabrics.pod), so no load/store path joins the dies: the nodes reach each other only "
                "through their NICs; move the data by RDMA, npusim.transfer(..., protocol='rdma')"
            )
        return self.levels[level].route(src, dst, direction)
