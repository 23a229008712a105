"""``npusim validate`` end to end, as a user runs it: ``python -m npusim validate ...``."""

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).parents[2]


def npusim(*args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-m", "npusim", "validate", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)


def table_rows(stdout: str) -> list[list[str]]:
    return [line.split() for line in stdout.splitlines() if line.startswith(("a2 ", "a3 ")) and line.split()[1].isdigit()]


def test_validate_passes_on_both_configs_and_prints_the_table():
    result = npusim("--only", "transfers")
    assert result.returncode == 0, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    assert lines[1].split() == ["system", "nodes", "protocol", "direction", "block", "measured", "GiB/s", "simulated", "GiB/s", "error"]
    rows = table_rows(result.stdout)
    assert len(rows) == 56
    assert rows[0][:7] == ["a2", "1", "hccs", "write", "1", "MiB", "19.058"]
    assert any(line.startswith("a2 1-node: 16 cases, mean |error| ") for line in lines)
    assert any(line.startswith("a2 2-node: 16 cases, mean |error| ") for line in lines)
    assert any(line.startswith("a3 2-node: 8 cases, mean |error| ") for line in lines)
    assert any(line.startswith("all: 56 cases, mean |error| ") and ", worst " in line for line in lines)
    assert lines[-1] == "OK: every case is within 10%"


def test_a_config_override_that_breaks_the_calibration_fails():
    result = npusim("--config", "a2", "--only", "transfers", "--set", "fabrics.node.link.efficiency=0.5")
    assert result.returncode == 1
    rows = table_rows(result.stdout)
    assert len(rows) == 32 and all(row[0] == "a2" for row in rows)
    assert "FAIL: 8 of 32 cases are outside the tolerance of 10%: a2 1-node hccs write 1 MiB (-32.3%)" in result.stdout


def test_a_tighter_tolerance_can_fail_a_passing_model():
    assert npusim("--config", "a3", "--only", "transfers", "--tolerance", "0.001").returncode == 1


def test_bad_inputs_exit_2_with_one_line():
    unknown = npusim("--config", "a5")
    assert unknown.returncode == 2 and unknown.stdout == ""
    assert unknown.stderr.strip() == ("npusim: error: no calibration data for config 'a5': "
                                      "npusim/calibration/hixl_point_to_point.csv has measurements of a2, a3; pick one of them")
    tolerance = npusim("--tolerance", "10")
    assert tolerance.returncode == 2
    assert "tolerance 10.0 is not a fraction between 0 and 1 (exclusive): 0.10 allows a 10% error on every case" in tolerance.stderr
    typo = npusim("--config", "a2", "--set", "die.sdma.chanels=4")
    assert typo.returncode == 2
    assert "die.sdma.chanels: unknown key 'chanels'; did you mean 'channels'?" in typo.stderr
    not_a_number = npusim("--tolerance", "ten")
    assert not_a_number.returncode == 2 and "'ten' is not a valid float" in not_a_number.stderr


def test_a_measured_kernel_row_is_simulated_and_compared():
    """The MoE dispatch and combine rows (CloudMatrix384 Table 6) at EP8: one simulation gives both."""
    result = npusim("--only", "kernels", "--kernel", "EP8")
    assert result.returncode == 0, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    assert lines[1].split() == ["kernel", "config", "measured", "simulated", "unit", "error"]
    rows = {line.split("  ")[0]: line.split() for line in lines[2:4]}
    assert set(rows) == {"CloudMatrix384 EP8 dispatch", "CloudMatrix384 EP8 combine"}
    for row in rows.values():
        assert row[4] in ("116", "118") and abs(float(row[-1].rstrip("%"))) <= 10
    assert lines[-1] == "OK: every case is within 10%"
    missing = npusim("--only", "kernels", "--kernel", "EP9000")
    assert missing.returncode == 2 and "no measured kernel's name contains 'EP9000'" in missing.stderr


def test_a_kernel_rows_simulated_figure_has_as_many_decimals_as_its_measured_one():
    from npusim.cli.validate_cmd import figures

    assert figures(0.7256, 0.73318) == ("0.7256", "0.7332")
    assert figures(0.794, 0.76951) == ("0.794", "0.770")
    assert figures(116, 119.41) == ("116", "119.4")  # at least one decimal
    assert figures(758.4824, 750.768) == ("758.482", "750.768")  # up to 6 significant digits, as published
