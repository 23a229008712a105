"""pcie_switch: the two chips of an Atlas 300I Duo card cross the sender's PCIe port, the switch and
the receiver's port; posted writes also cross the ports' write credits when the link has them."""

import pytest

from npusim.config import load_config
from npusim.errors import ConfigError
from npusim.hw.fabrics.pcie_switch import PcieSwitch
from npusim.hw.topology import Direction

CLOCK = 1.06e9


def test_a_transfer_crosses_both_pcie_ports_and_the_switch(system):
    s = system("atlas-300i-duo")
    pcie = s.topology.levels["node"]
    assert isinstance(pcie, PcieSwitch) and set(s.topology.levels) == {"node"} and s.topology.scale_out is None
    link, switch = s.spec.fabrics.node.link, s.spec.fabrics.node.switch
    for src, dst in ((0, 1), (1, 0)):
        route = pcie.route(src, dst, Direction.READ)
        assert [r.name for r in route.resources] == [f"die{src} PCIe tx", f"die{dst} PCIe rx"]
        assert route.latency_ps == 2 * link.latency.to_ps(CLOCK) + switch.latency.to_ps(CLOCK)
    assert route.resources[0].capacity == pytest.approx(31.5e9 * 1e-12 * 0.86)
    assert s.topology.route(0, 1, Direction.WRITE).resources == s.topology.route(0, 1, Direction.READ).resources  # no write credits


def test_write_credits_limit_posted_writes_at_both_ports(system):
    s = system("atlas-300i-duo", "fabrics.node.link.write_credits=8 KiB")
    route = s.topology.route(1, 0, Direction.WRITE)
    assert [r.name for r in route.resources] == ["die1 PCIe tx", "die1 PCIe tx write credits", "die0 PCIe rx", "die0 PCIe rx write credits"]
    assert route.resources[1].capacity == pytest.approx(8192 / (2 * 250_000))
    assert [r.name for r in s.topology.route(1, 0, Direction.READ).resources] == ["die1 PCIe tx", "die0 PCIe rx"]


@pytest.mark.parametrize("override, message", [
    ("fabrics.node.switch=null", "fabrics.node.switch: missing required key 'switch'"),
    ("fabrics.node.link.bandwidth=31.5", "fabrics.node.link.bandwidth"),
    ("fabrics.pod={kind: pcie_switch, link: {bandwidth: 1 GB/s, latency: 1 us}, switch: {latency: 1 us}}",
     "the pcie_switch of fabrics.pod.kind is a fabric of the node level, not of the pod level"),
])
def test_a_wrong_pcie_switch_is_a_located_error(override, message):
    with pytest.raises(ConfigError) as caught:
        load_config("atlas-300i-duo", [override])
    assert message in str(caught.value)
