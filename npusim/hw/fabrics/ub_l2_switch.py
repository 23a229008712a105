"""``ub_l2_switch``: the second-tier UB switches of an A3 SuperPoD, joining the nodes: the
first-tier switch of each plane in every node links to the second-tier switch of its plane."""

from __future__ import annotations

from typing import ClassVar, Literal, cast

from pydantic import Field

from npusim.config.registry import FABRICS
from npusim.config.schema import FabricSpec, SwitchSpec, SystemShape, SystemSpec
from npusim.hw.topology import Direction, Fabric, Route, Uplinks, Wiring


class UbL2SwitchSpec(FabricSpec):
    """A SuperPoD's second-tier UB switches (non-blocking: only their latency counts)."""

    kind: Literal["ub_l2_switch"]
    levels: ClassVar[tuple[str, ...]] = ("pod",)
    switch: SwitchSpec = Field(description="one second-tier switch")

    def check(self, level: str, system: SystemSpec) -> None:
        node = system.fabrics.node
        if not node.uplinks:
            raise ValueError(
                f"the ub_l2_switch of fabrics.{level} joins the nodes' first-tier switches, but fabrics.node is a {node.kind} "
                "fabric, without switches; use a node fabric with switches (ub_l1_switch) or remove fabrics.pod (nodes then reach "
                "each other by RDMA only)"
            )


@FABRICS.register("ub_l2_switch")
class UbL2Switch(Fabric):
    """Die -> the uplink of its node's first tier -> second-tier switch -> the downlink of the
    other node's first tier -> die: no resources of its own (the die's UB ports carry the bytes),
    the latency of every hop."""

    Spec = UbL2SwitchSpec
    spec: UbL2SwitchSpec

    def __init__(self, spec: UbL2SwitchSpec, shape: SystemShape, wiring: Wiring, inner: Fabric | None) -> None:
        super().__init__(spec, shape, wiring, inner)
        self.switch = wiring.delay("switch.latency", spec.switch.latency)

    def route(self, src: int, dst: int, direction: Direction) -> Route:
        nodes = cast(Uplinks, self.inner)
        return nodes.uplink(src, direction) + self.switch + nodes.downlink(dst, direction)
