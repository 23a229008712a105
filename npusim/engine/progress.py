"""A monotone counter that SimPy processes can wait on (pipe progress, flag counts)."""

from __future__ import annotations

import heapq
from collections.abc import Callable

import simpy

from npusim.engine.loop import Environment, succeed_at


class ProgressCounter:
    """Counts completed steps (e.g. instructions a pipe has finished); ``reached(n)`` is an event
    that fires when the count is at least ``n``. Waiters wake in order of their target, then of
    their arrival, so simultaneous wake-ups are deterministic."""

    __slots__ = ("env", "count", "waiters", "_seq")

    def __init__(self, env: Environment) -> None:
        self.env = env
        self.count = 0
        self.waiters: list[tuple[int, int, simpy.Event]] = []
        self._seq = 0

    def reached(self, target: int) -> simpy.Event:
        """An event that succeeds once ``count >= target`` (already triggered if it is)."""
        event = self.env.event()
        if self.count >= target:
            succeed_at(self.env, event, 0)  # event.succeed(), without its checks
        else:
            self._seq += 1
            heapq.heappush(self.waiters, (target, self._seq, event))
        return event

    def when_reached(self, target: int, callback: Callable[[simpy.Event], None]) -> None:
        """Run ``callback(event)`` once ``count >= target``: as a process that yields
        :meth:`reached` would go on (an event due now if the count is reached already)."""
        event = self.reached(target)
        event.callbacks.append(callback)

    def add(self, n: int = 1) -> None:
        """Advance the count and wake the waiters whose target is reached."""
        self.count += n
        if self.waiters:
            self.wake()

    def wake(self) -> None:
        """Wake the waiters whose target the count has reached (callers that bump ``count``
        directly on a hot path call this when ``waiters`` is not empty)."""
        waiters = self.waiters
        while waiters and waiters[0][0] <= self.count:
            succeed_at(self.env, heapq.heappop(waiters)[2], 0)  # its succeed(), without the checks
