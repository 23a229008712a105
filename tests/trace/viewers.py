"""Replays of how two real viewers import a JSON trace, to test what a person would see.

**Perfetto** (its trace processor's JSON importer; rules read from google/perfetto at commit
ec5d16b14b743ba6063d720956d6d6af6610fd72: ``src/trace_processor/importers/json/json_trace_tokenizer.cc``,
``json_trace_parser.cc``, ``src/trace_processor/sorter/trace_sorter.h``,
``src/trace_processor/importers/common/slice_tracker.cc`` and ``flow_tracker.cc``):

- ``ts`` and ``dur`` become whole nanoseconds each on its own: an integral number times 1000, any
  other number rounded to the nearest integer after multiplying by 1000 (halves away from zero).
- Events are processed in the order of ``ts``; at equal ``ts`` complete events come first, the
  longest first, then every other event (and complete events of zero duration), in file order.
- Each thread keeps a stack of open slices. A complete event first pops, from the top, every slice
  that ended before it starts, or exactly when it starts unless both are of zero duration. If it
  then starts inside the top slice but ends after it, it cannot nest: older versions drop it, newer
  ones move it to an overflow track with an import error. Otherwise it is pushed: its depth is the
  stack's size.
- A flow event (``s``, or ``f`` with ``"bp":"e"``) binds to the slice on top of its thread's stack
  when it is processed (the stack is not popped for it). An ``f`` processed before its ``s`` is
  dropped (an import error: an end without a start). The arrow's two slices are ordered by their
  start: the one that starts earlier is its source (the ``s`` slice on a tie); the UI draws it
  from the end of the source to the start of the target.

**speedscope** (``src/import/trace-event.ts`` of jlfwong/speedscope at commit
3613918de0dd55a263d0d04f85b0c8c2039c7bee): per thread, every ``ts`` minus the thread's smallest;
a complete event becomes a begin at ``ts`` and an end at ``ts + dur``, in floating point; begins in
order of ``ts`` (the longer first on a tie), ends in order of ``ts``; at equal times an end is taken
first unless it is the begin's own (a zero duration). An end first looks, among the ends of the
same time, for the one of the slice on top of the stack; when none matches, the top is closed with
a warning (mis-nested) or, when even the names differ, nothing is closed.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

_LAST = (1 << 63) - 1  # the sort key of events other than complete ones


def perfetto_ns(value: Any) -> int:
    """A JSON ``ts`` or ``dur`` (microseconds) as Perfetto's importer turns it into nanoseconds."""
    if isinstance(value, int) or float(value).is_integer():
        return int(value) * 1000
    scaled = float(value) * 1000.0
    whole = math.floor(scaled)
    return whole + (1 if scaled - whole >= 0.5 else 0)


@dataclass
class Slice:
    """A complete event as imported: its place in the file, thread, name, ns start and duration,
    its depth on the thread's track (-1: it could not nest and was set aside) and the slice it
    nests in, if any."""

    index: int
    thread: tuple[int, int]
    name: str
    ts: int
    dur: int
    depth: int = 0
    parent: Slice | None = None

    @property
    def end(self) -> int:
        return self.ts + self.dur


@dataclass
class PerfettoImport:
    """What Perfetto made of a trace: its slices (in file order), the slices set aside because
    they overlap a neighbour, the slices each flow's ``s`` and ``f`` ends bound to, by (id, name),
    the flow events that found no slice to bind to, and the ``f`` events dropped because they came
    before their ``s``."""

    slices: list[Slice] = field(default_factory=list)
    overlapping: list[Slice] = field(default_factory=list)
    flows: dict[tuple[int, str], tuple[Slice, Slice]] = field(default_factory=dict)
    unbound: list[dict] = field(default_factory=list)
    ended_before_start: list[dict] = field(default_factory=list)
    bound_to: dict[int, Slice] = field(default_factory=dict)  # file index of a flow event -> its slice

    def backwards(self) -> list[tuple[int, str]]:
        """The flows Perfetto turns around: the arrow goes from the slice that starts first, so a
        flow whose ``f`` end's slice starts before its ``s`` end's slice points back in time."""
        return [key for key, (source, target) in self.flows.items() if target.ts < source.ts]

    def drawn_backwards(self) -> list[tuple[int, str]]:
        """The flows whose arrow, drawn from the end of its source slice to the start of its target
        slice, goes back in time (turned-around flows included)."""
        return [key for key, (source, target) in self.flows.items() if target.ts < source.end]


def load_events(path: str | Path) -> list[dict]:
    return json.loads(Path(path).read_text(encoding="utf-8"))["traceEvents"]


def perfetto_import(events: list[dict]) -> PerfettoImport:
    """Replay Perfetto's JSON import of ``events`` (the ``traceEvents`` list)."""
    keyed = []
    for index, event in enumerate(events):
        phase = event["ph"]
        if phase == "M":
            continue
        ts = perfetto_ns(event["ts"])
        if phase == "X":
            dur = perfetto_ns(event["dur"])
            key = _LAST - dur
        else:
            dur, key = 0, _LAST
        keyed.append((ts, key, index, dur))
    keyed.sort()
    result = PerfettoImport()
    stacks: dict[tuple[int, int], list[Slice]] = {}
    starts: dict[tuple[int, str], Slice] = {}
    for ts, _, index, dur in keyed:
        event = events[index]
        phase = event["ph"]
        thread = (event["pid"], event.get("tid", event["pid"]))
        stack = stacks.setdefault(thread, [])
        if phase == "X":
            new = Slice(index, thread, event["name"], ts, dur)
            result.slices.append(new)
            while stack and (stack[-1].end < ts or (stack[-1].end == ts and not (stack[-1].dur == 0 and dur == 0))):
                stack.pop()
            if stack and ts < stack[-1].end < ts + dur:
                new.depth = -1
                result.overlapping.append(new)
                continue
            new.depth = len(stack)
            new.parent = stack[-1] if stack else None
            stack.append(new)
        elif phase in ("s", "f"):
            if not stack:
                result.unbound.append(event)
                continue
            top = stack[-1]
            result.bound_to[index] = top
            key = (event["id"], event["name"])
            if phase == "s":
                starts[key] = top
            elif key in starts:
                result.flows[key] = (starts[key], top)
            else:
                result.ended_before_start.append(event)
    result.slices.sort(key=lambda s: s.index)
    return result


@dataclass
class SpeedscopeImport:
    """What speedscope made of a trace's complete events: the depth each slice was entered at and
    the slice it was entered in (by file index), and the warnings of its import (a slice closed
    while another was on top)."""

    depth: dict[int, int] = field(default_factory=dict)
    parent: dict[int, int] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)


def _frame_key(event: dict) -> str:
    """speedscope's identity of a slice: its name and arguments."""
    return f"{event.get('name') or '(unnamed)'} {json.dumps(event['args'], separators=(',', ':'))}" if event.get("args") else event.get("name", "")


def speedscope_import(events: list[dict]) -> SpeedscopeImport:
    """Replay speedscope's import of the complete events of ``events``, thread by thread."""
    by_thread: dict[tuple[int, int], list[int]] = {}
    for index, event in enumerate(events):
        if event["ph"] == "X":
            by_thread.setdefault((event["pid"], event["tid"]), []).append(index)
    result = SpeedscopeImport()
    for members in by_thread.values():
        first = min(float(events[i]["ts"]) for i in members)
        ts = {i: float(events[i]["ts"]) - first for i in members}
        begins = sorted(members, key=lambda i: (ts[i], -float(events[i]["dur"])))  # stable: file order on ties
        ends = sorted(((ts[i] + float(events[i]["dur"]), i) for i in begins), key=lambda end: end[0])
        keys = {i: _frame_key(events[i]) for i in members}
        stack: list[int] = []
        b = e = 0
        while b < len(begins) or e < len(ends):
            take_begin = e == len(ends) or (b < len(begins) and (ts[begins[b]] < ends[e][0] or (
                ts[begins[b]] == ends[e][0] and keys[begins[b]] == keys[ends[e][1]])))
            if take_begin:
                result.depth[begins[b]] = len(stack)
                if stack:
                    result.parent[begins[b]] = stack[-1]
                stack.append(begins[b])
                b += 1
                continue
            if stack:  # prefer the end, among those of the same time, of the slice on top
                top = stack[-1]
                same_time = [k for k in range(e, len(ends)) if ends[k][0] == ends[e][0]]
                match = next((k for k in same_time if keys[ends[k][1]] == keys[top]), None)
                if match is None:
                    match = next((k for k in same_time if events[ends[k][1]]["name"] == events[top]["name"]), None)
                if match is not None:
                    ends[e], ends[match] = ends[match], ends[e]
            _, closing = ends[e]
            e += 1
            if not stack:
                result.warnings.append(f"end of {keys[closing]!r} with nothing open")
            elif events[closing]["name"] != events[stack[-1]]["name"]:
                result.warnings.append(f"end of {keys[closing]!r} while {keys[stack[-1]]!r} is open: nothing closed")
            else:
                if keys[closing] != keys[stack[-1]]:
                    result.warnings.append(f"end of {keys[closing]!r} closes {keys[stack[-1]]!r}")
                stack.pop()
    return result


def _owners(events: list[dict], children: tuple[str, ...]) -> dict[int, int]:
    """For each child slice (named one of ``children``), by file index: the slice the writer made
    it a child of, the last other complete event written before it on its thread."""
    last: dict[tuple[int, int], int] = {}
    owners = {}
    for index, event in enumerate(events):
        if event["ph"] != "X":
            continue
        thread = (event["pid"], event["tid"])
        if event["name"] in children:
            if thread in last:
                owners[index] = last[thread]
        else:
            last[thread] = index
    return owners


def viewer_problems(events: list[dict], *, children: tuple[str, ...] = ("release", "arrive")) -> list[str]:
    """What a person would find wrong with ``events`` in Perfetto or speedscope, one line per kind
    of problem (empty: nothing): slices set aside for overlapping, slices nested anywhere but a
    ``children`` slice in the slice written just before it on its lane, flow ends bound to no slice
    or dropped, arrows back in time, speedscope's import warnings and its nesting."""
    problems = []
    owners = _owners(events, children)

    def report(what: str, found: list) -> None:
        if found:
            problems.append(f"{len(found)} {what}, e.g. {found[:3]}")

    def in_owner(index: int, depth: int, parent: int | None) -> bool:
        return depth == 1 and parent is not None and owners.get(index) == parent

    perfetto = perfetto_import(events)
    report("slices overlap a neighbour in Perfetto", [(s.name, s.ts, s.dur) for s in perfetto.overlapping])
    report("slices are mis-nested in Perfetto", [(s.name, s.ts, s.parent.name if s.parent else None) for s in perfetto.slices if s.depth > 0 and not (
        s.name in children and in_owner(s.index, s.depth, s.parent.index if s.parent else None))])
    report(f"{'/'.join(children)} slices are not nested in their slice in Perfetto", [(s.name, s.ts) for s in perfetto.slices if s.name in children and not in_owner(
        s.index, s.depth, s.parent.index if s.parent else None)])
    report("flow events bind to no slice in Perfetto", perfetto.unbound)
    report("flow ends come before their start and are dropped by Perfetto", perfetto.ended_before_start)
    by_key = {key: (source, target) for key, (source, target) in perfetto.flows.items()}
    report("arrows are drawn back in time", [(key, by_key[key][0].name, by_key[key][1].name) for key in perfetto.drawn_backwards()])
    speedscope = speedscope_import(events)
    report("speedscope import warnings", speedscope.warnings)
    report("slices are mis-nested in speedscope", [events[i]["name"] for i, depth in speedscope.depth.items() if depth > 0 and not (
        events[i]["name"] in children and in_owner(i, depth, speedscope.parent.get(i)))])
    return problems
