"""The AICPUs of a die running a device task: scheduler threads that hand ready tile ops to the AI
cores (vector tile ops to the cores the product runs vector kernels on, cube tile ops to those of
its cube kernels: AIV and AIC on a split die) and poll signal slots for the tile ops that wait.

A device task is a graph of tasks (one per tile op). A *core task* runs a small program on one core
of its ``core_kind``; an *AICPU task* (a wait) is polled
by the scheduler thread it is assigned to. Each of the ``threads`` scheduler threads holds one of the
die's AICPUs for the whole device task, manages an equal, contiguous share of the AIV cores and one
of the AIC cores (each kind chosen on its own, as below), and loops, one thing at a time:

1. handle a finished task of its own (``completion + dependency`` ps), which makes the task's
   successors ready; a ready core task gets a core of its kind at once (``core_choice``: the next core in
   turn, or the core with the fewest dispatched and unfinished tasks, the next in turn among equals;
   "in turn" walks the first core of each thread, then the second ...) and joins the queue of the
   thread that manages that core; a ready AICPU task joins the wait queue of a thread in turn;
2. dispatch a queued core task to its core (``schedule`` ps); the core runs it when it is free;
3. with nothing else to do and waits queued, one poll pass: the queued waits read their slots in
   turn at the start of the pass (one that matches acts at once, e.g. clears its slot, so a later
   wait of the same slot sees the cleared value), the pass takes ``poll_interval``, and the waits
   that matched end with it. A signal that lands during a pass is seen by the next one, so a wait
   ends at least one poll interval after its signal lands. A wait that did not match reads the
   same until its slot changes, so a pass reads, in turn, only the waits queued or told of a
   change (:meth:`AicpuScheduler.may_match`) since their last read: the same decisions as reading
   them all, at a cost that follows the slots that changed, not the waits queued.

A *control task* (``on_control``: a read of one GM value by the control flow, which the framework
runs on one more AICPU) waits in the control queue and is run in turn by the control AICPU: it
takes ``control_read`` ps, records a ``read`` event on the lane ``aicpu control``, calls
``executed(event)`` and makes its successors ready at once (the control flow issues them).

A device task may be given more tasks while it runs (:meth:`AicpuScheduler.add`, for a program
that is still being built); :meth:`AicpuScheduler.hold` keeps it from ending until the matching
:meth:`AicpuScheduler.release`.

Polling must not keep a finished simulation alive: a pass that finds nothing, when the event queue
holds only poll timers and no queued wait of any die could match, parks its thread instead of
re-arming (nothing else can ever change a slot). Once every poller is parked the event queue empties
and the session reports a deadlock, with the reports of the waits (the session's ``deadlock_reporters``).

Tasks are typed by the protocol of :mod:`npusim.hw.device_task` (a :class:`DeviceTask` that is
a :class:`CoreWork`, an :class:`AicpuWait` or a :class:`ControlWork`), which a framework's runtime
implements (:mod:`npusim.runtime.tasks`); the scheduler calls nothing else of them. Times are
integer picoseconds.

For the trace and the critical path the scheduler records, besides its events (``dispatch``,
``complete`` and ``poll`` on the lane of each thread), the dependencies it enforces as flows:
``ready`` (the ``complete`` that made a task ready -> the task's ``dispatch``, or the poll pass that
saw an AICPU task match), ``dispatch`` (a ``dispatch`` -> the first event of the program it started)
and ``complete`` (the last event of a core task's program -> its ``complete``).

This module is typed to mypy's strict level and compiled with the engine (setup.py: mypyc, in the
engine's shared library; :mod:`npusim.engine` chooses compiled or interpreted for all), so a
thread's steps (:meth:`SchedulerThread._woken`, the events and flows it records, the readiness of
successors) run as C; interpreted, it runs the same code with the same results.
"""

from __future__ import annotations

import weakref
from collections import deque
from collections.abc import Generator, Sequence
from functools import partial
from heapq import heappop, heappush
from typing import TYPE_CHECKING, Any, ClassVar, cast

import simpy

from npusim.config.products import PRODUCTS
from npusim.engine.loop import Environment, Timer, clock, initialise, queued_events, schedule_stamp, start_process, succeed_at, when
from npusim.errors import ConfigError
from npusim.hw.device_task import AicpuWait, ControlWork, CoreWork, DeviceTask
from npusim.trace.costs import CostRule, Term, constant

if TYPE_CHECKING:
    from npusim.hw.system import Die, System

AICPU_ORDER = (-1,)
"""Where a die's AICPU lanes sort in the trace (``Track.order``): first, before its AI cores (kind
order 0, 1 ...), as MindStudio Insight shows the control path, the schedulers by index, then the
control AICPU; only a torch program's host lane (``frontend.host.HOST_ORDER``) comes before them."""
CORE_CHOICES = ("round_robin", "least_loaded")
SCHEDULE_LANE, CONTROL_LANE = "SCHEDULE", "CONTROL"
"""The lanes of a scheduler thread (``aicpuN``) and of the control AICPU (``aicpu control``)."""


class PollCoordinator:
    """The poll loops of one system: how many timers of poll passes that matched nothing are
    pending, and which waits are queued, so that a poller can tell when only pollers are left and
    nothing can match any more."""

    _of: ClassVar[weakref.WeakKeyDictionary[System, PollCoordinator]] = weakref.WeakKeyDictionary()

    def __init__(self, env: Environment) -> None:
        self.env = env
        self.armed_timers = 0
        self.schedulers: list[AicpuScheduler] = []
        # the queued wait (its place, itself, its thread) that matched when last looked for: it is looked at first
        self._matching: tuple[int, AicpuWait, SchedulerThread] | None = None
        self._stamp = -2  # schedule_stamp at the last look past the queue count,
        self._none_matched = False  # and whether it found no queued wait matching

    @classmethod
    def of(cls, system: System) -> PollCoordinator:
        coordinator = cls._of.get(system)
        if coordinator is None:
            coordinator = cls._of[system] = cls(system.env)
        return coordinator

    def only_pollers_left(self) -> bool:
        """True when every pending event is the timer of a poll pass that matched nothing and no
        queued wait can match now (a pass that matched a wait goes on with it when its timer ends,
        even at this very instant)."""
        if queued_events(self.env) != self.armed_timers:
            return False
        # Nothing scheduled since the last look, which found no match: only its idle poll timers
        # have fired since, and their threads changed nothing (a pass that takes a wait, a thread
        # that handles work or ends, all schedule an event first; slots change only in events). So
        # no wait matches now either: the idle threads whose passes end at one instant (thousands
        # on a SuperPoD, with tens of thousands of queued waits) read the slots once, not once each.
        stamp = schedule_stamp(self.env)
        unchanged, self._stamp = stamp == self._stamp + 1, stamp
        if unchanged and self._none_matched:
            return True
        self._none_matched = False
        # Any queued wait that matches answers no: only the unread ones can (the others read the
        # same as when they did not match). The one found last time usually still does (its
        # thread takes it at its next pass, while the other threads' idle passes ask again).
        if self._matching is not None:
            place, task, thread = self._matching
            if place in thread.unread_places and task.matches():
                return False
        for scheduler in self.schedulers:
            for thread in scheduler.threads:
                for place, task in thread.unread:
                    if task.matches():
                        self._matching = (place, task, thread)
                        return False
        self._none_matched = True
        return True

    def join(self, scheduler: AicpuScheduler) -> None:
        """A device task starts polling."""
        self.schedulers.append(scheduler)

    def leave(self, scheduler: AicpuScheduler) -> None:
        """A device task has ended: its waits are no longer queued."""
        self.schedulers.remove(scheduler)
        if self._matching is not None and self._matching[2].scheduler is scheduler:
            self._matching = None


class CorePool:
    """The cores of one kind (``aiv``, ``aic``) that a device task's threads share: which thread
    manages each core, the order in which the choice walks them, the unfinished tasks per core."""

    def __init__(self, kind: str, count: int, threads: int) -> None:
        self.kind = kind
        self.count = count
        self.per_thread = -(-count // threads)
        self.thread_of_core = [core // self.per_thread for core in range(count)]
        # cores in the order the choice walks them: the first core of each thread, then the second ...,
        # so that consecutive ready tasks spread over the threads
        self.core_order = sorted(range(count), key=lambda core: (core % self.per_thread, core // self.per_thread))
        self.outstanding = [0] * count
        self.next_core = 0

    def cores_of(self, thread: int) -> range:
        return range(thread * self.per_thread, min((thread + 1) * self.per_thread, self.count))


_STEP, _COMPLETED, _DISPATCHED, _POLLED, _PARKED, _ENDED = range(6)
"""The phases of a :class:`SchedulerThread`: where it goes on when it wakes."""


class SchedulerThread:
    """One AICPU scheduler thread of a device task: its cores, its queues, its trace lane."""

    def __init__(self, scheduler: AicpuScheduler, index: int, cores: range) -> None:
        self.scheduler = scheduler
        self.index = index
        self.cores = cores  # its AIV cores
        self.finished: deque[DeviceTask] = deque()
        self.to_dispatch: deque[tuple[CoreWork, int, int]] = deque()  # (core task, core, the event that made it ready)
        self.waits: dict[int, AicpuWait] = {}  # its queued AICPU tasks by their place in the queue (a number that grows)
        # the queued AICPU tasks its next pass reads (those not read since queued or told of a
        # change: the others do not match), as a heap of (place in the queue, task), and their places
        self.unread: list[tuple[int, AicpuWait]] = []
        self.unread_places: set[int] = set()
        # while a pass reads: the tasks it still reads (a heap, as ``unread``), their places, and
        # the place of the task it reads now
        self.reading: list[tuple[int, AicpuWait]] | None = None
        self.reading_places: set[int] = set()
        self.reading_at = -1
        self.parked = False
        self.wake: simpy.Event = scheduler.env.event()
        # its loop (start): where it goes on when it wakes, what the step it sleeps in holds, its end
        self.phase = _STEP
        self.held: tuple[Any, ...] = ()  # its shape is the phase's (see _resume)
        self.ended = simpy.Event(scheduler.env)
        # the thread's one timer, re-armed for each step it takes (the queue key a timeout made
        # then would get); nothing but this thread waits on it
        self.timer = Timer(scheduler.env, self._woken)
        die = scheduler.die
        self.track = die.system.recorder.track(die.index, f"aicpu{index}", SCHEDULE_LANE, AICPU_ORDER + (index,))

    def mark(self, place: int, task: AicpuWait) -> None:
        """The queued AICPU task at ``place`` may match now: the pass reading (if it has not read
        it yet: it reads the later tasks after this change) or else the next pass reads it."""
        if self.reading is not None and place > self.reading_at:
            heap, places = self.reading, self.reading_places
        else:
            heap, places = self.unread, self.unread_places
        if place not in places:
            places.add(place)
            heappush(heap, (place, task))

    def notify(self) -> None:
        """New work for this thread: wake it if it sleeps."""
        if not self.wake.triggered:
            succeed_at(self.scheduler.env, self.wake, 0)  # wake.succeed(), without its checks

    def start(self) -> simpy.Event:
        """Run the thread's loop, a state machine started as a process would be (its first step
        when an URGENT event due now is processed: see the order of events in
        :mod:`npusim.engine.loop`); the event returned is triggered when it ends (NORMAL, then), or
        failed with what it raised, as the process's end would be."""
        initialise(self.scheduler.env, self._woken)
        return self.ended

    def _woken(self, _event: simpy.Event) -> None:
        # the callback of each of its waits: go on where the thread stopped (what it raises fails
        # it, as a process fails with what its generator raises), then take the loop's next step:
        # complete a finished task, dispatch a ready one, poll the queued AICPU tasks, end (no
        # task of the device task remains), or sleep until told of new work
        try:
            scheduler = self.scheduler
            env = scheduler.env
            phase = self.phase
            if phase == _COMPLETED:  # a finished task's completion is done
                task, start = self.held
                completed = scheduler.record(self.track, scheduler.complete_name, start, task)
                if task.on_core:
                    scheduler.flow(cast(CoreWork, task).last_event, completed, scheduler.complete_name)
                scheduler.resolve(task, completed)
            elif phase == _DISPATCHED:  # a ready core task has been dispatched
                (task, core, ready), start = self.held
                dispatched = scheduler.record(self.track, scheduler.dispatch_name, start, task)
                scheduler.flow(ready, dispatched, scheduler.ready_name)
                task.start(core).callbacks.append(partial(scheduler.core_finished, task, core, dispatched))
            elif phase == _POLLED:  # a pass over the queued AICPU tasks is done
                start, matched, idle = self.held
                coordinator = scheduler.coordinator
                if idle:
                    coordinator.armed_timers -= 1
                polled = scheduler.record(self.track, scheduler.poll_name, start, None)
                for task in matched:
                    scheduler.flow(scheduler.ready_events.pop(id(task), -1), polled, scheduler.ready_name)
                    task.polled(polled)
                self.finished.extend(matched)
                if not matched and not self.finished and not self.to_dispatch and coordinator.only_pollers_left():
                    self.parked = True
                    self.wake = env.event()
                    self.phase = _PARKED
                    when(self.wake, self._woken)
                    return
            elif phase == _PARKED:
                self.parked = False
            if self.finished:
                self.held = (self.finished.popleft(), clock(env))
                self.phase = _COMPLETED
                self.timer.start(scheduler.completion_ps)
            elif self.to_dispatch:
                self.held = (self.to_dispatch.popleft(), clock(env))
                self.phase = _DISPATCHED
                self.timer.start(scheduler.schedule_ps)
            elif self.waits:
                start = clock(env)
                matched = []
                if self.unread:
                    waits, queued = self.waits, scheduler.queued
                    reading = self.reading = self.unread
                    self.reading_places = self.unread_places
                    self.unread, self.unread_places = [], set()
                    while reading:  # in turn: a wait that clears its slot hides it from the next
                        place, task = heappop(reading)
                        self.reading_at = place
                        if task.matches():
                            del waits[place], queued[id(task)]
                            task.satisfied()
                            matched.append(task)
                    self.reading = None
                idle = not matched  # only a pass that matched nothing is "just a poller": one that matched
                if idle:  # will go on with that work when it ends
                    scheduler.coordinator.armed_timers += 1
                self.held = (start, matched, idle)
                self.phase = _POLLED
                self.timer.start(scheduler.poll_ps)
            elif scheduler.remaining == 0:
                self.phase = _ENDED
                succeed_at(env, self.ended, 0)  # the end of the loop, as a process's
            else:
                self.wake = env.event()
                self.phase = _STEP
                when(self.wake, self._woken)
        except BaseException as error:
            self.ended.fail(cast(Exception, error))


class AicpuScheduler:
    """One device task on one die: its scheduler threads, the readiness of its tasks, core choice.

    ``run()`` is a SimPy generator (submit it to a stream): it holds ``threads`` of the die's AICPUs
    until every task has finished."""

    def __init__(self, die: Die, tasks: Sequence[DeviceTask], *, threads: int, core_choice: str, name: str) -> None:
        if core_choice not in CORE_CHOICES:
            raise ConfigError(f"shmem.core_choice={core_choice!r} is not one of {', '.join(CORE_CHOICES)}")
        if not 1 <= threads <= die.spec.aicpu.count:
            raise ConfigError(f"shmem.schedulers={threads}: a die has {die.spec.aicpu.count} AICPUs (die.aicpu.count)")
        system = die.system
        self.die: Die = die  # typed here: the threads' classes, above, read them
        self.env: Environment = system.env
        self.tasks = list(tasks)
        self.name = name
        self.core_choice = core_choice
        hz = die.spec.clock.hz
        aicpu = die.spec.aicpu
        self.schedule_ps = aicpu.schedule.to_ps(hz)
        completion, dependency = aicpu.completion.to_ps(hz), aicpu.dependency.to_ps(hz)
        self.completion_ps = completion + dependency
        self.poll_ps = aicpu.poll_interval.to_ps(hz)
        self.control_read_ps = aicpu.control_read.to_ps(hz)
        product = PRODUCTS.get(system.spec.product)
        # one pool per kind of core the product runs tile ops on (vector and cube; one pool when the
        # product runs both on the same kind)
        self.pools = {kind: CorePool(kind, die.core_count(kind), threads) for kind in dict.fromkeys((product.vector_cores, product.cube_cores))}
        self.threads = [SchedulerThread(self, k, self.pools[product.vector_cores].cores_of(k)) for k in range(threads)]
        self._next_wait_thread = 0
        self._next_place = 0  # the place in its thread's queue of the next AICPU task queued
        self.queued: dict[int, tuple[SchedulerThread, int]] = {}  # id of a queued AICPU task -> its thread and place
        self.ready_events: dict[int, int] = {}  # id of a queued AICPU task -> the event that made it ready
        self.remaining = len(self.tasks)
        self.started = False
        self.control_queue: deque[tuple[ControlWork, int]] = deque()
        self._control_running = False
        self.done: simpy.Event = self.env.event()
        self.coordinator = PollCoordinator.of(system)
        recorder = system.recorder
        self.recorder = recorder
        self.dispatch_name = recorder.name_id("dispatch")
        self.complete_name = recorder.name_id("complete")
        self.poll_name = recorder.name_id("poll", polls=True)
        self.read_name = recorder.name_id("read")
        self.ready_name = recorder.name_id("ready")  # the flows' names: ready, dispatch, complete
        self.add_flow = recorder.flow_of_ids
        costs = recorder.costs  # the config keys of each event's time, for the analysis
        costs.rule(SCHEDULE_LANE, self.dispatch_name, constant("die.aicpu.schedule"))
        costs.rule(SCHEDULE_LANE, self.complete_name, CostRule((Term(("die.aicpu.completion",), completion), Term(("die.aicpu.dependency",), dependency))))
        costs.rule(SCHEDULE_LANE, self.poll_name, constant("die.aicpu.poll_interval"))
        costs.rule(CONTROL_LANE, self.read_name, constant("die.aicpu.control_read"))

    # -- the device task -------------------------------------------------------------------------

    def run(self) -> Generator[simpy.Event, Any, None]:
        """The device task: take the AICPUs, run every task, give them back."""
        requests = [self.die.aicpus.request() for _ in self.threads]
        yield self.env.all_of(requests)
        self.coordinator.join(self)
        self.started = True
        try:
            for task in self.tasks:
                if task.pending == 0:
                    self.make_ready(task)
            if self.remaining:
                loops = [thread.start() for thread in self.threads]
                yield self.done
                for thread in self.threads:
                    thread.notify()
                yield self.env.all_of(loops)
        finally:
            self.coordinator.leave(self)
            for request in requests:
                self.die.aicpus.release(request)

    def add(self, tasks: Sequence[DeviceTask]) -> None:
        """More tasks of this device task (its program is still being built); those with no
        pending predecessor are ready now (once the device task has started)."""
        self.tasks.extend(tasks)
        self.remaining += len(tasks)
        if self.started:
            for task in tasks:
                if task.pending == 0:
                    self.make_ready(task, self._last_completed(task))

    def _last_completed(self, task: DeviceTask) -> int:
        """The completion event of the predecessor of ``task`` that ended last (-1: none)."""
        events = [dep.completed for dep in task.deps.values() if dep.completed >= 0]
        return max(events, key=self.recorder.end_ps) if events else -1

    def hold(self) -> None:
        """Keep the device task from ending (more tasks may come) until :meth:`release`."""
        self.remaining += 1

    def release(self) -> None:
        """No more tasks will come (the :meth:`hold` ends)."""
        self.remaining -= 1
        if self.remaining == 0:
            self.done.succeed()

    @property
    def waiting(self) -> list[AicpuWait]:
        """The AICPU tasks queued for polling and not yet satisfied."""
        return [task for thread in self.threads for task in thread.waits.values()]

    def may_match(self, task: AicpuWait) -> None:
        """What ``task``'s ``matches()`` says may have changed (its slot changed): if it is queued,
        its thread's next pass reads it (or the pass reading now, if it has not read it yet)."""
        queued = self.queued.get(id(task))
        if queued is not None:
            queued[0].mark(queued[1], task)

    # -- readiness and completion ------------------------------------------------------------------

    def make_ready(self, task: DeviceTask, ready_event: int = -1) -> None:
        """``task`` may run (``ready_event``: the event that made it ready, -1 at the start)."""
        if task.on_control:
            self.control_queue.append((cast(ControlWork, task), ready_event))
            if not self._control_running:
                self._control_running = True
                start_process(self.env, self._control_loop())
            return
        if task.on_core:
            work = cast(CoreWork, task)
            pool = self.pools[work.core_kind]
            core = self._choose_core(pool)
            pool.outstanding[core] += 1
            thread = self.threads[pool.thread_of_core[core]]
            thread.to_dispatch.append((work, core, ready_event))
        else:
            thread = self.threads[self._next_wait_thread]
            self._next_wait_thread = (self._next_wait_thread + 1) % len(self.threads)
            place = self._next_place
            self._next_place += 1
            wait = cast(AicpuWait, task)
            thread.waits[place] = wait
            self.queued[id(task)] = (thread, place)
            thread.mark(place, wait)
            if ready_event >= 0:
                self.ready_events[id(task)] = ready_event
        thread.notify()

    def _choose_core(self, pool: CorePool) -> int:
        """round_robin: the next core of the pool in turn; least_loaded: the core with the fewest
        unfinished tasks, the next in turn among equals."""
        n, start = pool.count, pool.next_core
        position = start
        if self.core_choice == "least_loaded":
            outstanding, order = pool.outstanding, pool.core_order
            fewest = min(outstanding)
            while outstanding[order[position % n]] != fewest:  # in turn from start: the first of the least loaded
                position += 1
        pool.next_core = (position + 1) % n
        return pool.core_order[position % n]

    def core_finished(self, task: CoreWork, core: int, dispatched: int, _event: simpy.Event) -> None:
        """A core finished ``task`` (dispatched as event ``dispatched``; ``_event``: its run's): its
        thread handles the completion."""
        self.flow(dispatched, task.first_event, self.dispatch_name)
        pool = self.pools[task.core_kind]
        pool.outstanding[core] -= 1
        thread = self.threads[pool.thread_of_core[core]]
        thread.finished.append(task)
        thread.notify()

    def _control_loop(self) -> Generator[simpy.Event, Any, None]:
        """The control AICPU: run the queued control tasks in turn."""
        track = self.recorder.track(self.die.index, "aicpu control", CONTROL_LANE, AICPU_ORDER + (len(self.threads),))
        read_name = self.read_name
        while self.control_queue:
            (task, ready), start = self.control_queue.popleft(), clock(self.env)
            yield self.env.timeout(self.control_read_ps)
            event = self.record(track, read_name, start, task)
            self.flow(ready, event, self.ready_name)
            task.executed(event)
            self.resolve(task, event)
        self._control_running = False

    def resolve(self, task: DeviceTask, completed: int) -> None:
        """``task`` has finished (its ``complete`` is event ``completed``): its successors lose one
        pending predecessor."""
        task.done = True
        task.completed = completed
        for successor in task.successors:
            successor.pending -= 1
            if successor.pending == 0:
                self.make_ready(successor, completed)
        self.remaining -= 1
        if self.remaining == 0:
            self.done.succeed()

    def record(self, track: int, name_id: int, start_ps: int, task: DeviceTask | None) -> int:
        """Record an event of a thread from ``start_ps`` to now; returns its index."""
        op, tile = (task.trace_op, task.tile) if task is not None else (-1, -1)
        return self.recorder.rows.record(track, name_id, start_ps, clock(self.env), 0, op, tile)

    def flow(self, from_event: int, to_event: int, name_id: int) -> None:
        """A flow named ``name_id`` between two recorded events, when both exist (-1: none)."""
        if from_event >= 0 and to_event >= 0:
            self.add_flow(from_event, to_event, name_id)
