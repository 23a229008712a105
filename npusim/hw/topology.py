"""Who is connected to whom: the scale-up fabric (HCCS full mesh on A2, UB switches on A3), the
die-to-die link inside a package (SIO), and the scale-out RoCE NICs.

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
        self._routes: dict[tuple[int, int, bool], Route] = {}
        self._rdma_routes: dict[tuple[int, int], Route] = {}
        self._explicit_next_hops: dict[int, dict[int, tuple[int, LinkSpec]]] = {}

    # -- where a die is ------------------------------------------------------------------------

    def package_of(self, die: int) -> int:
        return die // self.spec.shape.dies_per_package

    def node_of(self, die: int) -> int:
        return die // self.spec.shape.dies_per_node

    # -- routes --------------------------------------------------------------------------------

    def route(self, src: int, dst: int, *, writes: bool = False) -> Route:
        """The scale-up route carrying data from die ``src`` to die ``dst``; ``writes``: the data
        are posted writes, which also cross the write credits of each link."""
        key = (src, dst, writes)
        route = self._routes.get(key)
        if route is None:
            route = self._routes[key] = self._build_route(src, dst, writes)
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
                payload = nic.bandwidth.bytes_per_ps(self.clock_hz) * nic.efficiency
                tx = self._resource(f"nic{a} tx", payload, "nic", src)
                rx = self._resource(f"nic{b} rx", payload, "nic", dst)
                route = Route((tx, rx), nic.latency.to_ps(self.clock_hz))
            self._rdma_routes[key] = route
        return route

    def _build_route(self, src: int, dst: int, writes: bool) -> Route:
        if src == dst:
            return LOCAL
        spec = self.spec
        if spec.shape.dies_per_package > 1 and self.package_of(src) == self.package_of(dst) and spec.package_link:
            link = spec.package_link
            hop = self._hop(f"pkg{self.package_of(src)} SIO die{src}->die{dst}", link, src, writes)
            return Route(hop, self._ps(link.latency))
        fabric = spec.fabric
        if isinstance(fabric, FullMeshFabric):
            return Route(self._hop(f"die{src}->die{dst} HCCS", fabric.link, src, writes), self._ps(fabric.link.latency))
        if isinstance(fabric, UbSwitchFabric):
            return self._ub_route(fabric, src, dst, writes)
        return self._explicit_route(fabric, src, dst, writes)

    def _ub_route(self, fabric: UbSwitchFabric, src: int, dst: int, writes: bool) -> Route:
        """Die -> its node's first-tier switches (all planes) -> die; across nodes also through the
        second tier of each plane. Traffic is sprayed evenly over the planes, so one die's ports are
        modelled as one resource of ``planes x link`` per direction; the switches are non-blocking."""
        link = fabric.link
        credits = link.write_credits.scaled(fabric.planes) if link.write_credits is not None else None
        lanes = LinkSpec(bandwidth=link.bandwidth.scaled(fabric.planes), latency=link.latency, efficiency=link.efficiency, write_credits=credits)
        hops = self._hop(f"die{src} UB tx", lanes, src, writes) + self._hop(f"die{dst} UB rx", lanes, dst, writes)
        latency = 2 * self._ps(link.latency) + self._ps(fabric.l1_switch.latency)
        if self.node_of(src) != self.node_of(dst):
            latency += 2 * self._ps(link.latency) + self._ps(fabric.l1_switch.latency) + self._ps(fabric.l2_switch.latency)
        return Route(hops, latency)

    def _explicit_route(self, fabric: ExplicitFabric, src: int, dst: int, writes: bool) -> Route:
        """Shortest path in hops (ties broken by the order the links are listed)."""
        hops = self._explicit_next_hops.get(src)
        if hops is None:
            hops = self._explicit_next_hops[src] = self._bfs(fabric, src)
        if dst not in hops:
            raise WorkloadError(f"no path from die {src} to die {dst} in the explicit fabric; add a link (fabric.links)")
        resources, latency, here = [], 0, dst
        while here != src:
            previous, link = hops[here]
            resources.append(self._hop(f"die{previous}->die{here}", link, previous, writes))
            latency += self._ps(link.latency)
            here = previous
        return Route(tuple(resource for hop in reversed(resources) for resource in hop), latency)

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

    def _hop(self, name: str, link: LinkSpec, die: int, writes: bool) -> tuple[Resource, ...]:
        """One link direction: its payload bandwidth and, for posted writes, its write credits."""
        bandwidth = self._resource(name, link.bandwidth.bytes_per_ps(self.clock_hz) * link.efficiency, "link", die)
        if not writes or link.write_credits is None:
            return (bandwidth,)
        credit_rate = link.write_credits.bytes / (2 * self._ps(link.latency))
        return (bandwidth, self._resource(f"{name} write credits", credit_rate, "credits", die))

    def _resource(self, name: str, capacity: float, kind: str, die: int) -> Resource:
        resource = self._resources.get(name)
        if resource is None:
            resource = self._resources[name] = self.network.add_resource(Resource(name, capacity, kind=kind, die=die))
        return resource
