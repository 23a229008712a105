"""Bandwidth shared by concurrent transfers: a fluid network with max-min fair rates.

A :class:`Resource` is a bandwidth that transfers share: an HBM, an L2, one direction of a link, a
switch port, a NIC. A transfer (a flow) moves ``size_bytes`` through every resource on its path at
one rate, never above its own ``cap`` (the DMA engine that drives it: one core's MTE cannot exceed
its own rate). Whenever flows start or end, rates are recomputed by progressive filling, the
max-min fair allocation of validated flow-level network simulators (SimGrid).

Flows with the same path and cap get the same rate, so they are kept in one :class:`FlowClass`,
and each class keeps a virtual clock of the bytes each member has received, so members need no
update when rates change (the classic processor-sharing technique).

Progressive filling is a sequence of steps: raise every unfrozen rate to the next level at which a
resource saturates (the smallest fair share ``residual / unfrozen members``, ties to the resource a
scan of the busy classes in creation order meets first) or a class reaches its cap (caps first on a
tie), and freeze the classes it limits. The network keeps the steps of the last filling. When
member counts change, the steps before the first one the change can influence are kept as they
are (same choices, same floating-point operations, so the same rates to the bit), the later ones
are undone and the filling resumes from there: a change among the last-frozen, fastest classes
costs a few steps, not a full recomputation (:meth:`FlowNetwork._first_affected_step` states the
rule). A resource crossed by exactly the classes of another, of a clearly higher capacity (a port
behind its write credits, an L2 in front of its HBM), can never limit a rate and stays out of the
filling (:meth:`FlowNetwork._regroup`). Only classes whose rate changed are advanced and
rescheduled; the next finish of every busy class waits in one heap. The network wakes up only at
the instants where something changes: one SimPy event per instant however many flows it concerns.

Each flow also learns what limited it: at every recomputation each class notes its bottleneck (the
resource that froze it in the filling, or its own cap) when it changes, at the class's virtual
clock; a finished flow's event carries ``(bottleneck index, time its bytes started flowing)``, the
bottleneck being the one under which it received most of its bytes (of equals, the one it had
last; each class keeps a running total of the bytes under each of its bottlenecks, so a flow's
count costs no walk through the changes it lived through; the index is the resource's
position in ``FlowNetwork.resources``, -1 for the flow's own cap, -2 for an unregistered resource).

Units: time in integer picoseconds (SimPy time), sizes in bytes, rates in bytes per picosecond.
"""

from __future__ import annotations

import math
import struct
from array import array
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final, cast

import simpy

from npusim.engine.loop import Environment, EventQueue, clock

if TYPE_CHECKING:  # a native 64-bit int in the compiled module (no tag checks, no boxing in fields); an int when interpreted
    from mypy_extensions import i64

# A member has finished when its virtual finish is within this many bytes of the class clock,
# relative to its size (absorbs float rounding; completion times are whole picoseconds).
_FINISH_TOLERANCE: Final = 1e-9

OWN_CAP: Final = -1  # bottleneck of a flow limited by its own cap (the DMA engine that drives it)
UNREGISTERED: Final = -2  # bottleneck index of a resource that was never added to the network
# Tie-break key of a resource in the filling: (creation order of the first busy class crossing it)
# x _KEY_STRIDE + (its position on that class's path), i.e. the order in which a scan of the busy
# classes meets the resources. Paths are far shorter than the stride.
_KEY_STRIDE: Final = 1 << 32
_CAP_STEP_KEY: Final = -1  # the key of a step frozen by a cap: a cap wins ties against any resource
# A resource crossed by exactly the same classes as another whose capacity is lower by more than
# this fraction never limits a rate (see FlowNetwork._regroup). The two residuals undergo the same
# subtractions, each rounded to half an ulp of a value <= capacity, so their difference stays within
# k x 2.2e-16 x capacity of the exact one after k subtractions: far inside this margin.
_SHADOW_MARGIN: Final = 1e-6
_PENDING_POINTS: Final = 512  # points a RateLog takes in lists before it moves them into its arrays
# A full batch of pending points as the arrays hold them (native int64, float64), the formats parsed once.
_BATCH_TIMES: Final = struct.Struct(f"{_PENDING_POINTS}q")
_BATCH_RATES: Final = struct.Struct(f"{_PENDING_POINTS}d")


class Resource:
    """A shared bandwidth: ``capacity`` in bytes/ps, shared max-min fairly by the flows crossing it.

    ``bytes_moved`` and ``flows_done`` count finished flows; ``flows`` counts the flows crossing it
    now; ``rate`` is the current total rate; ``rate_log`` (for registered resources) records
    ``(time_ps, bytes_per_ps)`` at every change (a :class:`RateLog`). The other slots are the state of the network's
    progressive filling: the busy classes ``crossing`` it (in creation order), its tie-break ``key``,
    the ``residual`` capacity and ``frozen`` members after the last step that changed it (and, while
    a filling scans it, its fair ``share`` of the residual per unfrozen member and its neighbours in the scan, ``prev_live`` and
    ``next_live``), that
    state after each step (:class:`Snapshot` entries chained from ``entries``, the first ``depth``
    valid, up to ``last``; the later ones are kept to be written over; entries of undone steps are
    dropped when the filling next reads the resource, :meth:`FlowNetwork._restore`), the resources crossed by exactly the same classes (``peers``,
    None before its first use; the first of them its ``lead``) and whether it can limit a rate (``limiting``; see
    FlowNetwork._regroup).
    """

    __slots__ = ("name", "kind", "die", "capacity", "bytes_moved", "flows_done", "rate", "rate_log", "flows", "index",
                 "crossing", "key", "residual", "frozen", "share", "entries", "last", "depth", "peers", "limiting", "component", "mark",
                 "prev_live", "next_live", "lead", "next_moved")

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
        self.rate_log: RateLog | None = None
        self.flows = 0.0  # a float, as the filling divides by it (counts are exact in a float far beyond any run's)
        self.index: i64 = UNREGISTERED  # position in FlowNetwork.resources once registered
        self.crossing: list[FlowClass] = []
        self.key: i64 = 0
        self.residual = capacity
        self.frozen = 0.0
        self.share = math.inf  # residual / unfrozen members (inf: none), kept by a filling for the resources it scans
        self.entries: Snapshot | None = None  # the first entry of its history (valid or kept to be written over)
        self.last: Snapshot | None = None  # the last valid entry (None: none)
        self.depth: i64 = 0
        self.peers: list[Resource] | None = None
        self.limiting = True
        # The component of the busy classes crossing it, if it can limit a rate (kept once they have
        # left: its residual and history belong to that component's steps until they are undone).
        self.component: Component | None = None
        self.mark: i64 = 0  # the network's stamp of the last pass that listed it (a set without hashing)
        # the resources of a filling's scan before and after it (a chain: no list to grow or shrink; a
        # resource left with no unfrozen member leaves it at once, so the scan meets none)
        self.prev_live: Resource | None = None
        self.next_live: Resource | None = None
        self.lead: Resource = self  # the first of its peers, whose mark stands for theirs (itself before its first use)
        self.next_moved: Resource | None = None  # the next lead of the peer groups a recomputation sums again

    def __repr__(self) -> str:
        return f"Resource({self.name}, {self.capacity * 1e3:.3f} GB/s)"


class Snapshot:
    """A resource's ``residual`` capacity (bytes/ps) and ``frozen`` members after filling ``step``,
    the step numbered ``serial`` in the network and kept in ``record`` (an entry of a resource's
    history, valid while that record has that serial: an undone step's record has none; written
    over once invalid: no allocation per step). ``prev`` and ``next`` chain the resource's entries
    in the order of steps (native fields: no list to index)."""

    __slots__ = ("step", "serial", "residual", "frozen", "record", "prev", "next")

    def __init__(self, step: i64, serial: i64, residual: float, frozen: float, record: Step, prev: Snapshot | None) -> None:
        self.step = step
        self.serial = serial
        self.residual = residual
        self.frozen = frozen
        self.record = record
        self.prev = prev
        self.next: Snapshot | None = None


class RateLog:
    """A resource's total rate at every change: ``(time_ps, bytes_per_ps)`` points, kept in two
    packed arrays (a network-bound run logs millions of them: 16 bytes each, nothing for the
    garbage collector to walk). New points wait in two short lists and enter the arrays
    _PENDING_POINTS at a time (an append to a list costs far less than one to an array)."""

    __slots__ = ("_times", "_rates", "_pending_times", "_pending_rates")

    def __init__(self) -> None:
        self._times: array[int] = array("q")
        self._rates: array[float] = array("d")
        self._pending_times: list[object] = []
        self._pending_rates: list[object] = []

    def append(self, time_ps: object, rate: object) -> None:
        """Add the point (``time_ps``: an int, ``rate``: a float), both as Python objects: the
        network boxes the time of a recomputation once for all its points, and a total once for
        all the peers that share it."""
        pending = self._pending_times
        pending.append(time_ps)
        self._pending_rates.append(rate)
        if len(pending) >= _PENDING_POINTS:
            self._flush()

    def _flush(self) -> None:
        times = self._pending_times
        if times:
            count = len(times)  # packed as the arrays hold them (native int64, float64): a copy each, no per-item call
            if count == _PENDING_POINTS:
                self._times.frombytes(_BATCH_TIMES.pack(*times))
                self._rates.frombytes(_BATCH_RATES.pack(*self._pending_rates))
            else:  # the last points, when the log is read
                self._times.frombytes(struct.pack(f"{count}q", *times))
                self._rates.frombytes(struct.pack(f"{count}d", *self._pending_rates))
            self._pending_times = []
            self._pending_rates = []

    @property
    def times(self) -> array[int]:
        """The times of the points (ps)."""
        self._flush()
        return self._times

    @property
    def rates(self) -> array[float]:
        """The rates of the points (bytes/ps)."""
        self._flush()
        return self._rates

    def __len__(self) -> int:
        return len(self._times) + len(self._pending_times)

    def __iter__(self) -> Iterator[tuple[int, float]]:
        self._flush()
        return zip(self._times, self._rates)


class Under:
    """A bottleneck a :class:`FlowClass` had since it last became busy (``bottleneck``, an index as
    the module doc says): the virtual bytes the class received under it up to the class's last
    change of bottleneck (``spent``) and the number of the change that last made it the bottleneck
    (``last_had``). Native fields: a change adds to a float in place, no float object made."""

    __slots__ = ("bottleneck", "spent", "last_had")

    def __init__(self, bottleneck: i64) -> None:
        self.bottleneck = bottleneck
        self.spent = 0.0
        self.last_had: i64 = 0


class FlowClass:
    """The flows that share one path and one cap, and so one rate (bytes/ps). ``virtual_bytes`` is
    what each member has received since the class last became busy (exact at ``updated_ps``); a
    member ends when it reaches the member's virtual finish (virtual bytes at its start + its size).
    ``demand`` is ``level`` x members, what it takes from each resource on its path; ``bounds`` are
    the resources of its path that can limit its rate; ``step`` is the filling step that froze the
    class (-1: not frozen) at rate ``level``; ``finish_ps`` is when its first member ends at its
    rate (-1: idle), ``queued_ps`` its key in the network's heap of finishes (-1: not in it), never
    later than ``finish_ps``, and ``slot`` its position there. ``bottleneck`` is the index of what limits the class now (see
    the module doc; ``limit`` is what froze it in the last filling). Since the class last became busy
    ``unders`` lists the bottlenecks it had (:class:`Under`, in the order first had), ``under`` the
    present one (None until its bottleneck is noted) since ``noted_at`` (the virtual bytes at the
    last change of its bottleneck; ``changes`` counts them). A member keeps the totals as they were
    when it joined (:meth:`spent_until`): what it received under each bottleneck is the difference
    when it ends, a step per bottleneck the class had (two or three), however many changes it lived
    through.
    ``next_frozen`` and ``next_refill`` chain it to the other classes its filling step froze and
    to the other classes of a refill (chains of native fields: no list to build, grow and free)."""

    __slots__ = ("path", "bounds", "cap", "order", "rate", "demand", "level", "virtual_bytes", "updated_ps", "members",
                 "counted", "busy", "changed", "step", "finish_ps", "queued_ps", "slot", "limit", "bottleneck",
                 "under", "noted_at", "unders", "changes", "component", "next_frozen", "next_refill",
                 "first_finish", "first_tolerance")

    def __init__(self, path: tuple[Resource, ...], cap: float, order: i64) -> None:
        self.path = path
        self.bounds = path
        self.cap = cap
        self.order = order
        self.rate = 0.0
        self.demand = 0.0
        self.level = 0.0
        self.virtual_bytes = 0.0
        self.updated_ps: i64 = 0
        # (virtual finish, seq, size, done, flowing since ps, spent when it joined) in that order (the first ends first; a few
        # at once)
        self.members: list[tuple[float, int, int, simpy.Event, int, list[float]]] = []
        self.first_finish = 0.0  # the first member's virtual finish, and the bytes within which it counts as
        self.first_tolerance = 0.0  # finished (its size x _FINISH_TOLERANCE), while there are members: see note_first
        self.counted = 0.0  # members counted in the ``flows`` of the resources on the path (a float, as they are)
        self.busy = False
        self.changed = False
        self.step: i64 = -1
        self.finish_ps: i64 = -1
        self.queued_ps: i64 = -1
        self.slot: i64 = -1
        self.limit: i64 = OWN_CAP
        self.bottleneck: i64 = OWN_CAP
        self.under: Under | None = None
        self.noted_at = 0.0
        self.unders: list[Under] = []
        self.changes: i64 = 0
        self.component: Component | None = None  # while busy
        self.next_frozen: FlowClass | None = None  # the next class its filling step froze (Step.first)
        self.next_refill: FlowClass | None = None  # the next class of the set a filling is given (FlowNetwork._fill)

    def note_first(self) -> None:
        """Note the virtual finish and the tolerance of the first member (there is one) as native
        floats, read at every finish check and reschedule (a member ends within the tolerance)."""
        first = self.members[0]
        self.first_finish = first[0]
        self.first_tolerance = first[2] * _FINISH_TOLERANCE

    def advance(self, now: i64) -> None:
        """Bring the virtual clock to ``now`` at the current rate."""
        self.virtual_bytes += self.rate * float(now - self.updated_ps)
        self.updated_ps = now

    def forget_bottlenecks(self) -> None:
        """Start the totals of its bottlenecks afresh (it becomes busy)."""
        self.under = None
        self.unders.clear()

    def note_bottleneck(self, at: float, bottleneck: i64) -> None:
        """Its bottleneck is ``bottleneck`` from virtual bytes ``at`` on: the bytes since the last
        change go to the one before."""
        under = self.under
        if under is not None:
            under.spent += at - self.noted_at
        self.noted_at = at
        self.bottleneck = bottleneck
        under = None
        for had in self.unders:
            if had.bottleneck == bottleneck:
                under = had
                break
        if under is None:
            under = Under(bottleneck)
            self.unders.append(under)
        self.changes += 1
        under.last_had = self.changes
        self.under = under

    def spent_until(self, at: float) -> list[float]:
        """The virtual bytes it received under each of ``unders`` up to virtual bytes ``at`` (those
        since the last change under the present bottleneck)."""
        now = self.under
        return [under.spent + (at - self.noted_at) if under is now else under.spent for under in self.unders]

    def main_bottleneck(self, spent_before: list[float], finished: float) -> int:
        """The bottleneck under which a member that joined with totals ``spent_before``
        (:meth:`spent_until` then) and finished at virtual bytes ``finished`` got most of its bytes;
        of equals, the one it had last."""
        spent, unders = self.spent_until(finished), self.unders
        most = 0
        most_got = spent[0] - (spent_before[0] if spent_before else 0.0)
        for on in range(1, len(spent)):
            got = spent[on] - (spent_before[on] if on < len(spent_before) else 0.0)
            if got > most_got or (got == most_got and unders[on].last_had > unders[most].last_had):
                most, most_got = on, got
        return unders[most].bottleneck


class Step:
    """One step of a progressive filling: the ``level`` (bytes/ps) it raised the unfrozen rates to,
    its bottleneck's ``key`` (or _CAP_STEP_KEY), the running maximum of the levels up to it
    (``level_max``), the classes it froze (from ``first`` on, in creation order, a chain through
    FlowClass.next_frozen) and its ``serial``, unique
    in the network (the resources it changed are the limiting ones of those classes' paths, each
    with a Snapshot of that serial in its history), -1 once undone. A Component's entry, written
    over once undone."""

    __slots__ = ("level", "key", "level_max", "serial", "first")

    def __init__(self) -> None:
        self.level = 0.0
        self.key: i64 = 0
        self.level_max = 0.0
        self.serial: i64 = -1
        self.first: FlowClass | None = None


class Component:
    """A connected component of the busy classes (joined by the resources of their paths that can
    limit a rate) and the steps of its last progressive filling (the first ``count`` of ``steps``;
    the later ones are kept to be written over). ``classes`` are its busy classes; ``peak`` the
    most it had since its connectivity was last checked; ``refill``: its steps must be refilled
    from scratch."""

    __slots__ = ("steps", "count", "classes", "peak", "refill")

    def __init__(self) -> None:
        self.steps: list[Step] = []
        self.count: i64 = 0
        self.classes: dict[FlowClass, None] = {}
        self.peak = 0
        self.refill = True


def _sort_by_order(classes: list[FlowClass]) -> None:
    """Sort ``classes`` in creation order, in place (short lists, mostly in order already: an
    insertion sort compares native fields where ``list.sort`` would call a key per class)."""
    for i in range(1, len(classes)):
        flow_class = classes[i]
        order = flow_class.order
        j = i
        while j > 0 and classes[j - 1].order > order:
            classes[j] = classes[j - 1]
            j -= 1
        classes[j] = flow_class


def _smallest_cap(classes: FlowClass | None) -> tuple[float, i64]:
    """The smallest cap of the ``classes`` (a chain through FlowClass.next_refill) not frozen yet
    (inf if none) and how many have it."""
    capped = math.inf
    at_cap: i64 = 0
    flow_class = classes
    while flow_class is not None:
        if flow_class.step < 0:
            cap = flow_class.cap
            if cap < capped:
                capped = cap
                at_cap = 1
            elif cap == capped:
                at_cap += 1
        flow_class = flow_class.next_refill
    return capped, at_cap


def _before(a: FlowClass, b: FlowClass) -> bool:
    """Whether ``a`` comes before ``b`` in the network's heap of finishes (by key, then creation order)."""
    return a.queued_ps < b.queued_ps or (a.queued_ps == b.queued_ps and a.order < b.order)


def _sift_up(heap: list[FlowClass], flow_class: FlowClass, slot: int) -> None:
    """Move ``flow_class`` up the binary ``heap`` from ``slot`` (its own, or ``len(heap)`` to
    enter it) to the place its key, just lowered or new, gives it."""
    if slot == len(heap):
        heap.append(flow_class)
    while slot > 0:
        parent_slot = (slot - 1) >> 1
        parent = heap[parent_slot]
        if not _before(flow_class, parent):
            break
        heap[slot] = parent
        parent.slot = slot
        slot = parent_slot
    heap[slot] = flow_class
    flow_class.slot = slot


def _sift_down(heap: list[FlowClass], flow_class: FlowClass, slot: int) -> None:
    """Move ``flow_class`` down the binary ``heap`` from ``slot`` to the place its key, just
    raised, gives it."""
    size = len(heap)
    while True:
        child_slot = 2 * slot + 1
        if child_slot >= size:
            break
        child = heap[child_slot]
        if child_slot + 1 < size:
            right = heap[child_slot + 1]
            if _before(right, child):
                child_slot += 1
                child = right
        if not _before(child, flow_class):
            break
        heap[slot] = child
        child.slot = slot
        slot = child_slot
    heap[slot] = flow_class
    flow_class.slot = slot


def _pop_first(heap: list[FlowClass]) -> None:
    """Take the first class out of the binary ``heap``."""
    first = heap[0]
    first.queued_ps = first.slot = -1
    last = heap.pop()
    if last is not first:
        _sift_down(heap, last, 0)


class Start:
    """A transfer whose bytes start to flow at ``start_ps`` (ps): ``size`` bytes in ``flow_class``,
    ``done`` fired when the last one arrives. ``sequence`` numbers the transfers in issue order
    (of equal starts, the first issued comes first). An entry of the network's heap of starts."""

    __slots__ = ("start_ps", "sequence", "flow_class", "size", "done")

    def __init__(self, start_ps: i64, sequence: i64, flow_class: FlowClass, size: i64, done: simpy.Event) -> None:
        self.start_ps = start_ps
        self.sequence = sequence
        self.flow_class = flow_class
        self.size = size
        self.done = done


def _starts_before(a: Start, b: Start) -> bool:
    """Whether ``a`` comes before ``b`` in the network's heap of starts (by time, then issue order)."""
    return a.start_ps < b.start_ps or (a.start_ps == b.start_ps and a.sequence < b.sequence)


def _push_start(heap: list[Start], start: Start) -> None:
    """Put ``start`` into the binary ``heap`` of starts (native fields compared: no tuple of keys)."""
    slot: i64 = len(heap)
    heap.append(start)
    while slot > 0:
        parent_slot = (slot - 1) >> 1
        parent = heap[parent_slot]
        if not _starts_before(start, parent):
            break
        heap[slot] = parent
        slot = parent_slot
    heap[slot] = start


def _pop_start(heap: list[Start]) -> Start:
    """Take the first start out of the binary ``heap`` of starts."""
    first = heap[0]
    last = heap.pop()
    if last is not first:
        size: i64 = len(heap)
        slot: i64 = 0
        while True:
            child_slot = 2 * slot + 1
            if child_slot >= size:
                break
            child = heap[child_slot]
            if child_slot + 1 < size:
                right = heap[child_slot + 1]
                if _starts_before(right, child):
                    child_slot += 1
                    child = right
            if not _starts_before(child, last):
                break
            heap[slot] = child
            slot = child_slot
        heap[slot] = last
    return first


def _insert_by_order(classes: list[FlowClass], flow_class: FlowClass) -> None:
    """Insert ``flow_class`` into ``classes`` (in creation order) at its place."""
    order = flow_class.order
    j = len(classes)
    classes.append(flow_class)
    while j > 0 and classes[j - 1].order > order:
        classes[j] = classes[j - 1]
        j -= 1
    classes[j] = flow_class
_component_size = lambda component: len(component.classes)  # noqa: E731


@dataclass(frozen=True)
class InFlight:
    """Transfers of one class still moving bytes (:meth:`FlowNetwork.slowest_in_flight`): what limits
    them (a resource name), their rate each (bytes/ps), how many, the bytes the last one still has to
    move, and in how many ps it ends at that rate."""

    limited_by: str
    rate_bytes_per_ps: float
    flows: int
    left_bytes: float
    ends_in_ps: float

    def describe(self) -> str:
        gbps = self.rate_bytes_per_ps * 1e3
        return (f"{self.flows} transfer{'s' if self.flows > 1 else ''} limited by {self.limited_by}, at {gbps:.6g} GB/s each, "
                f"{self.left_bytes:,.0f} bytes still to move (about {self.ends_in_ps / 1e6:,.3f} us more at that rate)")


class FlowNetwork:
    """All flows of a simulation, the max-min fair rates they get, and their completions."""

    def __init__(self, env: Environment, *, record_rates: bool = True, quantum_ps: int = 0) -> None:
        if quantum_ps < 0:
            raise ValueError(f"the network's time quantum must be 0 (exact) or a positive number of ps, got {quantum_ps}")
        self.env = env
        self.record_rates = record_rates
        self.quantum_ps = quantum_ps  # 0: exact; else starts and ends take effect at its multiples only
        self.resources: list[Resource] = []
        self._classes: dict[tuple[Sequence[Resource], float], FlowClass] = {}
        self._classes_across: dict[int, list[FlowClass]] = {}  # id(resource) -> the classes whose path crosses it
        self._starts: list[Start] = []  # a binary heap, see _push_start
        self._finishes: list[FlowClass] = []  # a binary heap of classes by (queued_ps, order), see _schedule_finish
        self._finish_slack: i64 = 2  # ps before its finish_ps at which a class may already be within tolerance
        self._sequence = 0
        self._wakeup_ps: int | None = None
        self._timer: simpy.Event | None = None  # the pending wake-up's event (an earlier one supersedes it)
        self._events = EventQueue(env)  # where completions and the re-armed timer go
        self._wakeup: Callable[[simpy.Event], None] = self._on_wakeup  # bound once: every timer's callback
        self._rebuild = False  # a resource became limiting: components and steps are built again from scratch
        self._marks: i64 = 0  # stamps Resource.mark
        self._serials: i64 = 0  # numbers the filling steps (Step.serial)
        self.recomputations = 0

    def add_resource(self, resource: Resource) -> Resource:
        """Register a resource so that its rate changes are logged and it appears in summaries."""
        if self.record_rates:
            resource.rate_log = RateLog()
        resource.index = len(self.resources)
        self.resources.append(resource)
        return resource

    @property
    def active_flows(self) -> int:
        """Flows moving bytes now."""
        return sum(len(c.members) for c in self._classes.values())

    def slowest_in_flight(self) -> InFlight | None:
        """The transfers still moving bytes whose last member ends last at the present rates (None
        when no bytes are in flight): what limits them, their rate and what they still have to move."""
        now = clock(self.env)
        slowest: InFlight | None = None
        for flow_class in self._classes.values():
            if not flow_class.members or flow_class.rate <= 0:
                continue
            reached = flow_class.virtual_bytes + flow_class.rate * (now - flow_class.updated_ps)
            left = max(0.0, max(member[0] for member in flow_class.members) - reached)
            ends_in_ps = left / flow_class.rate
            if slowest is None or ends_in_ps > slowest.ends_in_ps:
                index = flow_class.bottleneck
                limit = self.resources[index].name if index >= 0 else "the engine's own rate (the DMA engine that drives it)"
                slowest = InFlight(limit, flow_class.rate, len(flow_class.members), left, ends_in_ps)
        return slowest

    def transfer(self, size_bytes: int, path: Sequence[Resource], *, cap: float = math.inf, delay_ps: int = 0,
                 done: simpy.Event | None = None) -> simpy.Event:
        """Move ``size_bytes`` across ``path`` at no more than ``cap`` bytes/ps, the bytes starting
        to flow ``delay_ps`` from now (a fixed cost paid first); returns the event fired when the
        last byte arrives, whose value is ``(bottleneck index, ps the bytes started flowing)``."""
        return self.start(self.flow_class(path, cap) if size_bytes > 0 else None, size_bytes, delay_ps, done)

    def flow_class(self, path: Sequence[Resource], cap: float = math.inf) -> FlowClass | None:
        """The class of the flows that cross ``path`` at no more than ``cap`` bytes/ps, created on
        first use (None for a transfer nothing limits: no path, no cap). A caller that moves many
        transfers along one path keeps it and passes it to :meth:`start`."""
        if not path and cap == math.inf:
            return None
        key = (path, cap)
        flow_class = self._classes.get(key)
        if flow_class is None:
            path = tuple(path)
            if not cap > 0:
                raise ValueError(f"a transfer's cap must be a positive rate in bytes/ps, got {cap}; give the engine's rate "
                                 "(math.inf for none)")
            if len(set(path)) != len(path):  # a resource is equal to itself only (its identity)
                repeated = next(r for i, r in enumerate(path) if r in path[:i])
                raise ValueError(f"a transfer's path crosses resource {repeated.name!r} twice; a flow crosses each resource "
                                 "at most once: list every hop once (model a doubled demand with its own resource)")
            flow_class = self._classes[key] = FlowClass(path, cap, len(self._classes))
            for resource in path:
                self._classes_across.setdefault(id(resource), []).append(flow_class)
            self._regroup(path)
            flow_class.bounds = tuple(r for r in path if r.limiting)
        return flow_class

    def start(self, flow_class: FlowClass | None, size_bytes: int, delay_ps: int = 0, done: simpy.Event | None = None) -> simpy.Event:
        """:meth:`transfer` for a class :meth:`flow_class` gave (None: nothing limits the rate)."""
        env = self.env
        if done is None:
            done = simpy.Event(env)
        now = clock(env)
        start_ps = now + delay_ps
        if flow_class is None or size_bytes <= 0:
            outcome = (OWN_CAP, start_ps)
            if delay_ps > 0:
                def fire(_event: simpy.Event) -> None:
                    done.succeed(outcome)

                env.timeout(delay_ps).callbacks.append(fire)
            else:
                done.succeed(outcome)
            return done
        self._sequence = sequence = self._sequence + 1
        _push_start(self._starts, Start(start_ps, sequence, flow_class, size_bytes, done))
        wakeup_ps = self._wakeup_ps
        quantum = self.quantum_ps
        if quantum:
            start_ps = -(-start_ps // quantum) * quantum
        if wakeup_ps is None or start_ps < wakeup_ps:
            self._wake_at(start_ps, now)
        return done

    # -- internals -----------------------------------------------------------------------------

    def _regroup(self, path: tuple[Resource, ...]) -> None:
        """A class of ``path`` was created: split the groups of resources crossed by exactly the
        same classes (``peers``) between those on the path and the others, and decide again which
        of them can limit a rate. Of peers, one whose capacity exceeds the lowest by more than
        _SHADOW_MARGIN never does: its residual always exceeds the lowest one's by about the
        capacity difference and its member count is the same, so its fair share is strictly
        higher until the lowest one's step has frozen all its classes (as a UB port and its write
        credits, an L2 and its HBM). Leaving it out of the filling changes no step. Groups only
        split, so a resource may become limiting (then the next recomputation refills from
        scratch) but never stops being limiting once used (a split group's lowest capacity is no
        lower), so only the classes crossing one that became limiting change their bounds."""
        on_path = set(map(id, path))
        regrouped = []
        fresh = [r for r in path if r.peers is None]
        for resource in fresh:
            resource.peers = fresh
        if fresh:
            regrouped.append(fresh)
        for resource in path:
            group = resource.peers
            assert group is not None  # every resource of the path has peers by now
            if group is fresh or any(group is other for other in regrouped):
                continue
            inside = [r for r in group if id(r) in on_path]
            if len(inside) < len(group):
                group[:] = [r for r in group if id(r) not in on_path]
                for r in inside:
                    r.peers = inside
                regrouped += [group, inside]
        became_limiting: list[Resource] = []
        for group in regrouped:
            lowest = min(r.capacity for r in group)
            lead = group[0]
            for resource in group:
                resource.lead = lead
                limiting = resource.capacity <= lowest * (1 + _SHADOW_MARGIN)
                if limiting and not resource.limiting:
                    became_limiting.append(resource)
                resource.limiting = limiting
        if became_limiting:
            self._rebuild = True
            for resource in became_limiting:
                for flow_class in self._classes_across[id(resource)]:
                    flow_class.bounds = tuple(r for r in flow_class.path if r.limiting)

    def _wake_at(self, time_ps: int, now: int, timer: simpy.Event | None = None) -> None:
        """Wake up at ``time_ps`` (with a time quantum, at the first multiple of it at or after
        ``time_ps``; ``now`` is the clock), before the pending wake-up if any (which is then
        ignored). ``timer`` is the event of the wake-up under way, processed by now: it is triggered
        again (with the queue key a new Timeout would get) instead of a new one."""
        quantum = self.quantum_ps
        if quantum:
            time_ps = -(-time_ps // quantum) * quantum
        self._wakeup_ps = time_ps
        if timer is None:
            timer = simpy.Timeout(self.env, time_ps - now)
            timer.callbacks.append(self._wakeup)
        else:
            self._events.rearm(timer, time_ps, self._wakeup)
        self._timer = timer

    def _on_wakeup(self, timer: simpy.Event) -> None:
        """Finish the members that are done (classes in creation order), start the flows due, and
        recompute the rates if anything changed; wake up next with ``timer`` (this wake-up's). A
        timer that is not the pending wake-up's was superseded by an earlier one: nothing to do
        (only the pending wake-up's timer is ever triggered again, so a superseded one stays so)."""
        if timer is not self._timer:
            return
        self._wakeup_ps = None
        stamp: object = clock(self.env)  # the clock's int: the time of every completion and rate point of now
        now: i64 = cast(int, stamp)
        events = self._events
        changed: list[FlowClass] = []
        finishes = self._finishes
        horizon = now + self._finish_slack
        due = []
        while finishes and finishes[0].queued_ps <= horizon:
            flow_class = finishes[0]
            finish_ps = flow_class.finish_ps
            if horizon < finish_ps:
                flow_class.queued_ps = finish_ps  # its finish moved later: its key follows
                _sift_down(finishes, flow_class, 0)
                continue
            _pop_first(finishes)
            if finish_ps >= 0:  # else idle since
                due.append(flow_class)
        if len(due) > 1:
            _sort_by_order(due)
        for flow_class in due:
            members = flow_class.members
            reached = flow_class.virtual_bytes + flow_class.rate * float(now - flow_class.updated_ps)
            if flow_class.first_finish - reached > flow_class.first_tolerance:
                finish_ps = flow_class.finish_ps
                if finish_ps > now:
                    flow_class.queued_ps = finish_ps  # not yet: it stays due at its finish_ps
                    _sift_up(finishes, flow_class, len(finishes))
                else:
                    flow_class.advance(now)
                    self._schedule_finish(flow_class, now)
                continue
            flow_class.advance(now)
            finished = finished_bytes = 0
            while members and flow_class.first_finish - flow_class.virtual_bytes <= flow_class.first_tolerance:
                finish, _, size, done, flowing_ps, spent_before = members.pop(0)
                if members:
                    flow_class.note_first()
                finished += 1
                finished_bytes += size
                if flow_class.under is None or flow_class.noted_at <= finish - size:  # one bottleneck all its life: the usual case
                    events.succeed(done, now, (flow_class.bottleneck, flowing_ps))
                else:
                    events.succeed(done, now, (flow_class.main_bottleneck(spent_before, finish), flowing_ps))
            for resource in flow_class.path:
                resource.bytes_moved += finished_bytes
                resource.flows_done += finished
            flow_class.finish_ps = -1  # rescheduled by the recomputation if members are left
            if not flow_class.changed:
                flow_class.changed = True
                changed.append(flow_class)
        starts = self._starts
        while starts and starts[0].start_ps <= now:
            entry = _pop_start(starts)
            flow_class, sequence, size, done = entry.flow_class, entry.sequence, entry.size, entry.done
            if not flow_class.members:
                flow_class.virtual_bytes, flow_class.updated_ps = 0.0, now
                flow_class.forget_bottlenecks()
            elif flow_class.updated_ps != now:
                flow_class.advance(now)
            members = flow_class.members
            finish = flow_class.virtual_bytes + size
            j = len(members)  # its place: after those ending no later (started earlier, a smaller seq)
            while j and members[j - 1][0] > finish:
                j -= 1
            members.insert(j, (finish, sequence, size, done, now, flow_class.spent_until(flow_class.virtual_bytes)))
            if not j:
                flow_class.note_first()
            if not flow_class.changed:
                flow_class.changed = True
                changed.append(flow_class)
        counted = []  # classes whose member count changed; the others only need their next finish
        for flow_class in changed:  # count what started and ended in the flows crossing each resource
            change = len(flow_class.members) - flow_class.counted
            if change:
                flow_class.counted += change
                for resource in flow_class.path:
                    resource.flows += change
                counted.append(flow_class)
            else:  # as many started as ended: the filling, which depends on member counts only, is the same
                flow_class.changed = False
                if flow_class.under is None:  # its members all ended and new ones started: note the bottleneck again
                    flow_class.note_bottleneck(flow_class.virtual_bytes, flow_class.bottleneck)
                self._schedule_finish(flow_class, now)
        if counted:
            self._recompute(now, stamp, counted)
        while finishes:  # drop idle classes, move early keys to their finish: the first is the next finish
            flow_class = finishes[0]
            finish_ps = flow_class.finish_ps
            if finish_ps == flow_class.queued_ps:
                break
            if finish_ps >= 0:
                flow_class.queued_ps = finish_ps
                _sift_down(finishes, flow_class, 0)
            else:
                _pop_first(finishes)
        next_ps = finishes[0].queued_ps if finishes else None
        if starts and (next_ps is None or starts[0].start_ps < next_ps):
            next_ps = starts[0].start_ps
        if next_ps is not None:
            self._wake_at(next_ps, now, timer)  # one timer for the next instant, whichever kind it is

    def _schedule_finish(self, flow_class: FlowClass, now: i64) -> None:
        """When the first member of ``flow_class`` ends at its rate (its clock is at ``now``). The
        class enters the heap of finishes only if that is earlier than its entry there: a later
        finish is found when the early entry comes up (rates change far more often than classes
        finish, so most changes cost no heap operation)."""
        left = flow_class.first_finish - flow_class.virtual_bytes
        rate = flow_class.rate
        finish_ps = now + max(1, math.ceil(left / rate - 1e-9)) if left > 0 else now
        # a member within tolerance ends at any wake-up up to tolerance / rate before its finish_ps
        slack = 2 + int(flow_class.first_tolerance / rate)
        if slack > self._finish_slack:
            self._finish_slack = slack
        flow_class.finish_ps = finish_ps
        queued_ps = flow_class.queued_ps
        if queued_ps < 0 or finish_ps < queued_ps:  # not in the heap of finishes, or to come up earlier there
            flow_class.queued_ps = finish_ps
            _sift_up(self._finishes, flow_class, len(self._finishes) if queued_ps < 0 else flow_class.slot)

    def _recompute(self, now: i64, stamp: object, changed: list[FlowClass]) -> None:
        """New rates after the member counts of ``changed`` classes changed: update which classes
        are busy and the components they form, refill each component concerned from its first
        affected step, apply the rates that changed (the points of the rate logs at ``stamp``, the
        clock's int for ``now``)."""
        self.recomputations += 1
        concerned: dict[Component, list[FlowClass]] = {}  # component -> its changed classes
        joining = []
        for flow_class in changed:
            busy = bool(flow_class.members)
            if busy != flow_class.busy:
                flow_class.busy = busy
                for resource in flow_class.path:
                    crossing = resource.crossing
                    if busy:
                        _insert_by_order(crossing, flow_class)
                        first_changed = crossing[0] is flow_class
                    else:  # found by identity, as list.remove would (classes define no equality) without its generic compares
                        at = 0
                        while crossing[at] is not flow_class:
                            at += 1
                        crossing.pop(at)
                        first_changed = at == 0
                    if first_changed and crossing:  # the key follows the first class crossing it
                        first = crossing[0]
                        position = 0  # the resource's place on that class's path (by identity, as tuple.index)
                        while first.path[position] is not resource:
                            position += 1
                        resource.key = first.order * _KEY_STRIDE + position
                if busy:
                    joining.append(flow_class)
                    continue
                component = flow_class.component  # it leaves its component (its resources stay in it:
                assert component is not None  # a busy class is in a component
                flow_class.component = None  # their state is the component's until its steps are undone)
                del component.classes[flow_class]
            else:
                component = flow_class.component
                assert component is not None
            mine = concerned.get(component)
            if mine is None:
                concerned[component] = [flow_class]
            else:
                mine.append(flow_class)
        for flow_class in joining:
            component = self._join(flow_class, concerned)
            mine = concerned.get(component)
            if mine is None:
                concerned[component] = [flow_class]
            else:
                mine.append(flow_class)
        if self._rebuild:
            self._rebuild = False
            concerned = self._rebuild_components(concerned)
        refilled = []  # the classes refilled, a chain through FlowClass.next_refill per component
        for component, mine in concerned.items():
            refilled.append(self._refill(component, mine))

        self._marks = mark = self._marks + 1
        moved: Resource | None = None  # the leads of the peer groups whose total may have changed (marked), chained
        for chain in refilled:
            refilled_class = chain
            while refilled_class is not None:
                if refilled_class.limit != refilled_class.bottleneck or refilled_class.under is None:  # note a change, at the clock of now
                    refilled_class.note_bottleneck(refilled_class.virtual_bytes + refilled_class.rate * float(now - refilled_class.updated_ps), refilled_class.limit)
                if refilled_class.level != refilled_class.rate:
                    refilled_class.advance(now)
                    refilled_class.rate = refilled_class.level
                    rescheduled = True
                else:
                    rescheduled = refilled_class.changed
                if rescheduled:
                    self._schedule_finish(refilled_class, now)
                    for resource in refilled_class.bounds:
                        lead = resource.lead
                        if lead.mark != mark:
                            lead.mark = mark
                            lead.next_moved = moved
                            moved = lead
                refilled_class = refilled_class.next_refill
        for flow_class in changed:
            flow_class.changed = False
            for resource in flow_class.bounds:
                lead = resource.lead
                if lead.mark != mark:
                    lead.mark = mark
                    lead.next_moved = moved
                    moved = lead
        while moved is not None:  # each group once, in no particular order: each resource has its own log
            total = 0.0  # peers are crossed by the same classes: one sum, in creation order
            for flow_class in moved.crossing:
                total += flow_class.demand
            logged: object = None  # the total as a Python float, once for the group's logs
            group = moved.peers
            assert group is not None  # a resource of a class's path has peers
            moved = moved.next_moved
            for resource in group:
                if total != resource.rate:
                    resource.rate = total
                    rate_log = resource.rate_log
                    if rate_log is not None:
                        if logged is None:
                            logged = total
                        rate_log.append(stamp, logged)

    def _join(self, flow_class: FlowClass, concerned: dict[Component, list[FlowClass]]) -> Component:
        """``flow_class`` became busy: it joins the component of the resources it can be limited
        by; if they belong to several, they merge into the largest (the others' steps are undone at
        once, so that no resource keeps a state of theirs; the largest's start again from scratch
        if it gained classes; the changes ``concerned`` lists for the others move to it)."""
        found: list[Component] = []
        for resource in flow_class.bounds:
            component = resource.component
            if component is not None and not any(component is other for other in found):
                found.append(component)
        if not found:
            component = Component()
        else:
            component = max(found, key=_component_size)
            for other in found:
                if other is component:
                    continue
                self._undo_steps(other, 0)
                for member in other.classes:
                    member.component = component
                    component.classes[member] = None
                    for resource in member.bounds:
                        resource.component = component
                moved = concerned.pop(other, None)
                if moved:
                    concerned.setdefault(component, []).extend(moved)
                if other.classes:
                    component.refill = True  # new neighbours for its classes: refill from scratch
                other.classes = {}  # an idle resource may still name it: it comes back empty
        flow_class.component = component
        component.classes[flow_class] = None
        for resource in flow_class.bounds:
            resource.component = component
        if len(component.classes) > component.peak:
            component.peak = len(component.classes)
        return component

    def _refill(self, component: Component, changed: list[FlowClass]) -> FlowClass | None:
        """Refill ``component`` after its ``changed`` classes changed: from its first affected step,
        or from scratch (after a merge; or split into its connected parts once it has lost half its
        classes since it was last looked at). Returns the classes refilled (a chain through
        FlowClass.next_refill, in no particular order: what is done with each refilled class
        concerns that class alone)."""
        if component.refill or len(component.classes) * 2 <= component.peak:
            self._undo_steps(component, 0)
            if component.refill:
                component.refill = False
                parts = [component]
            else:
                parts = self._connected(list(component.classes))
                component.classes = {}  # an idle resource may still name it: it comes back empty
            refilled: FlowClass | None = None
            for part in parts:
                part.refill = False
                part.peak = len(part.classes)
                classes: FlowClass | None = None
                last: FlowClass | None = None  # the last of the part's chain, to link the other parts' after it
                for flow_class in part.classes:
                    flow_class.next_refill = classes
                    classes = flow_class
                    if last is None:
                        last = flow_class
                self._fill(part, classes)
                if last is not None:
                    last.next_refill = refilled
                    refilled = classes
            return refilled
        self._marks = mark = self._marks + 1
        affected: list[Resource] = []
        for flow_class in changed:
            for resource in flow_class.bounds:
                if resource.mark != mark:
                    resource.mark = mark
                    affected.append(resource)
        step = self._first_affected_step(component, changed, affected)
        refill: FlowClass | None = None
        for flow_class in changed:
            if flow_class.busy and flow_class.step < 0:  # not among the classes the undone steps froze
                flow_class.next_refill = refill
                refill = flow_class
        refill = self._undo_steps(component, step, refill)
        self._fill(component, refill)
        return refill

    def _connected(self, classes: list[FlowClass]) -> list[Component]:
        """The connected components of ``classes`` (busy, none frozen), each a new Component that
        its classes and their limiting resources now point to."""
        for flow_class in classes:
            flow_class.component = None
        parts = []
        for start in classes:
            if start.component is not None:
                continue
            part = Component()
            parts.append(part)
            start.component = part
            stack = [start]
            while stack:
                flow_class = stack.pop()
                part.classes[flow_class] = None
                for resource in flow_class.bounds:
                    resource.component = part
                    for other in resource.crossing:
                        if other.component is None:
                            other.component = part
                            stack.append(other)
        return parts

    def _rebuild_components(self, concerned: dict[Component, list[FlowClass]]) -> dict[Component, list[FlowClass]]:
        """A resource became limiting (``_regroup``): forget the steps of every component (those of
        the busy classes and the ``concerned`` ones, which may have lost all theirs) and build the
        components of the busy classes again, to be filled from scratch."""
        busy = [c for c in self._classes.values() if c.busy]
        for component in {id(c): c for c in [*concerned, *(c.component for c in busy)] if c is not None}.values():
            self._undo_steps(component, 0)
        for resource in self.resources:
            resource.component = None
        for flow_class in self._classes.values():
            for resource in flow_class.path:
                resource.component = None
        parts = self._connected(busy)
        return {part: [] for part in parts}

    def _first_affected_step(self, component: Component, changed: list[FlowClass], affected: list[Resource]) -> int:
        """The first step of the last filling that the new member counts of ``changed`` (whose
        paths cross the limiting ``affected`` resources) can alter; every earlier step makes the
        same choice and freezes the same classes at the same level as a filling from scratch.

        By induction on the steps before it, step j is kept unless: it froze a changed class (its
        arithmetic changes); or a changed class not frozen yet has a cap <= level_j (a cap step
        would come first or take it too); or an affected resource, with the members frozen before
        step j and its new member count, offers a fair share below level_j (equal, with a smaller
        key, against a resource step): it would be chosen first. Unaffected resources have the same
        residuals, member counts and keys as in the last filling, so they choose as before; an
        affected bottleneck of step j either had a changed class frozen at j or gained members, and
        then its share falls below level_j."""
        steps = component.steps
        first = component.count
        for flow_class in changed:
            if 0 <= flow_class.step < first:
                first = flow_class.step
        for flow_class in changed:
            if flow_class.busy and flow_class.step < 0 and first and flow_class.cap <= steps[first - 1].level_max:
                cap = flow_class.cap
                first = next(j for j in range(first) if cap <= steps[j].level)
        for resource in affected:
            if not resource.limiting:
                continue
            self._restore(resource)
            flows, key = resource.flows, resource.key
            residual, frozen, start = resource.capacity, 0.0, 0
            last = resource.last
            snapshot = resource.entries if last is not None else None  # its valid entries, then the state they leave
            while True:
                # steps start..end (bounded by first) see this residual and frozen count
                if snapshot is not None:
                    end, next_residual, next_frozen = min(snapshot.step + 1, first), snapshot.residual, snapshot.frozen
                    snapshot = None if snapshot is last else snapshot.next
                else:
                    end, next_residual, next_frozen = first, 0.0, 0.0
                if start >= end:
                    break
                unfrozen = flows - frozen
                if unfrozen > 0.0:
                    share = residual / unfrozen
                    if share <= steps[end - 1].level_max:
                        for j in range(start, end):
                            step = steps[j]
                            level = step.level
                            if share < level or (share == level and key < step.key):
                                first = j
                                break
                residual, frozen, start = next_residual, next_frozen, end
        return first

    def _undo_steps(self, component: Component, first: int, unfrozen: FlowClass | None = None) -> FlowClass | None:
        """Forget the steps from ``first`` on, the last first, and unfreeze the classes they froze;
        returns the busy ones (each once: a class is frozen by one step) put before the chain
        ``unfrozen`` (through FlowClass.next_refill). The resources those steps changed keep their
        entries until the filling next reads them (:meth:`_restore`: the records lose their serial)."""
        steps = component.steps
        for j in range(component.count - 1, first - 1, -1):
            record = steps[j]
            record.serial = -1
            flow_class = record.first
            while flow_class is not None:
                flow_class.step = -1
                if flow_class.busy:
                    flow_class.next_refill = unfrozen
                    unfrozen = flow_class
                flow_class = flow_class.next_frozen
        if first < component.count:
            component.count = first
        return unfrozen

    def _restore(self, resource: Resource) -> None:
        """Drop the entries of ``resource``'s history whose step was undone (its record has another
        serial now; the steps of a component it left were all undone), and give it back the state
        after its last valid entry. The valid entries are a prefix of the history: steps are undone
        from the last, and entries are made in the order of steps."""
        snapshot = resource.last
        if snapshot is not None:
            if snapshot.record.serial == snapshot.serial:
                return  # the usual case: nothing undone
            depth = resource.depth - 1
            snapshot = snapshot.prev
            while snapshot is not None and snapshot.record.serial != snapshot.serial:
                depth -= 1
                snapshot = snapshot.prev
            resource.depth = depth
            resource.last = snapshot
            if snapshot is not None:
                resource.residual, resource.frozen = snapshot.residual, snapshot.frozen
            else:
                resource.residual, resource.frozen = resource.capacity, 0.0

    def _fill(self, component: Component, unfrozen: FlowClass | None) -> None:
        """Progressive filling of the ``unfrozen`` busy classes (a chain through
        FlowClass.next_refill, left as it is) from the state the kept steps left:
        raise their rates together until a resource saturates or a class reaches its cap; freeze
        those; repeat. Each step scans the resources of their paths that still have unfrozen
        members for the smallest fair share (ties to the smallest key; a resource left with none
        leaves the scan when the scan next meets it) and counts the classes of the
        smallest cap not frozen yet (the cap is looked for again when they are all frozen and a cap
        could be reached). Each step is recorded for the next recomputation: its level, key and
        frozen classes, and in each resource it changed a Snapshot of its state after it."""
        self._marks = mark = self._marks + 1
        live: Resource | None = None  # the first of the resources of their paths with unfrozen members, each once
        capped = math.inf  # the smallest cap of the unfrozen classes, and how many have it
        at_cap: i64 = 0
        unfixed: i64 = 0
        steps = component.steps
        step = component.count
        flow_class = unfrozen
        while flow_class is not None:
            unfixed += 1
            cap = flow_class.cap
            if cap < capped:
                capped = cap
                at_cap = 1
            elif cap == capped:
                at_cap += 1
            for resource in flow_class.bounds:
                if resource.mark != mark:
                    resource.mark = mark
                    snapshot = resource.last  # its state is that of its last entry unless its step was undone: _restore
                    if snapshot is not None and snapshot.record.serial != snapshot.serial:
                        self._restore(resource)
                    members = resource.flows - resource.frozen
                    if members > 0.0:  # in the state the kept steps left
                        resource.share = resource.residual / members
                        resource.prev_live = None
                        resource.next_live = live
                        if live is not None:
                            live.prev_live = resource
                        live = resource
                    else:
                        resource.share = math.inf
            flow_class = flow_class.next_refill
        top = steps[step - 1].level_max if step else -math.inf  # the running maximum of the levels
        serial = self._serials
        while unfixed:
            bottleneck: Resource | None = None
            level = math.inf
            key: i64 = _CAP_STEP_KEY
            scanned = live  # (whose order decides nothing: the smallest share, ties to the smallest key)
            while scanned is not None:
                share = scanned.share
                if share < level or (share == level and scanned.key < key):
                    bottleneck, level, key = scanned, share, scanned.key
                scanned = scanned.next_live
            if at_cap == 0 and capped <= level:  # the classes of the smallest cap are all frozen: the next cap
                capped, at_cap = _smallest_cap(unfrozen)
            freezing: FlowClass | None = None  # the classes this step freezes, in creation order, chained by next_frozen
            count: i64 = 0
            if capped <= level:
                level, key, limit = capped, _CAP_STEP_KEY, OWN_CAP
                candidate = unfrozen
                while candidate is not None:  # each one of the smallest cap put in its place in the chain
                    if candidate.step < 0 and candidate.cap == capped:
                        count += 1
                        order = candidate.order
                        if freezing is None or order < freezing.order:
                            candidate.next_frozen = freezing
                            freezing = candidate
                        else:
                            after = freezing
                            while after.next_frozen is not None and after.next_frozen.order < order:
                                after = after.next_frozen
                            candidate.next_frozen = after.next_frozen
                            after.next_frozen = candidate
                    candidate = candidate.next_refill
            else:
                assert bottleneck is not None  # no share left means level = inf, and the cap step is taken
                last: FlowClass | None = None
                for candidate in bottleneck.crossing:  # in creation order
                    if candidate.step < 0:
                        count += 1
                        if last is None:
                            freezing = candidate
                        else:
                            last.next_frozen = candidate
                        last = candidate
                if last is not None:
                    last.next_frozen = None
                limit = bottleneck.index
            self._marks = touched = self._marks + 1  # marks the resources this step has changed
            if step < len(steps):
                record = steps[step]
            else:
                record = Step()
                steps.append(record)
            flow_class = freezing
            while flow_class is not None:
                flow_class.step = step
                flow_class.level = level
                flow_class.limit = limit
                if flow_class.cap == capped:
                    at_cap -= 1
                n = flow_class.counted  # its members (all counted by now)
                flow_class.demand = demand = level * n
                for resource in flow_class.bounds:
                    left = resource.residual - demand
                    residual = left if left > 0.0 else 0.0
                    frozen = resource.frozen + n
                    resource.residual = residual
                    resource.frozen = frozen
                    members = resource.flows - frozen
                    if members > 0.0:
                        resource.share = residual / members
                    else:  # nothing left to limit, for the rest of this filling: out of the scan
                        resource.share = math.inf
                        earlier, later = resource.prev_live, resource.next_live
                        if earlier is None:
                            live = later
                        else:
                            earlier.next_live = later
                        if later is not None:
                            later.prev_live = earlier
                    newest = resource.last
                    if resource.mark == touched:  # changed by this step already: its entry is the newest
                        assert newest is not None
                        newest.residual = residual
                        newest.frozen = frozen
                    else:
                        resource.mark = touched
                        snapshot = resource.entries if newest is None else newest.next
                        if snapshot is not None:
                            snapshot.step, snapshot.serial, snapshot.residual, snapshot.frozen = step, serial, residual, frozen
                            snapshot.record = record
                        else:
                            snapshot = Snapshot(step, serial, residual, frozen, record, newest)
                            if newest is None:
                                resource.entries = snapshot
                            else:
                                newest.next = snapshot
                        resource.last = snapshot
                        resource.depth += 1
                flow_class = flow_class.next_frozen
            if level > top:
                top = level
            record.level, record.key, record.level_max, record.serial, record.first = level, key, top, serial, freezing
            unfixed -= count
            step += 1
            serial += 1
        component.count = step
        self._serials = serial
