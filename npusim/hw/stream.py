"""A device stream: tasks (kernel launches, copies) run one after the other, like an ACL stream."""

from __future__ import annotations

from collections.abc import Callable, Generator
from typing import Any

import simpy
from mypy_extensions import mypyc_attr

from npusim.engine.loop import Environment, start_process


@mypyc_attr(native_class=False)  # a Python class, its methods compiled: HCCL's runtime keeps streams in a weak-keyed table (weak references)
class Stream:
    """An in-order task queue of one die: each task starts when the previous one has finished."""

    def __init__(self, env: Environment, die: int, name: str = "default") -> None:
        self.env = env
        self.die = die
        self.name = name
        self.tail: simpy.Process | None = None
        self.tasks = 0

    def submit(self, task: Callable[..., Generator[simpy.Event, Any, None]], *args: object) -> simpy.Process:
        """Queue ``task`` (a function returning a SimPy generator, given ``args``); returns its process."""
        self.tasks += 1
        tail = self.tail = start_process(self.env, _after(self.tail, task, args))
        tail.callbacks.append(self._ended)
        return tail

    def _ended(self, process: simpy.Event) -> None:
        """``process`` has been processed: no longer the tail to wait for, if it still was (a
        stream whose last task is done holds none: one per core that ran, ~30 MB of them at 768
        dies)."""
        if self.tail is process:
            self.tail = None


def _after(previous: simpy.Process | None, task: Callable[..., Generator[simpy.Event, Any, None]], args: tuple[object, ...]) -> Generator[simpy.Event, Any, None]:
    """``task(*args)`` once ``previous`` (the stream's task before it, if any) has finished (a
    module function, not a closure: a stream of tile ops holds thousands of them queued)."""
    if previous is not None and not previous.processed:
        yield previous
    yield from task(*args)
