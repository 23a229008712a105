"""Shared helpers of the test suite, and its hypothesis profiles."""

import contextlib
import os
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import settings

import npusim
from npusim.engine import CHOICE, ENGINE_VARIABLE

# The suite is deterministic: every property test draws the same examples on every run and every
# machine (seeded from the test itself, no example database), so a failure CI meets is the one a
# developer reproduces. ``make explore`` (HYPOTHESIS_PROFILE=explore) draws fresh random examples,
# keeps the failures it finds in .hypothesis/ and prints how to pin one with @reproduce_failure;
# pin a failure found that way as an @example of its test.
settings.register_profile("repeatable", derandomize=True, database=None)
settings.register_profile("explore", derandomize=False, print_blob=True)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "repeatable"))


@pytest.hookimpl(tryfirst=True)
def pytest_pyfunc_call(pyfuncitem: pytest.Function) -> bool | None:
    """A test marked ``interpreted`` replaces methods of the model's classes to watch them (a
    monkeypatch on ``CoreTask.start`` ...): compiled code calls its own compiled methods directly
    and never sees the replacement. Where the engine runs compiled, such a test runs in a child
    pytest on the interpreted engine (NPUSIM_ENGINE=interpreted: the same code, whose results
    the golden digests hold equal to the compiled engine's), and passes or fails as it does there."""
    if pyfuncitem.get_closest_marker("interpreted") is None or CHOICE.folder is None:
        return None
    root = Path(__file__).resolve().parent.parent
    child = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist", pyfuncitem.nodeid],
                           cwd=root, env={**os.environ, ENGINE_VARIABLE: "interpreted"}, capture_output=True, text=True, timeout=600)
    if child.returncode != 0:
        pytest.fail(f"on the interpreted engine (NPUSIM_ENGINE=interpreted):\n{child.stdout}{child.stderr}", pytrace=False)
    return True


@contextlib.contextmanager
def process_groups():
    """``start(*args, **kwargs)`` starts a process as ``subprocess.Popen`` does, in a process group
    (a session) of its own. However the block ends (a failed assertion, an exception, a timeout),
    every process of each such group still there is killed and reaped, pipes closed: nothing is
    left behind (a workload looping forever, a sweep's fork server and workers). Ctrl-C at a
    terminal is ``os.killpg(process.pid, signal.SIGINT)``."""
    processes: list[subprocess.Popen] = []

    def start(*args, **kwargs) -> subprocess.Popen:
        process = subprocess.Popen(*args, start_new_session=True, **kwargs)
        processes.append(process)
        return process

    try:
        yield start
    finally:
        for process in processes:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(process.pid, signal.SIGKILL)  # the group: the process and whatever it started
            with contextlib.suppress(ProcessLookupError):
                process.kill()  # a leader that left its group
            with contextlib.suppress(subprocess.TimeoutExpired, ValueError, OSError):
                process.communicate(timeout=60)  # reaped, its pipes drained and closed


@pytest.fixture
def started():
    """:func:`process_groups` for one test: every test that starts a process it may not wait for
    (a run or sweep it interrupts) starts it with this."""
    with process_groups() as start:
        yield start


@pytest.fixture
def pypto_launches(monkeypatch) -> list:
    """The PyPTO launches (``npusim.runtime.launch.ShmemLaunch``) made while the test runs. Its class
    is compiled with the engine, so the frontend's maker of launches is watched, not its ``__init__``."""
    from npusim.frontend.pypto import runtime as pypto_runtime

    made: list = []
    make = pypto_runtime.ShmemLaunch

    def recording(*args, **kwargs):
        made.append(make(*args, **kwargs))
        return made[-1]

    monkeypatch.setattr(pypto_runtime, "ShmemLaunch", recording)
    return made


@pytest.fixture
def a2_session():
    """A session on the built-in A2 config, with real data."""
    with npusim.session("a2") as s:
        yield s


def cycles(session, n: float) -> int:
    """``n`` AI-core cycles in ps for the session's config."""
    return int(round(n * 1e12 / session.config.spec.die.clock.hz))


def events_of(result):
    """The recorded events as a list of dicts (lane label, name, start, end, bytes, op, tile)."""
    recorder = result.recorder
    c = recorder.columns()
    rows = []
    for i in range(len(recorder)):
        track = recorder.tracks[c["track"][i]]
        rows.append({"die": track.die, "unit": track.unit, "lane": track.lane, "name": recorder.names[c["name"][i]],
                     "start": int(c["start_ps"][i]), "end": int(c["end_ps"][i]), "bytes": int(c["bytes"][i]),
                     "op": int(c["op"][i]), "tile": int(c["tile"][i])})
    return rows


__all__ = ["cycles", "events_of", "np"]
