"""links: a node fabric written link by link, routed by the fewest hops."""

import pytest

from npusim.config import load_config
from npusim.errors import ConfigError, WorkloadError
from npusim.hw.system import System
from npusim.hw.topology import Direction

CHAIN = (
    "extends: a2\nname: chain\nshape: {packages_per_node: 3}\nfabrics:\n  node:\n    kind: links\n    link: null\n    links:\n"
    "      - {a: 0, b: 1, link: {bandwidth: 10 GB/s, latency: 100 ns, write_credits: 1 KiB}}\n"
    "      - {a: 1, b: 2, link: {bandwidth: 10 GB/s, latency: 200 ns}}\n"
)


def chain(tmp_path, text=CHAIN, *overrides):
    config = tmp_path / "chain.yaml"
    config.write_text(text)
    return load_config(str(config), list(overrides))


def test_an_explicit_path_has_credits_on_each_hop(tmp_path):
    s = System(chain(tmp_path).spec, with_data=False)
    writes = s.topology.route(0, 2, Direction.WRITE)
    assert [r.name for r in writes.resources] == ["die0->die1", "die0->die1 write credits", "die1->die2"]
    assert writes.latency_ps == 300_000
    assert writes.resources[1].capacity == pytest.approx(1024 / 200_000)
    assert [r.name for r in s.topology.route(2, 0, Direction.READ).resources] == ["die2->die1", "die1->die0"]


def test_dies_the_links_do_not_join_have_no_path(tmp_path):
    s = System(chain(tmp_path, CHAIN.replace("packages_per_node: 3", "packages_per_node: 4")).spec, with_data=False)
    with pytest.raises(WorkloadError, match=r"no path from die 0 to die 3 in the links of the node fabric; add a link \(fabrics.node.links\)"):
        s.topology.route(0, 3, Direction.READ)


def test_a_link_between_two_nodes_is_refused(tmp_path):
    with pytest.raises(ConfigError) as caught:
        chain(tmp_path, CHAIN, "shape.nodes=2", "fabrics.node.links.1.b=4")
    assert ("fabrics.node.links.1: fabrics.node.links[1] joins die 1 (node 0) and die 4 (node 1); a node fabric joins the dies of one "
            "node: link dies of one node (nodes are joined by fabrics.pod or by RDMA)") in str(caught.value)
