"""The schema's own checks: every quantity fits the engine once converted, no coercion between types
(``true`` is not 1), a config name that is safe in a folder name, and the interconnect as levels."""

import textwrap

import pytest
from pydantic import BaseModel

from npusim.config import load_config
from npusim.config.schema import LEVELS, fabric_kinds_at
from npusim.units import Dimension, Quantity
from tests.config.test_loader import error_of

OUT_OF_RANGE = {Dimension.TIME: "0.1 ps", Dimension.SIZE: "0.1 B", Dimension.RATE: "1e400 TB/s", Dimension.FREQUENCY: "1e-300 Hz"}


def quantity_paths(value, path=()):
    """The key path and dimension of every quantity in a spec, found by walking it."""
    if isinstance(value, Quantity):
        yield path, value.dimension
    elif isinstance(value, BaseModel):
        for name in type(value).model_fields:
            yield from quantity_paths(getattr(value, name), path + (name,))
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from quantity_paths(item, path + (key,))


@pytest.mark.parametrize("config", ["a2", "a3"])
def test_every_quantity_of_a_builtin_config_is_checked_against_the_engine(config):
    """Not a list of fields: each quantity the spec holds, set out of range, is refused by its key."""
    paths = list(quantity_paths(load_config(config).spec))
    assert len(paths) > 40 and {dimension for _, dimension in paths} == set(Dimension)
    for path, dimension in paths:
        key = ".".join(path)
        override = f"{key}={OUT_OF_RANGE[dimension]}"
        assert error_of(config, [override]).startswith(f"--set {override}: {key}: '{OUT_OF_RANGE[dimension]}' is "), key


@pytest.mark.parametrize(
    ("override", "problem"),
    [("die.aicpu.poll_interval=0.1 ps", "'0.1 ps' is 0.1 ps, which rounds to 0 in the engine's whole ps; give at least 1 ps"),
     ("die.hbm.bandwidth=1e400 TB/s", "'1e400 TB/s' is more than 2**53 bytes/ps"),
     ("die.cores.aiv.buffers.UB.size=0.1 B", "'0.1 B' is 0.1 bytes, which rounds to 0 in the engine's whole bytes; give at least 1 B"),
     ("die.hbm.size=1e308 TB", "'1e308 TB' is more than 2**53 bytes"),
     ("die.clock=1e-300 Hz", "'1e-300 Hz' is more than 2**53 ps per cycle")],
)
def test_the_reported_extreme_values_are_config_errors_naming_the_key(override, problem):
    key = override.partition("=")[0]
    assert error_of("a3", [override]).startswith(f"--set {override}: {key}: {problem}")


def test_a_quantity_out_of_range_in_a_file_is_located_at_its_line(tmp_path):
    config = tmp_path / "c.yaml"
    config.write_text("extends: a2\ndie:\n  aicpu:\n    poll_interval: 0.1 ps\n  hbm:\n    size: 0.2 B\n")
    assert error_of(config).splitlines() == [
        "2 errors in " + str(config) + ":",
        f"{config}:4: die.aicpu.poll_interval: '0.1 ps' is 0.1 ps, which rounds to 0 in the engine's whole ps; give at least 1 ps",
        f"{config}:6: die.hbm.size: '0.2 B' is 0.2 bytes, which rounds to 0 in the engine's whole bytes; give at least 1 B",
    ]


def test_a_quantity_in_a_list_is_checked_and_located(tmp_path):
    config = tmp_path / "c.yaml"
    config.write_text(textwrap.dedent("""\
        extends: a2
        fabrics:
          node:
            kind: links
            link: null
            links:
              - {a: 0, b: 1, link: {bandwidth: 28 GB/s, latency: 100 ns}}
              - a: 1
                b: 2
                link: {bandwidth: 28 GB/s, latency: 0.3 ps}
        """))
    assert error_of(config).startswith(f"{config}:10: fabrics.node.links.1.link.latency: '0.3 ps' is 0.3 ps, which rounds to 0")


def test_per_cycle_quantities_are_converted_with_the_die_clock_and_located_where_written():
    """At 10 THz, 1 cycle is 0.1 ps: each time written in few cycles is refused, at its own line."""
    lines = error_of("a2", ["die.clock=10000 GHz"]).splitlines()
    assert lines[0].endswith("errors in builtin:a2:")
    assert all(":" in line.split(": ")[0] for line in lines[1:])  # FILE:LINE, not the --set
    assert any(" die.scalar.flag: '" in line and "cycles' at the 1e+13 Hz clock is" in line and "rounds to 0" in line for line in lines[1:])


def test_a_clock_out_of_range_is_reported_alone():
    """The per-cycle quantities cannot be judged against a clock the engine cannot take."""
    message = error_of("a2", ["die.clock=1e-300 Hz"])
    assert "\n" not in message and message.startswith("--set die.clock=1e-300 Hz: die.clock: ")


@pytest.mark.parametrize(
    ("override", "key"),
    [("shape.nodes=true", "shape.nodes"), ("die.cores.aic.count=false", "die.cores.aic.count"), ("shape.packages_per_node=4.0", "shape.packages_per_node"),
     ("fabrics.scale_out.efficiency=true", "fabrics.scale_out.efficiency"), ("die.vector.repeat_bytes=yes", "die.vector.repeat_bytes")],
)
def test_booleans_and_fractions_do_not_pass_as_whole_numbers(override, key):
    message = error_of("a3", [override])
    assert message.startswith(f"--set {override}: {key}: must be a valid ")
    assert "write a whole number" in message or "write a number" in message


def test_a_boolean_does_not_pass_as_a_die_index_of_a_link(tmp_path):
    config = tmp_path / "c.yaml"
    config.write_text("extends: a2\nfabrics:\n  node:\n    kind: links\n    link: null\n    links:\n      - {a: true, b: 1, link: {bandwidth: 28 GB/s, latency: 100 ns}}\n")
    assert error_of(config).startswith(f"{config}:7: fabrics.node.links.0.a: must be a valid integer, got True")


@pytest.mark.parametrize("name", ["/../../../../tmp/escape", "..", ".hidden", "a/b", "a b", "-rf", "", "x" * 65, "a\\b"])
def test_a_config_name_must_be_safe_in_a_folder_name(name):
    override = f"name='{name}'"
    message = error_of("a2", [override])
    assert message.startswith(f"--set {override}: name: {name!r} is not a safe name: the name becomes part of output folders")
    assert "letters, digits, '.', '_' or '-', starting with a letter or a digit" in message


@pytest.mark.parametrize("name", ["a3-superpod", "my_a2.v2", "A2", "x" * 64])
def test_safe_config_names_are_accepted(name):
    assert load_config("a2", [f"name={name}"]).name == name


def test_the_memory_technology_names_the_dram_and_must_be_a_short_plain_name():
    assert load_config("a2").spec.die.hbm.technology == "HBM"
    assert load_config("atlas-300i-duo").spec.die.hbm.technology == "LPDDR4X"
    message = error_of("a2", ["die.hbm.technology='LP DDR/4'"])
    assert message.startswith("--set die.hbm.technology='LP DDR/4': die.hbm.technology: 'LP DDR/4' is not a safe name: the name labels")
    assert "no '/', no spaces), e.g. LPDDR4X" in message


# -- the interconnect as levels (fabrics.package / node / pod / scale_out): each level validated by the
# model of its registered kind, kinds only at their levels, overrides that build or change a level


def test_each_level_has_its_kinds():
    assert LEVELS == ("package", "node", "pod", "scale_out")
    assert {level: fabric_kinds_at(level) for level in LEVELS} == {
        "package": ["die_to_die"], "node": ["full_mesh", "links", "pcie_switch", "ub_l1_switch"], "pod": ["ub_l2_switch"], "scale_out": ["roce"]}


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


def test_node_is_required_and_package_with_two_dies_a_package():
    assert "fabrics.node: missing required key 'node'" in error_of("a2", ["fabrics.node=null"])
    assert "shape.dies_per_package is 2 but fabrics.package (the die-to-die link of a package) is missing" in error_of("a3", ["fabrics.package=null"])


def test_scale_out_is_optional_for_one_node_and_needed_to_join_nodes_without_a_pod():
    assert load_config("a2", ["fabrics.scale_out=null"]).spec.fabrics.scale_out is None  # a server without NICs
    assert error_of("a2", ["fabrics.scale_out=null", "shape.nodes=2"]).endswith(
        "shape.nodes is 2, but neither fabrics.pod nor fabrics.scale_out joins the nodes, so the dies of one node could not "
        "reach those of another; add fabrics.scale_out (the NICs) or fabrics.pod, or use shape.nodes=1")
    assert load_config("a3", ["fabrics.scale_out=null", "shape.nodes=2"]).spec.shape.dies == 32  # the pod joins the nodes


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


def _models_of(annotation, seen: set) -> None:
    """Every pydantic model reachable from ``annotation`` (its fields' types, list and dict items)."""
    import typing

    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        if annotation in seen:
            return
        seen.add(annotation)
        for field in annotation.model_fields.values():
            _models_of(field.annotation, seen)
    for argument in typing.get_args(annotation):
        _models_of(argument, seen)


def test_every_whole_number_of_the_schema_has_an_upper_bound():
    """A count without one lets a typo allocate for minutes before anything fails (the SDMA's
    100000000 channels); die indices are checked against the system's dies by their fabric."""
    import annotated_types

    from npusim.config.registry import FABRICS, OPS
    from npusim.config.schema import SystemSpec

    models: set = set()
    for model in [SystemSpec, *(provider.Spec for _, provider in FABRICS), *(provider.Settings for _, provider in OPS if provider.Settings)]:
        _models_of(model, models)
    whole_numbers = [(model.__name__, name, field) for model in models for name, field in model.model_fields.items() if field.annotation is int]
    assert len(whole_numbers) > 10
    unbounded = [f"{model}.{name}" for model, name, field in whole_numbers
                 if not any(isinstance(rule, (annotated_types.Le, annotated_types.Lt)) for rule in field.metadata)
                 and "die index" not in (field.description or "")]
    assert unbounded == []


@pytest.mark.parametrize(("key", "config"), [
    ("die.sdma.channels", "a2"), ("die.cores.aiv.count", "a2"), ("die.aicpu.count", "a2"), ("shape.packages_per_node", "a2"),
    ("die.vector.max_repeats", "a2"), ("die.vector.repeat_bytes", "a2"), ("die.cube.m", "a2"), ("shmem.schedulers", "a2"),
    ("shmem.max_groups", "a2"), ("die.cores.aiv.engines.MTE2.burst_bytes", "a2"), ("die.cores.aiv.buffers.UB.alignment", "a2"),
    ("fabrics.node.planes", "a3"), ("ops.quant_scatter.vector_cores", "a2"),
])
def test_a_count_beyond_its_physical_bound_is_refused_naming_the_key_and_the_bound(key, config):
    message = error_of(config, (f"{key}=100000000",))
    assert f"--set {key}=100000000: {key}: must be less than or equal to " in message and "got 100000000; give a smaller value" in message
