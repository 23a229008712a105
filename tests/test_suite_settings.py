"""The suite's own settings: its property tests are repeatable unless asked to explore; a test's
processes do not outlive it."""

import os

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

drawn: list[int] = []


@pytest.mark.skipif(os.environ.get("HYPOTHESIS_PROFILE", "repeatable") != "repeatable", reason="an exploring run draws at random")
def test_property_tests_are_seeded_from_the_test_and_keep_no_database():
    assert settings.default.derandomize is True
    assert settings.default.database is None


@pytest.mark.skipif(os.environ.get("HYPOTHESIS_PROFILE", "repeatable") != "repeatable", reason="an exploring run draws at random")
def test_the_same_examples_are_drawn_on_every_run():
    @settings(max_examples=20)
    @given(st.integers())
    def draw(value):
        drawn.append(value)

    draw()
    first = list(drawn)
    drawn.clear()
    draw()
    assert drawn == first and len(set(first)) > 1


def test_a_test_that_fails_leaves_no_process_it_started():
    """The ``started`` fixture's groups: a process looping forever and one it started are killed
    when the test's block ends with an error."""
    import signal
    import subprocess
    import sys
    import time
    from pathlib import Path

    from tests.conftest import process_groups

    spins = "import subprocess, sys, time\nsubprocess.Popen([sys.executable, '-c', 'while True: pass'])\nprint('up', flush=True)\nwhile True: pass\n"
    with pytest.raises(AssertionError), process_groups() as start:
        parent = start([sys.executable, "-c", spins], stdout=subprocess.PIPE, text=True)
        assert parent.stdout.readline() == "up\n"
        group = parent.pid
        raise AssertionError("a test failing while its process spins")
    deadline = time.monotonic() + 30
    alive = None
    while time.monotonic() < deadline:
        alive = [p for p in Path("/proc").iterdir() if p.name.isdigit() and _in_group(p, group)]
        if not alive:
            break
        time.sleep(0.05)
    assert alive == [] and parent.returncode == -signal.SIGKILL


def _in_group(proc, group: int) -> bool:
    """Whether the process of ``proc`` (its /proc folder) runs in process group ``group``."""
    try:
        fields = (proc / "stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return False
    return int(fields[2]) == group and fields[0] != "Z"
