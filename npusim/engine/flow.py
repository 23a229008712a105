"""Bandwidth shared by concurrent transfers: a fluid network with max-min fair rates.

A :class:`Resource` is a bandwidth that transfers share: an HBM, an L2, one direction of a link, a
switch port, a NIC. A transfer (a flow) moves ``size_bytes`` through every resource on its path at
one rate, never above its own ``cap`` (the DMA engine that drives it: one core's MTE cannot exceed
its own rate). Whenever flows start or end, rates are recomputed by progressive filling, the
max-min fair allocation of validated flow-level network simulators (SimGrid).

Flows with the same path and cap get the same rate, so they are kept in one :class:`FlowClass`:
the filling works on classes (a handful, however many cores are busy), and each class keeps a
virtual clock of the bytes each member has received, so members need no update when rates change
(the classic processor-sharing technique). Starting or ending a flow costs O(log n) plus a
recomputation over classes. The network wakes up only at the instants where something changes:
one SimPy event per instant however many flows it concerns.

Each flow also learns what limited it: at every recomputation each class notes its bottleneck (the
resource that froze it in the filling, or its own cap) when it changes, at the class's virtual
clock; a finished flow's event carries ``(bottleneck index, time its bytes started flowing)``, the
bottleneck being the one under which it received most of its bytes (the index is the resource's
position in ``FlowNetwork.resources``, -1 for the flow's own cap, -2 for an unregistered resource).

Units: time in integer picoseconds (SimPy time), sizes in bytes, rates in bytes per picosecond.
"""

from __future__ import annotations

import heapq
import math
from typing import Sequence

import simpy

# A member has finished when its virtual finish is within this many bytes of the class clock,
# relative to its size (absorbs float rounding; completion times are whole picoseconds).
_FINISH_TOLERANCE = 1e-9

OWN_CAP = -1  # bottleneck of a flow limited by its own cap (the DMA engine that drives it)
UNREGISTERED = -2  # bottleneck index of a resource that was never added to the network


class Resource:
    """A shared bandwidth: ``capacity`` in bytes/ps, shared max-min fairly by the flows crossing it.

    ``bytes_moved`` and ``flows_done`` count finished flows; ``rate`` is the current total rate;
    ``rate_log`` (for registered resources) records ``(time_ps, bytes_per_ps)`` at every change.
    """

    __slots__ = ("name", "kind", "die", "capacity", "bytes_moved", "flows_done", "rate", "rate_log", "flows", "index",
                 "_residual", "_weight", "_crossing", "_version", "_first")  # _*: scratch of FlowNetwork._assign_rates

    def __init__(self, name: str, capacity: float, *, kind: str = "other", die: int = -1) -> None:
        if not capacity > 0:
            raise ValueError(f"resource {name}: capacity must be positive, got {capacity}")
        self.name = name
        self.kind = kind
        self.die = die
        self.capacity = capacity
        self.bytes_moved = 0
        self.flows_done = 0
        self.rate = 0.0
        self.rate_log: list[tuple[int, float]] | None = None
        self.flows = 0
        self.index = UNREGISTERED  # position in FlowNetwork.resources once registered
        self._first = -1
        self._crossing = None

    def __repr__(self) -> str:
        return f"Resource({self.name}, {self.capacity * 1e3:.3f} GB/s)"


class FlowClass:
    """The flows that share one path and one cap, and so one rate. ``virtual_bytes`` is what each
    member has received since the class was created (exact at ``updated_ps``); a member ends when
    it reaches the member's ``virtual finish`` (virtual bytes at its start + its size).
    ``bottleneck`` is the index of what limits the class now (see the module doc); ``changes``
    lists ``(virtual bytes, bottleneck)`` at each change of it since the class last started."""

    __slots__ = ("path", "cap", "rate", "virtual_bytes", "updated_ps", "members", "order", "bottleneck", "changes")

    def __init__(self, path: tuple[Resource, ...], cap: float, order: int) -> None:
        self.path = path
        self.cap = cap
        self.rate = 0.0
        self.virtual_bytes = 0.0
        self.updated_ps = 0
        self.members: list[tuple[float, int, int, simpy.Event, int]] = []  # (virtual finish, seq, size, done, flowing since ps)
        self.order = order
        self.bottleneck = OWN_CAP
        self.changes: list[tuple[float, int]] = []

    def advance(self, now: int) -> None:
        self.virtual_bytes += self.rate * (now - self.updated_ps)
        self.updated_ps = now

    def next_finish_ps(self, now: int) -> int:
        left = self.members[0][0] - self.virtual_bytes
        return now + max(1, math.ceil(left / self.rate - 1e-9)) if left > 0 else now

    def main_bottleneck(self, joined: float, finished: float) -> int:
        """The bottleneck under which a member that received virtual bytes ``joined`` to
        ``finished`` got most of them (when it changed during the member's life)."""
        changes = self.changes
        got: dict[int, float] = {}
        until = finished
        for since, bottleneck in reversed(changes):
            got[bottleneck] = got.get(bottleneck, 0.0) + until - max(since, joined)
            if since <= joined:
                break
            until = since
        return max(got, key=got.__getitem__)


def _class_order(flow_class: FlowClass) -> int:
    return flow_class.order


class FlowNetwork:
    """All flows of a simulation, the max-min fair rates they get, and their completions."""

    def __init__(self, env: simpy.Environment, *, record_rates: bool = True) -> None:
        self.env = env
        self.record_rates = record_rates
        self.resources: list[Resource] = []
        self._classes: dict[tuple, FlowClass] = {}
        self._busy: list[FlowClass] = []
        self._flowing: dict[Resource, None] = {}  # resources with a non-zero rate, in first-use order
        self._starts: list[tuple[int, int, FlowClass, int, simpy.Event]] = []
        self._sequence = 0
        self._wakeup_ps: int | None = None
        self._generation = 0
        self.recomputations = 0

    def add_resource(self, resource: Resource) -> Resource:
        """Register a resource so that its rate changes are logged and it appears in summaries."""
        if self.record_rates:
            resource.rate_log = []
        resource.index = len(self.resources)
        self.resources.append(resource)
        return resource

    @property
    def active_flows(self) -> int:
        """Flows moving bytes now."""
        return sum(len(c.members) for c in self._busy)

    def transfer(self, size_bytes: int, path: Sequence[Resource], *, cap: float = math.inf, delay_ps: int = 0,
                 done: simpy.Event | None = None) -> simpy.Event:
        """Move ``size_bytes`` across ``path`` at no more than ``cap`` bytes/ps, the bytes starting
        to flow ``delay_ps`` from now (a fixed cost paid first); returns the event fired when the
        last byte arrives, whose value is ``(bottleneck index, ps the bytes started flowing)``."""
        env = self.env
        if done is None:
            done = env.event()
        if size_bytes <= 0 or (not path and cap == math.inf):
            outcome = (OWN_CAP, env._now + delay_ps)
            if delay_ps > 0:
                env.timeout(delay_ps).callbacks.append(lambda _event: done.succeed(outcome))
            else:
                done.succeed(outcome)
            return done
        key = (path, cap)
        flow_class = self._classes.get(key)
        if flow_class is None:
            flow_class = self._classes[key] = FlowClass(tuple(path), cap, len(self._classes))
        start_ps = env._now + delay_ps
        self._sequence += 1
        heapq.heappush(self._starts, (start_ps, self._sequence, flow_class, size_bytes, done))
        self._wake_at(start_ps)
        return done

    # -- internals -----------------------------------------------------------------------------

    def _wake_at(self, time_ps: int) -> None:
        if self._wakeup_ps is not None and self._wakeup_ps <= time_ps:
            return
        self._wakeup_ps = time_ps
        self._generation += 1
        generation = self._generation
        self.env.timeout(time_ps - self.env._now).callbacks.append(lambda _event: self._on_wakeup(generation))

    def _on_wakeup(self, generation: int) -> None:
        if generation != self._generation:
            return  # superseded by an earlier wake-up
        self._wakeup_ps = None
        now = self.env._now
        changed = False
        emptied = False
        for flow_class in self._busy:
            flow_class.advance(now)
            members = flow_class.members
            finished = finished_bytes = 0
            while members and members[0][0] - flow_class.virtual_bytes <= members[0][2] * _FINISH_TOLERANCE:
                finish, _, size, done, flowing_ps = heapq.heappop(members)
                finished += 1
                finished_bytes += size
                if flow_class.changes[-1][0] <= finish - size:  # one bottleneck all its life: the usual case
                    done.succeed((flow_class.bottleneck, flowing_ps))
                else:
                    done.succeed((flow_class.main_bottleneck(finish - size, finish), flowing_ps))
            if finished:
                for resource in flow_class.path:
                    resource.bytes_moved += finished_bytes
                    resource.flows_done += finished
                    resource.flows -= finished
                changed = True
                emptied = emptied or not members
        if emptied:
            self._busy = [c for c in self._busy if c.members]
        starts = self._starts
        joined = False
        while starts and starts[0][0] <= now:
            _, sequence, flow_class, size, done = heapq.heappop(starts)
            if not flow_class.members:
                flow_class.virtual_bytes, flow_class.updated_ps = 0.0, now
                flow_class.changes = []
                self._busy.append(flow_class)
                joined = True
            else:
                flow_class.advance(now)
            heapq.heappush(flow_class.members, (flow_class.virtual_bytes + size, sequence, size, done, now))
            for resource in flow_class.path:
                resource.flows += 1
            changed = True
        if joined:
            self._busy.sort(key=_class_order)
        if changed:
            self._assign_rates(now)
        if self._busy:
            self._wake_at(min(c.next_finish_ps(now) for c in self._busy))
        if starts:
            self._wake_at(starts[0][0])

    def _assign_rates(self, now: int) -> None:
        """Progressive filling over classes: raise every rate together until a resource saturates
        or a class reaches its cap; freeze those; repeat. The fair share of each resource sits in
        a heap (stale entries skipped by version), so a recomputation costs O(classes x path x log)
        rather than a scan of every resource per frozen level; ties go to the resource met first.
        Per-resource scratch lives in the resources' ``_*`` slots."""
        self.recomputations += 1
        busy = self._busy
        touched: list[Resource] = []
        for flow_class in busy:
            flow_class.rate = -1.0
            n = len(flow_class.members)
            for resource in flow_class.path:
                if resource._first >= 0:
                    resource._weight += n
                    resource._crossing.append(flow_class)
                else:
                    resource._first = len(touched)
                    resource._residual = resource.capacity
                    resource._weight = n
                    resource._crossing = [flow_class]
                    resource._version = 0
                    touched.append(resource)
        shares = [(r._residual / r._weight, r._first, 0, r) for r in touched if r._weight]
        heapq.heapify(shares)
        heappush, heappop = heapq.heappush, heapq.heappop
        by_cap = sorted(busy, key=lambda c: c.cap)
        next_capped = 0
        unfixed = len(busy)
        while unfixed:
            while shares and shares[0][2] != shares[0][3]._version:
                heappop(shares)
            level, bottleneck = (shares[0][0], shares[0][3]) if shares else (math.inf, None)
            while by_cap[next_capped].rate >= 0.0:
                next_capped += 1
            capped = by_cap[next_capped].cap
            if capped <= level:
                level = capped
                freezing = []
                for flow_class in by_cap[next_capped:]:
                    if flow_class.cap > capped:
                        break
                    if flow_class.rate < 0.0:
                        freezing.append(flow_class)
                freezing.sort(key=lambda c: c.order)
                limit = OWN_CAP
            else:
                freezing = [c for c in bottleneck._crossing if c.rate < 0.0]
                limit = bottleneck.index
            changed: dict[Resource, None] = {}  # in first-change order, for deterministic pushes
            for flow_class in freezing:
                flow_class.rate = level
                if flow_class.bottleneck != limit or not flow_class.changes:  # note a change (the class is advanced to now)
                    flow_class.bottleneck = limit
                    flow_class.changes.append((flow_class.virtual_bytes, limit))
                n = len(flow_class.members)
                for resource in flow_class.path:
                    left = resource._residual - level * n
                    resource._residual = left if left > 0.0 else 0.0
                    resource._weight -= n
                    changed[resource] = None
            for resource in changed:
                resource._version += 1
                if resource._weight:
                    heappush(shares, (resource._residual / resource._weight, resource._first, resource._version, resource))
            unfixed -= len(freezing)
        for resource in touched:
            resource._first = -1
            resource._crossing = None
        totals: dict[Resource, float] = {}
        for flow_class in busy:
            for resource in flow_class.path:
                totals[resource] = totals.get(resource, 0.0) + flow_class.rate * len(flow_class.members)
        for resource in self._flowing:
            if resource not in totals:
                totals[resource] = 0.0
        flowing = {}
        for resource, total in totals.items():
            if total != resource.rate:
                resource.rate = total
                if resource.rate_log is not None:
                    resource.rate_log.append((now, total))
            if total:
                flowing[resource] = None
        self._flowing = flowing
