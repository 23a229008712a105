"""``full_mesh``: one link between every pair of dies of a node (HCCS in an A2 server: 7 links per
NPU, one to each other NPU)."""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field

from npusim.config.registry import FABRICS
from npusim.config.schema import FabricSpec, LinkSpec
from npusim.hw.topology import Direction, Fabric, Route


class FullMeshSpec(FabricSpec):
    """A node's full mesh: its own link between every two dies of the node."""

    kind: Literal["full_mesh"]
    levels: ClassVar[tuple[str, ...]] = ("node",)
    link: LinkSpec = Field(description="the link between two dies (HCCS on A2)")


@FABRICS.register("full_mesh")
class FullMesh(Fabric):
    """Resources ``dieA->dieB HCCS``, one per direction of each die pair."""

    Spec = FullMeshSpec
    spec: FullMeshSpec

    def route(self, src: int, dst: int, direction: Direction) -> Route:
        link = self.spec.link
        return Route(self.wiring.hop(f"die{src}->die{dst} HCCS", link, src, direction)) + self.wiring.delay("link.latency", link.latency)
