"""Routes: posted writes cross the write credits of every link on their path, reads do not."""

import pytest

from npusim.config import load_config
from npusim.hw.system import System

CLOCK = 1.85e9


def system_of(config, overrides=()):
    return System(load_config(config, list(overrides)).spec, with_data=False)


def test_remote_core_stores_cross_the_write_credits_and_loads_do_not():
    system = system_of("a2")
    store = system.gm_route(0, 1, to_gm=True).resources
    load = system.gm_route(0, 1, to_gm=False).resources
    assert [r.kind for r in store] == ["link", "credits", "l2", "hbm"]
    assert [r.kind for r in load] == ["link", "l2", "hbm"]
    link = system.spec.fabric.link
    assert store[1].capacity == pytest.approx(link.write_credits.bytes / (2 * link.latency.to_ps(CLOCK)))


def test_ub_write_credits_cover_every_plane_at_both_ends():
    system = system_of("a3")
    route = system.topology.route(0, 2, writes=True)
    assert [r.name for r in route.resources] == ["die0 UB tx", "die0 UB tx write credits", "die2 UB rx", "die2 UB rx write credits"]
    link = system.spec.fabric.link
    assert route.resources[1].capacity == pytest.approx(7 * link.write_credits.bytes / (2 * link.latency.to_ps(CLOCK)), rel=1e-4)


def test_an_explicit_path_has_credits_on_each_hop(tmp_path):
    config = tmp_path / "chain.yaml"
    config.write_text(
        "extends: a2\nname: chain\nshape: {packages_per_node: 3}\nfabric:\n  kind: links\n  link: null\n  links:\n"
        "    - {a: 0, b: 1, link: {bandwidth: 10 GB/s, latency: 100 ns, write_credits: 1 KiB}}\n"
        "    - {a: 1, b: 2, link: {bandwidth: 10 GB/s, latency: 200 ns}}\n"
    )
    system = System(load_config(str(config)).spec, with_data=False)
    writes = system.topology.route(0, 2, writes=True)
    assert [r.name for r in writes.resources] == ["die0->die1", "die0->die1 write credits", "die1->die2"]
    assert writes.latency_ps == 300_000
    assert writes.resources[1].capacity == pytest.approx(1024 / 200_000)
    assert [r.name for r in system.topology.route(0, 2).resources] == ["die0->die1", "die1->die2"]


def test_a_link_without_credits_limits_writes_by_its_bandwidth_only():
    system = system_of("a2", ["fabric.link.write_credits=null"])
    assert [r.kind for r in system.topology.route(0, 1, writes=True).resources] == ["link"]
