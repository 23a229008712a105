"""ub_l1_switch: a die's UB ports into the first-tier switches of its A3 node, all planes as one
resource per direction, and the uplinks the second tier composes."""

import pytest

from npusim.hw.fabrics.ub_l1_switch import UbL1Switch
from npusim.hw.topology import Direction

CLOCK = 1.85e9


def test_dies_of_two_packages_cross_their_ub_ports(system):
    s = system("a3")
    ub = s.topology.levels["node"]
    assert isinstance(ub, UbL1Switch)
    node = s.spec.fabrics.node
    route = ub.route(0, 5, Direction.READ)
    assert [r.name for r in route.resources] == ["die0 UB tx", "die5 UB rx"]
    assert route.resources[0].capacity == pytest.approx(node.link.bandwidth.bytes_per_ps(1.0) * node.planes * node.link.efficiency)
    assert route.latency_ps == 2 * node.link.latency.to_ps(CLOCK) + node.switch.latency.to_ps(CLOCK)


def test_write_credits_cover_every_plane_at_both_ends(system):
    s = system("a3")
    route = s.topology.route(0, 2, Direction.WRITE)
    assert [r.name for r in route.resources] == ["die0 UB tx", "die0 UB tx write credits", "die2 UB rx", "die2 UB rx write credits"]
    link = s.spec.fabrics.node.link
    assert route.resources[1].capacity == pytest.approx(7 * link.write_credits.bytes / (2 * link.latency.to_ps(CLOCK)), rel=1e-4)


def test_the_uplinks_use_the_same_ports_and_reach_the_second_tier(system):
    s = system("a3")
    ub, node = s.topology.levels["node"], s.spec.fabrics.node
    up, down = ub.uplink(0, Direction.READ), ub.downlink(5, Direction.READ)
    inside = ub.route(0, 5, Direction.READ)
    assert up.resources + down.resources == inside.resources
    assert up.latency_ps == down.latency_ps == 2 * node.link.latency.to_ps(CLOCK) + node.switch.latency.to_ps(CLOCK)
