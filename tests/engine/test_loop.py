"""npusim.engine.loop: the one module that uses SimPy's internals. The layout it relies on is
checked against the installed SimPy, so an upgrade that changes it fails here first, and its
Environment against SimPy's own."""

import contextlib
import gc
import traceback
import weakref
from functools import partial
from importlib.metadata import version

import numpy as np
import pytest
import simpy
from hypothesis import given
from hypothesis import strategies as st
from simpy.events import NORMAL, URGENT

from npusim.engine.loop import (
    LOOK_STEPS,
    Environment,
    EventQueue,
    Stop,
    clock,
    due_now,
    next_event_ps,
    queued_events,
    run_process,
    run_until,
    schedule_stamp,
    start_process,
    succeed_at,
)
from npusim.errors import WorkloadError


def test_the_installed_simpy_has_the_layout_the_loop_relies_on():
    """Every event SimPy makes goes into the queue through ``Environment.schedule`` (which the
    engine's Environment replaces) with the priorities the queue key has room for; the clock, the
    counter of event ids and the outcome fields are where the loop reads them."""
    assert version("simpy").split(".")[:2] == ["4", "1"]  # the versions pyproject.toml pins
    scheduled = []

    class Watched(simpy.Environment):
        def schedule(self, event, priority=NORMAL, delay=0):
            scheduled.append((type(event).__name__, priority, delay))
            super().schedule(event, priority, delay)

    env = Watched()
    timeout = env.timeout(5, "value")
    now = env.event()
    now.succeed()

    def nothing():
        yield env.timeout(0)

    process = env.process(nothing())  # a process starts with an URGENT initialisation event
    assert scheduled == [("Timeout", NORMAL, 5), ("Event", NORMAL, 0), ("Initialize", URGENT, 0)]
    assert len(env._queue) == 3 and process.is_alive
    assert isinstance(next(env._eid), int)
    assert timeout._ok is True and timeout._value == "value" and env._now == 0 == clock(env)
    failed = env.event()
    failed.fail(RuntimeError("x"))
    failed.defused = True
    assert failed._ok is False and failed._defused is True
    env.run(until=3)  # the bound is an URGENT event; the StopSimulation it raises puts it back at priority -1
    env.run()
    assert clock(env) == env.now == 5
    assert {priority for _, priority, _ in scheduled} == {-1, URGENT, NORMAL}
    assert (URGENT, NORMAL) == (0, 1)  # engine.loop's own constants of them


@given(st.lists(st.tuples(st.integers(0, 2**50), st.sampled_from([-1, URGENT, NORMAL])), min_size=1, max_size=60))
def test_the_queue_gives_events_in_simpys_order(scheduled):
    """Events put into the queue at any times and priorities come out by time, then priority,
    then the order they were scheduled in (SimPy's keys)."""
    env = Environment()
    events = []
    for delay, priority in scheduled:
        event = env.event()
        event._ok, event._value = True, None  # triggered, as Event.succeed leaves it before it schedules
        env.schedule(event, priority, delay)
        events.append(event)
    expected = [events[index] for _, _, index in sorted((delay, priority, index) for index, (delay, priority) in enumerate(scheduled))]
    processed = []
    for event in events:
        event.callbacks.append(processed.append)
    while env.peek() != simpy.core.Infinity:
        env.step()
    assert processed == expected


def _scenario(env, plan, log):
    """Events of every kind SimPy makes, driven by ``plan`` (a list of small ints): timeouts,
    succeeds now, processes started by processes at the same instant, failures handled; runs with
    bounds (``run(until=...)``, whose StopSimulation reschedules its event) and to the end."""

    def worker(name, steps):
        log.append((name, "start", env.now))
        for delay in steps:
            if delay == 0:
                now = env.event()
                now.succeed(name)
                log.append((name, "now", (yield now), env.now))
            elif delay == 1:
                child = env.process(worker(f"{name}.c", [2]))
                log.append((name, "child", (yield child), env.now))
            elif delay == 2:
                bad = env.event()
                bad.fail(KeyError(name))
                try:
                    yield bad
                except KeyError:
                    log.append((name, "handled", env.now))
            else:
                yield env.timeout(delay - 2)
                log.append((name, "slept", env.now))
        return name

    for index, first in enumerate(plan):
        env.process(worker(f"p{index}", plan[index:index + 4]))
        env.timeout(first).callbacks.append(lambda event, index=index: log.append(("timeout", index, env.now)))
    env.run(until=3)
    log.append(("bound", env.now))
    env.run(until=env.timeout(4))
    env.run()
    log.append(("end", env.now))


@given(st.lists(st.integers(0, 6), min_size=1, max_size=12))
def test_the_engines_environment_orders_events_as_simpys(plan):
    """The engine's Environment (its own queue entries) processes every event at the moment and in
    the order SimPy's own environment does."""
    logs = []
    for environment in (simpy.Environment, Environment):
        log: list = []
        _scenario(environment(), plan, log)
        logs.append(log)
    assert logs[0] == logs[1]


def test_the_engines_environment_takes_delays_of_whole_picoseconds_only():
    """Simulated time is integer ps: an integral delay of another type (SimPy's ``run(until=...)``
    makes a float of it, numpy ints) is taken as its int; a fractional or non-numeric one is refused
    with an error that says so, compiled and interpreted alike."""
    env = Environment()
    env.timeout(3.0)
    env.timeout(np.int64(4))
    env.run(until=2)
    assert env.now == 2 and type(env.now) is int
    env.run()
    assert env.now == 4 and type(env.now) is int
    for bad in (1.5, float("nan"), float("inf")):
        with pytest.raises(WorkloadError, match="whole picoseconds"):
            env.timeout(bad)
    with pytest.raises(WorkloadError, match="whole picoseconds"):
        env.schedule(env.event(), NORMAL, "3")


def test_the_engines_environment_steps_as_simpys():
    env = Environment()
    with pytest.raises(simpy.core.EmptySchedule):
        env.step()
    assert env.peek() == simpy.core.Infinity
    env.timeout(4)
    assert env.peek() == 4 == next_event_ps(env)
    bad = env.event()
    bad.fail(ValueError("unhandled"))
    with pytest.raises(ValueError, match="unhandled") as caught:
        env.step()
    assert caught.value.__cause__ is bad.value  # a copy, raised from the original, as SimPy's


def test_succeed_at_orders_events_as_simpy_does():
    """Events triggered by succeed_at interleave with SimPy's own timeouts and succeeds exactly
    as SimPy would order them: by time, then by the order they were scheduled."""
    env = Environment()
    seen = []

    def note(name):
        return lambda event: seen.append((name, env.now, event.value))

    ours_late, ours_now = simpy.Event(env), simpy.Event(env)
    succeed_at(env, ours_late, 5, "late")
    env.timeout(5, "timeout").callbacks.append(note("timeout"))
    ours_late.callbacks.append(note("ours_late"))
    theirs = env.event()
    theirs.succeed("now")
    theirs.callbacks.append(note("theirs"))
    succeed_at(env, ours_now, 0, 42)
    ours_now.callbacks.append(note("ours_now"))
    env.run()
    assert seen == [("theirs", 0, "now"), ("ours_now", 0, 42), ("ours_late", 5, "late"), ("timeout", 5, "timeout")]


def test_schedule_stamp_tells_whether_anything_was_scheduled_and_changes_no_order():
    """Two stamps one after the other differ by one; any event scheduled in between (SimPy's own or
    succeed_at's) makes them differ by more; the stamps taken leave the order of events SimPy's."""
    env = Environment()
    seen = []
    first = schedule_stamp(env)
    assert schedule_stamp(env) == first + 1
    env.timeout(3).callbacks.append(lambda _event: seen.append("a"))
    after_timeout = schedule_stamp(env)
    assert after_timeout > first + 2
    ours = simpy.Event(env)
    succeed_at(env, ours, 3, None)
    ours.callbacks.append(lambda _event: seen.append("b"))
    assert schedule_stamp(env) > after_timeout + 1
    env.timeout(3).callbacks.append(lambda _event: seen.append("c"))
    env.run()
    assert seen == ["a", "b", "c"]


def test_an_event_queue_orders_events_as_simpy_does_and_rearms_a_processed_timeout():
    """EventQueue holds the environment's own queue and event ids (made once per environment):
    what it triggers interleaves with SimPy's own events by time, then by the order scheduled; a
    re-armed timeout fires again with only the callback given, its value still None."""
    env = Environment()
    events = EventQueue(env)
    seen = []

    def note(name):
        return lambda event: seen.append((name, env.now, event.value))

    timer = env.timeout(2)
    timer.callbacks.append(lambda event: events.rearm(event, env.now + 3, note("timer again")))
    ours = simpy.Event(env)
    events.succeed(ours, 5, "ours")
    ours.callbacks.append(note("ours"))
    env.timeout(5, "theirs").callbacks.append(note("theirs"))
    now = simpy.Event(env)
    events.succeed(now, clock(env), 42)
    now.callbacks.append(note("now"))
    env.run()
    assert seen == [("now", 0, 42), ("ours", 5, "ours"), ("theirs", 5, "theirs"), ("timer again", 5, None)]
    assert timer.ok and timer.processed


def test_a_process_waiting_on_succeed_at_resumes_with_its_value():
    env = Environment()
    event = simpy.Event(env)
    got = []

    def waiter():
        got.append((yield event))
        got.append(env.now)

    env.process(waiter())
    succeed_at(env, event, 7, ("bottleneck", 3))
    env.run()
    assert got == [("bottleneck", 3), 7]


def test_run_until_says_why_it_stopped():
    env = Environment()
    target = env.timeout(10)
    assert run_until(env, target, 100) is Stop.DONE and env.now == 10
    assert run_until(env, env.event(), 100) is Stop.IDLE  # nothing queued: the event can never fire
    late = env.timeout(50)
    assert next_event_ps(env) == 60 and queued_events(env) == 1
    assert run_until(env, late, 40) is Stop.BOUND and env.now == 10
    assert run_until(env, late, 100) is Stop.DONE and env.now == 60 and next_event_ps(env) is None


def test_run_until_raises_a_failure_no_process_handled_and_not_a_handled_one():
    env = Environment()

    def failing():
        yield env.timeout(1)
        raise ValueError("broken kernel")

    def handling(child):
        with contextlib.suppress(ValueError):
            yield child

    handled = env.process(failing())
    waiter = env.process(handling(handled))
    assert run_until(env, waiter, 10) is Stop.DONE
    with pytest.raises(ValueError, match="broken kernel") as caught:
        run_until(env, env.process(failing()), 10)
    assert isinstance(caught.value.__cause__, ValueError)  # a copy, raised from the original


def test_run_until_calls_back_every_so_many_steps():
    env = Environment()
    for t in range(10):
        env.timeout(t)
    seen = []
    assert run_until(env, env.timeout(20), 100, every=lambda: seen.append(env.now), steps=4) is Stop.DONE
    assert seen == [3, 7]  # after the 4th and the 8th of the 11 steps


def spin(env, counter):
    """A process that loops in zero simulated time."""
    while True:
        counter.append(None)
        yield env.timeout(0)


def test_run_until_stops_work_that_loops_in_zero_time():
    env = Environment()
    env.timeout(5)
    counter = []
    env.process(spin(env, counter))
    assert run_until(env, env.event(), 10**9, still_events=10_000) is Stop.STILL
    assert env.now == 0 and 10_000 <= len(counter) <= 10_000 + 2 * LOOK_STEPS  # bounded work, counted in looks
    assert due_now(env) == [("process spin", 1)]


def test_many_events_at_one_instant_below_the_guard_are_not_stopped():
    env = Environment()
    for _ in range(3 * LOOK_STEPS):
        env.timeout(0)  # a busy instant: every core of many dies starting at once
    target = env.timeout(7)
    assert run_until(env, target, 100, still_events=4 * LOOK_STEPS) is Stop.DONE and env.now == 7
    for _ in range(3):  # instants that each stay below the guard, one after the other
        for _ in range(3 * LOOK_STEPS):
            env.timeout(1)
        env.timeout(2)
        assert run_until(env, env.timeout(2), 10**6, still_events=4 * LOOK_STEPS) is Stop.DONE


def _worker(env, log, name, fail_at=None):
    """A process that sleeps, waits on a failing event it handles, and returns (or raises)."""
    log.append((name, "start", env.now))
    yield env.timeout(2)
    bad = env.event()
    bad.fail(KeyError(name))
    try:
        yield bad
    except KeyError as error:
        log.append((name, "handled", str(error), env.now))
    done = env.event()
    done.succeed("already")
    done.callbacks.append(lambda _event: None)
    log.append((name, "value", (yield done), env.now))
    if fail_at is not None:
        yield env.timeout(fail_at)
        raise ValueError(name)
    return f"{name} done"


def _note_end(ended, process):
    ended.append((process.ok, str(process.value), process.env.now))


def test_start_process_runs_as_env_process_does():
    """Processes started by start_process interleave with SimPy's own exactly as SimPy's would (the
    same queue keys, the same outcomes: return value, handled and unhandled failures), and a
    deadlock report names their generators."""
    outcomes = []
    for start in (Environment.process, start_process):
        env = Environment()
        log: list = []
        ours = [start(env, _worker(env, log, "a")), env.process(_worker(env, log, "b")), start(env, _worker(env, log, "c", fail_at=1))]
        ended: list = []
        for process in ours:
            process.callbacks.append(partial(_note_end, ended))
        ours[2].callbacks.append(lambda event: setattr(event, "defused", True))
        env.run()
        failure = ours[2].value
        frames = [frame.name for frame in traceback.extract_tb(failure.__traceback__)]
        outcomes.append((log, ended, [process.value for process in ours[:2]], frames, [p.is_alive for p in ours]))
    assert outcomes[0] == outcomes[1]
    assert outcomes[1][3] == ["_worker"]  # the traceback starts at the generator, as SimPy's

    env = Environment()
    def waits_forever():
        yield env.event()
    start_process(env, waits_forever())
    [(what, count)] = due_now(env)
    assert what.startswith("process ") and what.endswith(".waits_forever") and count == 1


def _ends(env, how):
    """A process that ends in one of the ways a generator can: returning a value or None after a
    step, returning or failing while handling a thrown failure, or failing after a step."""
    yield env.timeout(1)
    if how == "value":
        return ("a", "value")
    if how == "none":
        return None
    bad = env.event()
    bad.fail(KeyError(how))
    try:
        yield bad
    except KeyError:
        if how == "handled":
            return "handled"
        if how == "reraised":
            raise
    yield env.timeout(1)
    raise ValueError(how)


def test_a_process_ends_with_simpys_outcome_and_traceback_however_its_generator_ends():
    """Each way a generator ends (a return after a send or after a thrown failure, an exception
    from a send or from a throw) gives the process SimPy's outcome, value and traceback alike."""
    ways = ("value", "none", "handled", "reraised", "raised")
    outcomes = []
    for start in (Environment.process, start_process, run_process):
        env = Environment()
        processes = [start(env, _ends(env, how)) for how in ways]
        for process in processes:
            process.callbacks.append(lambda event: setattr(event, "defused", True))
        env.run()
        outcomes.append([(process.ok, repr(process.value), env.now,
                          [frame.name for frame in traceback.extract_tb(process.value.__traceback__)] if not process.ok else None)
                         for process in processes])
    assert outcomes[0] == outcomes[1] == outcomes[2]
    assert [outcome[3] for outcome in outcomes[1]] == [None, None, None, ["_ends"], ["_ends"]]


def test_a_finished_process_is_freed_by_reference_counting():
    """A process and its generator, once ended (returned or failed), are freed as soon as nothing
    references them, without a garbage collection (no cycle through its resume is left)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        for start in (start_process, run_process):
            env = Environment()
            processes = [start(env, _ends(env, how)) for how in ("value", "handled", "raised")]
            processes[-1].callbacks.append(lambda event: setattr(event, "defused", True))
            env.run()
            freed = [weakref.ref(process) for process in processes]
            del processes
            assert [ref() for ref in freed] == [None, None, None]
    finally:
        if enabled:
            gc.enable()


def _first_steps(env, log, name, end_at_once=False, fail_at_once=False):
    """A process whose first step schedules events of this instant (a timeout of 0 and a succeed),
    then sleeps; or ends, or fails, in its first step."""
    log.append((name, "first", env.now))
    if fail_at_once:
        raise ValueError(name)
    if end_at_once:
        return f"{name} at once"
    now = env.event()
    now.succeed(name)
    now.callbacks.append(lambda event: log.append((name, "event", event.value, env.now)))
    yield env.timeout(0)
    log.append((name, "resumed", env.now))
    yield env.timeout(1)
    return f"{name} done"


def test_run_process_orders_everything_as_start_process_where_its_initialisation_would_come_next():
    """Processes a NORMAL event's processing starts as the last things it schedules: taking their
    first steps at once (run_process) gives the order of every event, and every outcome, that
    starting them (start_process, SimPy's) gives, with one processed event fewer per process; a
    process ending or failing in its first step too."""
    runs = []
    for start in (start_process, run_process):
        env = Environment()
        log: list = []
        ended: list = []
        processes: list = []

        def starts(_event, start=start, env=env, log=log, ended=ended, processes=processes):
            log.append(("starter", env.now))
            later = env.timeout(0)  # scheduled before the processes: keeps its place
            later.callbacks.append(lambda _e: log.append(("later", env.now)))
            for name, kwargs in (("a", {}), ("b", {"end_at_once": True}), ("c", {}), ("d", {"fail_at_once": True})):
                process = start(env, _first_steps(env, log, name, **kwargs))
                process.callbacks.append(partial(_note_end, ended))
                processes.append(process)
            processes[-1].callbacks.append(lambda event: setattr(event, "defused", True))

        tick = env.timeout(3)
        tick.callbacks.append(starts)
        other = env.timeout(3)  # a NORMAL event of the same instant, after the starter
        other.callbacks.append(lambda _e, env=env, log=log: log.append(("other", env.now)))
        steps = 0
        while queued_events(env):
            env.step()
            steps += 1
        runs.append((log, ended, [p.value if p.ok else None for p in processes], steps))
    assert runs[0][:3] == runs[1][:3]
    assert runs[1][3] == runs[0][3] - 4  # no initialisation event
    assert runs[1][0][:2] == [("starter", 3), ("a", "first", 3)]  # the first steps run as the starter's event is processed
