"""What-if: the factor table derived from a config, the one-line reading, and constructed cases
with a known answer (a link-bound load ranks its link first; an HBM-bound copy ranks HBM first)."""

import math

import pytest

import npusim
from npusim.analysis import FACTORS, run_whatif, whatif
from npusim.analysis.whatif import NOTABLE, factor_overrides, label, reading
from npusim.config import load_config
from npusim.errors import WorkloadError
from tests.analysis.workloads import CREDIT_BOUND_REMOTE_STORE, HBM_BOUND_COPY, LINK_BOUND_REMOTE_LOAD, write

EXPLICIT_LINKS = """extends: a2.yaml
fabrics:
  node:
    kind: links
    link: null
    links:
      - {a: 0, b: 1, link: {bandwidth: 28 GB/s, latency: 150 ns}}
      - {a: 1, b: 2, link: {bandwidth: 14 GB/s, latency: 150 ns, write_credits: 4 KiB}}
"""


def applicable(config):
    loaded = load_config(config)
    return loaded, {factor.name: factor_overrides(factor, loaded.resolved) for factor in FACTORS if factor_overrides(factor, loaded.resolved)}


def spec_value(loaded, dotted):
    value = loaded.spec
    for part in dotted.split("."):
        value = value[int(part)] if part.isdigit() else value[part] if isinstance(value, dict) else getattr(value, part)
    return value if isinstance(value, int) else value.value


def test_factors_follow_the_config_and_keep_its_units():
    _, a2 = applicable("a2")
    assert a2["HBM bandwidth"] == ["die.hbm.bandwidth=3.2 TB/s"]
    assert a2["HCCS link bandwidth"] == ["fabrics.node.link.bandwidth=56 GB/s", "fabrics.node.link.write_credits=3338 B"]
    assert a2["AI core count"] == ["die.cores.aic.count=48", "die.cores.aiv.count=96"]
    assert a2["MTE rate"] == [f"die.cores.{kind}.engines.{pipe}.rate={rate}" for kind, pipe, rate in (
        ("aic", "MTE2", "256 B/cycle"), ("aic", "MTE1", "512 B/cycle"), ("aic", "FIXP", "172 B/cycle"),
        ("aiv", "MTE2", "256 B/cycle"), ("aiv", "MTE3", "128 B/cycle"))] + ["die.cores.aic.engines.MTE1.rates.L1->L0A=1024 B/cycle"]
    assert a2["vector rate"] == ["die.vector.per_repeat=1 cycles"]
    assert not {"UB link bandwidth", "SIO bandwidth", "fabric link bandwidth"} & set(a2)
    _, a3 = applicable("a3")
    assert a3["UB link bandwidth"] == ["fabrics.node.link.bandwidth=56 GB/s", "fabrics.node.link.write_credits=10.8 KiB"]
    assert a3["SIO bandwidth"] == ["fabrics.package.link.bandwidth=448 GB/s"]  # the SIO has no write credits
    assert "HCCS link bandwidth" not in a3
    assert a2["NIC bandwidth"] == a3["NIC bandwidth"] == ["fabrics.scale_out.bandwidth=400 Gb/s"]


def test_each_label_names_what_its_factor_changed_on_the_config():
    (_, a2), (_, a3) = applicable("a2"), applicable("a3")
    by_name = {factor.name: factor for factor in FACTORS}
    assert label(by_name["HCCS link bandwidth"], a2["HCCS link bandwidth"]) == (
        "HCCS link bandwidth + write credits", "doubling the HCCS link bandwidth and write credits")
    assert label(by_name["UB link bandwidth"], a3["UB link bandwidth"])[0] == "UB link bandwidth + write credits"
    assert label(by_name["SIO bandwidth"], a3["SIO bandwidth"]) == ("SIO bandwidth", "doubling the SIO (die-to-die) bandwidth")  # no credits to double
    assert label(by_name["HBM bandwidth"], a2["HBM bandwidth"]) == ("HBM bandwidth", "doubling the HBM bandwidth")


def test_every_factor_makes_its_resource_exactly_twice_as_fast(tmp_path):
    (tmp_path / "links.yaml").write_text(EXPLICIT_LINKS)
    for config in ("a2", "a3", str(tmp_path / "links.yaml")):
        base, factors = applicable(config)
        for name, overrides in factors.items():
            faster = load_config(config, overrides)
            factor = next(f for f in FACTORS if f.name == name)
            for text in overrides:
                key = text.partition("=")[0]
                assert spec_value(faster, key) == pytest.approx(spec_value(base, key) * factor.scale), (config, key)
    _, links = applicable(str(tmp_path / "links.yaml"))
    assert links["fabric link bandwidth"] == ["fabrics.node.links.0.link.bandwidth=56 GB/s", "fabrics.node.links.1.link.bandwidth=28 GB/s",
                                              "fabrics.node.links.1.link.write_credits=8 KiB"]  # credits only where a link has them


def row(reading_text, speedup, status="ok"):
    return {"reading": reading_text, "speedup": speedup if status == "ok" else math.nan, "status": status}


def test_the_reading_names_what_matters_and_sums_up_the_rest():
    assert reading([row("doubling the UB link bandwidth", 1.714), row("doubling the HBM bandwidth", 1.02)]) == \
        "doubling the UB link bandwidth gives 1.71x; everything else under 1.05x"
    assert reading([row("doubling A", 1.8), row("doubling B", 1.3)]) == "doubling A gives 1.80x, doubling B 1.30x"
    assert reading([row("doubling A", 1.01), row("doubling B", 1.0)]) == \
        f"no resource made twice as fast gives {NOTABLE:.2f}x or more (best: doubling A, 1.01x)"
    assert reading([row("doubling A", 1.5), row("doubling B", 1.0), row("doubling C", 0, "failed")]) == \
        "doubling A gives 1.50x; everything else under 1.05x; 1 factor failed (see the table)"


def test_a_link_bound_remote_load_ranks_the_hccs_link_first(tmp_path):
    rows, line = run_whatif("a2", write(tmp_path, "remote_load.py", LINK_BOUND_REMOTE_LOAD), workers=2, progress=False)
    baseline, first, *rest = rows
    assert baseline["factor"] == "baseline" and baseline["speedup"] == 1.0
    assert first["factor"] == "HCCS link bandwidth + write credits" and first["speedup"] > 1.5  # the label names both keys it doubled
    assert all(r["status"] == "ok" and r["speedup"] < NOTABLE for r in rest)
    assert line.startswith(f"doubling the HCCS link bandwidth and write credits gives {first['speedup']:.2f}x; everything else under")


def test_an_hbm_bound_copy_ranks_hbm_first_and_more_cores_do_not_help_much(tmp_path):
    frame = whatif("a2", write(tmp_path, "copy.py", HBM_BOUND_COPY), workers=2, progress=False)
    assert list(frame["factor"][:2]) == ["baseline", "HBM bandwidth"]
    speedups = dict(zip(frame["factor"], frame["speedup"]))
    assert speedups["HBM bandwidth"] > 1.3 and speedups["MTE rate"] < 1.1 and speedups["AI core count"] < 1.2
    assert list(frame["speedup"][1:]) == sorted(frame["speedup"][1:], reverse=True)
    assert frame.attrs["reading"].startswith("doubling the HBM bandwidth gives")


def test_a_failing_baseline_is_an_error(tmp_path):
    with pytest.raises(WorkloadError, match=r"baseline run of boom.py failed.*RuntimeError: boom"):
        run_whatif("a2", write(tmp_path, "boom.py", "raise RuntimeError('boom')\n"), workers=1, progress=False)


def test_a_workload_that_simulates_nothing_gains_nothing(tmp_path):
    rows, line = run_whatif("a3", write(tmp_path, "empty.py", "import npusim\n"), overrides=["die.hbm.bandwidth=0.8 TB/s"], workers=2, progress=False)
    assert next(row["changed"] for row in rows if row["factor"] == "HBM bandwidth") == "die.hbm.bandwidth=1.6 TB/s"  # twice the baseline's
    assert {row["speedup"] for row in rows} == {1.0} and {row["simulated_us"] for row in rows} == {0.0}
    assert line.startswith("no resource made twice as fast gives 1.05x or more (best: doubling the HBM bandwidth, 1.00x)")


def test_doubling_the_hccs_link_speeds_up_a_credit_bound_remote_store(tmp_path):
    """Posted writes over HCCS are capped by the link's write credits, below its bandwidth: the
    factor doubles both, so the store runs about twice as fast; the bandwidth alone would not help."""
    workload = write(tmp_path, "remote_store.py", CREDIT_BOUND_REMOTE_STORE)
    hccs = next(f for f in FACTORS if f.name == "HCCS link bandwidth")
    changes = factor_overrides(hccs, load_config("a2").resolved)
    base = npusim.simulate("a2", workload, data=False).simulated_ps
    faster = npusim.simulate("a2", workload, overrides=changes, data=False).simulated_ps
    bandwidth_only = npusim.simulate("a2", workload, overrides=[c for c in changes if "write_credits" not in c], data=False).simulated_ps
    assert base / faster > 1.6
    assert base / bandwidth_only < NOTABLE
