"""Routes composed from the levels of the interconnect: which level carries a die pair, node
crossings through the pod, RDMA through the scale-out NICs, the load/store path a multi-server A2
lacks, and a fabric kind added as one module (docs/architecture.md, "How to add a fabric")."""

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import npusim
from npusim.config import load_config
from npusim.errors import NoRouteError
from npusim.hw.system import System
from npusim.hw.topology import LOCAL, Direction, delay
from npusim.kernels.view_copy import build_view_copy
from npusim.trace.costs import Term

ROOT = Path(__file__).parents[2]
READ, WRITE = Direction.READ, Direction.WRITE


def system(name, *overrides):
    return System(load_config(name, list(overrides)).spec, with_data=False)


def names(route):
    return [r.name for r in route.resources]


def test_the_innermost_level_holding_both_dies_carries_them():
    a3 = system("a3", "shape.nodes=2").topology
    assert [a3.level_joining(0, dst) for dst in (0, 1, 2, 15, 16)] == [None, "package", "node", "node", "pod"]
    assert names(a3.route(2, 3, READ)) == ["pkg1 SIO die2->die3"]
    assert names(a3.route(0, 5, READ)) == ["die0 UB tx", "die5 UB rx"]
    a2 = system("a2").topology
    assert [a2.level_joining(0, dst) for dst in (1, 7)] == ["node", "node"]
    assert a2.route(3, 3, WRITE) is LOCAL


def test_crossing_nodes_composes_the_node_uplinks_with_the_pod_and_adds_latency_not_bandwidth():
    s = system("a3", "shape.nodes=2")
    topology, fabrics = s.topology, s.spec.fabrics
    inside, across = topology.route(0, 5, WRITE), topology.route(0, 21, WRITE)
    node, ps = topology.levels["node"], topology.wiring.ps
    assert across == node.uplink(0, WRITE) + delay((Term(("fabrics.pod.switch.latency",), ps(fabrics.pod.switch.latency)),)) + node.downlink(21, WRITE)
    assert names(across) == ["die0 UB tx", "die0 UB tx write credits", "die21 UB rx", "die21 UB rx write credits"]
    assert [r.capacity for r in across.resources] == [r.capacity for r in inside.resources]
    # die -> L1 -> L2 -> L1 -> die instead of die -> L1 -> die: two more links, one more L1, the L2
    assert across.latency_ps - inside.latency_ps == 2 * ps(fabrics.node.link.latency) + ps(fabrics.node.switch.latency) + ps(fabrics.pod.switch.latency)


@pytest.mark.parametrize(("config", "overrides", "pairs"), [
    ("a2", (), [(0, 1), (3, 3)]),
    ("a2", ("shape.nodes=2",), [(0, 9)]),
    ("a3", ("shape.nodes=2",), [(0, 1), (0, 5), (0, 21)]),
    ("atlas-300i-duo", (), [(0, 1)]),
])
def test_each_route_says_which_config_keys_its_latency_and_its_resources_come_from(config, overrides, pairs):
    """The latency of a route is the sum of its terms, each named by the key it came from (under
    fabrics.<level>); every resource it crosses has the keys of its capacity in the cost sources."""
    s = system(config, *overrides)
    loaded = load_config(config, list(overrides))
    for src, dst in pairs:
        for route in ([s.topology.route(src, dst, READ), s.topology.route(src, dst, WRITE)] if s.topology.joins(src, dst) or src == dst
                      else [s.topology.rdma_route(src, dst, READ)]):
            assert sum(term.ps for term in route.latency_terms) == route.latency_ps
            for term in route.latency_terms:
                assert term.keys and all(loaded.confidence_of(key).where != "schema" for key in term.keys), term  # keys the config sets
            for resource in route.resources:
                keys = s.recorder.costs.resources[resource.name]
                assert keys and all(key.startswith("fabrics.") for key in keys), (resource.name, keys)
    memory = s.gm_route(0, 0, False)
    assert [term.keys for term in memory.latency_terms] == [("die.l2.latency",), ("die.hbm.latency",)]
    assert [s.recorder.costs.resources[r.name] for r in memory.resources] == [("die.l2.bandwidth",), ("die.hbm.bandwidth",)]


def test_routes_are_built_once_per_direction_and_share_their_resources():
    topology = system("a2").topology
    assert topology.route(0, 1, WRITE) is topology.route(0, 1, WRITE)
    assert topology.route(0, 1, READ).resources[0] is topology.route(0, 1, WRITE).resources[0]
    assert topology.route(1, 0, READ).resources[0] is not topology.route(0, 1, READ).resources[0]  # one resource per direction


def test_remote_reads_pay_the_route_twice_and_writes_once():
    """A read (a hit or a miss in the remote die's L2) pays the fabric both ways; a posted write
    once, and only the L2's latency (it allocates its lines there)."""
    s = system("a2")
    hop = s.topology.route(3, 0, READ).latency_ps
    for hit in (False, True):
        assert s.gm_route(0, 3, to_gm=False, hit=hit).latency_ps == s.gm_route(0, 0, to_gm=False, hit=hit).latency_ps + 2 * hop
    assert s.gm_route(0, 3, to_gm=True).latency_ps == s.gm_route(0, 0, to_gm=False, hit=True).latency_ps + hop
    assert s.gm_route(0, 0, to_gm=False).latency_ps == s.gm_route(0, 0, to_gm=False, hit=True).latency_ps + s.die(0).memory_latency_ps \
        - s.die(0).l2_latency_ps


def test_remote_core_stores_cross_the_write_credits_and_loads_do_not():
    """A store crosses the write credits and ends in the L2 (a write allocates there, never
    reaching HBM); a load crosses the link, the L2, and the HBM when it misses."""
    s = system("a2")
    assert [r.kind for r in s.gm_route(0, 1, to_gm=True).resources] == ["link", "credits", "l2"]
    assert [r.kind for r in s.gm_route(0, 1, to_gm=False).resources] == ["link", "l2", "hbm"]
    assert [r.kind for r in s.gm_route(0, 1, to_gm=False, hit=True).resources] == ["link", "l2"]


def test_rdma_goes_through_both_nics_of_any_two_servers():
    s = system("a2", "shape.nodes=2")
    assert names(s.topology.rdma_route(1, 6, WRITE)) == ["nic1 tx", "nic6 rx"]
    inside, across = s.topology.rdma_route(0, 1, READ), s.topology.rdma_route(0, 8, READ)
    assert names(across) == ["nic0 tx", "nic8 rx"]
    assert across.latency_ps == inside.latency_ps  # one switch joins every NIC


def test_a_system_without_nics_has_no_rdma_route():
    topology = system("a2", "fabrics.scale_out=null").topology
    assert topology.scale_out is None and names(topology.route(0, 1, READ)) == ["die0->die1 HCCS"]
    with pytest.raises(NoRouteError, match=r"RDMA from die 0 to die 1: the system 'a2' has no scale-out network \(fabrics.scale_out\): "
                                           r"its dies have no NIC; move the data over the load/store fabric"):
        topology.rdma_route(0, 1, WRITE)


def test_two_a2_servers_have_no_load_store_path():
    topology = system("a2", "shape.nodes=2").topology
    assert topology.joins(0, 7) and not topology.joins(0, 8)
    with pytest.raises(NoRouteError, match=r"die 0 and die 8 are in different nodes \(0 and 1\) and no pod fabric joins the nodes "
                                           r"\(fabrics.pod\).*move the data by RDMA, npusim.transfer\(\.\.\., protocol='rdma'\)"):
        topology.route(0, 8, WRITE)


def test_an_mte_copy_across_a2_servers_fails_naming_both_dies_and_rdma():
    with pytest.raises(NoRouteError) as caught:
        with npusim.session("a2", ["shape.nodes=2"], data=False):
            src, dst = npusim.empty(4096, np.float16, device=8), npusim.empty(4096, np.float16, device=0)
            build_view_copy(dst, src, name="copy").launch()
    message = str(caught.value)
    assert message.startswith("the cores of die 0 cannot load from the GM of die 8 (an MTE copy): die 8 and die 0 are in different nodes")
    assert "protocol='rdma'" in message


def test_a_device_that_does_not_exist_is_named():
    with npusim.session("a2", data=False):
        with pytest.raises(npusim.errors.UsageError, match=r"device 8 does not exist: the config 'a2' has 8 dies \(0..7\)"):
            npusim.tensor([1.0], device=8)


# -- a fabric kind of one's own: one module, registered when imported -----------------------------

BUS = '''
"""A node fabric of one shared bus: every transfer inside a node crosses the same resource."""

from typing import ClassVar, Literal

from pydantic import Field

from npusim.config.registry import FABRICS
from npusim.config.schema import FabricSpec, LinkSpec
from npusim.hw.topology import Direction, Fabric, Route


class BusSpec(FabricSpec):
    kind: Literal["bus"]
    levels: ClassVar[tuple[str, ...]] = ("node",)
    link: LinkSpec = Field(description="the bus, shared by every transfer inside a node")


@FABRICS.register("bus")
class Bus(Fabric):
    Spec = BusSpec

    def route(self, src: int, dst: int, direction: Direction) -> Route:
        node = src // self.shape.dies_per_node
        return Route(self.wiring.hop(f"node{node} bus", self.spec.link, src, direction), self.wiring.ps(self.spec.link.latency))
'''

RUN_ON_THE_BUS = '''
import json, sys
import numpy as np
import bus  # registers the kind
import npusim
from npusim.config import load_config

rates = {}
for streams in (1, 2):
    with npusim.session(sys.argv[1], sys.argv[2:], data=False) as s:
        for i in range(streams):  # die 2i -> die 2i+1: disjoint pairs, one bus
            local, remote = npusim.empty(2**24, np.uint8, device=2 * i), npusim.empty(2**24, np.uint8, device=2 * i + 1)
            npusim.transfer("read", local, remote)
    rates[streams] = s.result.simulated_ps
links = sorted({r.name for r in s.system.network.resources if r.kind == "link"})
print(json.dumps({"rates": rates, "links": links, "bandwidth": str(load_config(sys.argv[1], sys.argv[2:]).spec.fabrics.node.link.bandwidth)}))
'''


def test_a_fabric_kind_of_ones_own_is_one_module_registered_on_import(tmp_path):
    (tmp_path / "bus.py").write_text(BUS.lstrip())
    (tmp_path / "run.py").write_text(RUN_ON_THE_BUS.lstrip())
    config = tmp_path / "bus.yaml"
    config.write_text("extends: a2\nname: bus\nfabrics:\n  node:\n    kind: bus\n    link: {write_credits: null}\n")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(tmp_path), str(ROOT)]))
    run = subprocess.run([sys.executable, str(tmp_path / "run.py"), str(config), "fabrics.node.link.bandwidth=14 GB/s"],
                         capture_output=True, text=True, env=env, timeout=120)
    assert run.returncode == 0, run.stderr
    result = json.loads(run.stdout)
    assert result["links"] == ["node0 bus"] and result["bandwidth"] == "14 GB/s"
    one, two = result["rates"]["1"], result["rates"]["2"]
    assert 1.9 < two / one < 2.0  # two transfers of disjoint pairs share the bus: twice the time, minus the fixed part


def test_pods_are_joined_by_the_nics_only():
    """The pod fabric joins the nodes of one pod; dies of two pods (SuperPoDs) reach each other by RDMA."""
    topology = system("a3", "shape.pods=2", "shape.nodes=2").topology
    assert topology.level_joining(0, 16) == "pod" and topology.level_joining(0, 32) is None
    with pytest.raises(NoRouteError, match="different pods"):
        topology.route(0, 32, WRITE)
    assert names(topology.rdma_route(0, 32, WRITE)) == ["nic0 tx", "nic32 rx"]
