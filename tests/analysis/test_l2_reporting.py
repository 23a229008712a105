"""The L2 hit rates as a run reports them: summary.json's ``l2`` (per die and per op and unit),
op_summary.csv's msprof-named columns, the report's L2 tables and the trace's hit-rate counter; the
same run twice gives the same bytes."""

import io
import json
from pathlib import Path

import numpy as np
import pytest
from rich.console import Console

import npusim
from npusim import isa
from npusim.analysis.profiling import op_summary
from npusim.analysis.report import print_report
from npusim.trace.l2 import L2_METRICS
from npusim.trace.summary import records

ROOT = Path(__file__).resolve().parents[2]
CHUNK = 16 * 1024  # bytes: 32 lines


def reread(tmp_path: Path, name: str):
    """One AIV reads a chunk twice (a miss, then a hit) and writes it out: 32 lines each."""
    with npusim.session("a2", data=False) as s:
        src, out = npusim.empty(CHUNK // 2, np.float16), npusim.empty(CHUNK // 2, np.float16)
        k = isa.Kernel("reread", die=0)
        p = k.aiv(0)
        ub = p.alloc(CHUNK // 2, np.float16)
        for _ in range(2):
            p.copy(ub, isa.gm(src))
            p.set_flag("MTE2", "MTE3", 0)
            p.wait_flag("MTE2", "MTE3", 0)
            p.copy(isa.gm(out), ub)
            p.set_flag("MTE3", "MTE2", 0)
            p.wait_flag("MTE3", "MTE2", 0)
        k.launch()
    return s.result, s.result.write_trace(tmp_path / name)


def test_the_summary_and_op_summary_give_msprofs_l2_metrics_per_die_and_per_op(tmp_path):
    result, _ = reread(tmp_path, "trace.json")
    l2 = result.summary["l2"]
    assert l2["line_bytes"] == 512
    (die,) = records(l2["dies"])
    assert {k: die[k] for k in ("die", *L2_METRICS, "written_back_bytes")} == {
        "die": 0, "write_cache_hit": 32, "write_cache_miss_allocate": 32, "r0_read_cache_hit": 32, "r0_read_cache_miss_allocate": 32,
        "write_hit_rate(%)": 50.0, "read_hit_rate(%)": 50.0, "total_hit_rate(%)": 50.0, "written_back_bytes": 0}
    (op,) = records(l2["ops"])
    assert (op["name"], op["die"], op["unit"], op["read_hit_rate(%)"]) == ("reread", 0, "aiv", 50.0)
    (row,) = op_summary(result.record)
    assert [row[f"aiv_{metric}"] for metric in L2_METRICS] == [32, 32, 32, 32, 50.0, 50.0, 50.0]
    assert [row[f"aic_{metric}"] for metric in L2_METRICS] == [""] * len(L2_METRICS)  # it ran on no cube core


def test_the_report_prints_the_l2_per_die_and_per_op(tmp_path):
    result, _ = reread(tmp_path, "trace.json")
    out = io.StringIO()
    print_report(result.summary, title="reread", console=Console(file=out, width=200, highlight=False))
    text = out.getvalue()
    assert "L2 per die" in text and "L2 by op" in text
    line = next(line for line in text.splitlines() if "reread" in line and "aiv" in line)
    assert [cell.strip() for cell in line.split("│")[3:6]] == ["50.0%", "50.0%", "50.0%"]


def test_the_trace_has_a_hit_rate_counter_per_die_and_is_the_same_twice(tmp_path):
    _, first = reread(tmp_path, "a.json")
    _, second = reread(tmp_path, "b.json")
    assert first.read_bytes() == second.read_bytes()
    points = [e for e in json.loads(first.read_text())["traceEvents"] if e["ph"] == "C" and e["name"] == "die0 L2 hit rate %"]
    rates = [p["args"]["%"] for p in points]  # per microsecond with accesses: the share of their lines that hit
    assert rates[0] == 0.0 and rates[-1] == 100.0 and [p["ts"] for p in points] == sorted(p["ts"] for p in points)


@pytest.mark.parametrize("example", ["pypto_matmul_add.py"])
def test_an_example_reports_hits_where_its_tiles_share_rows(example):
    result = npusim.simulate("a2", ROOT / "examples" / example, data=False)
    matmul = [row for row in records(result.summary["l2"]["ops"]) if row["name"] == "matmul"]
    assert matmul and 0 < matmul[0]["read_hit_rate(%)"] < 100  # A's rows are read by every column of tiles: all but the first hit
