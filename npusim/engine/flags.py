"""Flags between the pipes of a core: a ``set_flag`` raises one, a ``wait_flag`` takes one."""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterator

import simpy

from npusim.engine.loop import Environment, clock, succeed_at


class Flags:
    """The flags of one kernel run, by key (an int: the pipes and event id, ``hw.core.flag_key``).
    A flag raised is visible from a time (ps) on, which may lie ahead of the clock (a pipe running
    ahead); flags of one key are taken in the order they were raised, so a wait running ahead of
    the clock takes the one it would take at its own time. A wait that finds none raised waits:
    the next flag raised wakes the oldest waiter, when it becomes visible or when the waiter is
    ready, whichever is later (a NORMAL event then: see the order of events in
    :mod:`npusim.engine.loop`)."""

    __slots__ = ("env", "raised", "waiters")

    def __init__(self, env: Environment) -> None:
        self.env = env
        self.raised: dict[int, deque[int]] = {}
        """Key -> when its raised, not yet taken, instances become visible (ps), oldest first."""
        self.waiters: dict[int, deque[tuple[simpy.Event, int, object]]] = {}
        """Key -> the waits blocked on it: (wake-up event, when it is ready, who waits), oldest first."""

    def set(self, key: int, visible_ps: int) -> None:
        """Raise flag ``key``, visible at ``visible_ps`` (not before now): its oldest waiter wakes
        then (or when it is ready, if later); with no waiter, the flag is kept with that time."""
        waiters = self.waiters.get(key)
        if waiters:
            event, ready_ps, _ = waiters.popleft()
            env = self.env
            succeed_at(env, event, (visible_ps if visible_ps > ready_ps else ready_ps) - clock(env))
            return
        raised = self.raised.get(key)
        if raised is None:
            raised = self.raised[key] = deque()
        raised.append(visible_ps)

    def take(self, key: int) -> int | None:
        """Take the oldest raised flag ``key``: when it becomes visible (ps), or None when none is raised."""
        raised = self.raised.get(key)
        if raised:
            return raised.popleft()
        return None

    def wait(self, key: int, ready_ps: int, who: object, callback: Callable[[simpy.Event], None]) -> None:
        """Wait for the next flag ``key`` raised (none is raised now: :meth:`take` said so), not
        before ``ready_ps``: ``callback(event)`` runs when it wakes. ``who`` waits (for reports)."""
        event = simpy.Event(self.env)
        event.callbacks.append(callback)
        waiters = self.waiters.get(key)
        if waiters is None:
            waiters = self.waiters[key] = deque()
        waiters.append((event, ready_ps, who))

    def waiting(self) -> Iterator[object]:
        """Who waits, blocked on a flag not raised yet."""
        for waiters in self.waiters.values():
            for _, _, who in waiters:
                yield who
