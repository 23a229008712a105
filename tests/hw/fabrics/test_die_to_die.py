"""die_to_die: the SIO link between the two dies of a 910C package."""

import pytest

from npusim.hw.fabrics.die_to_die import DieToDie
from npusim.hw.topology import Direction


def test_sibling_dies_cross_their_package_link_only(system):
    s = system("a3")
    sio = s.topology.levels["package"]
    assert isinstance(sio, DieToDie)
    link = s.spec.fabrics.package.link
    route = s.topology.route(2, 3, Direction.WRITE)
    assert [r.name for r in route.resources] == ["pkg1 SIO die2->die3"]  # no write credits configured: the bandwidth alone
    assert route.resources[0].capacity == pytest.approx(link.bandwidth.bytes_per_ps(1.0) * link.efficiency)
    assert route.latency_ps == link.latency.to_ps(1.0)
    assert [r.name for r in s.topology.route(3, 2, Direction.READ).resources] == ["pkg1 SIO die3->die2"]


def test_write_credits_of_the_package_link_apply_to_writes(system):
    s = system("a3", "fabrics.package.link.write_credits=4 KiB")
    assert [r.kind for r in s.topology.route(0, 1, Direction.WRITE).resources] == ["link", "credits"]
    assert [r.kind for r in s.topology.route(0, 1, Direction.READ).resources] == ["link"]
