"""``npusim report`` and ``npusim compare`` end to end on two runs of the demo, and ``run --plot``."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from npusim.analysis.report import load_run
from npusim.trace.summary import records, with_tables

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "examples" / "vector_add.py"


def npusim(*args, cwd):
    env = dict(os.environ, PYTHONPATH=str(ROOT), MPLBACKEND="Agg")
    return subprocess.run([sys.executable, "-m", "npusim", *map(str, args)], cwd=cwd, env=env, capture_output=True, text=True, timeout=300)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Run A (a2) and run B (a2 with twice the HBM bandwidth), both timing only; A with --plot."""
    folder = tmp_path_factory.mktemp("runs")
    a = npusim("run", "-c", "a2", DEMO, "--no-data", "--plot", "--out", folder / "a", cwd=folder)
    b = npusim("run", "-c", "a2", DEMO, "--no-data", "--set", "die.hbm.bandwidth=3.2 TB/s", "--out", folder / "b", cwd=folder)
    assert a.returncode == b.returncode == 0, a.stderr + b.stderr
    return folder, a


def test_run_prints_the_bottlenecks_and_writes_them_and_the_plot(runs):
    folder, a = runs
    assert "bottlenecks (critical path" in a.stdout and "MTE2 waiting on die0 HBM" in a.stdout and "timeline.png" in a.stdout
    summary = json.loads((folder / "a" / "summary.json").read_text())
    assert summary["bottlenecks"]["breakdown"][0]["label"] == "MTE2 waiting on die0 HBM"
    assert summary["tiles"]["tiles"][0] == 8 and summary["ops"]["name"][0] == "vector_add"
    assert (folder / "a" / "timeline.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert not (folder / "b" / "timeline.png").exists()


def test_report_reprints_a_run_folder(runs):
    folder, _ = runs
    report = npusim("report", folder / "a", cwd=folder)
    assert report.returncode == 0, report.stderr
    for text in ("vector_add.py on a2", "where the end-to-end time goes", "MTE2 waiting on die0 HBM", "ops (by name)", "tiles", "pipes",
                 "die0 HBM", "GB/s of peak"):
        assert text in report.stdout


def test_compare_shows_what_changed_side_by_side(runs):
    folder, _ = runs
    compare = npusim("compare", folder / "a", folder / "b", cwd=folder)
    assert compare.returncode == 0, compare.stderr
    assert "B faster" in compare.stdout and "overrides" in compare.stdout and "3.2 TB/s" in compare.stdout
    assert "config keys that differ (config.yaml)" in compare.stdout
    assert [line.split("│")[1:4] for line in compare.stdout.splitlines() if "│ die.hbm.bandwidth" in line] == [
        [" die.hbm.bandwidth ", " 1.6 TB/s ", " 3.2 TB/s "]]  # the one key that differs, with both values
    for section in ("ops (total time per op name)", "bottlenecks (time on the critical path", "memory and links", "pipes (busy time"):
        assert section in compare.stdout
    as_json = json.loads(npusim("compare", folder / "a", folder / "b", "--json", cwd=folder).stdout)
    a = json.loads((folder / "a" / "summary.json").read_text())["simulated_time_us"]
    b = json.loads((folder / "b" / "summary.json").read_text())["simulated_time_us"]
    assert as_json["end_to_end_us"] == {"a": a, "b": b, "delta": pytest.approx(b - a), "ratio": pytest.approx(b / a)}
    assert b < a
    op = next(row for row in as_json["ops"] if row["key"] == "vector_add")
    assert op["delta"] == pytest.approx(b - a)
    hbm = next(row for row in as_json["bandwidth"] if row["key"] == "die0 HBM")
    assert hbm["b"] > hbm["a"]
    assert as_json["config_keys"] == [{"key": "die.hbm.bandwidth", "a": "1.6 TB/s", "b": "3.2 TB/s"}]


def table_rows(text: str, first: str) -> list[list[str]]:
    """The cells of the rows of a printed table whose first cell starts with ``first``."""
    return [[cell.strip() for cell in line.split("│")[1:-1]] for line in text.splitlines() if line.startswith(f"│ {first}")]


def test_compare_in_a_pipe_prints_times_and_percentages_whole(runs, monkeypatch):
    """In a pipe at 80 columns (a CI log): nothing cut, bottlenecks as times in us with B/A on the
    times and each side's share in %, as `run` prints them; an unchanged entry reads 1.000."""
    folder, _ = runs
    monkeypatch.setenv("COLUMNS", "80")
    compare = npusim("compare", folder / "a", folder / "b", cwd=folder)
    assert compare.returncode == 0, compare.stderr
    assert "…" not in compare.stdout
    header = next(line for line in compare.stdout.splitlines() if "A us" in line and "A %" in line)
    assert [cell.strip() for cell in header.split("┃")[1:-1]] == ["", "A us", "B us", "change us", "B/A", "A %", "B %"]
    breakdown = json.loads(npusim("compare", folder / "a", folder / "b", "--json", cwd=folder).stdout)["bottlenecks"]
    for row in breakdown:
        cells = next(cells for cells in table_rows(compare.stdout, row["key"]) if cells[0] == row["key"])
        assert cells[1:3] == [f"{row['a']:.3f}", f"{row['b']:.3f}"]  # us, whole
        assert cells[4] == f"{row['b'] / row['a']:.3f}" and cells[5:] == [f"{row['share_a']:.1%}", f"{row['share_b']:.1%}"]
    unchanged = [row for row in breakdown if row["delta"] == 0]
    assert unchanged and all(row["ratio"] == 1.0 for row in unchanged)  # B/A of times: an unchanged entry is 1, whatever the shares


def test_compare_on_a_narrow_terminal_wraps_labels_and_never_cuts_a_number(runs):
    from rich.console import Console

    from npusim.analysis.report import load_run, print_comparison

    folder, _ = runs
    console = Console(force_terminal=True, width=60, record=True, color_system=None)
    result = print_comparison(load_run(folder / "a"), load_run(folder / "b"), console=console)
    text = console.export_text()
    assert "…" not in text
    for row in result["bottlenecks"] + result["pipes"]:
        assert f"{row['a']:.3f}" in text and f"{row['share_a']:.1%}" in text


def test_runs_report_in_a_pipe_is_neither_wrapped_nor_cut(runs, monkeypatch):
    """Off a terminal the report's lines are as long as they are, whatever COLUMNS says (rich would
    wrap the first line at "wall" and cut the labels of the tables)."""
    folder, _ = runs
    monkeypatch.setenv("COLUMNS", "50")
    report = npusim("report", folder / "a", cwd=folder).stdout
    first = report.splitlines()[0]
    assert first.startswith("vector_add.py on a2: simulated") and "wall" in first and first.endswith(" engine)")  # the engine that ran it
    assert "…" not in report
    summary = json.loads((folder / "a" / "summary.json").read_text())
    assert all(any(row["label"] in line for line in report.splitlines()) for row in summary["bottlenecks"]["breakdown"])


def test_compare_of_different_configs_lists_every_key_that_differs(runs, tmp_path):
    folder, _ = runs
    a3 = npusim("run", "-c", "a3", DEMO, "--no-data", "--out", tmp_path / "a3", cwd=tmp_path)
    assert a3.returncode == 0, a3.stderr
    changed = {row["key"]: (row["a"], row["b"]) for row in json.loads(npusim("compare", folder / "a", tmp_path / "a3", "--json", cwd=tmp_path).stdout)["config_keys"]}
    assert changed["name"] == ("a2", "a3") and changed["shape.dies_per_package"] == (1, 2) and changed["product"] == ("ascend910b", "ascend910c")
    assert "die.hbm.bandwidth" not in changed  # a3 inherits a2's HBM


def test_compare_says_when_a_folder_has_no_config(runs, tmp_path):
    folder, _ = runs
    old = tmp_path / "old"
    old.mkdir()
    for name in ("summary.json", "manifest.json"):
        (old / name).write_bytes((folder / "a" / name).read_bytes())
    compare = npusim("compare", old, folder / "b", cwd=tmp_path)
    assert compare.returncode == 0 and "config keys: not compared, A has no config.yaml" in compare.stdout


def test_report_and_compare_name_a_folder_that_is_not_a_run(runs, tmp_path):
    folder, _ = runs
    missing = npusim("report", tmp_path / "nope", cwd=tmp_path)
    assert missing.returncode == 2 and "does not exist" in missing.stderr and "Traceback" not in missing.stderr
    empty = tmp_path / "empty"
    empty.mkdir()
    not_a_run = npusim("compare", folder / "a", empty, cwd=tmp_path)
    assert not_a_run.returncode == 2 and "has no summary.json" in not_a_run.stderr
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "summary.json").write_text("{not json")
    bad = npusim("report", broken, cwd=tmp_path)
    assert bad.returncode == 2 and "not valid JSON" in bad.stderr


@pytest.mark.parametrize(("change", "message"), [
    (lambda s: {**s, "ops": {**s["ops"], "duration_us": 1.5}}, "summary.json is not a summary npusim can read: ops.duration_us: input should be a valid list"),
    (lambda s: {**s, "ops": {**s["ops"], "name": [*s["ops"]["name"], "extra"]}}, "ops: value error, its columns differ in length: "),
    (lambda s: {**s, "pipes": {"die": [0]}}, "pipes: value error, it has no column 'pipe'"),
    (lambda s: {**s, "pipes": [{"die": 0}]}, "pipes: value error, it has no column 'pipe'"),  # the tables' form before they were columnar
    (lambda s: {**s, "bandwidth": {**s["bandwidth"], "bytes": ["1"] * len(s["bandwidth"]["bytes"])}}, "bandwidth.bytes.0: input should be a valid number"),
    (lambda s: {**s, "simulated_time_us": "1.5"}, "simulated_time_us: input should be a valid number"),
    (lambda s: [s], "summary.json is not a JSON object"),
])
def test_a_summary_of_another_structure_is_a_clear_error(runs, tmp_path, change, message):
    folder, _ = runs
    copy = tmp_path / "copy"
    copy.mkdir()
    (copy / "summary.json").write_text(json.dumps(change(json.loads((folder / "a" / "summary.json").read_text()))))
    for command in (["report", copy], ["compare", folder / "a", copy]):
        done = npusim(*command, cwd=tmp_path)
        assert done.returncode == 2 and message in done.stderr and "Traceback" not in done.stderr, done.stderr
        assert "run `npusim run` again to rewrite it" in done.stderr


def test_a_summary_whose_tables_are_lists_of_rows_reads_as_its_columns_do(runs, tmp_path):
    """Run folders written before the summary's tables were columnar (one object per row) are
    reported and compared as before."""
    folder, _ = runs
    summary = json.loads((folder / "a" / "summary.json").read_text())
    older = tmp_path / "older"
    older.mkdir()
    for name in ("manifest.json", "config.yaml"):
        (older / name).write_bytes((folder / "a" / name).read_bytes())
    as_rows = with_tables(summary, records)
    assert isinstance(as_rows["ops"], list) and as_rows["ops"] and as_rows["l2"]["ops"]
    (older / "summary.json").write_text(json.dumps(as_rows))
    assert load_run(older).summary == load_run(folder / "a").summary
    new, old = npusim("report", folder / "a", cwd=tmp_path), npusim("report", older, cwd=tmp_path)
    assert old.returncode == 0 and old.stdout == new.stdout
    compared = npusim("compare", older, folder / "a", "--json", cwd=tmp_path)
    assert compared.returncode == 0 and all(row["ratio"] in (1.0, None) for row in json.loads(compared.stdout)["ops"])


def test_a_run_folder_written_by_a_newer_npusim_is_flagged(runs, tmp_path):
    folder, _ = runs
    newer = tmp_path / "newer"
    newer.mkdir()
    for name in ("summary.json", "config.yaml"):
        (newer / name).write_bytes((folder / "a" / name).read_bytes())
    manifest = json.loads((folder / "a" / "manifest.json").read_text())
    (newer / "manifest.json").write_text(json.dumps({**manifest, "npusim_version": "99.0.0"}))
    report = npusim("report", newer, cwd=tmp_path)
    assert report.returncode == 0 and "vector_add.py on a2" in report.stdout
    assert f"npusim: warning: {newer} was written by npusim 99.0.0, newer than this npusim" in report.stderr
    (newer / "summary.json").write_text(json.dumps({**json.loads((folder / "a" / "summary.json").read_text()), "ops": None}))
    broken = npusim("report", newer, cwd=tmp_path)
    assert broken.returncode == 2 and "npusim 99.0.0 wrote it, newer than this npusim" in broken.stderr and "update npusim" in broken.stderr
