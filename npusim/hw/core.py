"""An AI core: in-order pipes that run concurrently, flags between them, on-chip buffers.

A program (built with :mod:`npusim.isa`) gives each pipe its instructions in program order. Each
pipe is one state machine (:class:`PipeRun`) that runs its instructions one after the other. The scalar unit issues
every instruction, so an instruction never starts before the scalar instructions that precede it in
program order have finished (``s_dep``); ``set_flag``/``wait_flag`` order two pipes; a
``pipe_barrier(ALL)`` on the scalar pipe waits for every pipe to drain.

Instructions are duck-typed: ``pipe``, ``s_dep``, ``label_id``, ``nbytes``, ``has_effect`` (whether
``effect(core, run)`` applies to real data at completion), ``control``, ``step`` (one of the constants below,
saying how the pipe executes it) and what that step needs: ``fixed_ps`` (FIXED), ``key``/``cost_ps``
(SET_FLAG, WAIT_FLAG), ``start(core, run, delay_ps)`` returning an event (TRANSFER), or
``start(core, run)`` returning ps or an event (WAITING: barriers); ``recorded`` is None or a
callable, called with the index of the instruction's event right after it is recorded (ops use it
to draw flows). A pipe reads the fields that do not change once a program is built from a typed
record per instruction (:class:`PipeStep`), made once per program (or once for the replays of a
template in a tile, which share them), not from the instruction object on every run (instructions
are objects of many classes, which a pipe sees untyped: each read is a look-up by name, where the
record's are native reads once compiled); it reads ``recorded`` only where one may be attached (not on the
instructions replays share).

This module is typed to mypy's strict level and compiled with the engine (setup.py: mypyc, in the
engine's shared library; :mod:`npusim.engine` chooses compiled or interpreted for both), so its
classes are native classes and its ``Final`` constants C constants; interpreted, it runs the same
code with the same results.

A pipe other than SCALAR runs ahead of SimPy's clock through instructions nobody else can observe
before a later synchronisation: flags (stamped with the exact time they become visible, so a waiter
wakes exactly then), and fixed-cost instructions without a data effect (all of them with data off).
It catches up (stops, to go on when the clock has caught up) only when it must wait: a DMA's completion, a flag not raised yet, the scalar
unit, a barrier. Recorded times are exact; a ``pipe_barrier(ALL)`` reads each pipe's exact end
times. With data on, instructions with an effect wait for the clock so that the effect lands at its time; with
data off only ``control`` instructions (signal writes, which waits depend on) keep their effect.

Requests in flight. A pipe with a copy engine hands each copy (TRANSFER) to the engine's queue
(:class:`~npusim.hw.queue.EngineQueue`, ``queue_depth`` requests at most): the copy's set-up and
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

from collections.abc import Generator
from typing import TYPE_CHECKING, Any, Final, Protocol, cast, final

import simpy

from npusim.engine.flags import Flags
from npusim.engine.flow import FlowClass
from npusim.engine.loop import Environment, Timer, begin, clock, start_process, succeed_at, when
from npusim.engine.progress import ProgressCounter
from npusim.hw.cache import L2Cache, L2Tally
from npusim.hw.memory import Allocation, LocalBuffer
from npusim.hw.pipes import PIPE_NAMES, Pipe
from npusim.hw.queue import EngineQueue, split_by_hits
from npusim.hw.topology import LOCAL
from npusim.trace.recorder import WAIT_LANE_SUFFIX, BufferSpan
from npusim.trace.rows import EventRows, pack

if TYPE_CHECKING:
    from npusim.hw.system import Die
    from npusim.hw.timing import CoreKindTiming


_SCALAR: Final = Pipe.SCALAR  # Pipe is an interpreted enum: a look-up of its member costs ~10x a constant's (EnumType.__getattr__)
_SCALAR_ID: Final = int(_SCALAR)
FIXED: Final = 0
SET_FLAG: Final = 1
WAIT_FLAG: Final = 2
TRANSFER: Final = 3
WAITING: Final = 4


def flag_key(src: Pipe, dst: Pipe, event_id: int) -> int:
    """The flag (src pipe -> dst pipe, event id) as one int, the key of a run's flag tables."""
    return event_id << 6 | int(src) << 3 | int(dst)


NO_EFFECT: Final = 0
DATA_EFFECT: Final = 1
CONTROL_EFFECT: Final = 2
"""Whether an instruction has an effect (:class:`PipeStep`): none, one on real data (applied with
data on), or a ``control`` one (kept with data off too: waits depend on it)."""


class PipeStep:
    """What a pipe reads of an instruction that building fixed, made once per instruction when a
    program is placed (or once for the replays of a template in a tile, which share them; isa's
    ``CoreProgram.pipe_steps`` and ``ProgramTemplate.replay``): its ``step`` (one of FIXED ...
    WAITING), ``s_dep``, ``cost_ps`` (the ``fixed_ps`` of a FIXED step, the ``cost_ps`` of a
    flag's; else 0), the flag ``key`` (else 0), its ``effect`` (:data:`NO_EFFECT`,
    :data:`DATA_EFFECT` or :data:`CONTROL_EFFECT`), ``label_id``, ``nbytes``, and whether it may
    have a ``recorded`` callback (``watched``: False for an instruction the replays of a template
    share, to which nothing is attached). Compiled, a native class: the pipe reads its fields as C
    fields, not by name from the instruction."""

    __slots__ = ("step", "s_dep", "cost_ps", "key", "effect", "label_id", "nbytes", "watched")

    def __init__(self, instruction: Any, watched: bool = True) -> None:
        step: int = instruction.step
        flag = step in (SET_FLAG, WAIT_FLAG)
        self.step = step
        self.s_dep: int = instruction.s_dep
        self.cost_ps: int = instruction.fixed_ps if step == FIXED else instruction.cost_ps if flag else 0
        self.key: int = instruction.key if flag else 0
        self.effect = NO_EFFECT if not instruction.has_effect else CONTROL_EFFECT if instruction.control else DATA_EFFECT
        self.label_id: int = instruction.label_id
        self.nbytes: int = instruction.nbytes
        self.watched = watched


Copy = tuple[Any, PipeStep, bool]
"""A copy in flight as its pipe hands it to the queue (its request's owner): the instruction, its
:class:`PipeStep`, whether its effect applies."""


RouteKey = tuple[Pipe, "int | None", bool, tuple[str, str], bool]
"""Which path a copy takes (:meth:`AICore.dma_route`): its pipe, the die whose GM it reads or
writes (None: between two buffers of the core), whether towards GM, its move ``(source,
destination)`` and whether it is an atomic-add store."""


@final
class DmaRoute:
    """What the copies of one path key take (:meth:`AICore.dma_route`): the engine's set-up and
    cost per burst after the first (ps); the L2 of the die whose GM they read or write (None for a
    copy between two buffers of the core) and whether they write it; the flow class (path capped at
    the engine's rate of the move) and route latency in ps of a hit, and of a miss (the same for a
    write and an on-core copy). Immutable (``Final`` fields); a class of its own, not a named
    tuple, whose construction runs the tuple's ``__new__`` as Python (~2.9k instructions: each
    die's first copy of each path key makes one)."""

    __slots__ = ("setup_ps", "per_burst_ps", "cache", "write", "hit_class", "hit_latency_ps", "miss_class", "miss_latency_ps")

    def __init__(self, setup_ps: int, per_burst_ps: int, cache: L2Cache | None, write: bool, hit_class: FlowClass | None, hit_latency_ps: int,
                 miss_class: FlowClass | None, miss_latency_ps: int) -> None:
        self.setup_ps: Final = setup_ps
        self.per_burst_ps: Final = per_burst_ps
        self.cache: Final = cache
        self.write: Final = write
        self.hit_class: Final = hit_class
        self.hit_latency_ps: Final = hit_latency_ps
        self.miss_class: Final = miss_class
        self.miss_latency_ps: Final = miss_latency_ps


class Program(Protocol):
    """What a core runs (:meth:`AICore.execute`; isa's placed programs): its instructions per pipe
    (``by_pipe``), their :class:`PipeStep` records per pipe in the same order (``steps``), its
    kernel's ``name``, whether it has a ``pipe_barrier(ALL)`` (``needs_end_times``) and the bytes it
    reserves per buffer (``buffer_bytes``)."""

    by_pipe: dict[Pipe, list[Any]]
    steps: dict[Pipe, list[PipeStep]]
    name: str
    needs_end_times: bool
    buffer_bytes: dict[str, int]


class KernelRun:
    """The state of one program running on one core: per-pipe progress, flag counters, scalar
    registers, and what each blocked pipe is waiting for (for deadlock reports)."""

    __slots__ = ("env", "core", "program", "op", "scalar_issues", "progress", "flags", "regs", "blocked", "ends", "pipes_running", "pipes_done")
    # ``blocked`` maps a pipe (its int value) to the instruction it waits in, or a sentence, for
    # deadlock reports (a pipe blocked in a wait_flag waits in ``flags`` instead).

    def __init__(self, env: Environment, core: AICore, program: Program, op: int) -> None:
        self.env = env
        self.core = core
        self.program = program
        self.op = op
        self.scalar_issues = bool(program.by_pipe.get(_SCALAR))  # the scalar pipe has instructions: the others wait for it to issue theirs
        # per pipe (its int value): the instructions it finished, for the pipes with instructions
        # (made as their processes start, in AICore.run; None for the others, which nobody reads)
        self.progress: list[ProgressCounter | None] = [None] * len(Pipe)
        # the flags between its pipes, by flag_key (a wait blocked on one waits with its wait_flag)
        self.flags = Flags(env)
        self.regs: dict[int, int | float] = {}
        self.blocked: dict[int, object] = {}
        # end time of every instruction per pipe, kept only for programs with a pipe_barrier(ALL)
        self.ends: dict[int, list[int]] | None = {int(p): [] for p in Pipe} if program.needs_end_times else None
        # the pipes not ended yet, and the event that fires once all have (see pipe_ended)
        self.pipes_running = 0
        self.pipes_done = simpy.Event(env)

    def pipe_ended(self, process: simpy.Event) -> None:
        """A pipe has ended (its ``PipeRun.ended``): the run is done (``pipes_done`` fires) when every pipe has,
        or fails with the first pipe that failed. This is ``env.all_of`` of the pipes' ends with
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
        for wait_flag in self.flags.waiting():
            waits[int(cast(Any, wait_flag).pipe)] = wait_flag
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

    def __init__(self, env: Environment) -> None:
        self.env = env
        self.busy = False  # a granted request holds the core
        # the requests not granted yet, oldest first: a list (56 bytes empty, a deque 760: one per core
        # of the machine, 28 MB at 768 dies), a few at a time
        self.waiting: list[simpy.Event] = []

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
            succeed_at(self.env, self.waiting.pop(0), 0)  # its succeed(): a request is granted once


class CoreKind:
    """What every core of one kind (``die.cores.<kind>``: an AIC, an AIV ...) shares, worked out once
    per kind for all the cores of the machine (:attr:`System.core_kinds
    <npusim.hw.system.System.core_kinds>`), not once per core: the kind's ``name`` and ``timing``,
    its ``order`` among the die's kinds (which sorts trace lanes), its ``buffers`` as (name,
    capacity in bytes), its copy ``engines`` by pipe, and its trace lanes as (pipe, pipe's int
    value, lane name): ``pipe_lanes``, one per pipe, and ``wait_lanes``, one per pipe whose engine
    keeps more than one copy in flight (``MTE2 wait``: see :class:`AICore`). A lane name is one
    string shared by the lanes of every core of the kind."""

    def __init__(self, timing: CoreKindTiming) -> None:
        self.name = timing.name
        self.timing = timing
        self.order = timing.order
        self.buffers = [(name, buffer.capacity_bytes) for name, buffer in timing.buffers.items()]
        self.engines = timing.engines
        self.pipe_lanes = [(pipe, int(pipe), PIPE_NAMES[pipe]) for pipe in timing.pipes]
        self.wait_lanes = [(pipe, int(pipe), PIPE_NAMES[pipe] + WAIT_LANE_SUFFIX) for pipe, engine in timing.engines.items() if engine.queue_depth > 1]


class AICore:
    """One core of a die, of the kind ``kind`` describes (``die.cores.<kind>``: an AIC, an AIV, a
    310P AI core ...): its pipes, buffers and DMA engines."""

    def __init__(self, die: Die, kind: CoreKind, index: int) -> None:
        system = die.system
        self.die = die
        self.system = system
        self.env = system.env
        self.kind = kind.name
        self.index = index
        self.name = name = f"{kind.name}{index}"
        self.timing = die.timing
        self.kind_timing = kind.timing
        self.buffers = {buffer: LocalBuffer(buffer, capacity) for buffer, capacity in kind.buffers}
        # This core's DMA engines (MTE1/2/3, FIXP): each caps the rate of the copies it drives.
        self.dma_timing = kind.engines
        recorder = system.recorder
        die_index, order = die.index, kind.order
        self.tracks = {pipe: recorder.track(die_index, name, lane, (order, index, pipe_id)) for pipe, pipe_id, lane in kind.pipe_lanes}
        # Each copy engine's queue of requests (hw.queue.EngineQueue), built on its pipe's first run
        # (queue): a core whose pipe never runs builds none. A pipe whose engine keeps more than one
        # in flight records its wait_flags on a lane of their own ("aiv0 MTE2 wait", right after the
        # pipe's): they run while its copies stream, and a lane's slices never overlap. Those lanes
        # are made here, with the core's others: a lane's id is its tid in trace.json
        self.queues: dict[Pipe, EngineQueue] = {}
        self.wait_tracks = {pipe: recorder.track(die_index, name, lane, (order, index, pipe_id, 1)) for pipe, pipe_id, lane in kind.wait_lanes}
        recorder.costs.unit(die_index, name, kind.name)  # its copies are its kind's engines' (their keys: System)
        self.lock = CoreLock(self.env)
        self.current: KernelRun | None = None
        self.network = system.network
        self.dma_routes = die.dma_routes.setdefault(kind.name, {})  # see dma_route; shared by the die's cores of this kind

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

    def dma_route(self, key: RouteKey) -> DmaRoute:
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
                hit, miss = system.gm_routes(self.die.index, gm_die, to_gm, atomic)
                hit_class = network.flow_class(hit.resources, cap)
                miss_class = hit_class if to_gm else network.flow_class(miss.resources, cap)  # a write's miss is its hit
                route = DmaRoute(engine.setup_ps, engine.per_burst_ps, system.die(gm_die).cache, to_gm,
                                 hit_class, hit.latency_ps, miss_class, miss.latency_ps)
                # the latency of a miss (a write's: its L2's), by config key
                system.recorder.costs.route(self.die.index, self.kind, PIPE_NAMES[pipe], miss.latency_terms)
            self.dma_routes[key] = route
        return route

    def dma_segments(self, route: DmaRoute, moved_bytes: int, issue_ps: int, allocation: Allocation | None, offset: int, length: int, stride: int, count: int,
                     tally: L2Tally | None) -> list[tuple[FlowClass | None, int, int]]:
        """The flows of a copy issued at ``issue_ps`` that moves ``moved_bytes`` along ``route``:
        on-core, one; to or from GM, its ``count`` runs of ``length`` bytes ``stride`` apart from
        byte ``offset`` of ``allocation`` looked up in the L2 of the die whose GM it is (when the
        set-up is done), and split into the part that hits (from when its lines are in L2: an
        earlier miss may still be fetching them) and the part that misses
        (:func:`~npusim.hw.queue.split_by_hits`; a write, one flow across the L2). ``allocation``
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

    def execute(self, program: Program, op: int) -> simpy.Process:
        """Run ``program`` (``by_pipe``: its instructions per pipe; ``steps``: their
        :class:`PipeStep` records per pipe, in the same order; ``name``; ``needs_end_times``: it has a
        ``pipe_barrier(ALL)``; ``buffer_bytes``: bytes it reserves per buffer) on this core once the
        core is free; the process (of :meth:`run`) ends when every pipe is done."""
        return start_process(self.env, self.run(program, op))

    def run(self, program: Program, op: int) -> Generator[simpy.Event, object, None]:
        """The run of ``program`` (see :meth:`execute`) as a SimPy generator: it takes the core,
        runs the pipes, gives the core back."""
        lock = self.lock
        yield lock.request()
        try:
            run = KernelRun(self.env, self, program, op)
            self.current = run
            self.system.recorder.kernel_run(self.die.index, self.name)
            started = clock(self.env)
            pipe_ended, steps = run.pipe_ended, program.steps
            progress, env = run.progress, self.env
            pipes = [(pipe, instructions) for pipe, instructions in program.by_pipe.items() if instructions]
            for pipe, _ in pipes:
                progress[pipe] = ProgressCounter(env)
            run.pipes_running = len(pipes)
            if not pipes:
                run.pipes_done.succeed()
            # The pipes' first steps run here, in order (begin): this runs as the core's grant (a
            # NORMAL event) is processed, and nothing is scheduled after them
            for pipe, instructions in pipes:
                pipe_run = PipeRun(self, run, pipe, instructions, steps[pipe])
                pipe_run.ended.callbacks.append(pipe_ended)
                begin(pipe_run.start)
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


# the phases of a PipeRun: where it goes on when it wakes (each after a wait, or a step it falls through to)
_NEXT: Final = 0
_ISSUE_WAIT: Final = 1
_ISSUED: Final = 2
_STEP: Final = 3
_SLOT_WAIT: Final = 4
_SLOT_FREE: Final = 5
_COPY: Final = 6
_COPIED: Final = 7
_DRAIN_WAIT: Final = 8
_DRAINED: Final = 9
_EXECUTE: Final = 10
_SLEPT: Final = 11
_SET_SLEPT: Final = 12
_FLAG_WOKEN: Final = 13
_FLAG_TAKEN: Final = 14
_WAITING_FLUSHED: Final = 15
_WAITED: Final = 16
_END: Final = 17
_END_FLUSHED: Final = 18
_END_DRAINED: Final = 19
_END_REST: Final = 20


class PipeRun:
    """One pipe of a kernel run running its instructions in order: a state machine driven by the
    engine (a :class:`~npusim.engine.loop.Timer` for the busy stretches it sleeps through,
    :func:`~npusim.engine.loop.when` and ``when_reached`` for its waits, the run's
    :class:`~npusim.engine.flags.Flags`), not a SimPy process: the same events at the same moments
    as the process it replaces (the order of events: :mod:`npusim.engine.loop`), so the same
    results. ``ended`` is triggered (NORMAL, now) when the pipe is done, as a process's end would be,
    or failed with what the pipe raised. :meth:`start` takes its first step (``begin``); each wake-up
    goes on (:meth:`go_on`) from ``phase`` at instruction ``index``.

    The hot loop of the simulator, compiled: typed locals while it runs (the instructions' fixed
    fields from their PipeStep records), int keys, events put into the recorder's rows (a native
    :class:`~npusim.trace.rows.EventRows`, lane and label packed once), and flag costs run ahead
    (see the module doc). A pipe with a copy engine hands its copies to the engine's queue (hw.queue.EngineQueue), which records each one when it completes
    (:meth:`complete`); with a queue of one request the pipe waits for each copy, else it goes on
    while they are in flight ("Requests in flight" in the module doc)."""

    __slots__ = ("core", "env", "run", "instructions", "steps", "count", "pipe_id", "rows", "lane",
                 "wait_lane", "issued", "done", "blocked", "may_run_ahead", "effect_from", "ends", "flags", "counts_progress",
                 "waits_for_issue", "queue", "in_flight_too", "depth", "tally", "timer",
                 "ended", "resume", "complete_copy", "index", "phase", "ahead", "start_ps", "issued_count")
    # dropped as the pipe ends (_end): bound to the PipeRun, each is a reference cycle through it
    __deletable__ = ("resume", "complete_copy", "timer")

    def __init__(self, core: AICore, run: KernelRun, pipe: Pipe, instructions: list[Any], steps: list[PipeStep]) -> None:
        env = core.env
        self.core = core
        self.env = env
        self.run = run
        self.instructions = instructions
        self.steps = steps
        self.count = len(instructions)
        pipe_id = self.pipe_id = int(pipe)
        self.rows: EventRows = core.system.recorder.rows  # where its events go
        self.lane: int = pack(core.tracks[pipe], run.op)
        # this pipe's progress is made; SCALAR's too if any pipe waits for issue (None if it has no instructions)
        self.issued: ProgressCounter | None = run.progress[_SCALAR_ID]
        self.done = cast(ProgressCounter, run.progress[pipe_id])
        self.blocked = run.blocked
        may_run_ahead = self.may_run_ahead = pipe is not _SCALAR
        self.effect_from = DATA_EFFECT if core.system.with_data else CONTROL_EFFECT  # the effects applied
        ends = self.ends = run.ends[pipe_id] if run.ends is not None else None
        self.flags = run.flags
        # Pipe progress is read only by the scalar issue order (SCALAR's count) and by barriers.
        self.counts_progress = not may_run_ahead or ends is not None
        self.waits_for_issue = may_run_ahead and run.scalar_issues
        queue = self.queue = core.queue(pipe)  # the pipe's copy engine's queue (None: no engine on this pipe)
        in_flight_too = self.in_flight_too = queue is not None and queue.depth > 1  # copies stay in flight while the pipe goes on
        self.wait_lane: int = pack(core.wait_tracks[pipe], run.op) if in_flight_too else self.lane
        self.depth = queue.depth if queue is not None else 0
        self.tally = core.system.l2_tally(run.op, core.kind) if queue is not None else None
        self.resume = self.go_on  # bound once: the callback of every wait
        self.complete_copy = self.complete  # bound once: given with every copy
        # The pipe's one timer, re-armed for each busy stretch it sleeps through; nothing but this pipe waits on it.
        self.timer = Timer(env, self.go_on)
        self.ended = simpy.Event(env)
        self.index = 0  # the instruction it is at
        self.phase = _NEXT  # where in it
        self.ahead = 0  # ps this pipe has run ahead of env.now
        self.start_ps = 0  # the start of the instruction it is in
        self.issued_count = 0  # the scalar unit's count as last read: it only grows, so an s_dep up to it needs no look

    def start(self) -> None:
        """Take the first step: run up to the first wait (or the end)."""
        self.go_on(self.timer.event)

    def go_on(self, event: simpy.Event) -> None:
        """Go on where the pipe stopped, up to its next wait or its end: the callback of each of its
        waits (``event``: the one processed). What it raises (or a failure of the event it waited
        on) fails the pipe, as a process fails with what its generator raises."""
        try:
            env = self.env
            now: int = clock(env)  # refreshed at every wake-up
            phase, index, ahead, start = self.phase, self.index, self.ahead, self.start_ps
            instructions, steps, count = self.instructions, self.steps, self.count
            may_run_ahead, effect_from, in_flight_too, flags = self.may_run_ahead, self.effect_from, self.in_flight_too, self.flags
            waits_for_issue = self.waits_for_issue
            while index < count:
                instruction = instructions[index]
                fixed = steps[index]
                step, cost_ps, key = fixed.step, fixed.cost_ps, fixed.key
                if phase == _NEXT:
                    phase = _STEP
                    if waits_for_issue and fixed.s_dep > self.issued_count:
                        self.issued_count = issued_count = cast(ProgressCounter, self.issued).count
                        if fixed.s_dep > issued_count:
                            if ahead:
                                phase, ahead, wait, delay = _ISSUE_WAIT, 0, None, ahead
                                break
                            phase = _ISSUE_WAIT
                if phase != _STEP and phase < _EXECUTE:  # woken in the issue order's wait
                    if phase == _ISSUE_WAIT:
                        self.blocked[self.pipe_id] = "waiting for the scalar unit to issue it"
                        phase, wait = _ISSUED, cast(ProgressCounter, self.issued).reached(fixed.s_dep)
                        break
                    if phase == _ISSUED:
                        del self.blocked[self.pipe_id]
                        phase = _STEP
                applies = fixed.effect >= effect_from
                if phase == _STEP:
                    start = now + ahead
                    phase = _EXECUTE
                    if step == TRANSFER:
                        phase = _COPY
                        if self.queue.in_flight >= self.depth:  # type: ignore[union-attr]  # no free slot: wait for the oldest copy
                            phase = _SLOT_WAIT
                            if ahead:
                                phase, ahead, wait, delay = _SLOT_WAIT, 0, None, ahead
                                break
                    elif in_flight_too and self.queue.in_flight:  # type: ignore[union-attr]  # copies of this pipe are in flight
                        if step == SET_FLAG:  # raised once they have completed, in the queue's turn
                            self.queue.fence(start, cost_ps, self.deferred_set_flag, instruction, fixed)  # type: ignore[union-attr]
                            ahead += cost_ps
                            index += 1
                            phase = _NEXT
                            continue
                        if step != WAIT_FLAG:  # any other instruction of the pipe waits for them (a barrier on the pipe, a vector op)
                            phase = _DRAIN_WAIT
                            if ahead:
                                phase, ahead, wait, delay = _DRAIN_WAIT, 0, None, ahead
                                break
                if phase < _EXECUTE:  # a copy, or a wait for the copies in flight
                    if phase == _SLOT_WAIT:
                        self.blocked[self.pipe_id] = f"waiting for a free slot of its DMA queue ({self.depth} copies in flight)"
                        phase, ahead, wait = _SLOT_FREE, ahead, self.queue.until(self.depth - 1)  # type: ignore[union-attr]
                        break
                    if phase == _SLOT_FREE:
                        del self.blocked[self.pipe_id]
                        start = now + ahead
                        phase = _COPY
                    if phase == _COPY:
                        self.queue.issue(instruction.request(self.core, self.run, start, self.tally, self.complete_copy,  # type: ignore[union-attr]
                                                             (instruction, fixed, applies)))
                        if in_flight_too:  # recorded when it completes
                            index += 1
                            phase = _NEXT
                            continue
                        self.blocked[self.pipe_id] = instruction
                        phase, ahead, wait = _COPIED, ahead, self.queue.until(0)  # type: ignore[union-attr]
                        break
                    if phase == _COPIED:
                        del self.blocked[self.pipe_id]
                        ahead = 0
                        index += 1
                        phase = _NEXT
                        continue
                    if phase == _DRAIN_WAIT:
                        self.blocked[self.pipe_id] = "waiting for its copies in flight to complete"
                        phase, ahead, wait = _DRAINED, ahead, self.queue.until(0)  # type: ignore[union-attr]
                        break
                    # _DRAINED
                    del self.blocked[self.pipe_id]
                    start = now
                    phase = _EXECUTE
                if phase == _EXECUTE:
                    if step == FIXED:
                        if may_run_ahead and not applies:
                            ahead += cost_ps
                            end = start + cost_ps
                        else:
                            busy = ahead + cost_ps
                            if busy:
                                phase, ahead, wait, delay = _SLEPT, 0, None, busy
                                break
                            ahead = 0
                            end = now
                    elif step == SET_FLAG:
                        # Raise the flag at ``end``: the oldest waiter wakes then (or when it is ready, if
                        # later); with no waiter, the flag is kept with the time it becomes visible.
                        if may_run_ahead:
                            ahead += cost_ps
                            end = now + ahead
                            flags.set(key, end)
                        else:
                            phase, ahead, wait, delay = _SET_SLEPT, ahead, None, cost_ps
                            break
                    elif step == WAIT_FLAG:
                        # Take the oldest raised flag (flags are taken in the order they were raised, so a
                        # wait running ahead of the clock takes the one it would take at its own time), or
                        # wait for one, not before this wait is ready (``start``).
                        visible = flags.take(key)
                        if visible is None:  # not raised yet: wait for it
                            self.phase, self.index, self.ahead, self.start_ps = _FLAG_WOKEN, index, ahead, start
                            flags.wait(key, start, instruction, self.resume)
                            return
                        if visible > start:  # raised, visible later: stall until then
                            ahead = visible - now
                        phase = _FLAG_TAKEN
                    else:  # WAITING: needs the real time, may block on other pipes
                        phase = _WAITING_FLUSHED
                        if ahead:
                            phase, ahead, wait, delay = _WAITING_FLUSHED, 0, None, ahead
                            break
                elif phase == _SLEPT:
                    end = now
                    ahead = 0
                elif phase == _SET_SLEPT:
                    end = now
                    flags.set(key, end)
                elif phase == _FLAG_WOKEN:
                    ahead = 0
                    phase = _FLAG_TAKEN
                elif phase == _WAITED:
                    if not event._ok:  # the process would be thrown (a copy of) the failure
                        event._defused = True
                        failure = cast(BaseException, event._value)
                        error = type(failure)(*failure.args)
                        error.__cause__ = failure
                        raise error
                    del self.blocked[self.pipe_id]
                    end = now
                if phase == _FLAG_TAKEN:
                    if may_run_ahead:
                        ahead += cost_ps
                        end = now + ahead
                    else:
                        phase, ahead, wait, delay = _SLEPT, 0, None, ahead + cost_ps
                        break
                elif phase == _WAITING_FLUSHED:
                    start = now
                    started = instruction.start(self.core, self.run)  # ps it is busy, or an event it waits on
                    if isinstance(started, int):
                        if started:
                            phase, ahead, wait, delay = _SLEPT, 0, None, started
                            break
                        ahead = 0
                        end = now
                    else:
                        self.blocked[self.pipe_id] = instruction
                        phase, ahead, wait = _WAITED, 0, started
                        break
                # the instruction has ended at ``end``
                if in_flight_too and step == WAIT_FLAG and self.queue.in_flight:  # type: ignore[union-attr]
                    self.queue.fence(end, 0, self.deferred_wait, instruction, start, end, fixed)  # type: ignore[union-attr]
                else:
                    if applies:
                        instruction.effect(self.core, self.run)
                    self.record(self.wait_lane if step == WAIT_FLAG else self.lane, instruction, fixed, start, end, fixed.nbytes)
                index += 1
                phase = _NEXT
            else:
                self._end(phase, index, ahead, start)
                return
            # stopped in a wait: go on at ``phase`` when it ends (``wait`` processed, else ``delay`` ps from now)
            self.phase, self.index, self.ahead, self.start_ps = phase, index, ahead, start
            if wait is None:
                self.timer.start(delay)
            else:
                when(wait, self.resume)
        except BaseException as error:
            self.ended.fail(cast(Exception, error))

    def _end(self, phase: int, index: int, ahead: int, start: int) -> None:
        # every instruction has run: the pipe ends once its last busy stretch and its copies in flight are done
        queue = self.queue
        if phase == _NEXT:
            phase = _END_FLUSHED
            if ahead:
                self.phase, self.index, self.ahead = _END_FLUSHED, index, 0
                self.timer.start(ahead)
                return
        if phase == _END_FLUSHED:
            phase = _END_REST
            if self.in_flight_too and queue.in_flight:  # type: ignore[union-attr]
                self.blocked[self.pipe_id] = "waiting for its copies in flight to complete"
                self.phase, self.index, self.ahead = _END_DRAINED, index, 0
                when(queue.until(0), self.resume)  # type: ignore[union-attr]
                return
        if phase == _END_DRAINED:
            del self.blocked[self.pipe_id]
            phase = _END_REST
        if phase == _END_REST and self.in_flight_too:
            rest = queue.free_at - clock(self.env)  # type: ignore[union-attr]  # a set_flag that ran in the queue's turn ends then
            if rest > 0:
                self.phase, self.index, self.ahead = _END, index, 0
                self.timer.start(rest)
                return
        # Nothing calls the pipe back now: drop its callbacks bound to itself (its timer's among
        # them), so that reference counting frees it, its kernel run and their flags, events and
        # instructions as the run ends, not CPython's cycle collector some time later (on the
        # 768-die MoE dispatch ~930,000 objects, ~150 MB, were waiting for it as the run ended)
        del self.resume, self.complete_copy, self.timer
        succeed_at(self.env, self.ended, 0)  # the end of the pipe, as a process's

    def record(self, track: int, instruction: Any, fixed: PipeStep, start: int, end: int, nbytes: int) -> None:
        """An instruction ended (``fixed``: its :class:`PipeStep`): its event on ``track`` (``start`` to ``end`` ps, ``nbytes``), its hook,
        its progress (in program order)."""
        self.recorded(instruction, fixed, self.rows.put(track, fixed.label_id, start, end, nbytes), end)

    def recorded(self, instruction: Any, fixed: PipeStep, index: int, end: int) -> None:
        """An instruction ending at ``end`` (ps) was recorded as event ``index``: its hook, its progress (in program order)."""
        if fixed.watched:
            recorded = instruction.recorded
            if recorded is not None:
                recorded(index)
        if self.counts_progress:
            ends = self.ends
            if ends is not None:
                ends.append(end)
            done = self.done
            done.count += 1
            if done.waiters:
                done.wake()

    def complete(self, owner: Copy, start: int, flowed: int, arrived: int, bottleneck: int) -> None:
        """A copy's last byte has arrived (at ``arrived``) and its tail, if any, is done (now; an
        atomic add's read-modify-write), in issue order: its effect, its event, its hook, its progress."""
        instruction, fixed, applies = owner
        end: int = clock(self.env)
        if applies:
            instruction.effect(self.core, self.run)
        rows = self.rows
        index = rows.put(self.lane, fixed.label_id, start, end, fixed.nbytes)
        if end > arrived:
            rows.transfer_tail(index, end - arrived)
        rows.transfer(index, flowed - start, bottleneck)
        self.recorded(instruction, fixed, index, end)

    def deferred_wait(self, _turn: int, _at: int, instruction: Any, start: int, end: int, fixed: PipeStep) -> None:
        """A wait_flag that ran while copies were in flight, recorded in the queue's turn (after the
        copies issued before it, before those issued after it: in program order on the recorder)."""
        self.record(self.wait_lane, instruction, fixed, start, end, 0)

    def deferred_set_flag(self, start: int, end: int, instruction: Any, fixed: PipeStep) -> None:
        """A set_flag after copies still in flight, run once they have completed (EngineQueue.fence)."""
        self.flags.set(fixed.key, end)
        self.record(self.lane, instruction, fixed, start, end, 0)
