"""Who is connected to whom: the scale-up fabric (HCCS full mesh on A2, UB switches on A3), the
die-to-die link inside a package (SIO), and the scale-out RoCE NICs.

A :class:`Route` lists the bandwidth resources a transfer from one die to another crosses and its
one-way latency. Link resources are created on first use, so a 768-die SuperPoD costs nothing for
the links no transfer touches.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

from npusim.config.schema import ExplicitFabric, FullMeshFabric, LinkSpec, SystemSpec, UbSwitchFabric
from npusim.engine.flow import FlowNetwork, Resource
from npusim.errors import WorkloadError


@dataclass(frozen=True)
class Route:
    """The resources (in order) a transfer crosses and its one-way latency in ps."""

    resources: tuple[Resource, ...]
    latency_ps: int


LOCAL = Route((), 0)


class Topology:
    """Routes between the dies of a system."""

    def __init__(self, spec: SystemSpec, network: FlowNetwork) -> None:
        self.spec = spec
        self.network = network
        self.clock_hz = spec.die.clock.hz
        self.dies = spec.shape.dies
        self._resources: dict[str, Resource] = {}
        self._routes: dict[tuple[int, int], Route] = {}
        self._rdma_routes: dict[tuple[int, int], Route] = {}
        self._explicit_next_hops: dict[int, dict[int, tuple[int, LinkSpec]]] = {}

    # -- where a die is ------------------------------------------------------------------------

    def package_of(self, die: int) -> int:
        return die // self.spec.shape.dies_per_package

    def node_of(self, die: int) -> int:
        return die // self.spec.shape.dies_per_node

    # -- routes --------------------------------------------------------------------------------

    def route(self, src: int, dst: int) -> Route:
        """The scale-up route carrying data from die ``src`` to die ``dst``."""
        key = (src, dst)
        route = self._routes.get(key)
        if route is None:
            route = self._routes[key] = self._build_route(src, dst)
        return route

    def rdma_route(self, src: int, dst: int) -> Route:
        """The scale-out route (RoCE NICs) from die ``src`` to die ``dst``."""
        key = (src, dst)
        route = self._rdma_routes.get(key)
        if route is None:
            nic = self.spec.nic
            owner = (lambda d: self.package_of(d)) if nic.per == "package" else (lambda d: d)
            a, b = owner(src), owner(dst)
            if a == b:
                route = LOCAL
            else:
                tx = self._resource(f"nic{a} tx", nic.bandwidth.bytes_per_ps(self.clock_hz), "nic", src)
                rx = self._resource(f"nic{b} rx", nic.bandwidth.bytes_per_ps(self.clock_hz), "nic", dst)
                route = Route((tx, rx), nic.latency.to_ps(self.clock_hz))
            self._rdma_routes[key] = route
        return route

    def _build_route(self, src: int, dst: int) -> Route:
        if src == dst:
            return LOCAL
        spec = self.spec
        if spec.shape.dies_per_package > 1 and self.package_of(src) == self.package_of(dst) and spec.package_link:
            link = spec.package_link
            return Route((self._link(f"pkg{self.package_of(src)} SIO die{src}->die{dst}", link, src),), self._ps(link.latency))
        fabric = spec.fabric
        if isinstance(fabric, FullMeshFabric):
            return Route((self._link(f"die{src}->die{dst} HCCS", fabric.link, src),), self._ps(fabric.link.latency))
        if isinstance(fabric, UbSwitchFabric):
            return self._ub_route(fabric, src, dst)
        return self._explicit_route(fabric, src, dst)

    def _ub_route(self, fabric: UbSwitchFabric, src: int, dst: int) -> Route:
        """Die -> its node's first-tier switches (all planes) -> die; across nodes also through the
        second tier of each plane. Traffic is sprayed evenly over the planes, so one die's ports are
        modelled as one resource of ``planes x link`` per direction; the switches are non-blocking."""
        link = fabric.link
        lanes = LinkSpec(bandwidth=link.bandwidth.scaled(fabric.planes), latency=link.latency, efficiency=link.efficiency)
        tx = self._link(f"die{src} UB tx", lanes, src)
        rx = self._link(f"die{dst} UB rx", lanes, dst)
        latency = 2 * self._ps(link.latency) + self._ps(fabric.l1_switch.latency)
        if self.node_of(src) != self.node_of(dst):
            latency += 2 * self._ps(link.latency) + self._ps(fabric.l1_switch.latency) + self._ps(fabric.l2_switch.latency)
        return Route((tx, rx), latency)

    def _explicit_route(self, fabric: ExplicitFabric, src: int, dst: int) -> Route:
        """Shortest path in hops (ties broken by the order the links are listed)."""
        hops = self._explicit_next_hops.get(src)
        if hops is None:
            hops = self._explicit_next_hops[src] = self._bfs(fabric, src)
        if dst not in hops:
            raise WorkloadError(f"no path from die {src} to die {dst} in the explicit fabric; add a link (fabric.links)")
        resources, latency, here = [], 0, dst
        while here != src:
            previous, link = hops[here]
            resources.append(self._link(f"die{previous}->die{here}", link, previous))
            latency += self._ps(link.latency)
            here = previous
        return Route(tuple(reversed(resources)), latency)

    def _bfs(self, fabric: ExplicitFabric, src: int) -> dict[int, tuple[int, LinkSpec]]:
        neighbours: dict[int, list[tuple[int, LinkSpec]]] = {}
        for entry in fabric.links:
            neighbours.setdefault(entry.a, []).append((entry.b, entry.link))
            neighbours.setdefault(entry.b, []).append((entry.a, entry.link))
        reached: dict[int, tuple[int, LinkSpec]] = {src: (src, fabric.links[0].link)} if fabric.links else {}
        queue = deque([src])
        while queue:
            here = queue.popleft()
            for there, link in neighbours.get(here, ()):
                if there not in reached:
                    reached[there] = (here, link)
                    queue.append(there)
        return reached

    # -- resources -----------------------------------------------------------------------------

    def _ps(self, quantity) -> int:
        return quantity.to_ps(self.clock_hz)

    def _link(self, name: str, link: LinkSpec, die: int) -> Resource:
        return self._resource(name, link.bandwidth.bytes_per_ps(self.clock_hz) * link.efficiency, "link", die)

    def _resource(self, name: str, capacity: float, kind: str, die: int) -> Resource:
        resource = self._resources.get(name)
        if resource is None:
            resource = self._resources[name] = self.network.add_resource(Resource(name, capacity, kind=kind, die=die))
        return resource
