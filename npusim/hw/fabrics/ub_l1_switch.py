"""``ub_l1_switch``: the first-tier UB switches of an A3 node. Each die has one link into each of
the node's ``planes`` switches; a first-tier switch reaches the second tier (``ub_l2_switch``) over
the same kind of link."""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar, Literal

from pydantic import Field

from npusim.config.registry import FABRICS
from npusim.config.schema import MAX_CHANNELS, ChannelCount, FabricSpec, LinkSpec, SwitchSpec, SystemShape
from npusim.hw.topology import Direction, Fabric, Route, Wiring

if TYPE_CHECKING:
    from npusim.engine.flow import Resource


class UbL1SwitchSpec(FabricSpec):
    """A node's first-tier UB switches: ``planes`` switches, one ``link`` from each die to each."""

    kind: Literal["ub_l1_switch"]
    levels: ClassVar[tuple[str, ...]] = ("node",)
    uplinks: ClassVar[bool] = True
    planes: ChannelCount = Field(description=f"first-tier switches per node = links per die (at most {MAX_CHANNELS})")
    link: LinkSpec = Field(description="one die-to-switch link; a first-tier switch reaches the second tier over the same link")
    switch: SwitchSpec = Field(description="one first-tier switch")


@FABRICS.register("ub_l1_switch")
class UbL1Switch(Fabric):
    """Die -> its node's first-tier switches (all planes) -> die. Traffic is sprayed evenly over
    the planes, so one die's ports are one resource of ``planes x link`` per direction, ``dieN UB
    tx`` and ``dieN UB rx`` (with their write credits, ``planes x`` the link's); the switches are
    non-blocking. Its uplinks take a die's traffic through its first-tier switch up to the second
    tier, and down from there."""

    Spec = UbL1SwitchSpec
    spec: UbL1SwitchSpec

    def __init__(self, spec: UbL1SwitchSpec, shape: SystemShape, wiring: Wiring, inner: Fabric | None) -> None:
        super().__init__(spec, shape, wiring, inner)
        link, planes = spec.link, spec.planes
        credits = link.write_credits.scaled(planes) if link.write_credits is not None else None
        self.ports = LinkSpec(bandwidth=link.bandwidth.scaled(planes), latency=link.latency, efficiency=link.efficiency, write_credits=credits)
        self.two_links = wiring.delay("link.latency", link.latency, 2)
        self.switch = wiring.delay("switch.latency", spec.switch.latency)
        # a die's ports (its tx or rx side, one direction) and its uplink and downlink, made once: every route of the die takes them
        self._ports: dict[tuple[int, str, Direction], tuple[Resource, ...]] = {}
        self._links: dict[tuple[int, str, Direction], Route] = {}

    def route(self, src: int, dst: int, direction: Direction) -> Route:
        return Route(self._port(src, "tx", direction) + self._port(dst, "rx", direction)) + self.two_links + self.switch

    def uplink(self, src: int, direction: Direction) -> Route:
        """Die ``src`` -> first-tier switch -> its link to the second tier."""
        return self._link(src, "tx", direction)

    def downlink(self, dst: int, direction: Direction) -> Route:
        """The second tier's link -> first-tier switch -> die ``dst``."""
        return self._link(dst, "rx", direction)

    def _link(self, die: int, side: str, direction: Direction) -> Route:
        """Die ``die``'s ports of ``side`` -> first-tier switch -> its link to the second tier (or back)."""
        key = (die, side, direction)
        link = self._links.get(key)
        if link is None:
            link = self._links[key] = Route(self._port(die, side, direction)) + self.two_links + self.switch
        return link

    def _port(self, die: int, side: str, direction: Direction) -> tuple[Resource, ...]:
        """The resources of die ``die``'s UB ports on ``side`` (``tx`` or ``rx``), for ``direction``."""
        key = (die, side, direction)
        port = self._ports.get(key)
        if port is None:
            port = self._ports[key] = self.wiring.hop(f"die{die} UB {side}", self.ports, die, direction, also=("planes",))
        return port
