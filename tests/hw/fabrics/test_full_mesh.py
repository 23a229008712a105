"""full_mesh: the HCCS links of an A2 server, one per direction of every die pair."""

import pytest

from npusim.hw.fabrics.full_mesh import FullMesh, FullMeshSpec
from npusim.hw.topology import Direction

CLOCK = 1.85e9


def test_a2_dies_talk_over_their_own_hccs_link(system):
    s = system("a2")
    mesh = s.topology.levels["node"]
    assert isinstance(mesh, FullMesh) and isinstance(s.spec.fabrics.node, FullMeshSpec)
    route = mesh.route(0, 5, Direction.READ)
    assert [r.name for r in route.resources] == ["die0->die5 HCCS"]
    link = s.spec.fabrics.node.link
    assert route.resources[0].capacity == pytest.approx(link.bandwidth.bytes_per_ps(1.0) * link.efficiency)
    assert route.latency_ps == link.latency.to_ps(1.0)
    assert mesh.route(5, 0, Direction.READ).resources[0] is not route.resources[0]  # one resource per direction


def test_writes_cross_the_link_credits(system):
    s = system("a2")
    link = s.spec.fabrics.node.link
    write = s.topology.levels["node"].route(0, 1, Direction.WRITE)
    assert [(r.name, r.kind) for r in write.resources] == [("die0->die1 HCCS", "link"), ("die0->die1 HCCS write credits", "credits")]
    assert write.resources[1].capacity == pytest.approx(link.write_credits.bytes / (2 * link.latency.to_ps(CLOCK)))


def test_a_link_without_credits_limits_writes_by_its_bandwidth_only(system):
    s = system("a2", "fabrics.node.link.write_credits=null")
    assert [r.kind for r in s.topology.route(0, 1, Direction.WRITE).resources] == ["link"]


def test_each_server_of_a_cluster_has_its_own_mesh(system):
    s = system("a2", "shape.nodes=2")
    assert [r.name for r in s.topology.route(9, 15, Direction.READ).resources] == ["die9->die15 HCCS"]
