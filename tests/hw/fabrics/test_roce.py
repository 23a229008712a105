"""roce: the scale-out NICs, one per package or per die, all on one switch."""

import pytest

from npusim.hw.fabrics.roce import Roce
from npusim.hw.topology import LOCAL, Direction


def test_rdma_crosses_the_sending_and_the_receiving_nic(system):
    s = system("a2")
    roce, nic = s.topology.scale_out, s.spec.fabrics.scale_out
    assert isinstance(roce, Roce)
    route = roce.route(1, 6, Direction.WRITE)
    assert [(r.name, r.kind, r.die) for r in route.resources] == [("nic1 tx", "nic", 1), ("nic6 rx", "nic", 6)]
    assert route.resources[0].capacity == pytest.approx(nic.bandwidth.bytes_per_ps(1.0) * nic.efficiency)
    assert route.latency_ps == nic.latency.to_ps(1.0)
    assert roce.route(1, 6, Direction.READ).resources == route.resources  # no credits on RoCE


def test_a_nic_per_package_is_shared_by_its_dies(system):
    per_package = system("a3", "fabrics.scale_out.per=package").topology
    assert per_package.rdma_route(0, 1, Direction.READ) is LOCAL
    assert [r.name for r in per_package.rdma_route(1, 2, Direction.READ).resources] == ["nic0 tx", "nic1 rx"]
    per_die = system("a3").topology
    assert [r.name for r in per_die.rdma_route(0, 1, Direction.READ).resources] == ["nic0 tx", "nic1 rx"]


def test_every_server_reaches_every_other_through_the_same_switch(system):
    topology = system("a2", "shape.nodes=3").topology
    assert [r.name for r in topology.rdma_route(3, 20, Direction.READ).resources] == ["nic3 tx", "nic20 rx"]
    assert topology.rdma_route(3, 20, Direction.READ).latency_ps == topology.rdma_route(3, 4, Direction.READ).latency_ps
