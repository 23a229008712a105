"""The results file: append-only rows, a torn last line dropped on resume, refusals, typed reading."""

import math
import os

import pytest

from npusim.analysis.points import OUTCOME_COLUMNS
from npusim.analysis.results import ResultsFile, columns_for, typed_rows
from npusim.errors import UsageError

COLUMNS = columns_for(["param.tile"])


def outcome(status="ok", simulated_us=1.5, error=""):
    row = dict.fromkeys(OUTCOME_COLUMNS, 0.25)
    row.update(status=status, simulated_us=simulated_us if status == "ok" else math.nan, bottleneck="die0 HBM", error_type="", error=error)
    return row


def test_rows_are_appended_and_read_back_exactly(tmp_path):
    path = tmp_path / "results.csv"
    results, recorded = ResultsFile.open(path, COLUMNS, resume=False)
    assert recorded == {}
    results.append({"key": "a", "param.tile": "8", **outcome(simulated_us=0.1 + 0.2)})
    results.append({"key": "b", "param.tile": "16", **outcome("failed", error="first line\nsecond line")})
    _, recorded = ResultsFile.open(path, COLUMNS, resume=True)
    assert set(recorded) == {"a", "b"}
    assert float(recorded["a"]["simulated_us"]) == 0.1 + 0.2
    assert recorded["b"]["simulated_us"] == "" and recorded["b"]["error"] == "first line | second line"
    assert path.read_text().count("\n") == 3  # header and two rows, one line each


def test_the_file_is_made_with_its_first_row_in_one_write(tmp_path, monkeypatch):
    """The header and the first row reach the file in one write, so a sweep stopped (Ctrl-C,
    SIGTERM) as its first point finishes leaves either no file or that point's row, never a header
    alone (the executors' stop tests wait for the file, then stop the sweep)."""
    path = tmp_path / "out" / "results.csv"
    results, _ = ResultsFile.open(path, COLUMNS, resume=False)
    writes = []
    real_write = os.write
    monkeypatch.setattr(os, "write", lambda fd, data: writes.append(data) or real_write(fd, data))
    results.append({"key": "a", "param.tile": "8", **outcome()})
    assert len(writes) == 1 and writes[0].count(b"\n") == 2
    results.append({"key": "b", "param.tile": "16", **outcome()})
    assert len(writes) == 2 and writes[1].count(b"\n") == 1
    assert set(ResultsFile.open(path, COLUMNS, resume=True)[1]) == {"a", "b"}


def test_the_last_row_of_a_key_counts(tmp_path):
    path = tmp_path / "results.csv"
    results, _ = ResultsFile.open(path, COLUMNS, resume=False)
    results.append({"key": "a", "param.tile": "8", **outcome("failed")})
    results.append({"key": "a", "param.tile": "8", **outcome("ok")})
    assert ResultsFile.open(path, COLUMNS, resume=True)[1]["a"]["status"] == "ok"


def test_a_torn_last_line_is_dropped_on_resume(tmp_path):
    path = tmp_path / "results.csv"
    results, _ = ResultsFile.open(path, COLUMNS, resume=False)
    results.append({"key": "a", "param.tile": "8", **outcome()})
    whole = path.read_bytes()
    path.write_bytes(whole + b"b,16,ok,2.")  # interrupted in the middle of a row
    _, recorded = ResultsFile.open(path, COLUMNS, resume=True)
    assert set(recorded) == {"a"} and path.read_bytes() == whole


def test_the_file_is_created_by_its_first_row(tmp_path):
    path = tmp_path / "out" / "results.csv"
    results, _ = ResultsFile.open(path, COLUMNS, resume=False)
    assert not path.exists()
    results.append({"key": "a", "param.tile": "8", **outcome()})
    assert path.read_text().splitlines()[0] == ",".join(COLUMNS)


def test_an_existing_file_needs_resume_and_the_same_columns(tmp_path):
    path = tmp_path / "results.csv"
    ResultsFile.open(path, COLUMNS, resume=False)[0].append({"key": "a", "param.tile": "8", **outcome()})
    with pytest.raises(UsageError, match="holds the results of an earlier sweep; add --resume"):
        ResultsFile.open(path, COLUMNS, resume=False)
    with pytest.raises(UsageError, match="written by a different sweep"):
        ResultsFile.open(path, columns_for(["param.cores"]), resume=True)


def test_a_damaged_row_is_named_by_its_line(tmp_path):
    path = tmp_path / "results.csv"
    path.write_text(",".join(COLUMNS) + "\n")
    with open(path, "a") as handle:
        handle.write("a,8,ok\n")
    with pytest.raises(UsageError, match=r"results.csv:2: 3 fields where the header has"):
        ResultsFile.open(path, COLUMNS, resume=True)


def test_typed_rows_give_floats_and_numeric_axes():
    texts = [{**dict.fromkeys(COLUMNS, ""), "key": k, "param.tile": tile, "status": "ok", "simulated_us": us}
             for k, tile, us in (("a", "8", "1.5"), ("b", "16", ""))]
    rows = typed_rows(texts, ["param.tile"])
    assert [row["param.tile"] for row in rows] == [8, 16]
    assert rows[0]["simulated_us"] == 1.5 and math.isnan(rows[1]["simulated_us"])
    mixed = typed_rows([{**texts[0], "param.tile": "1.6TB/s"}, {**texts[1], "param.tile": "2"}], ["param.tile"])
    assert [row["param.tile"] for row in mixed] == ["1.6TB/s", "2"]


@pytest.mark.parametrize("fault", ["short", "error"])
def test_a_row_the_disk_has_no_room_for_is_taken_back_whole(tmp_path, monkeypatch, fault):
    """A full disk within a line (a short write, or ENOSPC after part of it got there) leaves the
    rows before it whole and no part of the line: an OutputError saying so."""
    import errno
    import os

    import npusim.analysis.results as results_module
    from npusim.errors import OutputError

    path = tmp_path / "results.csv"
    results, _ = ResultsFile.open(path, COLUMNS, resume=False)
    results.append({"key": "a", "param.tile": "8", **outcome()})
    whole = path.read_bytes()
    real_write = os.write

    def full_disk(descriptor, data):
        written = real_write(descriptor, data[: len(data) // 2])
        if fault == "error":
            raise OSError(errno.ENOSPC, "No space left on device")
        return written

    monkeypatch.setattr(results_module.os, "write", full_disk)
    with pytest.raises(OutputError, match=r"No space left on device; the rows before it are whole: free some space, then run the same "
                                          r"command with --resume"):
        results.append({"key": "b", "param.tile": "16", **outcome()})
    assert path.read_bytes() == whole
