import simpy

from npusim.engine.events import succeed_at


def test_succeed_at_orders_events_as_simpy_does():
    """Events triggered by succeed_at interleave with SimPy's own timeouts and succeeds exactly
    as SimPy would order them: by time, then by the order they were scheduled."""
    env = simpy.Environment()
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


def test_a_process_waiting_on_succeed_at_resumes_with_its_value():
    env = simpy.Environment()
    event = simpy.Event(env)
    got = []

    def waiter():
        got.append((yield event))
        got.append(env.now)

    env.process(waiter())
    succeed_at(env, event, 7, ("bottleneck", 3))
    env.run()
    assert got == [("bottleneck", 3), 7]
