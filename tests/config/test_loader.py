"""load_config: built-in names, extends, overrides, sha256, and errors located at FILE:LINE with key and fix."""

import hashlib
import json
import os
import textwrap
from pathlib import Path

import pytest
import yaml

from npusim.config import LoadedConfig, SystemSpec, builtin_configs, load_config, loader
from npusim.config.loader import MAX_ALIAS_VALUES, MAX_DEPTH
from npusim.errors import ConfigError


def write(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
    return path


def error_of(config, overrides=()) -> str:
    with pytest.raises(ConfigError) as caught:
        load_config(config, overrides)
    return str(caught.value)


EXPLICIT_LINKS = """
    extends: a2
    fabrics:
      node:
        kind: links
        link: null
        links:
          - {a: 0, b: 1, link: {bandwidth: 28 GB/s, latency: 100 ns}}
          - a: 1
            b: 9
            link: {bandwidth: 28 GB/s, latency: 100 ns}
    """


# -- built-in configs and paths ------------------------------------------------------------------


def test_builtin_configs_are_listed():
    assert builtin_configs() == ["a2", "a3", "ascend-950dt", "ascend-950pr", "atlas-300i-duo", "atlas-950-superpod"]


@pytest.mark.parametrize(("name", "source"), [("a2", "builtin:a2"), ("a2.yaml", "builtin:a2"), ("a3", "builtin:a3"), ("a3.yaml", "builtin:a3")])
def test_builtin_names_resolve_from_any_folder(tmp_path, monkeypatch, name, source):
    monkeypatch.chdir(tmp_path)
    loaded = load_config(name)
    assert isinstance(loaded, LoadedConfig) and isinstance(loaded.spec, SystemSpec)
    assert loaded.source == source
    assert loaded.name == loaded.spec.name == source.split(":")[1]


def test_a_path_like_is_accepted_and_an_existing_file_wins_over_a_builtin_name(tmp_path, monkeypatch):
    write(tmp_path, "a2.yaml", "extends: a3\nname: mine\n")
    monkeypatch.chdir(tmp_path)
    assert load_config("a2.yaml").name == "mine"
    assert load_config(tmp_path / "a2.yaml").source == str(tmp_path / "a2.yaml")


def test_unknown_config_lists_the_builtin_names(tmp_path):
    message = error_of(tmp_path / "nope.yaml")
    assert "nope.yaml: does not exist" in message
    assert "a built-in name: a2, a3" in message


def test_a_folder_is_not_a_config(tmp_path):
    assert "is a folder, not a YAML file" in error_of(tmp_path)


# -- extends -------------------------------------------------------------------------------------


def test_extends_merges_mappings_deeply_and_replaces_scalars(tmp_path):
    write(tmp_path, "base.yaml", "extends: a2\nname: base\ndie:\n  hbm:\n    bandwidth: 1 TB/s\n")
    write(tmp_path, "child.yaml", "extends: base.yaml\nname: child\ndie:\n  hbm:\n    size: 32 GiB\n")
    loaded = load_config(tmp_path / "child.yaml")
    assert loaded.name == "child"
    assert loaded.resolved["die"]["hbm"] == {"size": "32 GiB", "bandwidth": "1 TB/s", "latency": "150 cycles"}
    assert loaded.spec.die.hbm.size.bytes == 32 * 2**30
    assert loaded.spec.die.cores["aic"].count == 24  # from a2, two levels up
    assert "extends" not in loaded.resolved


def test_extends_replaces_lists(tmp_path):
    write(tmp_path, "links.yaml", EXPLICIT_LINKS.replace("b: 9", "b: 2"))
    write(tmp_path, "child.yaml", "extends: links.yaml\nfabrics:\n  node:\n    links:\n      - {a: 3, b: 4, link: {bandwidth: 1 GB/s, latency: 1 us}}\n")
    links = load_config(tmp_path / "child.yaml").spec.fabrics.node.links
    assert [(link.a, link.b) for link in links] == [(3, 4)]


def test_null_in_a_child_removes_the_inherited_key(tmp_path):
    write(tmp_path, "one_die.yaml", "extends: a3\nshape: {dies_per_package: 1}\nfabrics: {package: null}\n")
    loaded = load_config(tmp_path / "one_die.yaml")
    assert loaded.spec.fabrics.package is None and "package" not in loaded.resolved["fabrics"]


def test_extends_is_relative_to_the_file_not_the_cwd(tmp_path, monkeypatch):
    sub = tmp_path / "sub"
    sub.mkdir()
    write(sub, "base.yaml", "extends: a2\nname: base\n")
    write(sub, "child.yaml", "extends: base.yaml\n")
    monkeypatch.chdir(tmp_path)
    assert load_config(os.path.join("sub", "child.yaml")).name == "base"


def test_extends_cycle_is_reported_with_the_loop(tmp_path):
    write(tmp_path, "x.yaml", "extends: y.yaml\nname: x\n")
    write(tmp_path, "y.yaml", "name: y\nextends: x.yaml\n")
    message = error_of(tmp_path / "x.yaml")
    assert f"{tmp_path / 'y.yaml'}:2: extends: cycle" in message
    assert "x.yaml -> " in message and message.count("x.yaml") >= 2
    assert "remove the `extends` that closes the loop" in message


def test_extends_of_itself_is_a_cycle(tmp_path):
    write(tmp_path, "self.yaml", "extends: self.yaml\n")
    assert "extends: cycle" in error_of(tmp_path / "self.yaml")


def test_extends_of_a_missing_file(tmp_path):
    write(tmp_path, "child.yaml", "name: c\nextends: nowhere.yaml\n")
    message = error_of(tmp_path / "child.yaml")
    assert "child.yaml:2: extends: no file 'nowhere.yaml'" in message
    assert "(a2, a3, ascend-950dt, ascend-950pr, atlas-300i-duo, atlas-950-superpod)" in message and "fix the path" in message


def test_an_error_points_to_the_file_that_set_the_value(tmp_path):
    write(tmp_path, "parent.yaml", "extends: a2\ndie:\n  hbm:\n    latency: 150\n")
    write(tmp_path, "child.yaml", "extends: parent.yaml\nname: child\n")
    message = error_of(tmp_path / "child.yaml")
    assert message.startswith(f"{tmp_path / 'parent.yaml'}:4: die.hbm.latency: missing unit")



def test_a_value_replaced_takes_the_locations_of_what_replaced_it(tmp_path):
    """What a replaced value held below it is forgotten, the mark of a removed key included: the
    missing key is reported at the override that wrote die.hbm last, not where a parent removed it."""
    write(tmp_path, "parent.yaml", "extends: a2\ndie:\n  hbm:\n    latency: null\n")
    write(tmp_path, "child.yaml", "extends: parent.yaml\ndie:\n  hbm: 5\n")
    override = "die.hbm={size: 64 GiB, bandwidth: 1 TB/s}"
    assert error_of(tmp_path / "child.yaml", [override]).startswith(f"--set {override}: die.hbm.latency: missing required key 'latency'")
    assert error_of(tmp_path / "child.yaml").startswith(f"{tmp_path / 'child.yaml'}:3: die.hbm: must be a valid dictionary")


def test_every_key_of_a_long_child_is_located_in_the_child(tmp_path):
    """A child replacing many keys of its parent: each error is located in the file that set the key last."""
    latencies = "".join(f"      k{i}: {i + 1} cycles\n" for i in range(200))
    write(tmp_path, "parent.yaml", "extends: a2\ndie:\n  vector:\n    latency:\n" + latencies)
    child = latencies.replace("k7: 8 cycles", "k7: 8").replace("k150: 151 cycles", "k150: 151")
    write(tmp_path, "child.yaml", "extends: parent.yaml\ndie:\n  vector:\n    latency:\n" + child)
    lines = error_of(tmp_path / "child.yaml").splitlines()
    assert [line.partition(": missing unit")[0] for line in lines[1:]] == [
        f"{tmp_path / 'child.yaml'}:12: die.vector.latency.k7", f"{tmp_path / 'child.yaml'}:155: die.vector.latency.k150"]


# -- overrides -----------------------------------------------------------------------------------


def test_override_values_are_read_as_yaml_scalars():
    loaded = load_config("a3", ["shape.nodes=4", "die.hbm.bandwidth=3.2TB/s", "fabrics.node.link.efficiency=0.5", "description='a: b'"])
    assert loaded.resolved["shape"]["nodes"] == 4
    assert loaded.spec.shape.dies == 64
    assert loaded.spec.die.hbm.bandwidth.bytes_per_second(1) == pytest.approx(3.2e12)
    assert loaded.spec.fabrics.node.link.efficiency == 0.5
    assert loaded.spec.description == "a: b"
    assert loaded.overrides == ("shape.nodes=4", "die.hbm.bandwidth=3.2TB/s", "fabrics.node.link.efficiency=0.5", "description='a: b'")


def test_override_with_a_quoted_value_and_spaces():
    loaded = load_config("a2", ["die.hbm.bandwidth='3.2 TB/s'"])
    assert loaded.resolved["die"]["hbm"]["bandwidth"] == "3.2 TB/s"


def test_overrides_as_a_mapping_apply_in_order():
    loaded = load_config("a2", {"shape.packages_per_node": 4, "die.hbm": {"bandwidth": "2 TB/s"}})
    assert loaded.spec.shape.dies == 4
    assert loaded.resolved["die"]["hbm"] == {"size": "64 GiB", "bandwidth": "2 TB/s", "latency": "150 cycles"}
    assert loaded.overrides == {"shape.packages_per_node": 4, "die.hbm": {"bandwidth": "2 TB/s"}}


def test_overrides_may_set_keys_the_schema_declares_but_the_file_omits():
    loaded = load_config("a2", ["die.cores.aiv.engines.MTE2.burst_bytes=64", "die.vector.latency.sqrt=20 cycles"])
    assert loaded.spec.die.cores["aiv"].engines["MTE2"].burst_bytes == 64
    assert str(loaded.spec.die.vector.latency["sqrt"]) == "20 cycles"


def test_override_of_a_list_item(tmp_path):
    config = write(tmp_path, "links.yaml", EXPLICIT_LINKS)
    assert load_config(config, ["fabrics.node.links.1.b=2"]).spec.fabrics.node.links[1].b == 2


def test_override_null_removes_a_key():
    loaded = load_config("a3", ["fabrics.package=null", "shape.dies_per_package=1"])
    assert loaded.spec.fabrics.package is None


def test_override_of_an_unknown_key_suggests_the_closest():
    message = error_of("a2", ["die.hbm.bandwith=3TB/s"])
    assert message == "--set die.hbm.bandwith=3TB/s: die.hbm.bandwith: unknown key 'bandwith'; did you mean 'bandwidth'?"


def test_override_of_an_unknown_key_without_a_close_one_lists_the_keys():
    message = error_of("a2", ["die.hbm.colour=red"])
    assert "unknown key 'colour'; remove it, or use one of the keys of die.hbm: bandwidth, latency, size" in message


def test_override_below_a_value_or_past_a_list():
    assert "die.clock is a value ('1850 MHz'), not a mapping; set die.clock itself" in error_of("a2", ["die.clock.mhz=1"])


def test_malformed_override_says_the_expected_form():
    message = error_of("a2", ["shape.nodes"])
    assert message.startswith("--set shape.nodes: malformed override; write KEY.PATH=VALUE")


def test_all_override_errors_are_listed_at_once():
    message = error_of("a2", ["nodes", "shape.nodez=2", "die..hbm=1"])
    lines = message.splitlines()
    assert lines[0] == "3 errors in the overrides:"
    assert "--set nodes: malformed override" in lines[1]
    assert "did you mean 'nodes'?" in lines[2]
    assert "empty part in the key path" in lines[3]


# -- validation errors, located ------------------------------------------------------------------


def test_unknown_key_in_a_file_with_did_you_mean(tmp_path):
    config = write(tmp_path, "c.yaml", "extends: a2\ndie:\n  hbm:\n    bandwith: 2 TB/s\n")
    assert error_of(config) == f"{config}:4: die.hbm.bandwith: unknown key 'bandwith'; did you mean 'bandwidth'?"


def test_unknown_top_level_key_suggests_extends(tmp_path):
    config = write(tmp_path, "c.yaml", "extend: a2\n")
    assert f"{config}:1: extend: unknown key 'extend'; did you mean 'extends'?" in error_of(config)


def test_missing_unit(tmp_path):
    config = write(tmp_path, "c.yaml", "extends: a2\nfabrics:\n  node:\n    link:\n      latency: 150\n")
    message = error_of(config)
    assert message.startswith(f"{config}:5: fabrics.node.link.latency: missing unit: 150 needs a time unit")
    assert "e.g. '1.5 us', '800 ns', '1400 cycles'" in message


def test_wrong_unit(tmp_path):
    config = write(tmp_path, "c.yaml", "extends: a2\nfabrics:\n  scale_out:\n    bandwidth: 200 GHz\n")
    message = error_of(config)
    assert message.startswith(f"{config}:4: fabrics.scale_out.bandwidth: wrong unit: 'GHz' in '200 GHz' is a frequency unit")
    assert "a rate is needed, e.g. '1.6 TB/s'" in message


@pytest.mark.parametrize(("key", "value"), [("size", "0 MiB"), ("bandwidth", "-1 TB/s")])
def test_non_positive_size_or_rate(tmp_path, key, value):
    config = write(tmp_path, "c.yaml", f"extends: a2\ndie:\n  l2:\n    {key}: {value}\n")
    assert error_of(config) == f"{config}:4: die.l2.{key}: '{value}' must be positive; use a value greater than zero"


def test_out_of_range_integer_names_the_meaning(tmp_path):
    config = write(tmp_path, "c.yaml", "extends: a3\nshape:\n  nodes: 129\n")
    message = error_of(config)
    assert message.startswith(f"{config}:3: shape.nodes: must be less than or equal to 128, got 129; give a smaller value")
    assert "the nodes of an A3 SuperPoD (up to 48)" in message


def test_missing_required_key_at_the_top_level(tmp_path):
    config = write(tmp_path, "c.yaml", "extends: a2\nfabrics: null\n")
    assert error_of(config) == (f"{config}:2: fabrics: missing required key 'fabrics' [the interconnect, level by level: package, node, "
                                "pod, scale_out]; add it at the top level (see docs/configs.md)")


def test_missing_required_nested_key_is_located_at_its_parent(tmp_path):
    config = write(tmp_path, "c.yaml", "extends: a2\nshape: {dies_per_package: 2}\nfabrics:\n  package:\n    kind: die_to_die\n    link:\n      bandwidth: 224 GB/s\n")
    message = error_of(config)
    assert message.startswith(f"{config}:6: fabrics.package.link.latency: missing required key 'latency'")
    assert "add it under fabrics.package.link" in message


def test_topology_referencing_a_missing_die_is_located_in_the_fabric(tmp_path):
    config = write(tmp_path, "links.yaml", EXPLICIT_LINKS)
    message = error_of(config)
    assert message.startswith(f"{config}:9: fabrics.node.links.1.b: fabrics.node.links[1].b references die 9, but the system has 8 dies")
    assert "fix the link or raise shape.packages_per_node" in message


def test_a_model_check_failing_because_of_an_override_is_located_at_the_override():
    message = error_of("a2", ["shape.dies_per_package=2"])
    assert message == ("--set shape.dies_per_package=2: shape.dies_per_package: shape.dies_per_package is 2 but fabrics.package (the "
                       "die-to-die link of a package) is missing; add it with a kind of die_to_die")


def test_an_override_value_error_is_located_at_the_override():
    assert error_of("a2", ["die.hbm.bandwidth=3"]).startswith("--set die.hbm.bandwidth=3: die.hbm.bandwidth: missing unit: 3 needs a rate unit")


def test_removing_a_required_key_by_override_is_located_at_the_override():
    assert error_of("a2", ["die.hbm.latency=null"]).startswith("--set die.hbm.latency=null: die.hbm.latency: missing required key 'latency'")


def test_unknown_fabric_kind_suggests_the_closest(tmp_path):
    config = write(tmp_path, "c.yaml", "extends: a2\nfabrics:\n  node:\n    kind: ub-l1-switch\n")
    assert error_of(config) == (f"{config}:4: fabrics.node.kind: unknown fabric kind 'ub-l1-switch'; did you mean 'ub_l1_switch'? "
                                "use one of die_to_die, full_mesh, links, pcie_switch, roce, ub_l1_switch, ub_l2_switch")


def test_a_key_inherited_across_a_kind_change_says_how_to_drop_it(tmp_path):
    config = write(tmp_path, "c.yaml", "extends: a2\nfabrics:\n  node:\n    kind: links\n    links: []\n")
    message = error_of(config)
    assert "a2.yaml:" in message and "fabrics.node.link: unknown key 'link'" in message
    assert f"(inherited: {config}:4 changed the kind; drop the key there with `link: null`)" in message


def test_vector_latency_needs_a_default(tmp_path):
    config = write(tmp_path, "c.yaml", "extends: a2\ndie:\n  vector:\n    latency:\n      default: null\n")
    assert error_of(config) == f"{config}:4: die.vector.latency: vector.latency needs a 'default' entry, used for kinds not listed"


def test_several_errors_are_all_listed_one_per_line_in_file_order(tmp_path):
    config = write(
        tmp_path,
        "c.yaml",
        """
        extends: a2
        fabrics:
          scale_out:
            per: node
        die:
          hbm:
            latency: 150
          cores: {aic: {count: 0}}
        """,
    )
    lines = error_of(config).splitlines()
    assert lines[0] == f"3 errors in {config}:"
    assert lines[1].startswith(f"{config}:4: fabrics.scale_out.per: must be 'package' or 'die', got 'node'")
    assert lines[2].startswith(f"{config}:7: die.hbm.latency: missing unit")
    assert lines[3].startswith(f"{config}:8: die.cores.aic.count: must be greater than 0, got 0")


# -- YAML-level errors ---------------------------------------------------------------------------


def test_yaml_syntax_error_has_the_line(tmp_path):
    config = write(tmp_path, "c.yaml", "name: a\ndie:\n  clock: [1850 MHz\nfabrics: {}\n")
    message = error_of(config)
    assert message.startswith(f"{config}:4: YAML syntax error:")


def test_a_key_given_twice_is_refused(tmp_path):
    config = write(tmp_path, "c.yaml", "extends: a2\ndie:\n  clock: 1 GHz\n  clock: 2 GHz\n")
    assert error_of(config) == f"{config}:4: key 'clock' given twice in one mapping (first at line 3); keep one"


@pytest.mark.parametrize(("text", "found"), [("", "the file is empty"), ("- a\n- b\n", "found a list")])
def test_a_config_must_be_a_mapping(tmp_path, text, found):
    config = write(tmp_path, "c.yaml", text)
    message = error_of(config)
    assert message.startswith(f"{config}:1: a config is a mapping of keys") and found in message


def test_anchors_and_merge_keys_are_read(tmp_path):
    config = write(
        tmp_path,
        "c.yaml",
        """
        extends: a2
        fabrics:
          node:
            link: &fast {bandwidth: 56 GB/s, latency: 100 ns}
          scale_out:
            <<: *fast
            per: package
        """,
    )
    loaded = load_config(config)
    nic = loaded.resolved["fabrics"]["scale_out"]
    assert {key: nic[key] for key in ("bandwidth", "latency", "per")} == {"bandwidth": "56 GB/s", "latency": "100 ns", "per": "package"}



# -- aliases, recursion, nesting: bounded before anything is expanded -----------------------------


def alias_bomb(levels: int, fan_out: int) -> str:
    """``a0`` a list of ``fan_out`` strings, each next level a list of ``fan_out`` aliases of the one before:
    ``fan_out ** levels`` strings once expanded, written in a few lines."""
    lists = [f"&a0 [{', '.join(['x'] * fan_out)}]"] + [f"&a{i} [{', '.join([f'*a{i - 1}'] * fan_out)}]" for i in range(1, levels)]
    return "[" + ", ".join(lists) + "]"


@pytest.fixture
def yaml_work(monkeypatch):
    """Counts of the YAML nodes composed and of the values constructed from them while loading."""
    counts = {"composed": 0, "constructed": 0}
    compose, construct = yaml.SafeLoader.compose_node, yaml.SafeLoader.construct_object

    def counting_compose(self, *args):
        counts["composed"] += 1
        return compose(self, *args)

    def counting_construct(self, *args, **kwargs):
        counts["constructed"] += 1
        return construct(self, *args, **kwargs)

    monkeypatch.setattr(yaml.SafeLoader, "compose_node", counting_compose)
    monkeypatch.setattr(yaml.SafeLoader, "construct_object", counting_construct)
    return counts


def test_an_alias_bomb_in_a_file_is_refused_before_it_is_expanded(tmp_path, yaml_work):
    """9**9 (387 million) values: refused having composed only the nodes written and constructed none."""
    config = write(tmp_path, "c.yaml", f"extends: a2\nbomb: {alias_bomb(9, 9)}\n")
    message = error_of(config)
    assert message == (f"{config}:2: bomb.7: aliases expand this value to 48427561 values, used 10 times: more than the "
                       f"{MAX_ALIAS_VALUES} values aliases may add (an alias bomb?); use fewer aliases")
    assert yaml_work["composed"] < 100 and yaml_work["constructed"] == 0


def test_a_merge_key_bomb_is_refused_before_it_is_expanded(tmp_path, yaml_work):
    merges = "".join(f"m{i}: &m{i} {{<<: [{', '.join([f'*m{i - 1}'] * 9)}]}}\n" for i in range(1, 12))
    config = write(tmp_path, "c.yaml", f"extends: a2\nm0: &m0 {{k0: 1, k1: 2, k2: 3}}\n{merges}")
    message = error_of(config)
    assert message.startswith(f"{config}:12: m10: aliases expand this value to ") and "an alias bomb?" in message
    assert yaml_work["composed"] < 200 and yaml_work["constructed"] == 0


def test_an_alias_bomb_in_an_override_is_refused_before_it_is_expanded(yaml_work):
    override = f"name={alias_bomb(9, 9)}"
    assert error_of("a2", [override]).startswith(f"--set {override}: name.7: aliases expand this value to 48427561 values")
    assert yaml_work["constructed"] < 1000  # the built-in config's own values; none of the bomb's


def test_aliases_may_add_up_to_the_bound(tmp_path, monkeypatch):
    """Each alias of a 4-item list adds 5 values; with a bound of 50, ten aliases pass, eleven do not."""
    monkeypatch.setattr(loader, "MAX_ALIAS_VALUES", 50)
    within = write(tmp_path, "within.yaml", f"extends: a2\nlists: [&a [1, 2, 3, 4], {', '.join(['*a'] * 10)}]\n")
    beyond = write(tmp_path, "beyond.yaml", f"extends: a2\nlists: [&a [1, 2, 3, 4], {', '.join(['*a'] * 11)}]\n")
    assert "unknown key 'lists'" in error_of(within)
    assert error_of(beyond).startswith(f"{beyond}:2: lists.0: aliases expand this value to 5 values, used 12 times: more than the 50 values")


@pytest.mark.parametrize(("text", "where"), [("x: &a [*a]", "x.0"), ("x: &a {y: *a}", "x.y"), ("x: &a {<<: *a}", "x"), ("x: &a [[1, *a]]", "x.0.1")])
def test_a_recursive_value_in_a_file_is_refused(tmp_path, text, where):
    config = write(tmp_path, "c.yaml", f"extends: a2\n{text}\n")
    assert error_of(config) == f"{config}:2: {where}: a value that contains itself (a recursive alias); remove the alias that refers back"


@pytest.mark.parametrize("value", ["&a [*a]", "&a {x: *a}"])
def test_a_recursive_override_value_is_refused(value):
    message = error_of("a2", [f"die.hbm={value}"])
    assert message.startswith(f"--set die.hbm={value}: die.hbm.") and "a value that contains itself (a recursive alias)" in message


@pytest.mark.parametrize("levels", [MAX_DEPTH + 1, 5000])
def test_nesting_deeper_than_the_bound_is_refused(tmp_path, levels):
    config = write(tmp_path, "c.yaml", f"extends: a2\nx: {'[' * levels}{']' * levels}\n")
    assert error_of(config) == f"{config}:2: nested more than {MAX_DEPTH} levels deep; a config needs far fewer, flatten it"


def test_nesting_made_deep_by_aliases_is_refused(tmp_path):
    chain = "".join(f"l{i}: &l{i} [*l{i - 1}]\n" for i in range(1, MAX_DEPTH + 2))
    config = write(tmp_path, "c.yaml", f"extends: a2\nl0: &l0 [1]\n{chain}")
    assert "levels deep; use fewer aliases" in error_of(config)


def test_a_deeply_nested_override_value_is_refused():
    value = "[" * 100 + "]" * 100
    assert error_of("a2", [f"name={value}"]) == f"--set name={value}: nested more than {MAX_DEPTH} levels deep; a config needs far fewer, flatten it"


def test_all_bad_override_values_are_listed_at_once():
    lines = error_of("a2", ["name=&a [*a]", f"description={alias_bomb(9, 9)}"]).splitlines()
    assert lines[0] == "2 errors in the overrides:" and "contains itself" in lines[1] and "an alias bomb?" in lines[2]

# -- identity --------------------------------------------------------------------------------------


def test_sha256_is_the_hash_of_the_canonical_resolved_config():
    loaded = load_config("a3")
    canonical = json.dumps(loaded.resolved, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    assert loaded.sha256 == hashlib.sha256(canonical.encode()).hexdigest()


def test_sha256_is_stable_and_changes_with_an_override(tmp_path, monkeypatch):
    first = load_config("a3").sha256
    monkeypatch.chdir(tmp_path)
    assert load_config("a3.yaml").sha256 == first
    assert load_config("a3", ["shape.nodes=48"]).sha256 != first
    assert load_config("a3", ["shape.nodes=1"]).sha256 == first  # the same resolved config
    assert load_config("a2").sha256 != first


def test_overrides_are_named_by_the_option_that_gave_them():
    with pytest.raises(ConfigError, match=r"^--grid die.hbm.bandwith=1TB/s: die.hbm.bandwith: unknown key 'bandwith'; did you mean 'bandwidth'\?$"):
        load_config("a2", ["die.hbm.bandwith=1TB/s"], origin="--grid")


def test_a_file_parsed_once_is_not_changed_by_loads_that_override_it():
    changed = load_config("a3", ["die.hbm.bandwidth=3.2 TB/s", "fabrics.node.link.bandwidth=1 GB/s", "die.vector.latency.add=1 cycle"]).spec
    assert (str(changed.die.hbm.bandwidth), str(changed.fabrics.node.link.bandwidth), str(changed.die.vector.latency["add"])) == ("3.2 TB/s", "1 GB/s", "1 cycle")
    fresh = load_config("a3").spec
    assert (str(fresh.die.hbm.bandwidth), str(fresh.fabrics.node.link.bandwidth), str(fresh.die.vector.latency["add"])) == ("1.6 TB/s", "28 GB/s", "6 cycles")


@pytest.mark.parametrize("name", builtin_configs())
def test_libyaml_composes_each_builtin_config_as_pyyaml_does(name):
    file = loader.builtin_folder() / f"{name}.yaml"
    fast, careful = (loader._parse_yaml(str(file), file.read_text(), builtin=builtin) for builtin in (True, False))
    assert repr(fast[0]) == repr(careful[0])  # the same values, of the same types
    assert list(fast[1]._where.items()) == list(careful[1]._where.items())  # every key located at the same line


@pytest.mark.parametrize("text", ["a: [1, 2", "a: 1\n a: 2\n", "a: &x [*x]\n", "- 1\n- 2\n", ("[" * (MAX_DEPTH + 2)) + "]" * (MAX_DEPTH + 2)])
def test_a_builtin_text_libyaml_refuses_is_refused_as_pyyaml_refuses_it(text):
    with pytest.raises(ConfigError) as careful:
        loader._parse_yaml("mine.yaml", text)
    with pytest.raises(ConfigError) as fast:
        loader._parse_yaml("theirs.yaml", text, builtin=True)
    assert str(fast.value).replace("theirs.yaml", "mine.yaml") == str(careful.value)
