"""The interconnect of a SystemSpec as levels (fabrics.package / node / pod / scale_out): each level
validated by the model of its registered kind, kinds only at their levels, and overrides that build
or change a level."""

import pytest

from npusim.config import load_config
from npusim.config.schema import LEVELS, fabric_kinds_at
from npusim.errors import ConfigError


def error_of(config, overrides=()) -> str:
    with pytest.raises(ConfigError) as caught:
        load_config(config, list(overrides))
    return str(caught.value)


def test_each_level_has_its_kinds():
    assert LEVELS == ("package", "node", "pod", "scale_out")
    assert {level: fabric_kinds_at(level) for level in LEVELS} == {
        "package": ["die_to_die"], "node": ["full_mesh", "links", "ub_l1_switch"], "pod": ["ub_l2_switch"], "scale_out": ["roce"]}


def test_a_level_is_validated_by_the_model_of_its_kind():
    fabrics = load_config("a3").spec.fabrics
    assert [type(getattr(fabrics, level)).__name__ for level in LEVELS] == ["DieToDieSpec", "UbL1SwitchSpec", "UbL2SwitchSpec", "RoceSpec"]
    assert error_of("a2", ["fabrics.node.planes=7"]) == (
        "--set fabrics.node.planes=7: fabrics.node.planes: unknown key 'planes'; remove it, or use one of the keys of fabrics.node: kind, link")


def test_a_kind_at_another_level_is_refused_with_the_kinds_of_that_level():
    message = error_of("a2", ["fabrics.scale_out={kind: full_mesh, bandwidth: null, latency: null, per: null, efficiency: null, "
                              "link: {bandwidth: 1 GB/s, latency: 1 us}}"])
    assert message.endswith("fabrics.scale_out.kind: the full_mesh of fabrics.scale_out.kind is a fabric of the node level, not of "
                            "the scale_out level; use one of roce")


def test_node_and_scale_out_are_required_and_package_with_two_dies_a_package():
    assert "fabrics.node: missing required key 'node'" in error_of("a2", ["fabrics.node=null"])
    assert "fabrics.scale_out: missing required key 'scale_out'" in error_of("a2", ["fabrics.scale_out=null"])
    assert "shape.dies_per_package is 2 but fabrics.package (the die-to-die link of a package) is missing" in error_of("a3", ["fabrics.package=null"])


def test_overrides_build_a_level_kind_first_and_change_its_keys():
    loaded = load_config("a2", ["shape.nodes=2", "fabrics.node.kind=ub_l1_switch", "fabrics.node.planes=7", "fabrics.node.switch.latency=100 ns",
                                "fabrics.pod.kind=ub_l2_switch", "fabrics.pod.switch.latency=1 us"])
    assert loaded.spec.fabrics.pod.switch.latency.to_ps(1.0) == 10**6
    assert loaded.resolved["fabrics"]["pod"] == {"kind": "ub_l2_switch", "switch": {"latency": "1 us"}}
    assert error_of("a2", ["fabrics.pod.switch.latency=1 us"]) == (
        "--set fabrics.pod.switch.latency=1 us: fabrics.pod.switch.latency: unknown key 'switch'; remove it, or use one of the keys "
        "of fabrics.pod: kind")


def test_a2_takes_more_servers_and_a3_more_nodes():
    assert load_config("a2", ["shape.nodes=4"]).spec.shape.dies == 32
    assert load_config("a3", ["shape.nodes=48"]).spec.shape.dies == 768
