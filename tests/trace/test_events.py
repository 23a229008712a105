"""``result.events``: the events as a pandas DataFrame, and a clear error without pandas."""

import sys

import numpy as np
import pytest

import npusim
from npusim import isa
from npusim.errors import UsageError
from npusim.trace.events import EVENT_COLUMNS
from tests.conftest import events_of


def small_run():
    with npusim.session("a2", data=False) as s:
        x = npusim.empty(4096, np.float16)
        k = isa.Kernel("scale", die=0)
        for core in range(2):
            p = k.aiv(core)
            ub = p.alloc(2048, np.float16)
            with p.tile(core):
                p.copy(ub, isa.gm(x, core * 2048))
                p.set_flag("MTE2", "VECTOR", 0)
                p.wait_flag("MTE2", "VECTOR", 0)
                p.muls(ub, ub, 2.0)
        k.launch()
        other = isa.Kernel("other", die=0)
        other.aiv(0).scalar(3)
        other.launch()
    return s.result


def test_one_row_per_event_with_the_documented_columns():
    pytest.importorskip("pandas", reason="pandas is in the test extra: pip install -e '.[test]'")
    result = small_run()
    frame = result.events
    assert tuple(frame.columns) == EVENT_COLUMNS
    expected = events_of(result)
    assert len(frame) == len(expected)
    for row, event in zip(frame.itertuples(index=False), expected):
        assert (row.die, row.unit, row.lane, row.name, row.bytes, row.op, row.tile) == (
            event["die"], event["unit"], event["lane"], event["name"], event["bytes"], event["op"], event["tile"])
        assert row.start_us == event["start"] / 1e6 and row.end_us == event["end"] / 1e6
        assert row.duration_us == pytest.approx(row.end_us - row.start_us)
    assert set(frame["op_name"]) == {"scale", "other"}
    assert frame.groupby("lane", observed=True).size().to_dict() == {"MTE2": 4, "SCALAR": 1, "VECTOR": 4}  # per core: copy + set_flag; wait_flag + muls


def test_without_pandas_the_error_says_what_to_install(monkeypatch):
    result = small_run()
    monkeypatch.setitem(sys.modules, "pandas", None)
    with pytest.raises(UsageError, match=r"pip install 'npusim\[analysis\]'"):
        _ = result.events
