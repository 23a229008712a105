"""A simulation session: the simulated machine that workloads issue work to.

``with npusim.session("a3") as s:`` builds the system of a config; inside, the facades
(``npusim.torch_npu``, ``npusim.pypto``, the ISA builder) issue work to it; ``synchronize()`` runs the
simulation until all issued work is done. After the block, ``s.result`` holds the simulated time,
the summary and the events.
"""

from __future__ import annotations

import contextlib
import gc
import math
import numbers
import time
import weakref
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import simpy

from npusim.config import LoadedConfig, load_config
from npusim.engine.loop import STILL_EVENTS, Environment, Stop, due_now, run_until
from npusim.errors import DeadlockError, GraphCaptureError, NoProgressError, TimeBoundError, UsageError, WallTimeError
from npusim.frontend.host import HostThread, current_process
from npusim.frontend.memory import MemoryBudget, parse_memory
from npusim.hw.pipes import Pipe
from npusim.hw.stream import Stream
from npusim.hw.system import System
from npusim.isa import building_for
from npusim.isa.racecheck import check_mode as check_race_mode
from npusim.trace.chrome import write_chrome_trace
from npusim.trace.critical_path import CriticalPath, critical_path
from npusim.trace.events import events_frame
from npusim.trace.record import RunRecord
from npusim.trace.recorder import Recorder
from npusim.trace.summary import summarize
from npusim.units import Dimension, parse_quantity

if TYPE_CHECKING:
    from rich.progress import Progress

DEFAULT_TIME_LIMIT_PS = 10 * 10**12  # 10 s of simulated time: a bound on runaway programs
MAX_SEED = 2**32 - 1
"""Largest seed numpy's global random generator takes (``np.random.seed``: 0 .. 2**32 - 1)."""


def check_seed(seed: object) -> int:
    """``seed`` when numpy's global random generator takes it; else a :class:`UsageError` saying what it takes."""
    if isinstance(seed, bool) or not isinstance(seed, numbers.Integral) or not 0 <= int(seed) <= MAX_SEED:
        raise UsageError(f"seed {seed!r}: give a whole number from 0 to {MAX_SEED} (it seeds numpy's random generator)")
    return int(seed)


@dataclass
class SimResult:
    """What a session produced: simulated time (ps), the summary, the recorded events and status."""

    config: LoadedConfig
    simulated_ps: int
    summary: dict
    record: RunRecord
    status: str = "ok"
    error: str | None = None
    wall_seconds: float = 0.0
    params: dict = field(default_factory=dict)

    @property
    def simulated_us(self) -> float:
        return self.simulated_ps / 1e6

    @property
    def recorder(self) -> Recorder:
        """The run's events (``record.recorder``)."""
        return self.record.recorder

    @property
    def events(self):
        """The events as a pandas DataFrame, one row per executed instruction (columns: die, unit,
        lane, name, start_us, end_us, duration_us, bytes, op, op_name, tile); needs pandas."""
        return events_frame(self.recorder)

    def critical_path(self) -> CriticalPath:
        """The critical path of the run (segments, events on it, breakdown per resource)."""
        return critical_path(self.record)

    def write_trace(self, path) -> Path:
        """Write the Chrome/Perfetto trace of the run to ``path`` (returned)."""
        return write_chrome_trace(self.record, path, metadata={"config": self.config.name, "config_sha256": self.config.sha256,
                                                               "status": self.status, "params": self.params})


class Session:
    """One simulated machine and the work issued to it."""

    def __init__(self, config: LoadedConfig, *, with_data: bool = True, seed: int = 0, time_limit_ps: int = DEFAULT_TIME_LIMIT_PS,
                 params: dict | None = None, network_quantum: str | None = None, progress: bool = False,
                 wall_limit_s: float | None = None, races: str = "warn", memory: MemoryBudget | None = None) -> None:
        if memory is not None:
            memory.check_start()
        self.memory = memory  # what the run may use (npusim.frontend.memory); None: no limit
        self.config = config
        self.progress = RunProgress() if progress else None  # shown on the terminal while simulating
        self.network_quantum = network_quantum  # as given (e.g. '10ns'); None: the exact network
        self.seed = seed
        self.param_overrides: dict = dict(params or {})  # workload parameters given by the run
        self.params: dict[str, dict] = {}  # parameters the workload declared: name -> value, default, help
        self.system = System(config.spec, with_data=with_data, network_quantum_ps=network_quantum_ps(network_quantum, config))
        self.system.race_check = check_race_mode(races)  # what kernel launches do with pipe races (npusim.isa.racecheck)
        if memory is not None:  # a tensor's values too large for the limit are refused before they are allocated
            self.system.before_bytes = memory.expect_bytes
        self.env: Environment = self.system.env
        self.time_limit_ps = time_limit_ps
        self.still_events = STILL_EVENTS  # events at one instant that end the run (engine.loop.run_until)
        self.wall_limit_s = wall_limit_s  # wall-clock seconds after which the simulation stops (None: no limit)
        self._wall_start = time.perf_counter()
        self.pending: list[simpy.Event] = []
        self.result: SimResult | None = None
        self.main_host = HostThread(self.system)  # the torch program's host thread (docs/torch.md); a rank of npusim.spawn has its own
        self.user_streams: list[Stream] = []  # streams made with new_stream, besides each die's default
        self.current_streams: dict[int, Stream] = {}  # die -> the stream work is queued on, when not the default
        self.capture = None  # the graph being captured (npusim.frontend.graphs), if any
        self.deadlock_reporters: list = []  # callables returning report lines (e.g. unsatisfied waits)
        self.pypto_hints: list[dict] = []  # PyPTO compiler hints the workload gave (recorded, not modelled: docs/pypto.md)
        self.freezes_survivors = False  # whether the run may freeze what it keeps alive (frozen_survivors)
        self.froze_survivors = False  # whether it has frozen any (from the first look of its stepping loop, or of a long build, on)
        self._build_looks = 0  # the looks of its PyPTO builds so far (building)

    @property
    def now_us(self) -> float:
        """The simulated time so far, in microseconds."""
        return self.env.now / 1e6

    @property
    def with_data(self) -> bool:
        return self.system.with_data

    @property
    def host(self) -> HostThread:
        """The host thread of the code running now: the current SPMD rank's (:func:`npusim.spawn`, which
        torch.multiprocessing.spawn is in a session), else the session's own."""
        process = current_process()
        return process.host if process is not None else self.main_host

    def track(self, event: simpy.Event) -> simpy.Event:
        """Count ``event`` as issued work that ``synchronize`` must wait for."""
        self.pending.append(event)
        return event

    def stream(self, die: int) -> Stream:
        """The stream work for die ``die`` is queued on: the current one (``torch.npu.stream``),
        else the die's default stream."""
        current = self.current_streams.get(die)
        return current if current is not None else self.system.stream(die)

    def new_stream(self, die: int) -> Stream:
        """A new stream of die ``die`` (``torch.npu.Stream()``); synchronize waits for it too."""
        self.system.die(die)
        stream = Stream(self.env, die, f"stream{len(self.user_streams) + 1}")
        self.user_streams.append(stream)
        return stream

    def submit(self, stream: Stream, task) -> simpy.Process:
        """Queue ``task`` (a function returning a SimPy generator) on ``stream``."""
        return stream.submit(task)

    def synchronize(self, until: simpy.Event | None = None) -> None:
        """Run the simulation until every issued task has finished (or only ``until``); the host
        thread waits for it. A DeadlockError when nothing more can happen while work is still
        waiting, a TimeBoundError when the simulated-time bound is reached, a NoProgressError when
        the simulation loops in zero time; a GraphCaptureError while a graph is
        being captured (a captured graph cannot synchronise)."""
        if self.capture is not None:
            raise GraphCaptureError(
                "a synchronising call (tensor.cpu(), .item(), a host copy, torch.npu.synchronize(), event.synchronize()) "
                f"during the capture of {self.capture.name}: captured work does not run until the graph is replayed, so "
                "there is nothing to wait for; move the call out of the captured region"
            )
        process = current_process()
        if until is not None:
            pending = [] if until.processed else [until]
        elif process is not None:  # a rank of npusim.spawn waits for the work of its own devices, as torch.npu.synchronize does
            dies = process.dies | {process.device or 0}
            streams = [s for s in self.system.streams + self.user_streams if s.die in dies]
            pending = [s.tail for s in streams if s.tail is not None and not s.tail.processed]
        else:
            pending = self.unfinished_work()
            self.pending = [e for e in self.pending if not e.processed]
        if pending:
            if process is not None:  # other ranks run meanwhile (npusim.frontend.ranks)
                process.block(pending)
            else:
                self._run_until(self.env.all_of(pending))
        self.host.waited_until(int(self.env.now))

    def unfinished_work(self) -> list[simpy.Event]:
        """The issued work not simulated to its end yet: the tails of the streams, the tracked events."""
        streams = self.system.streams + self.user_streams
        work = [s.tail for s in streams if s.tail is not None and not s.tail.processed]
        return work + [e for e in self.pending if not e.processed]

    def run_until(self, event: simpy.Event) -> None:
        """Run the simulation until ``event`` is processed, without the host waiting (the device
        waits for it: a PyPTO kernel that reads a device value while it is built). A DeadlockError
        as :meth:`synchronize`."""
        if not event.processed:
            self._run_until(event)

    def _run_until(self, target: simpy.Event) -> None:
        """Step the simulation until ``target`` is processed (``engine.loop.run_until``). A
        DeadlockError when nothing more can happen, a TimeBoundError when the next event lies past
        the time bound, a NoProgressError when ``still_events`` events pass at one instant, a
        WallTimeError past the wall-clock limit (looked at here and every PROGRESS_STEPS steps, so a
        workload of many short synchronisations is stopped too)."""
        every = self._every_so_often()
        if every is not None:
            every(synchronizing=True)
        stop = run_until(self.env, target, self.time_limit_ps, every=every, steps=PROGRESS_STEPS, still_events=self.still_events)
        if stop is Stop.IDLE:
            raise DeadlockError(self._deadlock_report("deadlock", "nothing more can happen, but issued work is still waiting"))
        if stop is Stop.BOUND:
            slowest = self.system.network.slowest_in_flight()
            raise TimeBoundError(self._deadlock_report(
                "time bound reached", f"the simulated-time bound of {self.time_limit_ps / 1e6:,.0f} us ended the run while issued work was "
                "still running (raise it with npusim.session(time_limit_us=...))", [
                    "  the slowest transfer in flight: " + (slowest.describe() if slowest is not None else "none (no bytes are moving)")]))
        if stop is Stop.STILL:
            due = ", ".join(f"{what} ({count})" for what, count in due_now(self.env))
            raise NoProgressError(self._deadlock_report(
                "no progress", f"{self.still_events:,} events passed without simulated time advancing: work loops in zero time",
                [f"  due now, by what they run: {due or 'nothing'}"]))

    def _every_so_often(self):
        """What the stepping loop calls every PROGRESS_STEPS steps, and each synchronisation as it
        starts (``synchronizing=True``): the progress line, the wall-clock limit, the memory limit
        and the freezing of survivors (None: none of them)."""
        progress, limit_s, memory, freeze = self.progress, self.wall_limit_s, self.memory, self.freezes_survivors
        if progress is None and limit_s is None and memory is None and not freeze:
            return None
        deadline = math.inf if limit_s is None else self._wall_start + limit_s

        def look(synchronizing: bool = False) -> None:
            if freeze and (self.froze_survivors or not synchronizing):
                freeze_survivors(self)
            if progress is not None:
                progress.update(self.env.now, len(self.system.recorder))
            if time.perf_counter() > deadline:
                self.check_wall_clock()
            if memory is not None:
                memory.watch(self.env.now, len(self.system.recorder))

        return look

    def building(self, where: Callable[[], str]) -> None:
        """A PyPTO kernel function has built another BUILD_LOOK_OPS ops (``where()``: the kernel
        and loop): its memory limit, and from the session's BUILD_LOOKS_BEFORE_FREEZE-th such look
        on, the freezing of survivors (:func:`frozen_survivors`), as the stepping loop's looks do:
        a large launch's programs, tasks and tensors live until they run, and every young
        collection of the build would otherwise walk them again."""
        if self.memory is not None:
            self.memory.watch_build(where())
        self._build_looks += 1
        if self.freezes_survivors and self._build_looks >= BUILD_LOOKS_BEFORE_FREEZE:
            freeze_survivors(self)

    def check_wall_clock(self, where: Callable[[], str] | None = None) -> None:
        """A WallTimeError once the session is older than its wall-clock limit (``where()``: what was
        being done, for the message, asked only then). The stepping loop looks every PROGRESS_STEPS
        steps and at every synchronisation; a PyPTO kernel's build at each of its ops and loop iterations."""
        if self.wall_limit_s is not None and time.perf_counter() - self._wall_start > self.wall_limit_s:
            doing = where() if where is not None else ""
            raise WallTimeError(f"the run went past its wall-clock limit of {self.wall_limit_s:g} s at {self.now_us:,.3f} us simulated{doing}")

    def _deadlock_report(self, title: str, why: str, first: list[str] | None = None) -> str:
        lines = [f"{title} at {self.env.now / 1e6:.3f} us: {why}.", *(first or [])]
        for die in self.system.dies:
            for core in die.cores:
                run = core.current
                if run is None:
                    continue
                for pipe, what in sorted(run.waits().items()):
                    lines.append(f"  die {die.index} {core.name} {Pipe(pipe).name} (kernel {run.program.name!r}) waits in: {what}")
        for reporter in self.deadlock_reporters:
            lines.extend(reporter())
        if len(lines) == 1 + len(first or []) and title == "deadlock":
            lines.append("  no core is blocked; a task waits for an event that is never triggered")
        return "\n".join(lines)

    def finish(self, status: str = "ok", error: str | None = None) -> SimResult:
        """Close the session: the result with the summary of everything simulated."""
        wall = time.perf_counter() - self._wall_start
        if self.progress is not None:
            self.progress.stop()
        record = self.system.record()
        summary = summarize(record, self.config, wall_seconds=wall, status=status, error=error)
        summary["params"] = {name: entry["value"] for name, entry in self.params.items()}
        if self.network_quantum is not None:
            summary["network_quantum"] = self.network_quantum
        self.result = SimResult(self.config, record.simulated_ps, summary, record, status, error, wall, params=summary["params"])
        return self.result


PROGRESS_STEPS = 2048  # SimPy steps between two looks at the wall clock for the progress line
BUILD_LOOKS_BEFORE_FREEZE = 8
"""The looks of PyPTO builds (each after BUILD_LOOK_OPS ops, ~0.1 s) before a session freezes survivors
as they build (Session.building): a short build, as most tests make, freezes nothing (a session's first
freeze may collect the whole heap once, frozen_survivors)."""


class RunProgress:
    """One line on the terminal (stderr) while a long run simulates: the simulated time reached,
    the events recorded and the wall time, refreshed at most twice a second, from the first second
    on (short runs show nothing); erased when the run ends."""

    def __init__(self) -> None:
        self._start = time.perf_counter()
        self._shown = self._start
        self._bar: Progress | None = None

    def update(self, now_ps: int, events: int) -> None:
        wall = time.perf_counter()
        if wall - self._shown < 0.5 or wall - self._start < 1.0:
            return
        self._shown = wall
        if self._bar is None:
            from rich.console import Console  # imported by the runs that show the line (long ones, on a terminal) only
            from rich.progress import Progress, TextColumn

            self._bar = Progress(TextColumn("{task.description}"), console=Console(stderr=True), transient=True)
            self._bar.start()
            self._task = self._bar.add_task("")
        self._bar.update(self._task, description=f"simulated {now_ps / 1e6:,.3f} us, {events:,} events, wall {wall - self._start:.1f} s")

    def stop(self) -> None:
        if self._bar is not None:
            self._bar.stop()
            self._bar = None


# Allocations between two collections of CPython's youngest generation while a session is open
# (default 700). Building programs and simulating them keep many objects alive, so at the default a
# full collection runs each time the heap grows by a quarter: ~15% of the a3 all-gather's time.
# Every object that outlives a young collection is walked again by the middle one, and most of what
# a simulation allocates (instructions, events, tasks) lives for a few thousand allocations: at
# 100,000 most of it is freed before any collection sees it (at 10,000 the collections took 40% of
# a 256-die hierarchical all-gather, at 100,000 ~12%, for 2% more memory). The session restores
# the caller's thresholds when it ends.
GC_YOUNG_THRESHOLD = 100_000


@contextlib.contextmanager
def young_gc_threshold() -> Iterator[None]:
    """CPython's young-generation GC threshold raised to at least GC_YOUNG_THRESHOLD while inside;
    the caller's thresholds restored after."""
    thresholds = gc.get_threshold()
    gc.set_threshold(max(thresholds[0], GC_YOUNG_THRESHOLD), *thresholds[1:])
    try:
        yield
    finally:
        gc.set_threshold(*thresholds)


_unfrozen_runs = False  # whether a session ended (unfreezing what its run left) since a session's first freeze last collected


@contextlib.contextmanager
def frozen_survivors(current: Session) -> Iterator[None]:
    """CPython's collector blind to what a long simulation keeps alive while inside: from the
    stepping loop's first look (after PROGRESS_STEPS steps) or a long PyPTO build's
    (Session.building) on, what lives at each look (every PROGRESS_STEPS steps, at each
    synchronisation, every BUILD_LOOK_OPS ops built) is frozen (gc.freeze) as the run goes, so a
    young collection walks what was allocated since the last look only, not the cores, lanes and
    queues built or kept since the session began (at 768 dies the young list otherwise grows to
    ~680,000 objects and each young collection takes 41-56 ms: benchmarks/RESULTS.md, issue 28). A
    run too short to reach the first look freezes nothing: young collections cost it little.
    Objects still die as their references go; the reference cycles that died before a look
    (gc.freeze freezes garbage too) or while frozen are unfrozen with the rest as the session
    ends. The first freeze of a session that follows one that froze collects them first (a walk of
    the whole heap, once per session that runs long enough): frozen again, they would outlast every
    later session, piling up in a process that runs one after another (591 MiB resident after four
    test modules in one process, 395 without freezing, 375 with this collection). Short sessions do
    not pay that walk, which in a test process (pytest's and hypothesis's heap) costs ~0.12 s per
    session. All unfrozen on exit, so the caller's heap is as it was; nothing is frozen when the
    caller had frozen objects of its own (a session inside another, or gc.freeze before it), as
    unfreezing would unfreeze theirs too."""
    global _unfrozen_runs
    if gc.get_freeze_count():
        yield
        return
    current.freezes_survivors = True
    try:
        yield
    finally:
        current.freezes_survivors = False
        if current.froze_survivors:
            gc.unfreeze()
            _unfrozen_runs = True


def freeze_survivors(current: Session) -> None:
    """Freeze (gc.freeze) what lives now, for ``current``'s frozen_survivors; the session's first
    freeze collects first what earlier sessions left unfrozen."""
    global _unfrozen_runs
    if not current.froze_survivors:
        if _unfrozen_runs:
            gc.collect()
            _unfrozen_runs = False
        current.froze_survivors = True
    gc.freeze()


@contextlib.contextmanager
def session(config: str | LoadedConfig = "a3", overrides: Sequence[str] | Mapping[str, object] | None = None, data: bool = True,
            seed: int = 0, time_limit_us: float | None = None, params: Mapping[str, object] | None = None,
            network_quantum: str | None = None, progress: bool = False, wall_limit_s: float | None = None,
            races: str = "warn", max_memory: int | str | MemoryBudget | None = None) -> Iterator[Session]:
    """Build the simulated machine of ``config`` (a built-in name or a YAML path, with ``overrides``
    as ``key.path=value``); ``data=False`` simulates timing only; ``params`` override the workload's
    declared parameters (:func:`npusim.param`); ``network_quantum`` (a time, e.g. ``'10ns'``) makes
    the bandwidth network approximate for speed (docs/architecture.md, "Time quantum"); ``progress``
    shows a progress line on the terminal while simulating (:class:`RunProgress`); ``wall_limit_s``
    stops the simulation with a WallTimeError once the session is that many seconds old; ``races``
    says what a kernel launch does with the pipe races it has (:mod:`npusim.isa.racecheck`): ``warn``
    (a PipeRaceWarning and a warning in the trace and summary), ``error`` (a RaceError) or ``off``;
    ``max_memory`` (bytes, or a size such as ``'4GiB'``) is the memory the run may use: a
    MemoryLimitError before it simulates what would exceed it, or as it does
    (:mod:`npusim.frontend.memory`; ``npusim run`` takes what the machine has available). numpy's
    global random generator is seeded with ``seed`` so workloads that draw random inputs are
    reproducible."""
    check_seed(seed)
    check_race_mode(races)
    memory = memory_budget(max_memory)
    loaded = config if isinstance(config, LoadedConfig) else load_config(config, overrides or ())
    limit = DEFAULT_TIME_LIMIT_PS if time_limit_us is None else int(time_limit_us * 1e6)
    current = Session(loaded, with_data=data, seed=seed, time_limit_ps=limit, params=dict(params or {}), network_quantum=network_quantum,
                      progress=progress, wall_limit_s=wall_limit_s, races=races, memory=memory)
    np.random.seed(seed)
    _SESSIONS.append(current)
    _SESSION_OF[current.system] = weakref.ref(current)
    with young_gc_threshold(), frozen_survivors(current):
        try:
            with building_for(current.system):
                yield current
                current.synchronize()
        except KeyboardInterrupt:  # stop now: no summary (it can take a while), ``result`` stays None
            if current.progress is not None:
                current.progress.stop()
            raise
        except BaseException as error:
            current.finish("failed", f"{type(error).__name__}: {error}")
            raise
        finally:
            _SESSIONS.remove(current)
        current.finish()


_SESSIONS: list[Session] = []
"""The open sessions, innermost last."""

_SESSION_OF: weakref.WeakKeyDictionary[System, weakref.ref[Session]] = weakref.WeakKeyDictionary()
"""The session of each system a session built (tensors reach their session through their system),
weakly: a session refers to its system, so holding it here would keep both alive for as long as
the process runs (every session, and all it simulated)."""


def network_quantum_ps(network_quantum: str | None, config: LoadedConfig) -> int:
    """The bandwidth network's time quantum in ps for ``network_quantum`` as a run gives it (a
    time with a unit, e.g. ``'10ns'``; None: 0, the exact network)."""
    if network_quantum is None:
        return 0
    try:
        quantum = parse_quantity(network_quantum, Dimension.TIME)
    except ValueError as error:
        raise UsageError(f"network quantum {network_quantum!r}: {error}; give a time such as 10ns, or leave it unset for the "
                         "exact network") from None
    problem = quantum.engine_problem(config.spec.die.clock.hz)
    if problem is not None:
        raise UsageError(f"network quantum {problem}, or leave it unset for the exact network")
    return quantum.to_ps(config.spec.die.clock.hz)


def memory_budget(max_memory: int | str | MemoryBudget | None) -> MemoryBudget | None:
    """The :class:`MemoryBudget` of ``session(max_memory=...)``."""
    if max_memory is None or isinstance(max_memory, MemoryBudget):
        return max_memory
    if isinstance(max_memory, str):
        return MemoryBudget(parse_memory(max_memory), f"max_memory={max_memory!r}")
    if isinstance(max_memory, bool) or not isinstance(max_memory, int) or max_memory <= 0:
        raise UsageError(f"max_memory={max_memory!r}: give a number of bytes above 0 or a size such as '4GiB'")
    return MemoryBudget(max_memory, f"max_memory={max_memory}")


def current_session() -> Session:
    """The innermost open session (a UsageError when none is open)."""
    if not _SESSIONS:
        raise UsageError("no npusim session is active: wrap the code in `with npusim.session('a3'):` or run the file with `npusim run`")
    return _SESSIONS[-1]


def innermost_session() -> Session | None:
    """The innermost open session, or None when none is open."""
    return _SESSIONS[-1] if _SESSIONS else None


def session_of(system: System) -> Session | None:
    """The session that built ``system`` (None once nothing refers to that session any more)."""
    ref = _SESSION_OF.get(system)
    return ref() if ref is not None else None


def active_system() -> System:
    """The system of the innermost open session."""
    return current_session().system


def synchronize() -> None:
    """Run the active session until all issued work is done (like ``torch.npu.synchronize()``)."""
    current_session().synchronize()
