"""npusim.engine.flags: flags raised ahead of the clock, taken in order, waits woken when visible."""


from npusim.engine.flags import Flags
from npusim.engine.loop import Environment


def test_a_raised_flag_is_taken_with_its_time_in_raise_order():
    flags = Flags(Environment())
    assert flags.take(7) is None
    flags.set(7, 10)
    flags.set(7, 4)
    assert (flags.take(7), flags.take(7), flags.take(7)) == (10, 4, None)


def test_a_waiter_wakes_when_the_flag_is_visible_or_when_ready():
    env = Environment()
    flags = Flags(env)
    seen = []
    flags.wait(1, 0, "early", lambda _e: seen.append(("early", env.now)))
    flags.wait(1, 50, "late", lambda _e: seen.append(("late", env.now)))
    assert sorted(map(str, flags.waiting())) == ["early", "late"]
    flags.set(1, 20)  # the oldest waiter takes it: visible at 20
    flags.set(1, 30)  # the next: ready only at 50
    assert list(flags.waiting()) == [] and flags.take(1) is None
    env.run()
    assert seen == [("early", 20), ("late", 50)]


def test_waiters_of_one_instant_wake_in_the_order_the_flags_were_raised():
    env = Environment()
    flags = Flags(env)
    seen = []
    flags.wait(2, 0, "b", lambda _e: seen.append("b"))
    flags.wait(1, 0, "a", lambda _e: seen.append("a"))
    flags.set(1, 5)
    flags.set(2, 5)
    env.run()
    assert seen == ["a", "b"]
