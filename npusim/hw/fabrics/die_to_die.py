"""``die_to_die``: the link between the dies of one package (SIO between the two dies of a 910C)."""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field

from npusim.config.registry import FABRICS
from npusim.config.schema import FabricSpec, LinkSpec
from npusim.hw.topology import Direction, Fabric, Route


class DieToDieSpec(FabricSpec):
    """A package's die-to-die link: one in each direction between two of its dies."""

    kind: Literal["die_to_die"]
    levels: ClassVar[tuple[str, ...]] = ("package",)
    link: LinkSpec = Field(description="the die-to-die link (SIO on 910C)")


@FABRICS.register("die_to_die")
class DieToDie(Fabric):
    """Resources ``pkgP SIO dieA->dieB``, one per direction of each die pair."""

    Spec = DieToDieSpec
    spec: DieToDieSpec

    def route(self, src: int, dst: int, direction: Direction) -> Route:
        link = self.spec.link
        package = self.shape.package_of(src)
        return Route(self.wiring.hop(f"pkg{package} SIO die{src}->die{dst}", link, src, direction)) + self.wiring.delay("link.latency", link.latency)
