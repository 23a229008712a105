"""``npusim whatif``'s ranking of the config values the time is most sensitive to: on workloads whose
answer is known by construction (an HBM-bound copy: die.hbm.bandwidth first at about -1; a
link-bound load: the link's bandwidth and efficiency, the efficiency's upper side refused; a vector
loop: per_repeat at about +1), the confidence beside each value and the reading, and the errors."""

import math

import pytest

from npusim.analysis import run_sensitivity
from npusim.analysis.sensitivity import Varied, elasticity, moved, reading
from npusim.errors import ConfigError, UsageError, WorkloadError
from tests.analysis.test_report_cli import npusim
from tests.analysis.workloads import HBM_BOUND_COPY, LINK_BOUND_REMOTE_LOAD, write

NO_SETUP = ["die.cores.aiv.engines.MTE2.setup=1 cycle", "die.cores.aiv.engines.MTE3.setup=1 cycle"]  # the copy then streams only

VECTOR_LOOP = '''
import numpy as np
import npusim
from npusim import isa

kernel = isa.Kernel("vector_loop", die=0)
p = kernel.aiv(0)
a = p.alloc(16384, np.float16)
for _ in range(50):
    p.adds(a, a, 1.0)
kernel.launch()
'''


def test_values_move_in_their_own_unit_and_counts_by_at_least_one():
    assert moved("1.6 TB/s", 1.1) == ("1.76 TB/s", 1.1) and moved("1200 cycles", 0.9) == ("1080 cycles", 0.9)
    assert moved(48, 1.1) == (53, 53 / 48) and moved(2, 0.9) == (1, 0.5) and moved(1, 0.9) == (0, 0.0)  # 0: no side to take
    assert moved(0.99, 1.1) == (pytest.approx(1.089), 1.1)
    assert moved("full_mesh", 1.1) is None and moved(True, 1.1) is None and moved(["SCALAR"], 1.1) is None


def test_the_elasticity_is_the_slope_of_log_time_against_log_value():
    entry = Varied("k", "1 us", "k=0.9 us", "k=1.1 us", 0.9, 1.1)
    assert elasticity(10.0, 10 / 0.9, 10 / 1.1, entry) == pytest.approx(-1.0)  # inversely proportional: a bandwidth
    assert elasticity(10.0, 9.0, 11.0, entry) == pytest.approx(1.0)  # proportional: all of the path
    assert elasticity(10.0, 9.0, None, entry) == pytest.approx(1.0)  # one-sided, against the baseline
    assert math.isnan(elasticity(10.0, None, None, entry)) and math.isnan(elasticity(0.0, 0.0, 0.0, entry))


def test_an_hbm_bound_copy_ranks_hbm_bandwidth_first_at_minus_one(tmp_path):
    baseline, rows, line = run_sensitivity("a2", write(tmp_path, "hbm_copy.py", HBM_BOUND_COPY), overrides=NO_SETUP, workers=2, progress=False)
    assert baseline["which"] == "critical path" and "die.hbm.bandwidth" in baseline["keys"]
    first = rows[0]
    assert (first["key"], first["value"], first["confidence"], first["level"]) == ("die.hbm.bandwidth", "1.6 TB/s", "M/L, knob", "L")
    # the reads stream from HBM (a cold L2); the writes allocate in L2 and leave at the MTE3's rate, so about 3/4 of the time is HBM's
    assert first["elasticity"] == pytest.approx(-0.75, abs=0.1) and first["lower_us"] > baseline["simulated_us"] > first["upper_us"]
    assert all(abs(row["elasticity"]) < 0.3 for row in rows[1:])
    assert [abs(row["elasticity"]) for row in rows] == sorted((abs(row["elasticity"]) for row in rows), reverse=True)
    mte2 = next(row for row in rows if row["key"] == "die.cores.aiv.engines.MTE2.setup")
    assert (mte2["level"], mte2["low"]) == ("user", False)  # the --set value is the user's
    assert line.startswith(f"the time is most sensitive to die.hbm.bandwidth ({first['elasticity']:+.2f}) [M/L, knob]")
    assert "of low confidence (die.hbm.bandwidth)" in line


def test_a_link_bound_load_rests_on_the_links_bandwidth_and_efficiency_whose_upper_side_is_refused(tmp_path):
    workload = write(tmp_path, "remote_load.py", LINK_BOUND_REMOTE_LOAD)
    keys = ["fabrics.node.link.bandwidth", "fabrics.node.link.efficiency", "die.hbm.bandwidth"]
    baseline, rows, _ = run_sensitivity("a2", workload, keys=keys, params={"tiles": 2}, workers=2, progress=False)
    by_key = {row["key"]: row for row in rows}
    assert baseline["which"] == "given" and {row["key"] for row in rows[:2]} == set(keys[:2])
    assert by_key["fabrics.node.link.bandwidth"]["elasticity"] == pytest.approx(-0.9, abs=0.1)
    efficiency = by_key["fabrics.node.link.efficiency"]
    assert efficiency["upper"] == "" and math.isnan(efficiency["upper_us"]) and efficiency["status"] == "ok"  # 1.089 > 1: one-sided
    assert efficiency["elasticity"] == pytest.approx(by_key["fabrics.node.link.bandwidth"]["elasticity"], abs=0.05)
    assert abs(by_key["die.hbm.bandwidth"]["elasticity"]) < 0.02


def test_a_vector_loop_is_proportional_to_the_time_per_repeat(tmp_path):
    _, rows, line = run_sensitivity("a2", write(tmp_path, "vector_loop.py", VECTOR_LOOP), keys=["die.vector.per_repeat", "die.vector.issue"],
                                    workers=2, progress=False)
    assert [row["key"] for row in rows] == ["die.vector.per_repeat", "die.vector.issue"]
    assert rows[0]["elasticity"] == pytest.approx(1.0, abs=0.1) and 0 < rows[1]["elasticity"] < 0.1
    assert "die.vector.per_repeat (+" in line and "low confidence" not in line.partition(";")[0]


def test_a_value_neither_side_of_which_the_config_takes_is_not_varied(tmp_path):
    _, rows, line = run_sensitivity("a2", write(tmp_path, "vector_loop.py", VECTOR_LOOP), keys=["shape.dies_per_package"], workers=1,
                                    progress=False)
    assert rows[0]["status"] == "not varied" and math.isnan(rows[0]["elasticity"]) and "dies_per_package" in rows[0]["error"]
    assert line == "no value could be varied"


def test_bad_keys_and_steps_are_refused_before_anything_runs(tmp_path):
    workload = write(tmp_path, "vector_loop.py", VECTOR_LOOP)
    with pytest.raises(ConfigError, match=r"die\.hbm\.bandwith: unknown key 'bandwith'; did you mean 'bandwidth'\?"):
        run_sensitivity("a2", workload, keys=["die.hbm.bandwith"], progress=False)
    with pytest.raises(UsageError, match=r"fabrics\.node\.kind: its value 'full_mesh' is not a number"):
        run_sensitivity("a2", workload, keys=["fabrics.node.kind"], progress=False)
    with pytest.raises(UsageError, match=r"does not set die\.cores\.aiv\.engines\.MTE2\.burst_bytes .*--set die\.cores\.aiv\.engines\.MTE2\.burst_bytes=VALUE"):
        run_sensitivity("a2", workload, keys=["die.cores.aiv.engines.MTE2.burst_bytes"], progress=False)
    with pytest.raises(UsageError, match="--keys or --all, not both"):
        run_sensitivity("a2", workload, keys=["die.hbm.bandwidth"], all_values=True, progress=False)
    with pytest.raises(UsageError, match="between 0 and 1"):
        run_sensitivity("a2", workload, step=1.5, progress=False)
    with pytest.raises(WorkloadError, match=r"baseline run of boom.py failed.*RuntimeError: boom"):
        run_sensitivity("a2", write(tmp_path, "boom.py", "raise RuntimeError('boom')\n"), progress=False)


def test_the_reading_warns_when_the_top_values_are_of_low_confidence():
    def row(key, value, level, tag=""):
        return {"key": key, "elasticity": value, "level": level, "confidence": tag or level, "low": level in ("L", "unrated")}

    assert reading([row("a", -0.9, "M", "M, knob"), row("b", 0.2, "L", "L, knob"), row("c", 0.01, "L")]) == (
        "the time is most sensitive to a (-0.90) [M, knob], b (+0.20) [L, knob]; it is of low confidence (b): the ranking and the time are "
        "only as good as that value, measure it first")
    assert reading([row("a", 0.01, "H")]) == "the time hardly moves with any value varied (largest elasticity: a, +0.01)"
    assert reading([row("a", 0.5, "user")]) == "the time is most sensitive to a (+0.50) [your value]"
    assert reading([]) == "no config value to vary: the critical path rests on none"


def test_the_command_prints_the_ranking_and_exits_2_on_a_bad_key(tmp_path):
    workload = write(tmp_path, "hbm_copy.py", HBM_BOUND_COPY)
    run = npusim("whatif", "-c", "a2", workload, *[arg for text in NO_SETUP for arg in ("--set", text)], "--keys",
                 "die.hbm.bandwidth,die.l2.bandwidth", "--workers", "2", cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    ranked = [cells for cells in (line.split("│") for line in run.stdout.splitlines() if line.startswith("│")) if cells[1].strip()]  # not a source wrapped
    assert [(cells[1].strip(), cells[2].strip(), cells[7].strip()) for cells in ranked] == [("1", "die.hbm.bandwidth", "M/L, knob"),
                                                                                            ("2", "die.l2.bandwidth", "M, knob")]
    assert "reading: the time is most sensitive to die.hbm.bandwidth (-0.7" in run.stdout and "measure it first" in run.stdout
    typo = npusim("whatif", "-c", "a2", workload, "--keys", "die.hbm.bandwith", cwd=tmp_path)
    assert typo.returncode == 2 and "unknown key 'bandwith'; did you mean 'bandwidth'?" in typo.stderr and "Traceback" not in typo.stderr
    step = npusim("whatif", "-c", "a2", workload, "--step", "ten", cwd=tmp_path)
    assert step.returncode == 2 and "--step ten: give a percentage or a fraction" in step.stderr
