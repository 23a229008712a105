"""The critical path of a run and the bottleneck breakdown it gives.

The run is a dependency graph whose nodes are the recorded events (executed instructions). An
event could not proceed before its dependencies ended:

- **pipe order**: the previous event of its lane (a pipe runs in order, across kernels too);
- **flows**: a ``wait_flag`` depends on the ``set_flag`` whose flag it consumed, and any flow an op
  recorded (an AICPU scheduler's ready -> dispatch -> program -> complete, signals, puts, waits
  across PEs) makes its target depend on its source;
- **issue**: an event that started after its lane's previous event ended was held by the scalar
  unit that issues it, and a ``pipe_barrier`` by the pipes it drains: both depend on the event of
  another lane of the same core and run that ended last before (for the barrier: at) that moment;
- **stream order**: the first event of a kernel on a lane depends on the last event of the die's
  op that ended last before it started (a stream runs its tasks in order).

The path is walked back from the event that ends last: at each event, the dependency that ended
last is the one that held it (a flow wins a tie). A poll pass (``Recorder.poll_names``) holds up
nothing by itself: an event with flow sources that follows a poll on its lane (the pass that saw a
signal, a dispatch or completion delayed by a pass) is held by its latest flow source, and its span
is attributed from that source's end, the poll latency included. The event's own span after that moment is
attributed to what did the work: its pipe ("VECTOR on die0 aiv7"); for a DMA, the fixed part
(set-up, bursts, route latency) to the pipe and the streaming part to the resource that limited
its rate for most of its bytes ("MTE2 waiting on link die0->die1 HCCS", "MTE2 waiting on die0
HBM", or "MTE2 engine rate on die0 aiv3" when the core's own engine was the limit). Time where the
path has no event (launch, host) is "idle". The segments tile [0, end of the last event] exactly,
so the shares of the breakdown add up to 1.

Each segment also says which config values its time rests on (``terms``: ps by config key, from the
recorder's cost sources, :mod:`npusim.trace.costs`): an event's span by its name's cost rule, a DMA's
fixed part by its engine and route, its streaming part by the keys of the resource that limited it
(or of the engine's rate); a part of an event on the path takes that share of each of its terms.
Each breakdown row lists the keys of its time (``rests_on``), and :func:`bottlenecks` the keys of the
whole path's.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from npusim.engine.flow import OWN_CAP, UNREGISTERED
from npusim.trace.costs import Term, scaled
from npusim.trace.record import RunRecord

IDLE = "idle (no event on the path: launch, host)"


@dataclass(frozen=True)
class Segment:
    """A span of the critical path, ``[start_ps, end_ps)``, attributed to ``label``: ``kind`` is
    ``pipe``, ``dma fixed``, ``engine``, a resource kind (``hbm``, ``l2``, ``link``, ``nic``...) or
    ``idle``; ``event`` is the event it belongs to (-1 for idle); ``resource`` names the resource
    a DMA waited on (a resource kind's span), else empty; ``terms``, the config keys its time rests
    on (ps by key, :class:`~npusim.trace.costs.Term`)."""

    start_ps: int
    end_ps: int
    label: str
    kind: str
    event: int
    resource: str = ""
    terms: tuple[Term, ...] = ()

    @property
    def duration_ps(self) -> int:
        return self.end_ps - self.start_ps


@dataclass
class CriticalPath:
    """The segments of the critical path in time order and the end-to-end time they cover."""

    end_to_end_ps: int
    segments: list[Segment]
    events: list[int]  # the events on the path, in time order

    def breakdown(self, low: Callable[[str], bool] | None = None) -> list[dict[str, Any]]:
        """Time per label, largest first: label, kind, time_us, share of the end-to-end time,
        ``resource`` (its name) for time waiting on a resource, and ``rests_on``: the config keys
        of its time, each with its share of the row's time (:func:`keys_of`); given ``low`` (which
        keys are of low confidence), ``low_confidence_share``: the share of the row's time resting on
        at least one of them."""
        totals: dict[tuple[str, str, str], int] = {}
        terms: dict[tuple[str, str, str], list[Term]] = {}
        for segment in self.segments:
            key = (segment.label, segment.kind, segment.resource)
            totals[key] = totals.get(key, 0) + segment.duration_ps
            terms.setdefault(key, []).extend(segment.terms)
        whole = max(self.end_to_end_ps, 1)
        rows = [{"label": label, "kind": kind, "time_us": ps / 1e6, "share": ps / whole, **({"resource": resource} if resource else {}),
                 "rests_on": keys_of(terms[(label, kind, resource)], ps),
                 **({"low_confidence_share": _resting_on(terms[(label, kind, resource)], low) / ps} if low is not None else {})}
                for (label, kind, resource), ps in totals.items() if ps > 0]
        return sorted(rows, key=lambda row: (-row["time_us"], row["label"]))

    def rests_on(self) -> list[dict[str, Any]]:
        """The config keys the whole path's time rests on, each with its share of the end-to-end
        time (:func:`keys_of`)."""
        return keys_of([term for segment in self.segments for term in segment.terms], self.end_to_end_ps)

    def share_resting_on(self, chosen: Callable[[str], bool]) -> float:
        """The share of the end-to-end time that rests on at least one key ``chosen`` picks (time
        resting on several counted once)."""
        return _resting_on([term for segment in self.segments for term in segment.terms], chosen) / max(self.end_to_end_ps, 1)

    def describe(self, top: int = 3, rows: list[dict[str, Any]] | None = None) -> str:
        """One line: ``61% MTE2 waiting on link die0->die1 HCCS, 24% VECTOR on die0 aiv7, ...``
        (``rows``: the breakdown, when already made)."""
        rows = self.breakdown() if rows is None else rows
        text = ", ".join(f"{row['share']:.0%} {row['label']}" for row in rows[:top])
        return text + (", ..." if len(rows) > top else "")


def _resting_on(terms: list[Term], chosen: Callable[[str], bool]) -> int:
    """The ps of ``terms`` that rest on at least one key ``chosen`` picks."""
    return sum(term.ps for term in terms if any(chosen(key) for key in term.keys))


def keys_of(terms: list[Term], whole_ps: int) -> list[dict[str, Any]]:
    """The keys of ``terms`` with the time resting on each: ``key`` (``""`` for time no config
    key explains), ``time_us`` and ``share`` of ``whole_ps``; most first, then by key. A term of
    several keys counts fully for each (a link's bandwidth and its efficiency)."""
    per_key: dict[str, int] = {}
    for term in terms:
        for key in term.keys or ("",):
            per_key[key] = per_key.get(key, 0) + term.ps
    whole = max(whole_ps, 1)
    return [{"key": key, "time_us": ps / 1e6, "share": ps / whole} for key, ps in sorted(per_key.items(), key=lambda item: (-item[1], item[0])) if ps > 0]


def critical_path(record: RunRecord) -> CriticalPath:
    """The critical path of everything ``record`` holds (see the module doc)."""
    return _Walk(record).run()


def bottlenecks(record: RunRecord, *, rows: int = 12, low: Callable[[str], bool] | None = None) -> dict[str, Any]:
    """The ``bottlenecks`` section of a summary: end-to-end time, events on the critical path, the
    breakdown's ``rows`` largest entries (the rest summed in one ``other`` row), the config keys the
    path's time rests on (``rests_on``) and, given ``low`` (which keys are of low confidence), the
    share of the time that rests on at least one of them (``low_confidence_share``)."""
    path = critical_path(record)
    breakdown = path.breakdown(low)
    summary = path.describe(rows=breakdown)
    kept, rest = breakdown[:rows], breakdown[rows:]
    if rest:
        kept.append({"label": f"other ({len(rest)} entries)", "kind": "other", "time_us": sum(r["time_us"] for r in rest),
                     "share": sum(r["share"] for r in rest)})
    found = {"end_to_end_us": path.end_to_end_ps / 1e6, "path_events": len(path.events), "summary": summary, "breakdown": kept,
             "rests_on": path.rests_on()}
    if low is not None:
        found["low_confidence_share"] = path.share_resting_on(low)
    return found


def _part(terms: list[Term], part_ps: int, whole_ps: int) -> tuple[Term, ...]:
    """The terms of a span of ``whole_ps`` for the ``part_ps`` of it on the path: each term's share."""
    if part_ps >= whole_ps:
        return tuple(terms)
    return tuple(scaled(terms, part_ps))


def _narrow(values: np.ndarray) -> np.ndarray:
    """Small integers (track or op ids) as int16 when they fit, for numpy's stable sorts, which are
    radix sorts (several times faster) for 16-bit integers: the same order, being stable."""
    if len(values) and np.iinfo(np.int16).min <= int(values.min()) and int(values.max()) <= np.iinfo(np.int16).max:
        return values.astype(np.int16)
    return values


def _by_then(first: np.ndarray, then: np.ndarray) -> np.ndarray:
    """The order of ``np.lexsort((then, first))`` (by ``first``, then ``then``, then index; both
    non-negative integers) as one stable sort of a combined key where it fits in an int64 (~1.5x
    faster)."""
    if not len(first):
        return np.zeros(0, dtype=np.int64)
    span = int(then.max()) + 1
    if (int(first.max()) + 1) * span >= 2**63:
        return np.lexsort((then, first))
    return np.argsort(first.astype(np.int64) * span + then, kind="stable")


class _Walk:
    """Indexes of the recorded events that the backward walk looks things up in."""

    def __init__(self, record: RunRecord) -> None:
        recorder = record.recorder
        self.recorder = recorder
        self.resources = record.resources
        c = recorder.columns()
        self.track, self.start, self.end, self.op = c["track"], c["start_ps"], c["end_ps"], c["op"]
        self.name = c["name"]
        n = len(self.start)
        self.n = n
        # pipe order: the previous event of the same lane
        order = np.argsort(_narrow(self.track), kind="stable")
        same = self.track[order[1:]] == self.track[order[:-1]]
        self.prev = np.full(n, -1, dtype=np.int64)
        self.prev[order[1:][same]] = order[:-1][same]
        # flows, by target
        flows = recorder.flows()
        by_target = np.argsort(flows["to"], kind="stable")
        self.flow_to, self.flow_from = flows["to"][by_target], flows["from"][by_target]
        # DMAs
        transfers = recorder.transfers()
        self.transfer_event, self.transfer_fixed, self.transfer_limit = transfers["event"], transfers["fixed_ps"], transfers["bottleneck"]
        tails = recorder.tails()
        self.tail_of: dict[int, int] = dict(zip(tails["event"].tolist(), tails["tail_ps"].tolist(), strict=True))
        # the events of each core (die, unit) by end time, for issue and barrier dependencies
        core = recorder.track_units()[0][self.track] if n else np.zeros(0, dtype=np.int64)
        self.core = core
        self.by_core = _by_then(core, self.end)
        self.by_core_key = core[self.by_core]
        self.by_core_end = self.end[self.by_core]
        # ops: their dies, last events and end times, for stream order
        ops = recorder.ops
        self.op_die = [op.die for op in ops]
        self.op_last: dict[int, int] = {}
        if n:
            ends_first = np.argsort(self.end, kind="stable")  # by end, then index
            op_by_end = _narrow(self.op[ends_first])
            ops_seen, first_seen = np.unique(op_by_end, return_index=True)
            _, last_seen = np.unique(op_by_end[::-1], return_index=True)  # the last one wins: latest end, then highest index
            in_order = np.argsort(first_seen, kind="stable")  # in the order the ops are first seen by end
            self.op_last = dict(zip(ops_seen[in_order].tolist(), ends_first[n - 1 - last_seen[in_order]].tolist()))
        self._stream_indexes: dict[int | None, tuple[np.ndarray, list[int], list[int]]] = {}
        self.waits = recorder.wait_names
        self.named_waits = recorder.named_waits
        self.polls = recorder.poll_names

    # -- dependencies --------------------------------------------------------------------------

    def _flow_sources(self, e: int) -> list[int]:
        lo, hi = np.searchsorted(self.flow_to, [e, e + 1])
        sources: list[int] = self.flow_from[lo:hi].tolist()
        return sources

    def _same_core_before(self, e: int, time_ps: int) -> int:
        """The event of another lane of ``e``'s core and run that ended last at or before ``time_ps``."""
        key = self.core[e]
        lo, hi = np.searchsorted(self.by_core_key, [key, key + 1])
        position = lo + int(np.searchsorted(self.by_core_end[lo:hi], time_ps, side="right")) - 1
        track, op = self.track[e], self.op[e]
        while position >= lo:
            candidate = int(self.by_core[position])
            if candidate != e and self.track[candidate] != track and self.op[candidate] == op:
                return candidate
            position -= 1
        return -1

    def _stream_before(self, e: int) -> int:
        """The last event of the op of ``e``'s die that ended last at or before ``e`` started
        (among ops ending at the same time, the first in ``op_last``); events of no op count for
        every die, and an event of no op looks at every op."""
        op = int(self.op[e])
        ends, ops, lasts = self._stream_index(self.op_die[op] if op >= 0 else None)
        position = int(np.searchsorted(ends, self.start[e], side="right")) - 1
        while position >= 0 and ops[position] == op:
            position -= 1
        return lasts[position] if position >= 0 else -1

    def _stream_index(self, die: int | None) -> tuple[np.ndarray, list[int], list[int]]:
        """The ops' last events that :meth:`_stream_before` looks at for ``die``, by end time (ties:
        the op later in ``op_last`` first); built on first use."""
        index = self._stream_indexes.get(die)
        if index is None:
            ops = np.fromiter(self.op_last, dtype=np.int64, count=len(self.op_last))
            lasts = np.fromiter(self.op_last.values(), dtype=np.int64, count=len(self.op_last))
            if die is not None:
                looked_at = (ops < 0) | (np.array(self.op_die, dtype=np.int64)[np.maximum(ops, 0)] == die)
                ops, lasts = ops[looked_at], lasts[looked_at]
            ends = self.end[lasts]
            by_end = np.lexsort((-np.arange(len(ops)), ends))  # ties: the op later in op_last first
            index = self._stream_indexes[die] = (ends[by_end], ops[by_end].tolist(), lasts[by_end].tolist())
        return index

    def _holder(self, e: int) -> tuple[int, bool]:
        """The dependency of ``e`` that ended last (what held it), or -1; and whether ``e`` follows
        a poll on its lane and is held by a flow source instead (it waited from that source's end)."""
        start, end = self.start[e], self.end[e]
        sources = self._flow_sources(e)
        candidates = list(sources)
        previous = int(self.prev[e])
        after_poll = bool(sources) and previous >= 0 and self.name[previous] in self.polls
        if previous >= 0 and not after_poll:
            candidates.append(previous)
        latest = max((self.end[c] for c in candidates), default=-1)
        if not sources and self.name[e] in self.waits:
            # a barrier: held by the last event of the pipes it drains
            other = self._same_core_before(e, end)
            if other >= 0 and self.end[other] > latest:
                candidates.insert(0, other)
        elif latest < start:
            other = self._same_core_before(e, start)  # the scalar unit issued it late
            if other >= 0:
                candidates.insert(0, other)
        if not after_poll and (previous < 0 or self.op[previous] != self.op[e]):
            before = self._stream_before(e)
            if before >= 0:
                candidates.append(before)
        best, best_end = -1, -1
        for candidate in candidates:  # flows and same-core holders first: they win ties
            if candidate != e and self.end[candidate] > best_end and self.end[candidate] <= end:
                best, best_end = candidate, self.end[candidate]
        return best, after_poll and best >= 0

    # -- attribution ---------------------------------------------------------------------------

    def _attribute(self, e: int, since: int, until: int, segments: list[Segment]) -> None:
        """Attribute ``[since, until)`` of event ``e``'s span to what did its work."""
        if until <= since:
            return
        track = self.recorder.tracks[self.track[e]]
        where = f"die{track.die} {track.unit}".strip()
        name = int(self.name[e])
        pipe_label = f"{self.recorder.names[name]} on {where}" if name in self.named_waits else f"{track.lane} on {where}"
        costs = self.recorder.costs
        position = int(np.searchsorted(self.transfer_event, e))
        if position < len(self.transfer_event) and self.transfer_event[position] == e:
            fixed_ps = int(self.transfer_fixed[position])
            flowing = int(self.start[e] + fixed_ps)
            limit = int(self.transfer_limit[position])
            waited_on = ""
            if limit == OWN_CAP:
                label, kind = f"{track.lane} engine rate on {where}", "engine"
            elif limit == UNREGISTERED:
                label, kind = f"{track.lane} waiting on an unregistered resource", "other"
            else:
                resource = self.resources[limit]
                prefix = "link " if resource.kind == "link" else ""
                label, kind, waited_on = f"{track.lane} waiting on {prefix}{resource.name}", resource.kind, resource.name
            # appended latest first, as the walk goes back in time
            tail_from = int(self.end[e]) - self.tail_of.get(e, 0)  # after its last byte: its atomic add applied at the L2
            if until > tail_from:
                applying = until - max(since, tail_from)
                segments.append(Segment(max(since, tail_from), until, f"{track.lane} atomic adds applied at the L2 (read-modify-write) for {where}", "atomic", e,
                                        "", (Term(costs.atomic_add, applying),)))
                until = max(since, tail_from)
            if until > flowing:
                streaming = until - max(since, flowing)
                waits = costs.of_wait(track.die, track.unit, track.lane, waited_on if limit >= 0 else None, streaming) if limit != UNREGISTERED else []
                segments.append(Segment(max(since, flowing), until, label, kind, e, waited_on, tuple(waits)))
            if since < flowing:
                on_path = min(flowing, until) - since
                fixed = _part(costs.of_fixed(track.die, track.unit, track.lane, fixed_ps), on_path, fixed_ps)
                segments.append(Segment(since, min(flowing, until), f"{track.lane} fixed cost (set-up, latency) on {where}", "dma fixed", e, "", fixed))
            return
        duration = int(self.end[e] - self.start[e])
        own = _part(costs.of_event(track.lane, int(self.name[e]), duration), until - since, duration)
        segments.append(Segment(since, until, pipe_label, "pipe", e, "", own))

    def run(self) -> CriticalPath:
        if not self.n:
            return CriticalPath(0, [], [])
        end_to_end = int(self.end.max())
        e = int(np.flatnonzero(self.end == end_to_end)[-1])
        cursor = end_to_end
        segments: list[Segment] = []
        path: list[int] = []
        visited: set[int] = set()
        while e >= 0 and e not in visited:
            visited.add(e)
            path.append(e)
            holder, waited_from_source = self._holder(e)
            start = int(self.start[e])
            released = int(self.end[holder]) if holder >= 0 else 0
            lane_from = min(start, released) if waited_from_source else start
            own_from = max(lane_from, min(released, cursor))
            self._attribute(e, own_from, cursor, segments)
            gap_from = released if holder >= 0 else 0
            if gap_from < own_from:
                segments.append(Segment(gap_from, own_from, IDLE, "idle", -1))
            cursor = min(cursor, released)
            e = holder
        if cursor > 0 and e >= 0:  # stopped on a cycle of zero-length events: close the path
            segments.append(Segment(0, cursor, IDLE, "idle", -1))
        segments.reverse()
        path.reverse()
        return CriticalPath(end_to_end, segments, path)
