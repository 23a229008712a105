"""A device stream runs its tasks one after the other, each with the arguments it was given."""


from npusim.engine.loop import Environment
from npusim.hw.stream import Stream


def test_a_task_gets_its_arguments_and_starts_when_the_previous_one_ends():
    env = Environment()
    stream = Stream(env, 0)
    started = []

    def task(name, busy_ps):
        started.append((name, env.now))
        yield env.timeout(busy_ps)

    stream.submit(task, "a", 10)
    last = stream.submit(task, "b", 5)
    env.run()
    assert started == [("a", 0), ("b", 10)]
    assert last.processed and env.now == 15 and stream.tasks == 2


def test_a_task_submitted_after_the_stream_drained_starts_at_once():
    env = Environment()
    stream = Stream(env, 0)
    stream.submit(lambda: iter([env.timeout(7)]))
    env.run()
    started = []

    def task():
        started.append(env.now)
        yield env.timeout(1)

    stream.submit(task)
    env.run()
    assert started == [7] and env.now == 8
