"""The summary: its grouping of events by key (the distinct keys, each event's row and the counts,
as np.unique gives them), and its critical path found by a forked copy."""

import os
import threading
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import npusim
from npusim import files
from npusim.files import FORK
from npusim.frontend.workload import run_workload_file
from npusim.trace import summary
from npusim.trace.summary import _distinct


@given(hnp.arrays(st.sampled_from([np.int32, np.int64]), st.integers(0, 300),
                  elements=st.integers(0, 40) | st.integers(-2, 2**31 - 1) | st.integers(0, 1000)))
def test_distinct_keys_are_np_uniques(keys):
    unique, inverse, counts = _distinct(keys)
    expected = np.unique(keys, return_inverse=True, return_counts=True)
    assert unique.dtype == keys.dtype and all(np.array_equal(got, want) for got, want in zip((unique, inverse, counts), expected))


@pytest.fixture
def forkable(monkeypatch):
    """This process as if it could fork (as tests/test_files.py's): fork and two CPUs needed."""
    if not hasattr(os, "fork") or len(os.sched_getaffinity(0)) < 2:
        pytest.skip("needs fork and two CPUs")
    monkeypatch.setenv(FORK, "always")
    monkeypatch.setattr(threading, "active_count", lambda: 1)
    monkeypatch.setattr(files, "memory_for_a_copy", lambda: True)


def _allgather_result():
    with npusim.session("a3", data=False, params={"n_pes": 4}) as session:
        run_workload_file(Path(__file__).parents[2] / "examples" / "shmem_allgather.py")
    return session


def test_the_critical_path_found_by_a_forked_copy_is_the_one_found_here(forkable, monkeypatch):
    """A long run's bottlenecks section is found by a forked copy while the tables are made: the
    same summary (here every run counts as long)."""
    session = _allgather_result()
    record, config = session.result.record, session.config
    here = summary.summarize(record, config, wall_seconds=1.0)
    monkeypatch.setattr(summary, "PATH_ON_TWO_CORES_MIN_EVENTS", 0)
    started = []
    fork = summary.Forked

    def noting(work, what):
        started.append(what)
        return fork(work, what)

    monkeypatch.setattr(summary, "Forked", noting)
    assert summary.summarize(record, config, wall_seconds=1.0) == here
    assert started == ["finding the critical path"]


def test_a_failure_of_the_forked_critical_path_is_raised_by_the_summary(forkable, monkeypatch):
    session = _allgather_result()
    monkeypatch.setattr(summary, "PATH_ON_TWO_CORES_MIN_EVENTS", 0)

    def broken(record, *, low=None):
        raise ValueError("no path")

    monkeypatch.setattr(summary, "bottlenecks", broken)
    with pytest.raises(ValueError, match="no path") as raised:
        summary.summarize(session.result.record, session.config, wall_seconds=1.0)
    assert "a forked copy of this one" in "".join(getattr(raised.value, "__notes__", []))  # raised there, not here
