"""``links``: a node fabric written link by link (for what-if topologies): the shortest path in
hops between two dies, ties broken by the order the links are listed."""

from __future__ import annotations

from collections import deque
from typing import ClassVar, Literal

from pydantic import Field

from npusim.config.registry import FABRICS
from npusim.config.schema import FabricSpec, LinkSpec, Spec, SystemShape, SystemSpec
from npusim.errors import WorkloadError
from npusim.hw.topology import LOCAL, Direction, Fabric, Route, Wiring


class ExplicitLink(Spec):
    """One bidirectional link between two dies of one node."""

    a: int = Field(ge=0, description="die index of one end")
    b: int = Field(ge=0, description="die index of the other end")
    link: LinkSpec


class LinksSpec(FabricSpec):
    """A node fabric as a list of links between dies (die indices of the system)."""

    kind: Literal["links"]
    levels: ClassVar[tuple[str, ...]] = ("node",)
    links: list[ExplicitLink]

    def check(self, level: str, system: SystemSpec) -> None:
        dies, per_node = system.shape.dies, system.shape.dies_per_node
        for i, entry in enumerate(self.links):
            for end in ("a", "b"):
                die = getattr(entry, end)
                if die >= dies:
                    raise ValueError(
                        f"fabrics.{level}.links[{i}].{end} references die {die}, but the system has {dies} dies "
                        f"(0..{dies - 1}); fix the link or raise shape.packages_per_node"
                    )
            if entry.a // per_node != entry.b // per_node:
                raise ValueError(
                    f"fabrics.{level}.links[{i}] joins die {entry.a} (node {entry.a // per_node}) and die {entry.b} "
                    f"(node {entry.b // per_node}); a node fabric joins the dies of one node: link dies of one node "
                    "(nodes are joined by fabrics.pod or by RDMA)"
                )


@FABRICS.register("links")
class Links(Fabric):
    """Resources ``dieA->dieB`` per link direction, crossed hop by hop (each hop's write credits too)."""

    Spec = LinksSpec
    spec: LinksSpec

    def __init__(self, spec: LinksSpec, shape: SystemShape, wiring: Wiring, inner: Fabric | None) -> None:
        super().__init__(spec, shape, wiring, inner)
        self._next_hops: dict[int, dict[int, tuple[int, tuple[int, LinkSpec]]]] = {}

    def route(self, src: int, dst: int, direction: Direction) -> Route:
        hops = self._next_hops.get(src)
        if hops is None:
            hops = self._next_hops[src] = self._bfs(src)
        if dst not in hops:
            raise WorkloadError(f"no path from die {src} to die {dst} in the links of the node fabric; add a link (fabrics.node.links)")
        route, here = LOCAL, dst
        while here != src:
            previous, (index, link) = hops[here]
            at = f"links.{index}.link"
            route = Route(self.wiring.hop(f"die{previous}->die{here}", link, previous, direction, at)) + self.wiring.delay(f"{at}.latency", link.latency) + route
            here = previous
        return route

    def _bfs(self, src: int) -> dict[int, tuple[int, tuple[int, LinkSpec]]]:
        """For every die reachable from ``src``: the die before it on a shortest path, and the link
        (its index in ``links`` and its spec)."""
        links = self.spec.links
        neighbours: dict[int, list[tuple[int, tuple[int, LinkSpec]]]] = {}
        for index, entry in enumerate(links):
            neighbours.setdefault(entry.a, []).append((entry.b, (index, entry.link)))
            neighbours.setdefault(entry.b, []).append((entry.a, (index, entry.link)))
        reached: dict[int, tuple[int, tuple[int, LinkSpec]]] = {src: (src, (0, links[0].link))} if links else {}
        queue = deque([src])
        while queue:
            here = queue.popleft()
            for there, link in neighbours.get(here, ()):
                if there not in reached:
                    reached[there] = (here, link)
                    queue.append(there)
        return reached
