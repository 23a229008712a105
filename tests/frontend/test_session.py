"""Sessions: results, determinism, timing-only mode, failures."""

import re
import runpy
from pathlib import Path

import numpy as np
import pytest

import npusim
from npusim.errors import ConfigError, UsageError
from npusim.frontend.workload import run_workload_file

ROOT = Path(__file__).resolve().parents[2]
VECTOR_ADD = runpy.run_path(str(ROOT / "examples" / "vector_add.py"), run_name="vector_add")


def simulate_vector_add(data: bool, cores: int = 8):
    with npusim.session("a2", data=data) as s:
        n = cores * 2 * VECTOR_ADD["TILE"]
        x = npusim.tensor(np.ones(n, np.float16))
        y = npusim.tensor(np.full(n, 2.0, np.float16))
        z = npusim.zeros(n, np.float16)
        VECTOR_ADD["build_vector_add"](x, y, z, cores=cores).launch()
        if data:
            assert np.all(z.numpy() == 3.0)
    return s.result


def test_result_has_time_summary_and_events():
    result = simulate_vector_add(True)
    assert result.status == "ok" and result.simulated_ps > 0
    assert result.summary["simulated_time_us"] == result.simulated_ps / 1e6
    assert len(result.recorder) == result.summary["events"] > 0


def timings(result):
    """Every event's (track, name, start, end), sorted: the timing of a run, whatever order the
    events were recorded in (pipes run ahead of the clock further when there is no data)."""
    c = result.recorder.columns()
    return sorted(zip(c["track"].tolist(), c["name"].tolist(), c["start_ps"].tolist(), c["end_ps"].tolist()))


def test_no_data_does_not_change_timing():
    with_data, without = simulate_vector_add(True), simulate_vector_add(False)
    assert with_data.simulated_ps == without.simulated_ps
    assert timings(with_data) == timings(without)


def test_a_failing_workload_marks_the_result_failed():
    with pytest.raises(ZeroDivisionError):
        with npusim.session("a2", data=False) as s:
            _ = 1 / 0
    assert s.result.status == "failed" and "ZeroDivisionError" in s.result.error


def test_config_errors_surface_before_anything_runs():
    with pytest.raises(ConfigError, match="die.hbm.bandwidth"):
        with npusim.session("a2", overrides=["die.hbm.bandwidth=12"]):
            pass


@pytest.mark.parametrize("seed", [-1, 2**32, 1.5, True, "7"])
def test_a_seed_numpy_does_not_take_is_a_usage_error_before_anything_is_built(seed):
    with pytest.raises(UsageError, match=rf"^seed {re.escape(repr(seed))}: give a whole number from 0 to 4294967295 \(it seeds numpy's random generator\)$"):
        with npusim.session("a2", data=False, seed=seed):
            pass


def test_seed_makes_random_workloads_reproducible():
    draws = []
    for _ in range(2):
        with npusim.session("a2", data=False, seed=7):
            draws.append(np.random.rand(3).tolist())
    assert draws[0] == draws[1]


def test_a_session_raises_the_young_gc_threshold_and_restores_the_callers_even_on_failure():
    import gc

    from npusim.frontend.session import GC_YOUNG_THRESHOLD

    before = gc.get_threshold()
    try:
        gc.set_threshold(500, 7, 9)
        with npusim.session("a2", data=False):
            assert gc.get_threshold() == (GC_YOUNG_THRESHOLD, 7, 9)
            with npusim.session("a2", data=False):  # nested: the outer session's setting comes back
                pass
            assert gc.get_threshold() == (GC_YOUNG_THRESHOLD, 7, 9)
        assert gc.get_threshold() == (500, 7, 9)
        with pytest.raises(ZeroDivisionError):
            with npusim.session("a2", data=False):
                _ = 1 / 0
        assert gc.get_threshold() == (500, 7, 9)
        gc.set_threshold(2 * GC_YOUNG_THRESHOLD, 7, 9)  # a caller's higher threshold is kept
        with npusim.session("a2", data=False):
            assert gc.get_threshold() == (2 * GC_YOUNG_THRESHOLD, 7, 9)
    finally:
        gc.set_threshold(*before)


def test_a_session_freezes_what_it_keeps_alive_and_leaves_the_callers_collector_as_it_was(monkeypatch):
    import gc

    import npusim.frontend.session as session_module

    monkeypatch.setattr(session_module, "PROGRESS_STEPS", 16)  # a look every 16 steps: vector_add reaches several
    before = (gc.isenabled(), gc.get_threshold())
    assert gc.get_freeze_count() == 0
    with npusim.session("a2", data=False) as s:
        assert gc.get_freeze_count() == 0  # nothing before the stepping loop's first look
        run_workload_file(ROOT / "examples" / "vector_add.py")
        s.synchronize()
        assert gc.get_freeze_count() > 0  # what the run kept, at its looks
    assert gc.get_freeze_count() == 0 and (gc.isenabled(), gc.get_threshold()) == before
    with pytest.raises(ZeroDivisionError):
        with npusim.session("a2", data=False):
            _ = 1 / 0
    assert gc.get_freeze_count() == 0 and (gc.isenabled(), gc.get_threshold()) == before


def test_a_run_too_short_for_a_look_freezes_nothing_and_collects_nothing(monkeypatch):
    """The whole-heap collection before a session's first freeze is paid only by runs long enough
    to freeze: a process that runs many small sessions (a test suite) does not walk its heap each."""
    import gc

    import npusim.frontend.session as session_module

    collections = []
    monkeypatch.setattr(session_module.gc, "collect", lambda *args: collections.append(args))
    monkeypatch.setattr(session_module, "_unfrozen_runs", True)  # as after a long run
    monkeypatch.setattr(session_module, "PROGRESS_STEPS", 10**9)  # no look before the run ends
    with npusim.session("a2", data=False) as s:
        run_workload_file(ROOT / "examples" / "vector_add.py")
        s.synchronize()
        assert gc.get_freeze_count() == 0 and not s.froze_survivors
    assert collections == [] and session_module._unfrozen_runs


class Cycle:
    """A reference cycle: freed by the collector only, never by its references going."""

    def __init__(self) -> None:
        self.me = self


def test_the_cycles_a_run_left_are_collected_as_the_next_session_starts(monkeypatch):
    """gc.freeze freezes garbage too: a reference cycle that died in a run is frozen at the next
    look and unfrozen as the session ends, uncollected; the next session collects it before its
    first freeze, so the runs' garbage does not pile up in a process that runs one after another."""
    import gc
    import weakref

    import npusim.frontend.session as session_module

    monkeypatch.setattr(session_module, "PROGRESS_STEPS", 16)  # long enough to freeze
    monkeypatch.setattr(session_module, "_unfrozen_runs", False)  # as in a fresh process
    gc.disable()  # no collection but the sessions' own
    try:
        with npusim.session("a2", data=False) as s:
            dead = Cycle()
            died = weakref.ref(dead)
            del dead
            run_workload_file(ROOT / "examples" / "vector_add.py")
            s.synchronize()
            assert died() is not None
        assert died() is not None  # unfrozen as the session ended, not collected
        with npusim.session("a2", data=False) as s:
            assert died() is not None  # nothing collected before the run freezes
            run_workload_file(ROOT / "examples" / "vector_add.py")
            s.synchronize()
            assert died() is None
    finally:
        gc.enable()


def test_a_session_freezes_nothing_when_the_caller_froze_objects_of_its_own():
    import gc

    gc.freeze()
    try:
        mine = gc.get_freeze_count()  # frozen objects still die as their references go: it can only fall
        with npusim.session("a2", data=False) as s:
            run_workload_file(ROOT / "examples" / "vector_add.py")
            s.synchronize()
            assert gc.get_freeze_count() <= mine
            with npusim.session("a2", data=False):  # nested in the same way
                assert gc.get_freeze_count() <= mine
        assert 0 < gc.get_freeze_count() <= mine
    finally:
        gc.unfreeze()


def test_a_network_quantum_is_recorded_and_moves_the_time_by_little():
    exact = npusim.simulate("a2", ROOT / "examples" / "vector_add.py", data=False)
    approximate = npusim.simulate("a2", ROOT / "examples" / "vector_add.py", data=False, network_quantum="10ns")
    assert "network_quantum" not in exact.summary and approximate.summary["network_quantum"] == "10ns"
    assert abs(approximate.simulated_ps - exact.simulated_ps) / exact.simulated_ps < 0.02  # each core streams its copies in a chain: a quantum at most per copy


@pytest.mark.parametrize("quantum, message", [("10", "missing unit"), ("0.1ps", "rounds to 0"), ("3 GB", "a time is needed")])
def test_a_bad_network_quantum_is_refused(quantum, message):
    with pytest.raises(npusim.errors.UsageError, match=message):
        with npusim.session("a2", network_quantum=quantum):
            pass


def test_the_progress_line_appears_after_a_second_and_goes_away(monkeypatch):
    import rich.progress

    from npusim.frontend import session as session_module

    clock = iter([0.0, 0.5, 1.2, 1.3, 2.0])
    monkeypatch.setattr(session_module.time, "perf_counter", lambda: next(clock))
    shown = []
    progress = session_module.RunProgress()  # starts at 0.0
    monkeypatch.setattr(rich.progress, "Progress", lambda *a, **k: FakeBar(shown))  # imported when the line is first shown
    progress.update(5_000_000, 10)  # 0.5 s: too early
    progress.update(6_000_000, 20)  # 1.2 s: shown
    progress.update(7_000_000, 30)  # 1.3 s: under half a second since: not refreshed
    progress.update(9_000_000, 40)  # 2.0 s: refreshed
    progress.stop()
    assert shown == ["simulated 6.000 us, 20 events, wall 1.2 s", "simulated 9.000 us, 40 events, wall 2.0 s", "stopped"]


class FakeBar:
    def __init__(self, shown):
        self.shown = shown

    def start(self):
        pass

    def add_task(self, description):
        return 0

    def update(self, task, description):
        self.shown.append(description)

    def stop(self):
        self.shown.append("stopped")


def test_a_run_that_stops_advancing_in_time_ends_with_a_report_of_what_loops():
    from npusim.errors import NoProgressError

    def polls_forever(env):
        while True:
            yield env.timeout(0)

    with pytest.raises(NoProgressError) as error, npusim.session("a2") as s:
        s.still_events = 50_000
        s.track(s.env.process(polls_forever(s.env)))
    report = str(error.value)
    assert report.startswith("no progress at 0.000 us: 50,000 events passed without simulated time advancing: work loops in zero time.")
    assert "due now, by what they run: process " in report and "polls_forever (1)" in report
    assert s.result.status == "failed" and "NoProgressError" in s.result.error


def test_the_time_bound_is_not_called_a_deadlock_and_names_the_slowest_transfer():
    from npusim import isa
    from npusim.errors import DeadlockError, TimeBoundError

    with pytest.raises(TimeBoundError) as error, npusim.session("a2", time_limit_us=2.0, overrides=["die.hbm.bandwidth=1 GB/s"]):
        x = npusim.tensor(np.ones(1 << 16, np.float16))
        kernel = isa.Kernel("slow", die=0)
        p = kernel.aiv(0)
        p.copy(p.alloc(1 << 16, np.float16), isa.gm(x))
        kernel.launch()
    assert not isinstance(error.value, DeadlockError)
    report = str(error.value)
    assert report.startswith("time bound reached at ")
    assert "the slowest transfer in flight: 1 transfer limited by die0 HBM, at 1 GB/s each" in report


def ticking_clock(monkeypatch):
    """Make every look at the wall clock one second later than the one before."""
    import time

    ticks = iter(range(10**9))
    monkeypatch.setattr(time, "perf_counter", lambda: float(next(ticks)))


def test_a_wall_clock_limit_stops_the_simulation_from_inside(monkeypatch):
    from npusim.errors import WallTimeError

    ticking_clock(monkeypatch)  # the session starts at 0 s; the look before stepping at 1 s, the first inside the steps at 2 s
    with pytest.raises(WallTimeError, match=r"went past its wall-clock limit of 1.5 s at [\d.]+ us simulated") as error:
        with npusim.session("a2", data=False, wall_limit_s=1.5) as s:
            n = 48 * 16 * VECTOR_ADD["TILE"]  # well over the 2048 steps between two looks at the clock
            VECTOR_ADD["build_vector_add"](npusim.zeros(n, np.float16), npusim.zeros(n, np.float16), npusim.zeros(n, np.float16), cores=48).launch()
    assert s.env.now > 0 and "at 0.000 us" not in str(error.value)  # stopped while simulating, not before


def test_a_wall_clock_limit_stops_a_workload_of_many_short_synchronisations(monkeypatch):
    from npusim.errors import WallTimeError

    ticking_clock(monkeypatch)
    synchronised = 0
    with pytest.raises(WallTimeError, match="went past its wall-clock limit of 10 s"):
        with npusim.session("a2", data=False, wall_limit_s=10):
            x = npusim.zeros(256, np.float16)
            for _ in range(1000):  # each far under the 2048 steps between two looks inside the stepping loop
                VECTOR_ADD["build_vector_add"](x, x, x, cores=1, tile=256).launch()
                npusim.synchronize()
                synchronised += 1
    assert synchronised < 20
