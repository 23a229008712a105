"""Triggering SimPy events on the simulator's hot paths.

``succeed_at`` does what ``event.succeed(value)`` does for a fresh event, ``delay_ps`` later (as a
``Timeout`` would), in one call: it sets the outcome and puts the event in SimPy's queue with the
same key ``Environment.schedule`` uses (time, NORMAL priority, next event id), so the order of
events, and so every result, is the one SimPy gives."""

from __future__ import annotations

from heapq import heappush

import simpy
from simpy.events import NORMAL


def succeed_at(env: simpy.Environment, event: simpy.Event, delay_ps: int, value=None) -> None:
    """Trigger the not yet triggered ``event`` with ``value``, ``delay_ps`` ps from now."""
    event._ok = True
    event._value = value
    heappush(env._queue, (env._now + delay_ps, NORMAL, next(env._eid), event))
