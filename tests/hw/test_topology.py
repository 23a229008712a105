"""Routes between dies: HCCS mesh on A2, UB switches and SIO on A3, node crossings, RDMA, and the
write credits that posted writes cross on every link of their path (reads do not)."""

import pytest

import npusim
from npusim.config import load_config
from npusim.hw.system import System


def system(name, *overrides):
    return System(load_config(name, list(overrides)).spec, with_data=False)


def test_a2_dies_talk_over_their_own_hccs_link():
    s = system("a2")
    route = s.topology.route(0, 5)
    assert [r.name for r in route.resources] == ["die0->die5 HCCS"]
    link = s.spec.fabric.link
    assert route.resources[0].capacity == pytest.approx(link.bandwidth.bytes_per_ps(1.0) * link.efficiency)
    assert route.latency_ps == link.latency.to_ps(1.0)
    assert s.topology.route(5, 0).resources[0] is not route.resources[0]  # one resource per direction


def test_a3_sibling_dies_use_the_package_link_and_others_the_ub_ports():
    s = system("a3")
    assert [r.name for r in s.topology.route(2, 3).resources] == ["pkg1 SIO die2->die3"]
    route = s.topology.route(0, 5)
    assert [r.name for r in route.resources] == ["die0 UB tx", "die5 UB rx"]
    link = s.spec.fabric.link
    per_die = link.bandwidth.bytes_per_ps(1.0) * s.spec.fabric.planes * link.efficiency
    assert route.resources[0].capacity == pytest.approx(per_die)


def test_crossing_nodes_adds_switch_latency_not_bandwidth():
    s = system("a3", "shape.nodes=2")
    inside, across = s.topology.route(0, 5), s.topology.route(0, 21)
    assert across.latency_ps > inside.latency_ps
    assert [r.capacity for r in across.resources] == [r.capacity for r in inside.resources]


def test_remote_reads_pay_the_route_twice_and_writes_once():
    s = system("a2")
    local = s.gm_route(0, 0, to_gm=False)
    read = s.gm_route(0, 3, to_gm=False)
    write = s.gm_route(0, 3, to_gm=True)
    hop = s.topology.route(3, 0).latency_ps
    assert read.latency_ps == local.latency_ps + 2 * hop
    assert write.latency_ps == local.latency_ps + hop


def test_rdma_goes_through_both_nics():
    s = system("a2")
    assert [r.name for r in s.topology.rdma_route(1, 6).resources] == ["nic1 tx", "nic6 rx"]


def test_a_device_that_does_not_exist_is_named():
    with npusim.session("a2", data=False):
        with pytest.raises(npusim.errors.UsageError, match=r"device 8 does not exist: the config 'a2' has 8 dies \(0..7\)"):
            npusim.tensor([1.0], device=8)


CLOCK = 1.85e9


def test_remote_core_stores_cross_the_write_credits_and_loads_do_not():
    s = system("a2")
    store = s.gm_route(0, 1, to_gm=True).resources
    load = s.gm_route(0, 1, to_gm=False).resources
    assert [r.kind for r in store] == ["link", "credits", "l2", "hbm"]
    assert [r.kind for r in load] == ["link", "l2", "hbm"]
    link = s.spec.fabric.link
    assert store[1].capacity == pytest.approx(link.write_credits.bytes / (2 * link.latency.to_ps(CLOCK)))


def test_ub_write_credits_cover_every_plane_at_both_ends():
    s = system("a3")
    route = s.topology.route(0, 2, writes=True)
    assert [r.name for r in route.resources] == ["die0 UB tx", "die0 UB tx write credits", "die2 UB rx", "die2 UB rx write credits"]
    link = s.spec.fabric.link
    assert route.resources[1].capacity == pytest.approx(7 * link.write_credits.bytes / (2 * link.latency.to_ps(CLOCK)), rel=1e-4)


def test_an_explicit_path_has_credits_on_each_hop(tmp_path):
    config = tmp_path / "chain.yaml"
    config.write_text(
        "extends: a2\nname: chain\nshape: {packages_per_node: 3}\nfabric:\n  kind: links\n  link: null\n  links:\n"
        "    - {a: 0, b: 1, link: {bandwidth: 10 GB/s, latency: 100 ns, write_credits: 1 KiB}}\n"
        "    - {a: 1, b: 2, link: {bandwidth: 10 GB/s, latency: 200 ns}}\n"
    )
    s = System(load_config(str(config)).spec, with_data=False)
    writes = s.topology.route(0, 2, writes=True)
    assert [r.name for r in writes.resources] == ["die0->die1", "die0->die1 write credits", "die1->die2"]
    assert writes.latency_ps == 300_000
    assert writes.resources[1].capacity == pytest.approx(1024 / 200_000)
    assert [r.name for r in s.topology.route(0, 2).resources] == ["die0->die1", "die1->die2"]


def test_a_link_without_credits_limits_writes_by_its_bandwidth_only():
    s = system("a2", "fabric.link.write_credits=null")
    assert [r.kind for r in s.topology.route(0, 1, writes=True).resources] == ["link"]
