"""The request queue every DMA engine keeps (:class:`EngineQueue`: a core's MTE or FixPipe, an SDMA
channel): up to ``depth`` requests in flight; a request's fixed part (set-up, route and memory
latency) runs from its issue, overlapping the streaming of earlier requests; the bytes of the
requests stream one request after another (the engine's data path is one; a request's hit and miss
parts one after the other, :func:`split_by_hits`), so they complete in issue order. With depth 1,
each request is issued once the previous one has completed: its fixed part and bytes follow each
other. Compiled with the engine (setup.py), as the AI core's pipes that issue to it are.

Times in ps.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import simpy

from npusim.engine.flow import FlowClass, FlowNetwork
from npusim.engine.loop import Environment, clock, succeed_at


class Request:
    """One request of an engine's queue: its bytes as ``segments`` streamed in order, each
    ``(flow class, bytes, ps its bytes may start flowing)`` (the class None for a request nothing
    limits; the time absolute: issue + set-up + its route's latency), ``burst_ps`` of the engine's
    own work as it streams (its bursts' requests, paid before its first byte), issued at
    ``issue_ps``. Once its last byte has arrived and ``tail(owner, now)`` (if any: an atomic add's
    apply, the time it is done) has passed, in issue order, the queue calls ``complete(owner,
    start, flowed, arrived, bottleneck)``: ``owner`` is the caller's (the instruction, the block),
    ``start`` its slice's start (its issue, or the end of the queue's previous entry if later),
    ``flowed`` when its first bytes started flowing, ``arrived`` when its last byte arrived (its
    tail ran from then to now), ``bottleneck`` what limited its largest segment (as
    :meth:`~npusim.engine.flow.FlowNetwork.start` reports it). A copy or an SDMA block makes one:
    compiled, a native object (built without a Python call)."""

    __slots__ = ("segments", "burst_ps", "issue_ps", "complete", "owner", "tail")

    def __init__(self, segments: list[tuple[FlowClass | None, int, int]], burst_ps: int, issue_ps: int,
                 complete: Callable[[Any, int, int, int, int], None], owner: Any, tail: Callable[[Any, int], int] | None = None) -> None:
        self.segments = segments
        self.burst_ps = burst_ps
        self.issue_ps = issue_ps
        self.complete = complete
        self.owner = owner
        self.tail = tail


class Fence:
    """A fence waiting for its turn in a queue (:meth:`EngineQueue.fence`): from ``at_ps`` at the
    earliest, for ``cost_ps``, then ``fire(start, end, *args)``."""

    __slots__ = ("at_ps", "cost_ps", "fire", "args")

    def __init__(self, at_ps: int, cost_ps: int, fire: Callable[..., None], args: tuple[object, ...]) -> None:
        self.at_ps = at_ps
        self.cost_ps = cost_ps
        self.fire = fire
        self.args = args


class EngineQueue:
    """The queue of one DMA engine (see the module doc): ``depth`` requests at most in flight,
    streamed one after another across ``network``, completed in order. A ``fence`` (a ``set_flag``
    after copies still in flight) takes its turn among the requests: it runs once the requests
    before it have completed, for its own cost. ``in_flight`` counts the requests issued and not yet
    completed; :meth:`until` gives an event for a pipe that waits for a slot or for the queue to
    drain. One request streams at a time: the queue keeps its state (``_current`` and the fields
    after it)."""

    __slots__ = ("env", "network", "depth", "in_flight", "free_at", "_waiting", "_waiters",
                 "_current", "_segment", "_start_ps", "_flowed_ps", "_arrived_ps", "_largest", "_bottleneck")

    def __init__(self, env: Environment, network: FlowNetwork, depth: int) -> None:
        self.env = env
        self.network = network
        self.depth = depth
        self.in_flight = 0
        self.free_at = 0  # when the stream became free (after a fence: becomes free), ps
        # requests and fences not started yet, in issue order: a list, as a few are (the depth's, the
        # fences between), so taking the first is cheap, and an empty list takes 56 bytes to a deque's
        # 760 (every copy engine of every core that runs has a queue)
        self._waiting: list[Request | Fence] = []
        self._waiters: list[tuple[int, simpy.Event]] = []  # (in_flight at most, event) of the pipes waiting
        # the request streaming its bytes (or in its tail), None when none: its segment streaming,
        # its slice's start, when its first bytes flowed and its last arrived, its largest
        # segment's bytes and bottleneck
        self._current: Request | None = None
        self._segment = 0
        self._start_ps = 0
        self._flowed_ps = 0
        self._arrived_ps = 0
        self._largest = 0
        self._bottleneck = 0

    def issue(self, request: Request) -> None:
        """Queue ``request`` (the caller keeps ``in_flight`` below ``depth``: :meth:`until`)."""
        self.in_flight += 1
        if self._current is None and not self._waiting:
            self._start(request, clock(self.env))
        else:
            self._waiting.append(request)

    def fence(self, at_ps: int, cost_ps: int, fire: Callable[..., None], *args: object) -> None:
        """Once every request issued before has completed: ``fire(start, end, *args)`` with its turn
        ``start = max(at_ps, their end)`` and ``end = start + cost_ps`` (the next request streams
        from ``end``). Only while requests are in flight (else the caller runs it at once)."""
        self._waiting.append(Fence(at_ps, cost_ps, fire, args))

    def until(self, in_flight: int) -> simpy.Event:
        """An event that fires once at most ``in_flight`` requests are in flight (at once if so):
        ``depth - 1`` for a free slot, 0 for a drained queue (its fences run then too)."""
        event = simpy.Event(self.env)
        if self.in_flight <= in_flight:
            succeed_at(self.env, event, 0)
        else:
            self._waiters.append((in_flight, event))
        return event

    def _start(self, request: Request, now: int) -> None:
        """``request`` takes the stream: its slice starts (its issue, or the stream's end if later)
        and its first segment's bytes start once ready, after its bursts."""
        free_at = self.free_at
        issued = request.issue_ps
        self._current = request
        self._start_ps = issued if issued > free_at else free_at
        self._segment = 0
        self._largest = -1
        flow_class, nbytes, ready = request.segments[0]
        begin = ready if ready > free_at else free_at
        self.network.start(flow_class, nbytes, (begin if begin > now else now) - now + request.burst_ps).callbacks.append(self._on_segment_done)

    def _on_segment_done(self, event: simpy.Event) -> None:
        request = self._current
        assert request is not None
        bottleneck, flowed = event._value
        segments, segment = request.segments, self._segment
        nbytes = segments[segment][1]
        if not segment:
            self._flowed_ps = flowed
        if nbytes > self._largest:
            self._largest, self._bottleneck = nbytes, bottleneck
        now = clock(self.env)
        segment += 1
        if segment < len(segments):  # the next one streams, from when it is ready (now if it is)
            self._segment = segment
            self.free_at = now
            flow_class, nbytes, ready = segments[segment]
            self.network.start(flow_class, nbytes, ready - now if ready > now else 0).callbacks.append(self._on_segment_done)
            return
        self._arrived_ps = now
        tail = request.tail
        if tail is not None:
            done = tail(request.owner, now)
            if done > now:
                self.env.timeout(done - now).callbacks.append(self._on_tail_done)
                return
        self._finish(now)

    def _on_tail_done(self, _event: simpy.Event) -> None:
        self._finish(clock(self.env))

    def _finish(self, now: int) -> None:
        request = self._current
        assert request is not None
        self._current = None
        self.free_at = now
        self.in_flight -= 1
        request.complete(request.owner, self._start_ps, self._flowed_ps, self._arrived_ps, self._bottleneck)
        waiting = self._waiting
        while waiting:
            entry = waiting.pop(0)
            if isinstance(entry, Fence):  # its turn now
                start = entry.at_ps if entry.at_ps > self.free_at else self.free_at
                self.free_at = start + entry.cost_ps
                entry.fire(start, self.free_at, *entry.args)
                continue
            self._start(entry, now)
            break
        if self._waiters:
            in_flight, still = self.in_flight, []
            for limit, event in self._waiters:
                if in_flight <= limit:
                    succeed_at(self.env, event, 0)
                else:
                    still.append((limit, event))
            self._waiters = still


def split_by_hits(nbytes: int, hit_lines: float, lines: int, hit: tuple[FlowClass | None, int],
                  miss: tuple[FlowClass | None, int]) -> list[tuple[FlowClass | None, int, int]]:
    """The segments of a request of ``nbytes`` whose ``lines`` looked up in L2 had ``hit_lines``
    hits: the bytes split in proportion to the lines, the hit part ``(flow class, ready ps)`` first,
    then the miss part (a request of no line: one segment, the miss's)."""
    hit_bytes = int(nbytes * hit_lines) // lines if lines else 0
    if not hit_bytes:
        return [(miss[0], nbytes, miss[1])]
    if hit_bytes == nbytes:
        return [(hit[0], nbytes, hit[1])]
    return [(hit[0], hit_bytes, hit[1]), (miss[0], nbytes - hit_bytes, miss[1])]
