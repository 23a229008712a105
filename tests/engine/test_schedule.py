"""npusim.engine.loop's callbacks beside processes (schedule, cancel, when, begin, Timer): the
order of events they give is SimPy's (the rules in the module's docstring)."""


from npusim.engine.loop import Environment, Timer, begin, cancel, initialise, run_process, schedule, start_process, succeed_at, when
from npusim.engine.progress import ProgressCounter


def test_schedule_runs_callbacks_in_time_then_schedule_order():
    env = Environment()
    seen = []
    schedule(env, 5, lambda _e: seen.append(("b", env.now)))
    schedule(env, 3, lambda _e: seen.append(("a", env.now)))
    schedule(env, 5, lambda _e: seen.append(("c", env.now)))
    env.run()
    assert seen == [("a", 3), ("b", 5), ("c", 5)]


def test_a_callback_keeps_its_place_among_timeouts_of_processes():
    env = Environment()
    seen = []

    def process(name):
        yield env.timeout(2)
        seen.append(name)

    env.process(process("p1"))
    env.run(until=1)  # p1's timeout is in the queue, then the callback, then p2's
    schedule(env, 1, lambda _e: seen.append("callback"))
    env.process(process("p2"))  # its initialisation is URGENT, its timeout at 3 comes after
    env.timeout(1).callbacks.append(lambda _e: env.process(process("p3")))
    env.run()
    assert seen == ["p1", "callback", "p2", "p3"]


def test_a_callback_scheduled_now_runs_after_the_events_already_due_now():
    env = Environment()
    seen = []

    def first(_event):
        seen.append("first")
        schedule(env, 0, lambda _e: seen.append("scheduled now"))

    schedule(env, 1, first)
    schedule(env, 1, lambda _e: seen.append("second"))
    env.run()
    assert seen == ["first", "second", "scheduled now"]


def test_cancel_runs_nothing_and_moves_nothing():
    env = Environment()
    seen = []
    doomed = schedule(env, 2, lambda _e: seen.append("cancelled"))
    schedule(env, 2, lambda _e: seen.append("kept"))
    cancel(doomed)
    env.run()
    assert seen == ["kept"] and env.now == 2


def test_when_waits_for_processing_and_runs_at_once_after():
    env = Environment()
    event = env.event()
    seen = []
    when(event, lambda e: seen.append(("first", e.value)))
    succeed_at(env, event, 4, "done")
    env.run()
    assert seen == [("first", "done")]
    when(event, lambda e: seen.append(("after", env.now)))  # processed already: at once
    assert seen[-1] == ("after", 4)


def test_when_on_a_count_reached_now_is_a_trip_through_the_queue():
    env = Environment()
    counter = ProgressCounter(env)
    counter.add(2)
    seen = []
    schedule(env, 0, lambda _e: seen.append("due before"))
    counter.when_reached(1, lambda _e: seen.append("reached"))
    assert seen == []
    env.run()
    assert seen == ["due before", "reached"]


def test_when_reached_wakes_in_order_of_target_then_arrival():
    env = Environment()
    counter = ProgressCounter(env)
    seen = []
    counter.when_reached(2, lambda _e: seen.append("2a"))
    counter.when_reached(1, lambda _e: seen.append("1"))
    counter.when_reached(2, lambda _e: seen.append("2b"))
    schedule(env, 3, lambda _e: counter.add(2))
    env.run()
    assert seen == ["1", "2a", "2b"] and env.now == 3


def test_a_timer_rearmed_matches_a_timeout_per_sleep():
    def sleeps(make):
        env = Environment()
        seen = []
        make(env, seen)
        schedule(env, 3, lambda _e: seen.append(("other", env.now)))
        env.run()
        return seen

    def with_process(env, seen):
        def loop():
            for delay in (1, 2, 0, 4):
                yield env.timeout(delay)
                seen.append(("slept", env.now))
        run_process(env, loop())

    def with_timer(env, seen):
        delays = iter((1, 2, 0, 4))

        def fired(_event):
            seen.append(("slept", env.now))
            delay = next(delays, None)
            if delay is not None:
                timer.start(delay)

        timer = Timer(env, fired)
        begin(lambda: timer.start(next(delays)))

    assert sleeps(with_timer) == sleeps(with_process) == [("slept", 1), ("other", 3), ("slept", 3), ("slept", 3), ("slept", 7)]


def test_begin_takes_the_first_step_before_an_urgent_initialisation():
    env = Environment()
    seen = []

    def process():
        seen.append("process")
        yield env.timeout(0)

    start_process(env, process())
    begin(lambda: seen.append("machine"))
    env.run()
    assert seen == ["machine", "process"]


def test_initialise_takes_the_first_step_as_a_process_initialisation():
    env = Environment()
    seen = []

    def process(name):
        seen.append(name)
        yield env.timeout(0)

    schedule(env, 0, lambda _e: seen.append("normal, scheduled first"))
    start_process(env, process("process"))
    initialise(env, lambda _e: seen.append("machine"))
    start_process(env, process("process after"))
    env.run()
    assert seen == ["process", "machine", "process after", "normal, scheduled first"]
