"""A device stream: tasks (kernel launches, copies) run one after the other, like an ACL stream."""

from __future__ import annotations

from collections.abc import Callable, Generator

import simpy


class Stream:
    """An in-order task queue of one die: each task starts when the previous one has finished."""

    def __init__(self, env: simpy.Environment, die: int, name: str = "default") -> None:
        self.env = env
        self.die = die
        self.name = name
        self.tail: simpy.Process | None = None
        self.tasks = 0

    def submit(self, task: Callable[[], Generator]) -> simpy.Process:
        """Queue ``task`` (a function returning a SimPy generator); returns its process."""
        previous = self.tail
        self.tasks += 1

        def run():
            if previous is not None and not previous.processed:
                yield previous
            yield from task()

        self.tail = self.env.process(run())
        return self.tail
