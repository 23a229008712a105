"""``npusim config show`` and ``npusim config validate`` through click's runner."""

import yaml
from click.testing import CliRunner

from npusim.cli.config_cmd import config_group
from npusim.config import load_config


def invoke(*args: str):
    return CliRunner().invoke(config_group, list(args))


def test_show_prints_a_header_and_the_resolved_yaml():
    result = invoke("show", "a3")
    assert result.exit_code == 0, result.output
    header, _, body = result.stdout.partition("\n")
    loaded = load_config("a3")
    assert header == f"# a3: builtin:a3  sha256 {loaded.sha256}"
    assert yaml.safe_load(body) == loaded.resolved
    lines = body.splitlines()
    hbm = next(line for line in lines if line.strip().startswith("bandwidth: 1.6 TB/s"))
    assert "  # llm-sim; " in hbm and "[M/L, knob]  (a2.yaml:" in hbm  # the source comment of the line that set it, and where
    assert "(a3.yaml:" in next(line for line in lines if line.startswith("name: a3"))
    assert "  L1: {size: 512 KiB, alignment: 32}  # " in body  # a mapping written on one line stays on one line


def test_show_prints_the_source_of_every_value():
    body = invoke("show", "a2").stdout.partition("\n")[2]
    lines = body.splitlines()
    values = [line for line in lines if not line.startswith("#") and not line.partition("  # ")[0].endswith(":")]  # not a section's head
    assert len(values) > 50 and all("  # " in line for line in values)
    assert lines[-3].startswith("# confidence of its ") and " L, " in lines[-3]  # then the values counted by confidence


def test_show_applies_overrides():
    result = invoke("show", "a3", "--set", "shape.nodes=48", "--set", "die.hbm.bandwidth=3.2 TB/s")
    assert result.exit_code == 0, result.output
    header, _, body = result.stdout.partition("\n")
    assert header.startswith("# a3: builtin:a3 --set shape.nodes=48 --set die.hbm.bandwidth=3.2 TB/s  sha256 ")
    assert header.endswith(load_config("a3", ["shape.nodes=48", "die.hbm.bandwidth=3.2 TB/s"]).sha256)
    assert yaml.safe_load(body)["shape"]["nodes"] == 48
    assert "  nodes: 48  # --set shape.nodes=48" in body


def test_show_with_a_bad_override_exits_2_with_the_error_on_stderr():
    result = invoke("show", "a2", "--set", "shape.nodez=2")
    assert result.exit_code == 2
    assert result.stdout == ""
    assert "--set shape.nodez=2: shape.nodez: unknown key 'nodez'; did you mean 'nodes'?" in result.stderr


def test_validate_ok(tmp_path):
    config = tmp_path / "four.yaml"
    config.write_text("extends: a2\nname: four\nshape: {packages_per_node: 4}\n")
    result = invoke("validate", str(config))
    assert result.exit_code == 0, result.output
    assert result.stdout == f"OK: {config} (four, 4 dies)\n"


def test_validate_a_builtin():
    assert invoke("validate", "a3").stdout == "OK: a3 (a3, 16 dies)\n"


def test_validate_reports_every_located_error(tmp_path):
    config = tmp_path / "bad.yaml"
    config.write_text("extends: a2\ndie:\n  hbm:\n    bandwith: 2 TB/s\n    latency: 150\n")
    result = invoke("validate", str(config))
    assert result.exit_code == 2
    assert f"{config}:4: die.hbm.bandwith: unknown key 'bandwith'; did you mean 'bandwidth'?" in result.stderr
    assert f"{config}:5: die.hbm.latency: missing unit" in result.stderr


def test_validate_a_missing_file(tmp_path):
    result = invoke("validate", str(tmp_path / "nope.yaml"))
    assert result.exit_code == 2
    assert "does not exist" in result.stderr and "a2, a3" in result.stderr


def test_show_prints_the_fabric_levels_with_their_overrides():
    result = invoke("show", "a3", "--set", "fabrics.node.link.bandwidth=56 GB/s", "--set", "shape.nodes=2")
    assert result.exit_code == 0, result.output
    fabrics = yaml.safe_load(result.stdout.partition("\n")[2])["fabrics"]
    assert sorted(fabrics) == ["node", "package", "pod", "scale_out"]
    assert fabrics["node"]["kind"] == "ub_l1_switch" and fabrics["node"]["link"]["bandwidth"] == "56 GB/s"
    assert fabrics["pod"] == {"kind": "ub_l2_switch", "switch": {"latency": "200 ns"}}
