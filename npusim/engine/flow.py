"""Bandwidth shared by concurrent transfers: a fluid network with max-min fair rates.

A :class:`Resource` is anything with a peak rate that transfers share: an HBM, an L2, one direction
of a link, a switch port, one core's DMA engine. A :class:`Flow` moves ``size_bytes`` through every
resource on its path at one rate. Whenever a flow starts or ends, the rates of all active flows are
recomputed by progressive filling (the max-min fair allocation used by flow-level network
simulators such as SimGrid); recomputations requested at the same instant are coalesced into one.

Units: time in integer picoseconds (SimPy time), sizes in bytes, rates in bytes per picosecond.
"""

from __future__ import annotations

import math
from typing import Callable, Sequence

import simpy

# A flow is finished when less than this fraction of its bytes remains (absorbs float rounding of
# rate x time; completion times themselves are rounded up to whole picoseconds).
_DONE_FRACTION = 1e-9


class Resource:
    """A shared bandwidth: ``capacity`` in bytes/ps, shared max-min fairly by the flows crossing it.

    ``bytes_moved`` counts the payload of finished flows; ``rate_log`` (when enabled) records the
    total rate through the resource each time it changes, as ``(time_ps, bytes_per_ps)``.
    """

    __slots__ = ("name", "kind", "die", "capacity", "active", "bytes_moved", "flows_done", "rate", "rate_log")

    def __init__(self, name: str, capacity: float, *, kind: str = "other", die: int = -1) -> None:
        if not capacity > 0:
            raise ValueError(f"resource {name}: capacity must be positive, got {capacity}")
        self.name = name
        self.kind = kind
        self.die = die
        self.capacity = capacity
        self.active: list[Flow] = []
        self.bytes_moved = 0
        self.flows_done = 0
        self.rate = 0.0
        self.rate_log: list[tuple[int, float]] | None = None

    def __repr__(self) -> str:
        return f"Resource({self.name}, {self.capacity * 1e3:.3f} GB/s)"


class Flow:
    """One transfer of ``size_bytes`` across ``path``; ``done`` fires when its last byte arrives."""

    __slots__ = ("path", "size_bytes", "remaining", "rate", "done", "start_ps")

    def __init__(self, path: Sequence[Resource], size_bytes: int, done: simpy.Event, start_ps: int) -> None:
        self.path = path
        self.size_bytes = size_bytes
        self.remaining = float(size_bytes)
        self.rate = 0.0
        self.done = done
        self.start_ps = start_ps


class FlowNetwork:
    """All active flows of a simulation and the max-min fair rates they get."""

    def __init__(self, env: simpy.Environment, *, record_rates: bool = True) -> None:
        self.env = env
        self.active: list[Flow] = []
        self.record_rates = record_rates
        self.resources: list[Resource] = []
        self._last_update_ps = 0
        self._recompute_pending = False
        self._timer_generation = 0
        self.recomputations = 0
        self.on_flow_done: Callable[[Flow], None] | None = None

    def add_resource(self, resource: Resource) -> Resource:
        """Register a resource so that its rate changes are logged and summarised."""
        if self.record_rates:
            resource.rate_log = []
        self.resources.append(resource)
        return resource

    def transfer(self, size_bytes: int, path: Sequence[Resource], done: simpy.Event | None = None) -> simpy.Event:
        """Start moving ``size_bytes`` across ``path`` now; returns the event fired on arrival."""
        env = self.env
        if done is None:
            done = env.event()
        if size_bytes <= 0 or not path:
            done.succeed()
            return done
        self._advance()
        flow = Flow(path, size_bytes, done, env.now)
        self.active.append(flow)
        for resource in path:
            resource.active.append(flow)
        self._request_recompute()
        return done

    # -- internals -----------------------------------------------------------------------------

    def _advance(self) -> None:
        """Move every active flow forward to the current time at its current rate."""
        now = self.env.now
        elapsed = now - self._last_update_ps
        if elapsed:
            for flow in self.active:
                flow.remaining -= flow.rate * elapsed
            self._last_update_ps = now

    def _request_recompute(self) -> None:
        if not self._recompute_pending:
            self._recompute_pending = True
            event = self.env.event()
            event.callbacks.append(self._recompute)
            event.succeed()

    def _recompute(self, _event: simpy.Event | None = None) -> None:
        self._recompute_pending = False
        self._advance()
        self._assign_rates()
        self._arm_timer()

    def _assign_rates(self) -> None:
        """Progressive filling: repeatedly saturate the resource with the smallest fair share."""
        self.recomputations += 1
        flows = self.active
        residual: dict[Resource, float] = {}
        unfixed: dict[Resource, int] = {}
        for flow in flows:
            flow.rate = -1.0
            for resource in flow.path:
                if resource in unfixed:
                    unfixed[resource] += 1
                else:
                    residual[resource] = resource.capacity
                    unfixed[resource] = 1
        remaining = len(flows)
        while remaining:
            bottleneck = None
            share = math.inf
            for resource, count in unfixed.items():
                if count:
                    fair = residual[resource] / count
                    if fair < share:
                        share, bottleneck = fair, resource
            for flow in bottleneck.active:
                if flow.rate < 0.0:
                    flow.rate = share
                    remaining -= 1
                    for resource in flow.path:
                        residual[resource] = max(residual[resource] - share, 0.0)
                        unfixed[resource] -= 1
        now = self.env.now
        for resource in residual:
            total = 0.0
            for flow in resource.active:
                total += flow.rate
            if total != resource.rate:
                resource.rate = total
                if resource.rate_log is not None:
                    resource.rate_log.append((now, total))

    def _arm_timer(self) -> None:
        """Schedule one wake-up at the earliest completion (stale timers are ignored)."""
        self._timer_generation += 1
        if not self.active:
            return
        soonest = min(flow.remaining / flow.rate for flow in self.active)
        delay = max(1, math.ceil(soonest - 1e-9))
        generation = self._timer_generation
        self.env.timeout(delay).callbacks.append(lambda _e: self._on_timer(generation))

    def _on_timer(self, generation: int) -> None:
        if generation != self._timer_generation:
            return
        self._advance()
        finished = [flow for flow in self.active if flow.remaining <= flow.size_bytes * _DONE_FRACTION]
        if not finished:
            self._arm_timer()
            return
        for flow in finished:
            self._finish(flow)
        self._request_recompute()

    def _finish(self, flow: Flow) -> None:
        self.active.remove(flow)
        for resource in flow.path:
            resource.active.remove(flow)
            resource.bytes_moved += flow.size_bytes
            resource.flows_done += 1
            if not resource.active:
                resource.rate = 0.0
                if resource.rate_log is not None:
                    resource.rate_log.append((self.env.now, 0.0))
        if self.on_flow_done is not None:
            self.on_flow_done(flow)
        flow.done.succeed()
