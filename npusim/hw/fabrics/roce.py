"""``roce``: the scale-out network. RoCE v2 NICs, one per package or per die, every NIC of every
node connected to one non-blocking switch (a top-of-rack switch, or a non-blocking Clos of them):
two NPUs of one A2 server reach each other through it too (HCCL_INTRA_ROCE_ENABLE), and A2 servers
are joined only by it."""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field

from npusim.config.registry import FABRICS
from npusim.config.schema import FabricSpec, Fraction, Rate, Time
from npusim.hw.topology import LOCAL, Direction, Fabric, Route


class RoceSpec(FabricSpec):
    """Scale-out RoCE NICs, one per ``per`` (NPU package or die), each reaching every other NIC."""

    kind: Literal["roce"]
    levels: ClassVar[tuple[str, ...]] = ("scale_out",)
    bandwidth: Rate = Field(description="line rate of one NIC, per direction")
    latency: Time = Field(description="one way from NIC to NIC through the switch, NIC processing at both ends")
    per: Literal["package", "die"] = "package"
    efficiency: Fraction = Field(1.0, description="fraction of the line rate that carries payload (RoCE v2 headers per packet)")


@FABRICS.register("roce")
class Roce(Fabric):
    """Resources ``nicN tx`` and ``nicN rx`` (N: the package or die of the NIC); the switch is
    non-blocking. Two dies of one NIC have no RDMA path (LOCAL)."""

    Spec = RoceSpec
    spec: RoceSpec

    def route(self, src: int, dst: int, direction: Direction) -> Route:
        spec, wiring = self.spec, self.wiring
        a, b = (self.shape.package_of(src), self.shape.package_of(dst)) if spec.per == "package" else (src, dst)
        if a == b:
            return LOCAL
        payload = spec.bandwidth.bytes_per_ps(wiring.clock_hz) * spec.efficiency
        tx = wiring.resource(f"nic{a} tx", payload, "nic", src, ("bandwidth", "efficiency"))
        rx = wiring.resource(f"nic{b} rx", payload, "nic", dst, ("bandwidth", "efficiency"))
        return Route((tx, rx)) + wiring.delay("latency", spec.latency)
