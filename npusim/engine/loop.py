"""The simulator's event loop: SimPy's environment with the engine's own event queue, and every use
of SimPy's internals.

The simulator runs on SimPy's public API (environments, events, processes) except in this
module, which is the one place that reads or writes SimPy's private state, for speed on the hot
paths and for a stepping loop that can tell why it stopped. The layout it relies on (an event's
outcome is ``_ok`` / ``_value``; a failure a process handled is marked ``_defused``; the clock is
``_now``; every event SimPy makes is put into the queue through ``Environment.schedule``, with
the priorities URGENT 0 and NORMAL 1, and ``run`` goes through ``step`` and ``peek``) is SimPy
4.1's; pyproject.toml pins SimPy to the versions tested, and ``tests/engine/test_loop.py`` checks
the layout against the installed SimPy.

- :class:`Environment` is SimPy's environment with a queue of its own, an :class:`EventHeap`: a
  binary heap of native entries (:class:`Entry`: time, then SimPy's priority and event id, as two
  64-bit ints) and a native counter of event ids, in SimPy's order, so that a comparison in the
  heap is two native ints where SimPy's heap of tuples costs a few hundred instructions per
  comparison (the queue holds a thousand events and more on a SuperPoD). The order, and so every
  result, is SimPy's. Every helper here takes this environment, not a plain SimPy one.
- :data:`clock` reads ``env.now`` at the cost of an attribute read, not a property call (the pipe
  loops read the clock after every step).
- :func:`succeed_at` triggers a fresh event ``delay_ps`` later in one call, with the queue key
  ``Environment.schedule`` would give it, so the order of events, and every result, is SimPy's.
- :class:`EventQueue` does the same for a caller that triggers many events of one environment
  (the network: a completion per finished transfer, its own timer at every wake-up), holding the
  queue and its counter of event ids instead of looking them up on the environment at every call.
- :func:`start_process` is ``env.process``, its process resumed by compiled code (:class:`Resume`):
  SimPy's own steps, the same events at the same moments; :func:`run_process` takes the first
  step at once, for a caller whose processes' initialisations would be the next events processed.
- :func:`run_until` steps the environment until an event is processed, or says why it cannot.
- :func:`schedule_stamp` tells whether anything was scheduled between two moments.

Callbacks beside processes. The hardware model's busiest parts (the pipes of a core, the DMA
queues, the AICPU schedulers) are state machines driven by callbacks, not generators: a process
costs a generator, a :class:`Resume` and an event per wait. :func:`schedule` runs a callback
``delay_ps`` from now (:func:`cancel` takes it back), a :class:`Timer` re-arms one event for one
callback again and again, :func:`when` runs a callback once an event has been processed (at once
if it has), and :func:`begin` takes a state machine's first step now, as :func:`run_process` does
a process's, :func:`initialise` when an URGENT event due now is processed, as :func:`start_process`
does. The waits the model needs beside them are :meth:`ProgressCounter.when_reached
<npusim.engine.progress.ProgressCounter.when_reached>` (a count reached), :class:`~npusim.engine.flags.Flags`
(a flag raised by another pipe) and, for a resource or a completion, :func:`when` on the event
that stands for it.

The order of events. Everything here keeps SimPy's order, which every result depends on (the
golden digests, tests/golden, hold it to the byte); the rules are these, stated once:

1. Events are processed by time (integer ps), then priority, then the order they were scheduled
   in (a counter of event ids, :attr:`EventHeap.next_id`, one id per event put into the queue).
2. Two priorities: URGENT (0), a process's initialisation only (:func:`start_process`), and
   NORMAL (1), every other event: a timeout, a ``succeed``, a process's end, a callback scheduled
   with :func:`schedule`. So at one instant the processes started at it take their first steps
   before any NORMAL event of it that was scheduled earlier.
3. An event's callbacks run in the order they were added, all of them as the event is processed,
   before the next event: a callback that schedules an event at the present instant puts it
   behind every event already due then (rule 1).
4. A wait on an event triggered now (``succeed_at(env, event, 0)``, a count already reached) is
   still a trip through the queue: the waiter resumes when that event is processed, behind the
   events due now that were scheduled before it. A callback given to :func:`when` on an event
   already processed runs at once.
5. A process's end is an event of its own (NORMAL, at the instant it returns): whoever waits on
   the process resumes when that is processed, not when the generator returns. A state machine
   that replaces a process keeps that event where something waits on its end.
6. Skipping an event id (:func:`run_process`, :func:`schedule_stamp`) changes no order: ids only
   order events of one time and priority, and a later event still gets a larger one.

A state machine that replaces a generator keeps its results exactly when it puts the same events
into the queue at the same moments in the same order: each ``yield event`` becomes :func:`when`
(or a :class:`Timer` for a sleep), each process end an event triggered with :func:`succeed_at`.
"""

from __future__ import annotations

import enum
import operator
from collections.abc import Callable, Generator
from typing import TYPE_CHECKING, Any, Final, Protocol, cast, final

import simpy
from mypy_extensions import mypyc_attr
from simpy.core import EmptySchedule, Infinity, StopSimulation
from simpy.events import Initialize, Process, _describe_frame

from npusim.errors import WorkloadError

if TYPE_CHECKING:  # a native 64-bit int in the compiled module; an int when interpreted
    from mypy_extensions import i64

clock = operator.attrgetter("_now")
"""``clock(env)`` is ``env.now`` (integer ps), read without the property call."""

_new_process: Final[Callable[[type], object]] = Process.__new__
_new_initialize: Final[Callable[[type], object]] = Initialize.__new__
_NORMAL: Final = 1  # SimPy's NORMAL priority, a native constant (an imported name is looked up per use; tests/engine/test_loop.py)
_URGENT: Final = 0  # SimPy's URGENT priority
_ID_BITS: Final = 61
"""Bits of an event id in an entry's ``order``: ids count the events put into the queue, far
fewer than 2^61; SimPy's priority (-1 for an event a StopSimulation put back, URGENT 0, NORMAL 1),
plus one, sits above them."""


@final
class Entry:
    """An event in the queue: due at ``time_ps`` (integer ps), and among the events due then
    ordered by ``order``: SimPy's priority and event id, ``(priority + 1) << 61 | id``. Entries
    are ordered as SimPy orders its ``(time, priority, id)`` keys."""

    __slots__ = ("time_ps", "order", "event")

    def __init__(self, time_ps: i64, order: i64, event: simpy.Event) -> None:
        self.time_ps: Final = time_ps
        self.order: Final = order
        self.event: Final = event


def _before(a: Entry, b: Entry) -> bool:
    """Whether ``a`` is processed before ``b``."""
    return a.time_ps < b.time_ps or (a.time_ps == b.time_ps and a.order < b.order)


def _sift_up(entries: list[Entry], entry: Entry, slot: i64) -> None:
    """Put ``entry`` at ``slot`` of the heap ``entries`` or, moving its ancestors down, at the
    first of them it is not processed before."""
    while slot > 0:
        parent_slot = (slot - 1) >> 1
        parent = entries[parent_slot]
        if not _before(entry, parent):
            break
        entries[slot] = parent
        slot = parent_slot
    entries[slot] = entry


@final
class EventHeap:
    """The queue of an :class:`Environment`: a binary heap of :class:`Entry`, compared on two native
    ints where SimPy's heapq of ``(time, priority, id, event)`` tuples compares Python objects (a
    few hundred instructions a comparison; a SuperPoD run's queue holds a thousand events and more),
    and the counter of event ids (``next_id``), native where SimPy's is an ``itertools.count``."""

    __slots__ = ("entries", "next_id")

    def __init__(self) -> None:
        self.entries: list[Entry] = []
        self.next_id: i64 = 0

    def push(self, time_ps: i64, priority: i64, event: simpy.Event) -> None:
        """Put ``event`` into the queue, due at ``time_ps`` with SimPy's ``priority``, with the next
        event id."""
        event_id = self.next_id
        self.next_id = event_id + 1
        entry = Entry(time_ps, ((priority + 1) << _ID_BITS) | event_id, event)
        entries = self.entries
        entries.append(entry)
        _sift_up(entries, entry, len(entries) - 1)

    def pop(self) -> Entry:
        """Take the first entry out of the non-empty queue. As heapq does: the smaller child moves
        up at each level from the root down to a leaf, and the last entry, put there, moves up to
        its place; it belongs near the bottom, so this takes about one comparison per level, where
        stopping on the way down as soon as it fits takes two."""
        entries = self.entries
        last = entries.pop()
        size: i64 = len(entries)
        if size == 0:
            return last
        first = entries[0]
        slot: i64 = 0
        child: i64 = 1
        while child < size:
            below = entries[child]
            right = child + 1
            if right < size:
                other = entries[right]
                if _before(other, below):
                    child, below = right, other
            entries[slot] = below
            slot = child
            child = 2 * slot + 1
        _sift_up(entries, last, slot)
        return first

    def first(self) -> Entry | None:
        """The entry processed next (None: the queue is empty)."""
        entries = self.entries
        return entries[0] if entries else None


@mypyc_attr(native_class=False)  # a Python class (it extends SimPy's), its methods compiled
class Environment(simpy.Environment):
    """SimPy's environment with an :class:`EventHeap` for its queue (``_events``; SimPy's own
    ``_queue`` and ``_eid`` stay unused), in SimPy's order. SimPy's own events schedule themselves
    through :meth:`schedule`; its ``run`` steps through :meth:`step` and :meth:`peek`."""

    _now: int  # the clock, integer ps (SimPy's SimTime, always an int here)

    def __init__(self, initial_time: int = 0) -> None:
        super().__init__(initial_time)
        self._events = EventHeap()

    def schedule(self, event: simpy.Event, priority: Any = _NORMAL, delay: Any = 0) -> None:
        """Put ``event`` into the queue ``delay`` ps from now, with SimPy's ``priority``. Simulated
        time is whole picoseconds: an integral delay of another type (a numpy int, ``2.0``) is
        taken as its int, another one refused (:func:`whole_ps`)."""
        self._events.push(self._now + (delay if type(delay) is int else whole_ps(delay)), priority, event)

    def peek(self) -> Any:
        """When the next event is due (ps); SimPy's Infinity when none is queued."""
        entry = self._events.first()
        return Infinity if entry is None else entry.time_ps

    def step(self) -> None:
        """Process the next event, as SimPy's ``Environment.step`` does: EmptySchedule when none is
        left; a StopSimulation raised by a callback puts the event back, with its callbacks not
        run yet, ahead of everything due at this instant; a failure no process handled is raised."""
        events = self._events
        if not events.entries:
            raise EmptySchedule
        entry = events.pop()
        self._now = entry.time_ps
        event = entry.event
        callbacks = cast(_Processed, event).callbacks
        cast(_Processed, event).callbacks = None
        assert callbacks is not None  # an event is queued once, and processed once
        for done, callback in enumerate(callbacks):
            try:
                callback(event)
            except StopSimulation:
                cast(_Processed, event).callbacks = callbacks[done + 1:]
                self.schedule(event, -1)
                raise
        _raise_unhandled(event)


def whole_ps(delay: object) -> int:
    """``delay`` (a delay of a SimPy event: a timeout's, ``Environment.schedule``'s) as the int of
    picoseconds it is: an integer of any type (a numpy int), or a float with a whole value (SimPy's
    ``run(until=...)`` makes one); a WorkloadError for anything else (SimPy's Timeout refuses a
    negative delay itself)."""
    try:
        whole = operator.index(cast(Any, delay))
    except TypeError:
        if not isinstance(delay, float) or not delay.is_integer():
            raise WorkloadError(f"a SimPy delay of {delay!r}: simulated time is whole picoseconds (npusim's environment "
                                "counts integer ps); round it, e.g. env.timeout(round(delay_ps))") from None
        whole = int(delay)
    return whole


def _raise_unhandled(event: Any) -> None:
    """Raise (a copy of) the failure of a processed ``event`` that no process handled."""
    if not event._ok and not hasattr(event, "_defused"):
        error = type(event._value)(*event._value.args)
        error.__cause__ = event._value
        raise error


def succeed_at(env: Environment, event: simpy.Event, delay_ps: int, value: object = None) -> None:
    """Trigger the not yet triggered ``event`` with ``value``, ``delay_ps`` ps from now."""
    event._ok = True
    event._value = value
    env._events.push(env._now + delay_ps, _NORMAL, event)


class EventQueue:
    """The event queue of one environment, for a caller that triggers many of its events: each is
    put into the queue as ``Environment.schedule`` would put it at that moment (NORMAL, the next
    event id), so the order of events, and every result, is SimPy's. Times are absolute (integer
    ps, no earlier than the clock)."""

    __slots__ = ("_events",)

    def __init__(self, env: Environment) -> None:
        self._events = env._events

    def succeed(self, event: simpy.Event, time_ps: i64, value: object) -> None:
        """Trigger the not yet triggered ``event`` with ``value`` at ``time_ps``."""
        event._ok = True
        event._value = value
        self._events.push(time_ps, _NORMAL, event)

    def rearm(self, timer: simpy.Event, time_ps: i64, callback: Callable[[simpy.Event], None]) -> None:
        """Trigger ``timer`` again at ``time_ps``, with ``callback`` its only callback, once SimPy
        has processed it: a Timeout made without a value, whose outcome (success, None) stays as it
        is; the same place in the queue a new Timeout made now would get."""
        timer.callbacks = [callback]
        self._events.push(time_ps, _NORMAL, timer)


def schedule(env: Environment, delay_ps: int, callback: Callable[[simpy.Event], None]) -> simpy.Event:
    """Run ``callback(event)`` ``delay_ps`` ps from now (NORMAL: after the events due then that
    were scheduled before it); the event returned stands for the call (:func:`cancel`)."""
    event = simpy.Event(env)
    event.callbacks.append(callback)
    succeed_at(env, event, delay_ps)
    return event


def cancel(event: simpy.Event) -> None:
    """Take back the callbacks of ``event``, scheduled and not yet processed (:func:`schedule`):
    none of them runs. The event stays in the queue, processed with nothing to run, so the order
    of every other event is unchanged."""
    cast(_Processed, event).callbacks = []


def when(event: simpy.Event, callback: Callable[[simpy.Event], None]) -> None:
    """Run ``callback(event)`` once ``event`` has been processed, after its callbacks added before
    this one; at once if it has been processed already (as a process that yields it goes on)."""
    callbacks = cast(_Processed, event).callbacks
    if callbacks is None:
        callback(event)
    else:
        callbacks.append(callback)


def begin(step: Callable[[], None]) -> None:
    """Take a state machine's first step now: :func:`run_process` for a machine (the same order,
    for a machine started by the processing of a NORMAL event as the last thing it schedules)."""
    step()


def initialise(env: Environment, step: Callable[[simpy.Event], None]) -> None:
    """Take a state machine's first step as :func:`start_process` takes a process's: ``step(event)``
    runs when an URGENT event scheduled now is processed (before the NORMAL events due now)."""
    _initialisation(env, step)


def _initialisation(env: Environment, step: Callable[[simpy.Event], None]) -> Any:
    """An ``Initialize`` event as SimPy's makes it, succeeded and scheduled URGENT now, with
    ``step`` its one callback: the first step of a process or a state machine."""
    start: Any = _new_initialize(Initialize)
    start.env = env
    start.callbacks = [step]
    start._value = None
    start._ok = True
    env._events.push(env._now, _URGENT, start)
    return start


class Timer:
    """One event of ``env`` that runs ``callback`` each time it fires, re-armed by :meth:`start`
    (the queue key a new Timeout made then would get): the sleeps of one state machine, one at a
    time, without an event per sleep. It is started again only once it has fired."""

    __slots__ = ("env", "events", "event", "callback")

    def __init__(self, env: Environment, callback: Callable[[simpy.Event], None]) -> None:
        self.env = env
        self.events = env._events
        self.event = event = simpy.Event(env)
        event._ok = True  # its outcome, success with no value, set once: every firing has it (as a Timeout's)
        event._value = None
        self.callback = callback

    def start(self, delay_ps: int) -> None:
        """Fire ``delay_ps`` ps from now."""
        event = self.event
        event.callbacks = [self.callback]
        self.events.push(self.env._now + delay_ps, _NORMAL, event)


def rearm_at(env: Environment, event: simpy.Event, delay_ps: int) -> None:
    """Trigger ``event`` again, ``delay_ps`` ps from now, once SimPy has processed it: one timer a
    process sleeps on again and again in place of a new Timeout per sleep (the same queue key a
    Timeout made at this moment would get)."""
    event.callbacks = []
    succeed_at(env, event, delay_ps)


class _Ended:
    """What :func:`_delegate` yields once the generator it delegates to has returned: its value."""

    __slots__ = ("value",)

    def __init__(self, value: object) -> None:
        self.value = value


def _delegate(generator: Any) -> Generator[object, object, None]:
    """``generator``'s steps, one per value sent (``yield from``), then an :class:`_Ended` with its
    return value: its end raises nothing (compiled, ``yield from`` takes the value from
    ``PyIter_Send``), where ``generator.send`` raises a StopIteration (~3,500 instructions of
    exception handling per process, compiled). A failure is thrown into ``generator`` itself, past
    this, which stays suspended in its ``yield from`` (a generator that returns on a throw, which
    is rare, still raises its StopIteration)."""
    value = yield from generator
    yield _Ended(value)


class Resume:
    """The callback that resumes one process: SimPy's ``Process._resume`` step for step (send the
    event's value into the generator, or throw a copy of its failure; on the generator's end
    trigger the process with its return value, or with the exception it raised; else wait on the
    event it yielded), compiled, holding the process's environment and generator, and one object
    per process where SimPy binds a method per wait. Values are sent through :func:`_delegate`,
    so the generator's end raises no exception. It does not set ``env.active_process``, which
    nothing in the simulator reads (SimPy's interrupts, which do, are not used)."""

    __slots__ = ("process", "env", "generator", "steps")

    def __init__(self, process: simpy.Process, env: Environment, generator: Any) -> None:
        self.process = process
        self.env = env
        self.generator = generator
        self.steps = _delegate(generator)

    def __call__(self, event: simpy.Event) -> None:
        generator = self.generator
        target: Any = event
        while True:
            sent = target._ok
            try:
                if sent:
                    target = self.steps.send(target._value)
                else:  # the process handles the failure (or fails itself), with a copy of its exception
                    target._defused = True
                    failure = target._value
                    error = type(failure)(*failure.args)
                    error.__cause__ = failure
                    target = generator.throw(error)
            except StopIteration as end:  # the generator returned on a throw
                self._end(True, end.args[0] if end.args else None)
                return
            except BaseException as error:
                trace = cast(Any, error.__traceback__).tb_next  # from _delegate's frame on (a send), else the generator's
                if sent and trace is not None:
                    trace = trace.tb_next
                error.__traceback__ = trace  # from the generator's frame on, as SimPy's
                self._end(False, error)
                return
            if type(target) is _Ended:
                self._end(True, target.value)
                return
            try:
                callbacks = target.callbacks
            except AttributeError:
                if hasattr(target, "callbacks"):
                    raise
                raise RuntimeError(f'\n{_describe_frame(generator.gi_frame)}Invalid yield value "{target}"') from None
            if callbacks is not None:  # not triggered yet: resume when it is
                callbacks.append(self)
                self.process._target = target
                return

    def _end(self, ok: bool, value: object) -> None:
        """The generator has ended: trigger the process with its outcome, now, and let go of this
        resume (``process._resume``, which nothing calls once the process is dead): the cycle
        between the two would leave this, the process and its generators to the garbage collector
        (~5 objects per process, most of the garbage of a run with many short processes), where
        reference counting frees them as soon as the process is no longer referenced."""
        process: Any = self.process
        process._resume = None
        process._target = None
        process._ok = ok
        process._value = value
        env = self.env
        env._events.push(env._now, _NORMAL, process)


def start_process(env: Environment, generator: Any) -> simpy.Process:
    """``env.process(generator)``: a SimPy process, made as ``Process.__init__`` makes it (its
    initialisation an URGENT event scheduled now), resumed by a :class:`Resume` (``process._resume``)."""
    process: Any = _new_process(Process)
    process.env = env
    process.callbacks = []
    process._generator = generator
    resume = process._resume = Resume(process, env, generator)
    process._target = _initialisation(env, resume)
    return cast(simpy.Process, process)


_BEGUN: Final[Any] = _new_initialize(Initialize)  # the outcome a process's initialisation sends in: (success, None)
_BEGUN._ok = True
_BEGUN._value = None


def run_process(env: Environment, generator: Any) -> simpy.Process:
    """:func:`start_process` with the process's first step (up to its first yield, or its end) taken
    now, in this call, instead of when its initialisation event is processed, which is not
    scheduled. The same order of everything, and so every result, for processes started by the
    processing of a NORMAL event as the last things it schedules: no URGENT event of this instant
    is pending then (it would have come first), so their initialisations would be the next events
    processed, one after the other in the order started, with nothing in between; here their first
    steps run in that order, and every event they schedule keeps its place among the others (the
    ids skipped only order events of one time and priority: skipping one changes no order). One
    event fewer is processed per process."""
    process: Any = _new_process(Process)
    process.env = env
    process.callbacks = []
    process._generator = generator
    resume = process._resume = Resume(process, env, generator)
    process._target = _BEGUN
    resume(_BEGUN)
    return cast(simpy.Process, process)


class _Processed(Protocol):
    """An event as the loop watches it: SimPy sets ``callbacks`` to None once the event is
    processed (its annotation says a list: read through this, the compiled loop accepts None)."""

    callbacks: list[Callable[[simpy.Event], None]] | None


class Stop(enum.Enum):
    """Why :func:`run_until` returned."""

    DONE = "done"
    """The target event has been processed."""
    IDLE = "idle"
    """No event is left: nothing more can happen, and the target is still pending."""
    BOUND = "bound"
    """The next event lies past the time bound."""
    STILL = "still"
    """``still_events`` events were processed without the clock advancing: work loops in zero time."""


LOOK_STEPS = 2048
"""Steps between two looks at the clock for the no-progress guard (when no ``every`` sets the pace)."""
STILL_EVENTS = 10_000_000
"""Events at one simulated instant after which :func:`run_until` stops (``Stop.STILL``): far more
than the busiest instant of a SuperPoD run (every core of 768 dies starting at once), reached in a
few tens of seconds by work that loops in zero time."""


def run_until(env: Environment, target: simpy.Event, limit_ps: int, *, every: Callable[[], None] | None = None,
              steps: int = 0, still_events: int = STILL_EVENTS) -> Stop:
    """Step ``env`` until ``target`` is processed, or until nothing is left to happen, the next
    event lies past ``limit_ps``, or ``still_events`` events (rounded up to whole looks, one look
    every ``steps`` steps, or :data:`LOOK_STEPS` without ``every``) passed without the clock
    advancing; returns which. ``every`` (if given) is called after each ``steps`` steps (a progress
    line).

    SimPy's ``run(until=...)`` cannot tell these apart from a bound kept as a pending event (that
    event alone would keep the simulation alive until the bound), so the loop looks at the queue.
    Each step is ``Environment.step`` inlined (this is the simulation's innermost loop): pop the
    next event, run its callbacks, raise (a copy of) a failure no process handled. The guard costs
    nothing per step: the loop looks at the clock every ``look`` steps only."""
    events = env._events
    queue = events.entries
    look = steps if every is not None and steps > 0 else LOOK_STEPS
    done, look_at, still, seen_ps = 0, look, 0, env._now
    watched = cast(_Processed, target)
    while watched.callbacks is not None:  # not processed yet
        if not queue:
            return Stop.IDLE
        if queue[0].time_ps > limit_ps:
            return Stop.BOUND
        entry = events.pop()
        env._now = entry.time_ps
        event = entry.event
        processed = cast(_Processed, event)
        callbacks = cast(list[Callable[[simpy.Event], None]], processed.callbacks)  # a list: it was queued once, not processed yet
        processed.callbacks = None  # SimPy's mark of a processed event
        for callback in callbacks:  # compiled, a loop over a list by index, not through an iterator
            callback(event)
        if not event._ok and not hasattr(event, "_defused"):  # a failure no process handled
            _raise_unhandled(event)
        done += 1
        if done == look_at:
            look_at += look
            if every is not None:
                every()
            if env._now == seen_ps:
                still += look
                if still >= still_events:
                    return Stop.STILL
            else:
                seen_ps, still = env._now, 0
    return Stop.DONE


def due_now(env: Environment, most: int = 5) -> list[tuple[str, int]]:
    """What the events due at the present instant would run, the ``most`` commonest first, as
    ``(description, events)``: the generator function of a process they resume, else the callback
    (for the report of a run that stopped advancing)."""
    counts: dict[str, int] = {}
    now = env._now
    for entry in env._events.entries:
        if entry.time_ps != now:
            continue
        event = entry.event
        for callback in event.callbacks or ():
            owner = callback.process if isinstance(callback, Resume) else getattr(callback, "__self__", None)
            if isinstance(owner, simpy.Process):
                what = f"process {getattr(owner._generator, '__qualname__', owner.name)}"
            else:
                what = f"callback {getattr(callback, '__qualname__', type(callback).__name__)}"
            counts[what] = counts.get(what, 0) + 1
    return sorted(counts.items(), key=lambda item: (-item[1], item[0]))[:most]


def schedule_stamp(env: Environment) -> int:
    """A stamp of the events scheduled so far: two stamps taken one after the other differ by one
    exactly when no event was scheduled in between. It takes one of the queue's event ids, which only
    order events scheduled at the same time and priority: skipping one changes no order."""
    events = env._events
    stamp = events.next_id
    events.next_id = stamp + 1
    return stamp


def queued_events(env: Environment) -> int:
    """How many events are scheduled (the length of SimPy's event queue)."""
    return len(env._events.entries)


def next_event_ps(env: Environment) -> int | None:
    """When the next event is due (ps), or None when none is queued."""
    entry = env._events.first()
    return None if entry is None else entry.time_ps
