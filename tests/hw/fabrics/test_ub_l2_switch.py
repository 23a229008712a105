"""ub_l2_switch: the second-tier UB switches joining the nodes of an A3 SuperPoD through the first
tier's uplinks, and the node fabrics it refuses."""

import pytest

from npusim.config import load_config
from npusim.errors import ConfigError
from npusim.hw.fabrics.ub_l2_switch import UbL2Switch
from npusim.hw.topology import Direction

CLOCK = 1.85e9


def test_a_crossing_is_the_uplink_the_second_tier_and_the_downlink(system):
    s = system("a3", "shape.nodes=3")
    pod = s.topology.levels["pod"]
    assert isinstance(pod, UbL2Switch) and pod.inner is s.topology.levels["node"]
    route = pod.route(3, 40, Direction.READ)
    assert [r.name for r in route.resources] == ["die3 UB tx", "die40 UB rx"]
    fabrics = s.spec.fabrics
    link, l1, l2 = (q.to_ps(CLOCK) for q in (fabrics.node.link.latency, fabrics.node.switch.latency, fabrics.pod.switch.latency))
    assert route.latency_ps == 4 * link + 2 * l1 + l2


def test_the_second_tier_latency_slows_crossings_only(system):
    base, slow = system("a3", "shape.nodes=2").topology, system("a3", "shape.nodes=2", "fabrics.pod.switch.latency=1 us").topology
    assert slow.route(0, 16, Direction.READ).latency_ps - base.route(0, 16, Direction.READ).latency_ps == 10**6 - 200_000
    assert slow.route(0, 2, Direction.READ).latency_ps == base.route(0, 2, Direction.READ).latency_ps


def test_it_needs_a_node_fabric_with_switches(tmp_path):
    config = tmp_path / "c.yaml"
    config.write_text("extends: a2\nfabrics:\n  pod:\n    kind: ub_l2_switch\n    switch: {latency: 200 ns}\n")
    with pytest.raises(ConfigError) as caught:
        load_config(config)
    assert str(caught.value) == (
        f"{config}:3: fabrics.pod: the ub_l2_switch of fabrics.pod joins the nodes' first-tier switches, but fabrics.node is a "
        "full_mesh fabric, without switches; use a node fabric with switches (ub_l1_switch) or remove fabrics.pod (nodes then "
        "reach each other by RDMA only)"
    )
