"""An AI core: in-order pipes that run concurrently, flags between them, on-chip buffers.

A program (built with :mod:`npusim.isa`) gives each pipe its instructions in program order. Each
pipe is one SimPy process that runs its instructions one after the other. The scalar unit issues
every instruction, so an instruction never starts before the scalar instructions that precede it in
program order have finished (``s_dep``); ``set_flag``/``wait_flag`` order two pipes; a
``pipe_barrier(ALL)`` on the scalar pipe waits for every pipe to drain.

Instructions are duck-typed: ``pipe``, ``s_dep``, ``label_id``, ``nbytes``, ``effect`` (None or a
callable applied to real data at completion), ``control``, ``step`` (one of the constants below,
saying how the pipe executes it) and what that step needs: ``fixed_ps`` (FIXED), ``key``/``cost_ps``
(SET_FLAG, WAIT_FLAG), ``start(core, run, delay_ps)`` returning an event (TRANSFER), or
``start(core, run)`` returning ps or an event (WAITING: barriers); ``recorded`` is None or a
callable, called with the index of the instruction's event right after it is recorded (ops use it
to draw flows). A pipe reads the fields that do not change once a program is built from a flat
tuple per instruction (:func:`pipe_step`), made once per program (or once for the replays of a
template in a tile, which share them), not from the instruction object on every run (a look-up
that sees instructions of many classes cannot be specialised by the interpreter: it is slow); it
reads ``recorded`` only where one may be attached (not on the instructions replays share).

A pipe other than SCALAR runs ahead of SimPy's clock through instructions nobody else can observe
before a later synchronisation: flags (stamped with the exact time they become visible, so a waiter
wakes exactly then), and fixed-cost instructions without a data effect (all of them with data off).
It catches up (yields) only when it must wait: a DMA's completion, a flag not raised yet, the scalar
unit, a barrier. Recorded times are exact; a ``pipe_barrier(ALL)`` reads each pipe's exact end
times. With data on, instructions with an effect yield so that the effect lands at its time; with
data off only ``control`` instructions (signal writes, which waits depend on) keep their effect.

Requests in flight. A pipe with a copy engine hands each copy (TRANSFER) to the engine's queue
(:class:`~npusim.hw.dma.EngineQueue`, ``queue_depth`` requests at most): the copy's set-up and
route latency run from its issue, its bytes stream after the earlier copies', and it completes in
order, its effect applied, event recorded (from its issue, or the previous copy's end if later, to
its completion) and progress counted then. With a queue of one the pipe waits for each copy, as an
in-order pipe. With more, the pipe goes on: a further copy waits only for a free slot; a
``set_flag`` after copies in flight takes its turn in the queue (raised once they have completed,
for its cost); a ``wait_flag`` runs at once, on a lane of its own (``<pipe> wait``: a lane's
slices never overlap), and is recorded (its event appended, its progress counted) in the queue's
turn, so the recorder holds a pipe's events in program order; any other instruction waits for the
copies in flight; the pipe's end waits for them too.

For the analysis, the pipes record (all O(1) per instruction): where each kernel run starts (the
recorder pairs each ``wait_flag`` with the ``set_flag`` whose flag it consumed from that, after
the run); for a TRANSFER whose event reports ``(bottleneck index, ps the bytes started flowing)``
(the bandwidth network's transfers do), the DMA's fixed part and bottleneck; and, per run, the
bytes of each buffer the program reserved (:class:`~npusim.trace.recorder.BufferSpan`).
"""

from __future__ import annotations

from collections import deque
from struct import error as struct_error
from typing import TYPE_CHECKING, Any, NamedTuple, cast

import simpy

from npusim.engine.flow import FlowClass
from npusim.engine.loop import clock, rearm_at, run_process, start_process, succeed_at
from npusim.engine.progress import ProgressCounter
from npusim.hw.cache import L2Cache, L2Tally
from npusim.hw.dma import EngineQueue, split_by_hits
from npusim.hw.memory import LocalBuffer
from npusim.hw.pipes import PIPE_NAMES, Pipe
from npusim.hw.topology import LOCAL
from npusim.trace.recorder import EVENT_ROW, WAIT_LANE_SUFFIX, BufferSpan, pack

if TYPE_CHECKING:
    from npusim.hw.system import Die


FIXED, SET_FLAG, WAIT_FLAG, TRANSFER, WAITING = range(5)
_PIPE_IDS = tuple(int(pipe) for pipe in Pipe)  # iterating the enum itself is slow, and a run starts per tile op
_SCALAR = Pipe.SCALAR  # module constants: an enum member's look-up is slow, and a pipe's loop starts per run
_SCALAR_ID = int(_SCALAR)


def flag_key(src: Pipe, dst: Pipe, event_id: int) -> int:
    """The flag (src pipe -> dst pipe, event id) as one int, the key of a run's flag tables."""
    return event_id << 6 | int(src) << 3 | int(dst)


NO_EFFECT, DATA_EFFECT, CONTROL_EFFECT = range(3)
"""Whether an instruction has an effect (:func:`pipe_step`): none, one on real data (applied with
data on), or a ``control`` one (kept with data off too: waits depend on it)."""


def pipe_step(instruction, watched: bool = True) -> tuple[int, int, int, int, int, int, int, bool]:
    """What a pipe reads of ``instruction`` that building fixed: (step, ``s_dep``, cost in ps (the
    ``fixed_ps`` of a FIXED step, the ``cost_ps`` of a flag's; else 0), flag key (else 0), its effect
    (:data:`NO_EFFECT`, :data:`DATA_EFFECT` or :data:`CONTROL_EFFECT`), label id, nbytes, whether
    it may have a ``recorded`` callback: ``watched``, False for an instruction the replays of a
    template share, to which nothing is attached)."""
    step = instruction.step
    flag = step in (SET_FLAG, WAIT_FLAG)
    cost = instruction.fixed_ps if step == FIXED else instruction.cost_ps if flag else 0
    key = instruction.key if flag else 0
    effect = NO_EFFECT if instruction.effect is None else CONTROL_EFFECT if instruction.control else DATA_EFFECT
    return step, instruction.s_dep, cost, key, effect, instruction.label_id, instruction.nbytes, watched


class DmaRoute(NamedTuple):
    """What the copies of one path key take (:meth:`AICore.dma_route`): the engine's set-up and
    cost per burst after the first (ps); the L2 of the die whose GM they read or write (None for a
    copy between two buffers of the core) and whether they write it; the flow class (path capped at
    the engine's rate of the move) and route latency in ps of a hit, and of a miss (the same for a
    write and an on-core copy)."""

    setup_ps: int
    per_burst_ps: int
    cache: L2Cache | None
    write: bool
    hit_class: FlowClass | None
    hit_latency_ps: int
    miss_class: FlowClass | None
    miss_latency_ps: int


class KernelRun:
    """The state of one program running on one core: per-pipe progress, flag counters, scalar
    registers, and what each blocked pipe is waiting for (for deadlock reports)."""

    __slots__ = ("env", "core", "program", "op", "progress", "flags", "flag_waiters", "regs", "blocked", "ends", "pipes_running", "pipes_done")
    # ``blocked`` maps a pipe (its int value) to the instruction it waits in, or a sentence, for
    # deadlock reports (a pipe blocked in a wait_flag is in ``flag_waiters`` instead).

    def __init__(self, env: simpy.Environment, core: AICore, program, op: int) -> None:
        self.env = env
        self.core = core
        self.program = program
        self.op = op
        # per pipe (its int value): the instructions it finished, for the pipes with instructions
        # (made as their processes start, in AICore.run; None for the others, which nobody reads)
        self.progress: list[ProgressCounter | None] = [None] * len(_PIPE_IDS)
        # flag (its flag_key) -> the times its raised, not yet taken, instances become visible
        self.flags: dict[int, deque[int]] = {}
        # flag -> waits blocked on it: (wake-up event, time it is ready to proceed, the wait_flag)
        self.flag_waiters: dict[int, deque[tuple[simpy.Event, int, Any]]] = {}
        self.regs: dict[int, int | float] = {}
        self.blocked: dict[int, object] = {}
        # end time of every instruction per pipe, kept only for programs with a pipe_barrier(ALL)
        self.ends: dict[int, list[int]] | None = {p: [] for p in _PIPE_IDS} if program.needs_end_times else None
        # the pipe processes not ended yet, and the event that fires once all have (see pipe_ended)
        self.pipes_running = 0
        self.pipes_done = simpy.Event(env)

    def pipe_ended(self, process: simpy.Process) -> None:
        """A pipe's process has ended: the run is done (``pipes_done`` fires) when every pipe's has,
        or fails with the first pipe that failed. This is ``env.all_of`` of the pipe processes with
        its triggers at the same moments (so every event keeps its place in the queue), without the
        condition's value nobody reads."""
        done = self.pipes_done
        if done.triggered:
            return
        if not process.ok:  # its value is the exception the pipe raised
            process.defused = True
            done.fail(cast(Exception, process.value))
            return
        self.pipes_running -= 1
        if not self.pipes_running:
            succeed_at(self.env, done, 0)  # done.succeed(), without its checks

    def waits(self) -> dict[int, object]:
        """What each blocked pipe (its int value) waits in: an instruction or a sentence."""
        waits = dict(self.blocked)
        for waiters in self.flag_waiters.values():
            for _, _, wait_flag in waiters:
                waits[int(wait_flag.pipe)] = wait_flag
        return waits


class CoreLock:
    """A core's one program slot, which kernel runs take in the order they ask for it: SimPy's
    ``Resource(capacity=1)`` with every event at the same moment, so every result is the same,
    without its generic put and get queues (a run takes it per tile op). A request is an event
    that triggers at once when the core is free. A release frees the core at once and hands it to
    the oldest waiting request when its hand-over event is processed, or as soon as a newer request
    comes, if that is sooner (both as SimPy does). A release with no request waiting schedules no
    event: SimPy's would do nothing when processed (the core is already free), and the caller's
    end (the event that ends :meth:`AICore.run`'s process, scheduled right after the release) keeps the
    queue as long as it would be until then, which the AICPU pollers read."""

    __slots__ = ("env", "busy", "waiting")

    def __init__(self, env: simpy.Environment) -> None:
        self.env = env
        self.busy = False  # a granted request holds the core
        self.waiting: deque[simpy.Event] = deque()  # the requests not granted yet, oldest first

    def request(self) -> simpy.Event:
        """An event that triggers when this request holds the core (at once if it is free)."""
        grant = simpy.Event(self.env)
        self.waiting.append(grant)
        self._grant()
        return grant

    def release(self) -> None:
        """The holder is done: the core is free, handed to the oldest waiting request."""
        self.busy = False
        if self.waiting:
            handover = simpy.Event(self.env)
            handover.callbacks.append(self._grant)
            succeed_at(self.env, handover, 0)

    def _grant(self, _event: simpy.Event | None = None) -> None:
        if not self.busy and self.waiting:
            self.busy = True
            succeed_at(self.env, self.waiting.popleft(), 0)  # its succeed(): a request is granted once


class AICore:
    """One core of a die, of the kind ``kind`` names (``die.cores.<kind>``: an AIC, an AIV, a 310P AI
    core ...): its pipes, buffers and DMA engines."""

    def __init__(self, die: Die, kind: str, index: int) -> None:
        system = die.system
        self.die = die
        self.system = system
        self.env = system.env
        self.kind = kind
        self.index = index
        self.name = f"{kind}{index}"
        timing = die.timing
        self.timing = timing
        self.kind_timing = kind_timing = timing.kinds[kind]
        self.buffers = {name: LocalBuffer(name, buffer.capacity_bytes) for name, buffer in kind_timing.buffers.items()}
        # This core's DMA engines (MTE1/2/3, FIXP): each caps the rate of the copies it drives.
        self.dma_timing = kind_timing.engines
        recorder = system.recorder
        order_base = (kind_timing.order, index)
        self.tracks = {pipe: recorder.track(die.index, self.name, PIPE_NAMES[pipe], order_base + (int(pipe),)) for pipe in kind_timing.pipes}
        # Each copy engine's queue of requests (hw.dma.EngineQueue), built on its pipe's first run
        # (queue): a core whose pipe never runs builds none. A pipe whose engine keeps more than one
        # in flight records its wait_flags on a lane of their own ("aiv0 MTE2 wait", right after the
        # pipe's): they run while its copies stream, and a lane's slices never overlap. Those lanes
        # are made here, with the core's others: a lane's id is its tid in trace.json
        self.queues: dict[Pipe, EngineQueue] = {}
        self.wait_tracks = {pipe: recorder.track(die.index, self.name, PIPE_NAMES[pipe] + WAIT_LANE_SUFFIX, order_base + (int(pipe), 1))
                            for pipe, engine in kind_timing.engines.items() if engine.queue_depth > 1}
        recorder.costs.unit(die.index, self.name, kind)  # its copies are its kind's engines' (their keys: System)
        self.lock = CoreLock(self.env)
        self.current: KernelRun | None = None
        self.network = system.network
        self.dma_routes = die.dma_routes.setdefault(kind, {})  # see dma_route; shared by the die's cores of this kind

    def __repr__(self) -> str:
        return f"die{self.die.index} {self.name}"

    def queue(self, pipe: Pipe) -> EngineQueue | None:
        """The queue of pipe ``pipe``'s copy engine (None: no engine on this pipe), made on first use."""
        queue = self.queues.get(pipe)
        if queue is None:
            engine = self.dma_timing.get(pipe)
            if engine is None:
                return None
            queue = self.queues[pipe] = EngineQueue(self.env, self.network, engine.queue_depth)
        return queue

    def dma_route(self, key: tuple) -> DmaRoute:
        """What a DMA of pipe ``key[0]`` takes to read (or write, ``key[2]``) the GM of die ``key[1]``
        (None: between two buffers of this core) for the move ``key[3]`` (``(source, destination)``), an
        atomic-add store when ``key[4]``:
        a :class:`DmaRoute`. Kept in ``dma_routes``, which the die's cores of one kind share: they
        have the same engines and reach GM the same way."""
        route = self.dma_routes.get(key)
        if route is None:
            pipe, gm_die, to_gm, move, atomic = key
            engine = self.dma_timing[pipe]
            cap = engine.rate_bytes_per_ps(move, gm_die is not None and gm_die != self.die.index)
            network = self.network
            if gm_die is None:
                local = network.flow_class(LOCAL.resources, cap)
                route = DmaRoute(engine.setup_ps, engine.per_burst_ps, None, False, local, 0, local, 0)
            else:
                system = self.system
                hit = system.gm_route(self.die.index, gm_die, to_gm, hit=True, atomic=atomic)
                miss = system.gm_route(self.die.index, gm_die, to_gm, atomic=atomic)
                route = DmaRoute(engine.setup_ps, engine.per_burst_ps, system.die(gm_die).cache, to_gm,
                                 network.flow_class(hit.resources, cap), hit.latency_ps, network.flow_class(miss.resources, cap), miss.latency_ps)
            self.dma_routes[key] = route
            if gm_die is not None:  # the latency of a miss (a write's: its L2's), by config key
                self.system.recorder.costs.route(self.die.index, self.kind, PIPE_NAMES[pipe], (hit if to_gm else miss).latency_terms)
        return route

    def dma_segments(self, route: DmaRoute, moved_bytes: int, issue_ps: int, allocation, offset: int, length: int, stride: int, count: int,
                     tally: L2Tally | None) -> list[tuple[FlowClass | None, int, int]]:
        """The flows of a copy issued at ``issue_ps`` that moves ``moved_bytes`` along ``route``:
        on-core, one; to or from GM, its ``count`` runs of ``length`` bytes ``stride`` apart from
        byte ``offset`` of ``allocation`` looked up in the L2 of the die whose GM it is (when the
        set-up is done), and split into the part that hits (from when its lines are in L2: an
        earlier miss may still be fetching them) and the part that misses
        (:func:`~npusim.hw.dma.split_by_hits`; a write, one flow across the L2). ``allocation``
        None: a GM address computed from scalar registers (known only with data on), not looked up
        (:meth:`~npusim.hw.cache.L2Cache.unknown`: ``length`` bytes that miss). ``tally``: the op's
        counters."""
        at_ps = issue_ps + route.setup_ps
        cache = route.cache
        if cache is None:
            return [(route.hit_class, moved_bytes, at_ps)]
        if allocation is None:  # its address is known only with data on: timing must not depend on it
            hit, lines, arrived = cache.unknown(length, route.write, at_ps, tally)
        else:
            hit, lines, arrived = cache.access(allocation, offset, length, stride, count, route.write, at_ps, tally, moved_bytes)
        if route.write:
            return [(route.hit_class, moved_bytes, at_ps + route.hit_latency_ps)]
        if not hit:  # a miss (a first read): no split
            return [(route.miss_class, moved_bytes, at_ps + route.miss_latency_ps)]
        if hit == lines:  # a hit (a re-read): no split
            return [(route.hit_class, moved_bytes, (arrived if arrived > at_ps else at_ps) + route.hit_latency_ps)]
        return split_by_hits(moved_bytes, hit, lines, (route.hit_class, (arrived if arrived > at_ps else at_ps) + route.hit_latency_ps),
                             (route.miss_class, at_ps + route.miss_latency_ps))

    def execute(self, program, op: int) -> simpy.Process:
        """Run ``program`` (``by_pipe``: its instructions per pipe; ``steps``: their
        :func:`pipe_step` tuples per pipe, in the same order; ``name``; ``needs_end_times``: it has a
        ``pipe_barrier(ALL)``; ``buffer_bytes``: bytes it reserves per buffer) on this core once the
        core is free; the process (of :meth:`run`) ends when every pipe is done."""
        return start_process(self.env, self.run(program, op))

    def run(self, program, op: int):
        """The run of ``program`` (see :meth:`execute`) as a SimPy generator: it takes the core,
        runs the pipes, gives the core back."""
        lock = self.lock
        yield lock.request()
        try:
            run = KernelRun(self.env, self, program, op)
            self.current = run
            self.system.recorder.kernel_run(self.die.index, self.name)
            started = clock(self.env)
            pipe_loop, pipe_ended, steps = self._pipe_loop, run.pipe_ended, program.steps
            progress, env = run.progress, self.env
            pipes = [(pipe, instructions) for pipe, instructions in program.by_pipe.items() if instructions]
            for pipe, _ in pipes:
                progress[pipe] = ProgressCounter(env)
            run.pipes_running = len(pipes)
            if not pipes:
                run.pipes_done.succeed()
            # The pipes' first steps run here, in order (run_process): this runs as the core's grant
            # (a NORMAL event) is processed, and nothing is scheduled after them
            for pipe, instructions in pipes:
                run_process(env, pipe_loop(run, pipe, instructions, steps[pipe])).callbacks.append(pipe_ended)
            yield run.pipes_done
            self.current = None
            recorder = self.system.recorder
            for name, reserved in program.buffer_bytes.items():
                if reserved:
                    recorder.buffer_span(BufferSpan(self.die.index, self.name, name, self.buffers[name].capacity_bytes, reserved,
                                                    started, clock(self.env), op))
        except GeneratorExit:  # the process is dropped unfinished: no release (as SimPy's request in a with block)
            raise
        except BaseException:
            lock.release()
            raise
        lock.release()  # the process ends right after: see CoreLock

    def _pipe_loop(self, run: KernelRun, pipe: Pipe, instructions, steps):
        # The hot loop of the simulator: locals instead of attribute look-ups (the instructions'
        # fixed fields from their pipe_step tuples), int keys, the recorder's rows packed directly,
        # and flag costs run ahead (see the module doc). A pipe with a copy engine hands its copies
        # to the engine's queue (hw.dma.EngineQueue), which records each one when it completes
        # (complete, below); with a queue of one request the pipe waits for each copy, else it goes
        # on while they are in flight ("Requests in flight" in the module doc).
        env = self.env
        new_event = simpy.Event  # not env.event: that descriptor builds a bound method per call
        # The pipe's one timer: re-armed (fresh callbacks, then scheduled as env.timeout schedules a
        # timeout: the same queue key) for each busy stretch it sleeps through, instead of a Timeout
        # built per stretch; nothing but this pipe ever waits on it.
        timer = new_event(env)
        recorder = self.system.recorder
        rows, pack_row, row_bytes = recorder.rows, EVENT_ROW.pack_into, EVENT_ROW.size  # recorder.events: the next event's index
        lane = pack(self.tracks[pipe], run.op)
        pipe_id = int(pipe)
        progress = cast("list[ProgressCounter]", run.progress)  # this pipe's is made; SCALAR's too if any waits for issue
        issued, done = progress[_SCALAR_ID], progress[pipe_id]
        blocked = run.blocked
        may_run_ahead = pipe is not _SCALAR
        with_data = self.system.with_data
        effect_from = DATA_EFFECT if with_data else CONTROL_EFFECT  # the effects applied
        ends = run.ends[pipe_id] if run.ends is not None else None
        flags, flag_waiters = run.flags, run.flag_waiters
        ahead = 0  # ps this pipe has run ahead of env.now
        clock_of = clock  # a local: read after every step
        now = clock_of(env)  # env.now, refreshed after every yield
        # Pipe progress is read only by the scalar issue order (SCALAR's count) and by barriers.
        counts_progress = not may_run_ahead or ends is not None
        waits_for_issue = may_run_ahead and bool(run.program.by_pipe[_SCALAR])
        issued_count = 0  # the scalar unit's count as last read: it only grows, so an s_dep up to it needs no look
        queue = self.queue(pipe)  # the pipe's copy engine's queue (None: no engine on this pipe)
        in_flight_too = queue is not None and queue.depth > 1  # copies stay in flight while the pipe goes on
        wait_lane = pack(self.wait_tracks[pipe], run.op) if in_flight_too else lane
        if queue is not None:
            depth = queue.depth
            tally = self.system.l2_tally(run.op, self.kind)
            put_transfer_event, put_transfer_info = recorder.transfer_event.append, recorder.transfer_info.append
            issue, fence = queue.issue, queue.fence  # bound once: called per copy, per set_flag in the queue's turn

            def complete(owner: tuple, start: int, flowed: int, bottleneck: int) -> None:
                # a copy's last byte has arrived (in issue order): its effect, its event, its hook, its progress
                instruction, label_id, nbytes, watched, applies = owner
                end = clock_of(env)
                if applies:
                    instruction.effect(self, run)
                index = recorder.events
                put_transfer_event(index)
                put_transfer_info((flowed - start) << 32 | (bottleneck + 2))
                record_in_turn(lane, instruction, label_id, start, end, nbytes, watched)

            def record_in_turn(track: int, instruction, label_id: int, start: int, end: int, nbytes: int, watched: bool) -> None:
                # an instruction of the queue ended in its turn: its event on ``track``, its hook, its progress
                index = recorder.events
                try:
                    pack_row(rows, index * row_bytes, track, label_id, start, end, nbytes)
                except struct_error:  # the rows are full
                    recorder.put_row(index, track, label_id, start, end, nbytes)
                recorder.events = index + 1
                if watched:
                    recorded = instruction.recorded
                    if recorded is not None:
                        recorded(index)
                if counts_progress:
                    count_done(end)

            def count_done(end: int) -> None:
                # an instruction has ended (in program order: after the copies in flight before it)
                if ends is not None:
                    ends.append(end)
                done.count += 1
                if done.waiters:
                    done.wake()

            def deferred_wait(_turn: int, _at: int, instruction, start: int, end: int, label_id: int, watched: bool) -> None:
                # a wait_flag that ran while copies were in flight, recorded in the queue's turn (after the
                # copies issued before it, before those issued after it: in program order on the recorder)
                record_in_turn(wait_lane, instruction, label_id, start, end, 0, watched)

            def deferred_set_flag(start: int, end: int, instruction, key: int, label_id: int, watched: bool) -> None:
                # a set_flag after copies still in flight, run once they have completed (EngineQueue.fence)
                raise_flag(env, run, key, end)
                record_in_turn(lane, instruction, label_id, start, end, 0, watched)

        for instruction, (step, s_dep, cost_ps, key, effect, label_id, nbytes, watched) in zip(instructions, steps):
            if waits_for_issue and s_dep > issued_count and s_dep > (issued_count := issued.count):
                if ahead:
                    rearm_at(env, timer, ahead)
                    yield timer
                    ahead = 0
                blocked[pipe_id] = "waiting for the scalar unit to issue it"
                yield issued.reached(s_dep)
                del blocked[pipe_id]
                now = clock_of(env)
            start = now + ahead
            applies = effect >= effect_from
            row_lane = lane
            if step == TRANSFER:
                if queue.in_flight >= depth:  # type: ignore[union-attr]  # no free slot: wait for the oldest copy
                    if ahead:
                        rearm_at(env, timer, ahead)
                        yield timer
                        ahead = 0
                    blocked[pipe_id] = f"waiting for a free slot of its DMA queue ({depth} copies in flight)"
                    yield queue.until(depth - 1)  # type: ignore[union-attr]
                    del blocked[pipe_id]
                    now = clock_of(env)
                    start = now + ahead
                issue(instruction.request(self, run, start, tally, complete, (instruction, label_id, nbytes, watched, applies)))
                if in_flight_too:
                    continue  # recorded when it completes
                blocked[pipe_id] = instruction
                yield queue.until(0)  # type: ignore[union-attr]
                del blocked[pipe_id]
                now = clock_of(env)
                ahead = 0
                continue
            if in_flight_too and queue.in_flight:  # type: ignore[union-attr]  # copies of this pipe are in flight
                if step == SET_FLAG:  # raised once they have completed, in the queue's turn
                    fence(start, cost_ps, deferred_set_flag, instruction, key, label_id, watched)
                    ahead += cost_ps
                    continue
                if step != WAIT_FLAG:  # any other instruction of the pipe waits for them (a barrier on the pipe, a vector op)
                    if ahead:
                        rearm_at(env, timer, ahead)
                        yield timer
                        ahead = 0
                    blocked[pipe_id] = "waiting for its copies in flight to complete"
                    yield queue.until(0)  # type: ignore[union-attr]
                    del blocked[pipe_id]
                    now = clock_of(env)
                    start = now
            if step == FIXED:
                if may_run_ahead and not applies:
                    ahead += cost_ps
                    end = start + cost_ps
                else:
                    busy = ahead + cost_ps
                    ahead = 0
                    if busy:
                        rearm_at(env, timer, busy)
                        yield timer
                        now = clock_of(env)
                    end = now
            elif step == SET_FLAG:
                # Raise the flag at ``end``: the oldest waiter wakes then (or when it is ready, if
                # later); with no waiter, the flag is kept with the time it becomes visible.
                if may_run_ahead:
                    ahead += cost_ps
                    end = now + ahead
                else:
                    rearm_at(env, timer, cost_ps)
                    yield timer
                    now = end = clock_of(env)
                raise_flag(env, run, key, end)
            elif step == WAIT_FLAG:
                # Take the oldest raised flag (flags are taken in the order they were raised, so a
                # wait running ahead of the clock takes the one it would take at its own time), or
                # wait for one, not before this wait is ready (``start``).
                row_lane = wait_lane
                raised = flags.get(key)
                if raised:
                    visible = raised.popleft()
                    if visible > start:  # raised, visible later: stall until then
                        ahead = visible - now
                else:  # not raised yet: wait for it
                    event = new_event(env)
                    waiters = flag_waiters.get(key)
                    if waiters is None:
                        waiters = flag_waiters[key] = deque()
                    waiters.append((event, start, instruction))
                    yield event
                    now = clock_of(env)
                    ahead = 0
                if may_run_ahead:
                    ahead += cost_ps
                    end = now + ahead
                else:
                    rearm_at(env, timer, ahead + cost_ps)
                    yield timer
                    ahead = 0
                    now = end = clock_of(env)
            else:  # WAITING: needs the real time, may block on other pipes
                if ahead:
                    rearm_at(env, timer, ahead)
                    yield timer
                    ahead = 0
                    now = clock_of(env)
                start = now
                busy = instruction.start(self, run)
                if busy.__class__ is int:
                    if busy:
                        rearm_at(env, timer, busy)
                        yield timer
                else:
                    blocked[pipe_id] = instruction
                    yield busy
                    del blocked[pipe_id]
                now = end = clock_of(env)
            if in_flight_too and step == WAIT_FLAG and queue.in_flight:  # type: ignore[union-attr]
                fence(end, 0, deferred_wait, instruction, start, end, label_id, watched)
                continue
            if applies:
                instruction.effect(self, run)
            index = recorder.events
            try:
                pack_row(rows, index * row_bytes, row_lane, label_id, start, end, nbytes)
            except struct_error:  # the rows are full
                recorder.put_row(index, row_lane, label_id, start, end, nbytes)
            recorder.events = index + 1
            if watched:
                recorded = instruction.recorded
                if recorded is not None:
                    recorded(index)
            if counts_progress:  # (count_done, inline: this runs per instruction)
                if ends is not None:
                    ends.append(end)
                done.count += 1
                if done.waiters:
                    done.wake()
        if ahead:
            rearm_at(env, timer, ahead)
            yield timer
        if in_flight_too:
            if queue.in_flight:  # type: ignore[union-attr]
                blocked[pipe_id] = "waiting for its copies in flight to complete"
                yield queue.until(0)  # type: ignore[union-attr]
                del blocked[pipe_id]
            rest = queue.free_at - clock_of(env)  # type: ignore[union-attr]  # a set_flag that ran in the queue's turn ends then
            if rest > 0:
                rearm_at(env, timer, rest)
                yield timer


def raise_flag(env: simpy.Environment, run: KernelRun, key: int, end: int) -> None:
    """Raise flag ``key`` of ``run``, visible at ``end`` (ps, not before now): its oldest waiter
    wakes then (or when it is ready, if later); with no waiter, the flag is kept with that time."""
    waiters = run.flag_waiters.get(key)
    if waiters:
        event, ready_ps, _ = waiters.popleft()
        succeed_at(env, event, (end if end > ready_ps else ready_ps) - clock(env))
    else:
        raised = run.flags.get(key)
        if raised is None:
            raised = run.flags[key] = deque()
        raised.append(end)
