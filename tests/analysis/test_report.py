"""The report's memory-and-links table: the resources the critical path waited on first, then by
utilisation, the rest summarised in one line."""

import io

from rich.console import Console

from npusim.analysis.report import print_report, resources_by_importance
from npusim.trace.summary import table_of


def resource(name, kind, utilisation):
    return {"resource": name, "kind": kind, "die": 0, "bytes": 2**20, "transfers": 1, "achieved_GBps": 100 * utilisation,
            "peak_GBps": 100.0, "utilisation": utilisation}


def summary(count=20):
    links = [resource(f"die0->die{i} HCCS", "link", 0.01 * i) for i in range(1, count)]
    return {
        "status": "ok", "simulated_time_us": 10.0, "events": 1, "wall_time_s": 0.1, "ops": {}, "pipes": {},
        "bandwidth": table_of([resource("die0 HBM", "hbm", 0.05), *links, resource("die0 L2", "l2", 0.02)]),
        "bottlenecks": {"path_events": 2, "summary": "60% MTE2 waiting on die0 HBM", "breakdown": [
            {"label": "MTE2 waiting on die0 HBM", "kind": "hbm", "resource": "die0 HBM", "share": 0.6, "time_us": 6.0},
            {"label": "MTE3 waiting on link die0->die3 HCCS", "kind": "link", "resource": "die0->die3 HCCS", "share": 0.1, "time_us": 1.0},
            {"label": "VECTOR on die0 aiv0", "kind": "pipe", "share": 0.3, "time_us": 3.0}]},
    }


def test_the_resources_waited_on_come_first_then_the_most_utilised():
    ordered = resources_by_importance(summary())
    assert [r["resource"] for r in ordered[:4]] == ["die0 HBM", "die0->die3 HCCS", "die0->die19 HCCS", "die0->die18 HCCS"]
    assert [r["critical_share"] for r in ordered[:3]] == [0.6, 0.1, 0.0]
    rest = [r["utilisation"] for r in ordered[2:]]
    assert rest == sorted(rest, reverse=True)


def test_the_table_keeps_the_first_rows_and_summarises_the_rest_by_kind():
    out = io.StringIO()
    print_report(summary(), title="t", console=Console(file=out, width=120), rows=5)
    text = out.getvalue()
    table = text[text.index("memory and links"):]
    assert table.index("die0 HBM") < table.index("die0->die3 HCCS") < table.index("die0->die19 HCCS")
    assert "60.0%" in table and "5.0%" in table  # its share of the critical path and its utilisation
    assert "... 16 more, none on the critical path: 15 link (up to 16.0%), 1 l2 (up to 2.0%); every row in summary.json" in table


def test_host_fallbacks_are_one_line_of_ops_with_counts_and_where_they_first_ran():
    rows = [{"op": "aten.abs", "count": 2, "first_us": 1.0, "die": 0, "message": "aten.abs ran on the host at prog.py:7", "at": "prog.py:7"},
            {"op": "aten.exp", "count": 1, "first_us": 2.0, "die": 0, "message": "aten.exp ran on the host at prog.py:9", "at": "prog.py:9"}]
    out = io.StringIO()
    print_report({**summary(), "host_fallbacks": rows}, title="t", console=Console(file=out, width=400), rows=5)
    line = next(line for line in out.getvalue().splitlines() if line.startswith("host fallbacks"))
    assert "aten.abs x2, aten.exp; first at prog.py:7, prog.py:9 (summary.json host_fallbacks)" in line
