
from npusim.engine.loop import Environment
from npusim.engine.progress import ProgressCounter


def test_waiters_wake_when_their_target_is_reached_in_order():
    env = Environment()
    counter = ProgressCounter(env)
    woke = []

    def waiter(target):
        yield counter.reached(target)
        woke.append((target, env.now))

    def worker():
        for _ in range(3):
            yield env.timeout(10)
            counter.add()

    for target in (3, 1, 2, 0):
        env.process(waiter(target))
    env.process(worker())
    env.run()
    assert woke == [(0, 0), (1, 10), (2, 20), (3, 30)]
