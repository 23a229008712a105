"""``pcie_switch``: the dies of a node joined by one PCIe switch (the two Ascend 310P chips of an
Atlas 300I Duo card). Each die has one PCIe port into the switch; a transfer between two dies
crosses the sender's port, the switch and the receiver's port."""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field

from npusim.config.registry import FABRICS
from npusim.config.schema import FabricSpec, LinkSpec, SwitchSpec
from npusim.hw.topology import Direction, Fabric, Route


class PcieSwitchSpec(FabricSpec):
    """A node's PCIe switch: one ``link`` from each die's PCIe port to the switch."""

    kind: Literal["pcie_switch"]
    levels: ClassVar[tuple[str, ...]] = ("node",)
    link: LinkSpec = Field(description="one die's PCIe port to the switch (lanes x line rate per direction)")
    switch: SwitchSpec = Field(description="the PCIe switch (one traversal, port to port)")


@FABRICS.register("pcie_switch")
class PcieSwitch(Fabric):
    """Die ``src``'s port (``dieN PCIe tx``), the switch, die ``dst``'s port (``dieN PCIe rx``):
    each port direction is one resource shared by every transfer through it (with its write
    credits for posted writes, when the link has them); the switch is non-blocking."""

    Spec = PcieSwitchSpec
    spec: PcieSwitchSpec

    def route(self, src: int, dst: int, direction: Direction) -> Route:
        link, wiring = self.spec.link, self.wiring
        resources = wiring.hop(f"die{src} PCIe tx", link, src, direction) + wiring.hop(f"die{dst} PCIe rx", link, dst, direction)
        return Route(resources) + wiring.delay("link.latency", link.latency, 2) + wiring.delay("switch.latency", self.spec.switch.latency)
