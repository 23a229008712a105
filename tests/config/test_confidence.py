"""Confidence as data: every tag form the built-in configs use, parsed; a line's tags given to its
values (one tag per key of a mapping written on one line); overrides marked as the user's value,
through a run folder's config.yaml too; values that state nothing marked so in ``config show``."""

import pytest

from npusim.config import load_config
from npusim.config.annotated import annotated_yaml, confidence_summary, header
from npusim.config.confidence import NOT_IN_CONFIG, UNRATED, USER, Tag, of_comment, parse_tags


@pytest.mark.parametrize(("comment", "tags"), [
    ("A2A3.ini cube_freq; npu-smi shows 1800 MHz on 910B1 [H]", [Tag("H", "H", False, False)]),
    ("PyPTO model COPY_IN [M, knob]", [Tag("M, knob", "M", True, False)]),
    ("assumed: one uncached read [L, knob]", [Tag("L, knob", "L", True, False)]),
    ("assumed: a new SRAM address per burst [L]", [Tag("L", "L", False, False)]),
    ("llm-sim; shmem notes; another source says 1.2 TB/s [M/L, knob]", [Tag("M/L, knob", "L", True, False)]),
    ("one block per cycle ([DtypeMKN]) [H; fp32 M]", [Tag("H; fp32 M", "H", False, False)]),
    ("UB -> GM: the same GM write path as the AIC's FixPipe [M, assumed equal]", [Tag("M, assumed equal", "M", False, True)]),
    ("A2A3.ini: 196608 B per AIV [H]; 32 B alignment (Ascend C API doc) [H]", [Tag("H", "H", False, False)] * 2),
    ("PCIe 4.0 x16 [M]; the port width is not published [L, knob]", [Tag("M", "M", False, False), Tag("L, knob", "L", True, False)]),
    ("a knob of no stated level [knob]", [Tag("knob", None, True, False)]),
    ("pipes [SCALAR, VECTOR] and moves [GM->UB] are no tags; 310P3.ini [AICoreSpec]", []),
    ("no tag at all", []),
])
def test_every_tag_form_of_the_configs_is_read(comment, tags):
    assert parse_tags(comment) == tags


def test_a_value_takes_the_lowest_level_and_every_mark_of_its_line():
    both = of_comment("line rate [M]; port width unknown [L, knob]", "x.yaml:3")
    assert (both.level, both.tag, both.knob, both.low) == ("L", "M; L, knob", True, True)
    assert of_comment("calibrated: HIXL A2 hccs reads [M, knob]", "x.yaml:1").basis == "calibrated"
    assert of_comment("assumed: decode and dispatch [L, knob]", "x.yaml:1").basis == "assumed"
    assert of_comment("the same path [M, assumed equal]", "x.yaml:1").basis == "assumed"
    assert of_comment("a2.yaml's value [H]", "x.yaml:1").basis == ""
    unstated = of_comment("GM -> UB", "x.yaml:1")
    assert (unstated.level, unstated.low, unstated.mark) == (UNRATED, True, "[no confidence given]")
    assert of_comment("--set die.hbm.bandwidth=3.2TB/s", "x.yaml:4").level == USER  # a run folder's config.yaml


def test_the_loader_gives_each_resolved_value_its_confidence():
    loaded = load_config("a3")
    control = loaded.confidence_of("die.aicpu.control_read")
    assert (control.level, control.knob, control.basis) == ("L", True, "assumed")
    assert control.where.endswith("a2.yaml:" + control.where.rpartition(":")[2]) and "GetTensorData" in control.source  # inherited from a2.yaml
    assert loaded.confidence_of("die.clock").mark == "[H]"
    assert loaded.confidence_of("die.hbm.bandwidth").level == "L"  # [M/L, knob]: conflicting sources count as L
    assert loaded.confidence_of(("die", "cores", "aic", "pipes", 2)).level == "H"  # a list item: its list's
    assert loaded.confidence_of("fabrics.node.link.efficiency").tag == "M, knob"  # a3's own line, not a2's
    assert loaded.confidence_of("die.cores.aiv.engines.MTE3.per_burst").level == "L"  # through a YAML merge key (<<: *gm_write)
    assert loaded.confidence_of("die.cores.aiv.engines.MTE3.burst_bytes") is NOT_IN_CONFIG  # the schema's default


def test_a_mapping_on_one_line_gives_each_key_its_own_tag():
    loaded = load_config("atlas-300i-duo")
    assert loaded.confidence_of("die.cores.aicore.buffers.L1.size").tag == "H"
    assert loaded.confidence_of("die.cores.aicore.buffers.L1.alignment").tag == "M"
    pcie = loaded.confidence_of("fabrics.node.link.bandwidth")  # one value, two claims: the lower
    assert (pcie.level, pcie.tag) == ("L", "M; L, knob")


def test_an_override_is_the_users_value_and_stays_so_in_a_run_folder(tmp_path):
    loaded = load_config("a2", ["die.hbm.bandwidth=3.2TB/s", "die.aicpu.control_read=2 us"])
    hbm = loaded.confidence_of("die.hbm.bandwidth")
    assert (hbm.level, hbm.where, hbm.mark, hbm.low) == (USER, "--set die.hbm.bandwidth=3.2TB/s", "[your value]", False)
    assert loaded.confidence_of("die.hbm.latency").level == "M"  # its siblings keep theirs
    text = annotated_yaml(loaded)
    assert "bandwidth: 3.2TB/s  # --set die.hbm.bandwidth=3.2TB/s  [your value]" in text
    folder_config = tmp_path / "config.yaml"
    folder_config.write_text(header(loaded) + text + confidence_summary(loaded))
    again = load_config(str(folder_config))
    assert again.confidence_of("die.hbm.bandwidth").level == USER  # the comment says who gave it
    assert again.confidence_of("die.aicpu.control_read").level == USER
    assert again.confidence_of("die.clock").level == "H" and again.confidence_of("die.hbm.latency").tag == "M, knob"
    assert load_config("a2", {"die.hbm.bandwidth": "1 TB/s"}).confidence_of("die.hbm.bandwidth").level == USER  # a mapping of overrides


def test_config_show_marks_values_that_state_no_confidence(tmp_path):
    own = tmp_path / "own.yaml"
    own.write_text("extends: a2.yaml\ndie:\n  hbm:\n    bandwidth: 2 TB/s   # my guess\n    latency: 100 ns\n")
    loaded = load_config(str(own))
    assert loaded.confidence_of("die.hbm.bandwidth").level == UNRATED
    text = annotated_yaml(loaded)
    assert "bandwidth: 2 TB/s  # my guess [no confidence given]  (" in text
    assert "latency: 100 ns  # [no confidence given]  (" in text
    assert "clock: 1850 MHz  # A2A3.ini cube_freq" in text and "name: a2" in text and "name: a2  # [" not in text  # labels are not marked
    summary = confidence_summary(loaded)
    assert summary.startswith("# confidence of its ") and ", 2 with no confidence given" in summary
