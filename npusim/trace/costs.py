"""Which config values each recorded time comes from: the cost sources of a run.

The hardware model converts config values into the costs it simulates once (``hw/timing.py`` for a
die's cores and engines, the AICPUs, the SDMA, the fabrics' links and switches, the host thread of a
torch program). Where it does, it tells the recorder's :class:`CostSources` which config key each
cost came from: once per kind of event, per engine, per route, per resource, never per event, so
recording costs nothing on the hot path. The analysis then splits any span of a recorded event among
the keys it rests on (:meth:`CostSources.of_event`, :meth:`CostSources.of_fixed`,
:meth:`CostSources.of_wait`):

- an event's time follows its name's :class:`CostRule`: the fixed parts of its cost (a vector
  instruction's issue and pipeline latency), then the rest (its repeats x ``per_repeat``) to the
  keys of the part that grows with the work; a rule without such a part (an AICPU completion:
  ``completion + dependency``) scales its parts to the event's time;
- a DMA's fixed part (the engine's set-up, the route's latencies, its bursts) is split by its
  engine (:class:`EngineCosts`) and the latencies of the route it took: among the routes its engine
  took from its die, the one whose latency leaves a whole number of bursts (the longest such);
- the streaming part of a DMA waited on the resource that limited its rate: a bandwidth resource's
  keys (``die.hbm.bandwidth``; a link's bandwidth and efficiency, its write credits and latency) or
  the engine's own ``rate`` when the engine was the limit;
- an atomic-add store's tail, from its last byte's arrival to its add applied at the L2 (its
  read-modify-write, after the earlier adds to the same blocks): ``die.l2.atomic_add``.

A :class:`Term` may rest on several keys at once (a link's payload rate is bandwidth x efficiency:
the time rests fully on each), so the shares of the keys of a span can add up to more than the span.
Times are integer picoseconds; keys are dotted config paths (``die.cores.aiv.engines.MTE2.setup``).
"""

from __future__ import annotations

from typing import NamedTuple

Keys = tuple[str, ...]

UNATTRIBUTED: Keys = ()
"""The keys of time no registered cost explains (a term with no key)."""


class Term(NamedTuple):
    """``ps`` picoseconds of time that rest on the config ``keys`` (each of them fully)."""

    keys: Keys
    ps: int


class CostRule(NamedTuple):
    """How the time of an event of one name splits among config keys: its fixed ``terms`` first
    (each at most the time left), then the rest to ``rest``, the keys of the part that grows with
    the event's work (repeats, blocks, instructions); with no ``rest``, the terms are scaled to the
    event's time (they are its whole cost)."""

    terms: tuple[Term, ...] = ()
    rest: Keys = ()

    def split(self, duration_ps: int) -> list[Term]:
        """The event's ``duration_ps`` as terms (summing to it, up to rounding of scaled terms)."""
        if duration_ps <= 0:
            return []
        if not self.rest:
            return scaled(self.terms, duration_ps)
        terms, left = [], duration_ps
        for term in self.terms:
            taken = min(term.ps, left)
            if taken > 0:
                terms.append(Term(term.keys, taken))
                left -= taken
        if left > 0:
            terms.append(Term(self.rest, left))
        return terms


def scaled(terms: tuple[Term, ...] | list[Term], total_ps: int) -> list[Term]:
    """``terms`` scaled to add up to ``total_ps`` exactly (each rounded down at its running sum, so
    no picosecond is lost); terms that round to nothing are left out; all of it unattributed when
    the terms hold no time."""
    whole = sum(term.ps for term in terms)
    if whole <= 0:
        return [Term(UNATTRIBUTED, total_ps)] if total_ps > 0 else []
    result, running, given = [], 0, 0
    for term in terms:
        running += term.ps
        upto = running * total_ps // whole
        if upto > given:
            result.append(Term(term.keys, upto - given))
            given = upto
    return result


def constant(*keys: str) -> CostRule:
    """A rule for events whose whole time is one cost, ``keys``."""
    return CostRule((), keys)


class EngineCosts(NamedTuple):
    """A copy engine's cost keys: its ``setup`` per copy and ``per_burst`` after the first (keys
    and ps), and the keys of its ``rate`` (the cap of every copy it makes)."""

    setup: Term
    per_burst: Term
    rate: Keys


class CostSources:
    """What the hardware model said about where its costs come from (see the module)."""

    def __init__(self) -> None:
        self.rules: dict[tuple[str, int], CostRule] = {}  # (lane, or "" for every lane; event name id) -> its rule
        self.kinds: dict[tuple[int, str], str] = {}  # (die, unit) -> the kind of engine its lanes' copies are made by
        self.engines: dict[tuple[str, str], EngineCosts] = {}  # (kind, lane, or "" for every lane) -> its engine's costs
        self.routes: dict[tuple[int, str, str], dict[tuple[Term, ...], None]] = {}  # (die, kind, lane) -> the latency terms of each route taken
        self.resources: dict[str, Keys] = {}  # bandwidth resource name -> the keys of its capacity
        self.atomic_add: Keys = UNATTRIBUTED  # the keys of an atomic add's read-modify-write at the L2 (a DMA's tail)

    # -- what the hardware model says ------------------------------------------------------------

    def rule(self, lane: str, name_id: int, rule: CostRule) -> None:
        """Events named ``name_id`` on ``lane`` ("": on any lane without a rule of its own) cost
        ``rule``; the first rule given for them stands."""
        self.rules.setdefault((lane, name_id), rule)

    def unit(self, die: int, unit: str, kind: str) -> None:
        """The copies on the lanes of ``unit`` of ``die`` are made by the engines of ``kind``."""
        self.kinds[(die, unit)] = kind

    def engine(self, kind: str, lane: str, costs: EngineCosts) -> None:
        """The engine of ``kind`` on ``lane`` ("": on every lane of the kind) costs ``costs``."""
        self.engines[(kind, lane)] = costs

    def route(self, die: int, kind: str, lane: str, latency: tuple[Term, ...]) -> None:
        """The engine of ``kind`` on ``lane`` of ``die`` took a route of these latencies."""
        self.routes.setdefault((die, kind, lane), {})[latency] = None

    def resource(self, name: str, keys: Keys) -> None:
        """The capacity of the bandwidth resource ``name`` comes from ``keys``."""
        self.resources[name] = keys

    def atomic_adds(self, keys: Keys) -> None:
        """An atomic add's read-modify-write at the L2 (after its last byte arrived) costs ``keys``."""
        self.atomic_add = keys

    # -- what the analysis asks ------------------------------------------------------------------

    def of_event(self, lane: str, name_id: int, duration_ps: int) -> list[Term]:
        """The keys the time of an event (its whole ``duration_ps``) rests on."""
        rule = self.rules.get((lane, name_id)) or self.rules.get(("", name_id))
        if rule is None:
            return [Term(UNATTRIBUTED, duration_ps)] if duration_ps > 0 else []
        return rule.split(duration_ps)

    def _engine(self, die: int, unit: str, lane: str) -> tuple[str, EngineCosts | None]:
        kind = self.kinds.get((die, unit), "")
        return kind, self.engines.get((kind, lane)) or self.engines.get((kind, ""))

    def of_fixed(self, die: int, unit: str, lane: str, fixed_ps: int) -> list[Term]:
        """The keys a DMA's fixed part of ``fixed_ps`` (set-up, bursts, route latency) rests on."""
        if fixed_ps <= 0:
            return []
        kind, engine = self._engine(die, unit, lane)
        if engine is None:
            return [Term(UNATTRIBUTED, fixed_ps)]
        terms = [Term(engine.setup.keys, min(engine.setup.ps, fixed_ps))] if engine.setup.ps > 0 else []
        left = fixed_ps - (terms[0].ps if terms else 0)
        routes = self.routes.get((die, kind, lane)) or self.routes.get((die, kind, "")) or {}
        latency = _route_of(left, engine.per_burst.ps, list(routes))
        for term in latency:
            taken = min(term.ps, left)
            if taken > 0:
                terms.append(Term(term.keys, taken))
                left -= taken
        if left > 0:
            terms.append(Term(engine.per_burst.keys, left))
        return terms

    def of_wait(self, die: int, unit: str, lane: str, resource: str | None, duration_ps: int) -> list[Term]:
        """The keys the streaming part of a DMA rests on: the capacity of the ``resource`` that
        limited it, or (``resource`` None) its engine's rate."""
        if duration_ps <= 0:
            return []
        if resource is not None:
            return [Term(self.resources.get(resource, UNATTRIBUTED), duration_ps)]
        _, engine = self._engine(die, unit, lane)
        return [Term(engine.rate if engine is not None else UNATTRIBUTED, duration_ps)]


def _route_of(left_ps: int, per_burst_ps: int, routes: list[tuple[Term, ...]]) -> tuple[Term, ...]:
    """Of the routes an engine took, the one a fixed part with ``left_ps`` after the set-up took:
    the longest latency that leaves a whole number of bursts (any number when bursts cost
    nothing), else the longest that fits in ``left_ps``; none when no route does."""
    shorter = [route for route in routes if _latency(route) <= left_ps]
    whole = [route for route in shorter if per_burst_ps <= 0 or (left_ps - _latency(route)) % per_burst_ps == 0]
    candidates = whole or shorter
    return max(candidates, key=_latency) if candidates else ()


def _latency(route: tuple[Term, ...]) -> int:
    return sum(term.ps for term in route)
