"""The calibration cases: the data file, and the built-in configs reproduce every measured row."""

from importlib import resources

import pytest

from npusim.analysis.calibration import DATA_FILE, check_tolerance, endpoints, load_cases, run_calibration, summarize_errors
from npusim.config import load_config
from npusim.errors import UsageError


def test_the_data_file_names_its_source_and_holds_every_measured_row():
    text = resources.files("npusim").joinpath(DATA_FILE).read_text(encoding="utf-8")
    assert "hicann/hixl benchmarks/A2_benchmark_performance.md and A3_benchmark_performance.md" in text
    assert "Unit: GiB/s" in text
    cases = load_cases()
    assert len(cases) == 56
    assert {(c.system, c.nodes, c.protocol, c.direction) for c in cases} >= {("a2", 1, "hccs", "write"), ("a3", 2, "hccs", "read"),
                                                                             ("a2", 2, "rdma", "read"), ("a2", 2, "hccs", "write")}
    assert "A2: two servers" in text
    assert sorted({c.block_bytes for c in cases}) == [2**20, 2**21, 2**22, 2**23]


@pytest.mark.parametrize("system", ["a2", "a3"])
def test_every_case_of_the_builtin_config_is_within_ten_percent(system):
    results = run_calibration([system])
    assert {r.case.system for r in results} == {system}
    outside = [(r.case.label, f"{r.error:+.1%}") for r in results if abs(r.error) > 0.10]
    assert outside == []


def test_a_broken_parameter_breaks_the_calibration():
    results = run_calibration(["a2"], ["fabrics.node.link.write_credits=835 B"])  # half the fitted 1669 B
    worst = summarize_errors(results).worst
    assert worst.case.direction == "write" and worst.case.protocol == "hccs" and worst.error < -0.4


def test_the_runs_are_deterministic():
    assert run_calibration(["a3"]) == run_calibration(["a3"])


def test_the_dies_of_a_measurement_are_on_two_packages_or_two_nodes():
    assert endpoints(load_config("a2").spec, 1) == (0, 1)
    assert endpoints(load_config("a3").spec, 1) == (0, 2)  # die 1 shares the package (SIO), die 2 does not
    assert endpoints(load_config("a3", ["shape.nodes=2"]).spec, 2) == (0, 16)
    assert endpoints(load_config("a2", ["shape.nodes=2"]).spec, 2) == (0, 8)  # the first die of the second server


def test_two_a2_servers_move_data_by_rdma_whatever_the_protocol_asked():
    results = {(r.case.protocol, r.case.direction, r.case.block_bytes): r.simulated_GiBps for r in run_calibration(["a2"]) if r.case.nodes == 2}
    assert len(results) == 16
    for (_protocol, direction, block), rate in results.items():
        assert rate == results[("rdma", direction, block)]  # HCCL serves "hccs" between servers over RoCE


def test_unknown_system_names_the_known_ones():
    with pytest.raises(UsageError, match=r"no calibration data for config 'a5': npusim/calibration/hixl_point_to_point.csv has measurements of a2, a3"):
        load_cases(["a5"])


@pytest.mark.parametrize("tolerance", [0.0, -0.1, 1.0, 10.0])
def test_tolerance_is_a_fraction(tolerance):
    with pytest.raises(UsageError, match="is not a fraction between 0 and 1 .exclusive.: 0.10 allows a 10% error"):
        check_tolerance(tolerance)
    assert check_tolerance(0.05) == 0.05
