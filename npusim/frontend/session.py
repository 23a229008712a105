"""A simulation session: the simulated machine that workloads issue work to.

``with npusim.session("a3") as s:`` builds the system of a config; inside, the facades
(``npusim.torch_npu``, ``npusim.pypto``, the ISA builder) issue work to it; ``synchronize()`` runs the
simulation until all issued work is done. After the block, ``s.result`` holds the simulated time,
the summary and the events.
"""

from __future__ import annotations

import contextlib
import gc
import time
from dataclasses import dataclass, field
from heapq import heappop
from pathlib import Path
from typing import Iterator, Mapping, Sequence

import numpy as np
import simpy
from rich.console import Console
from rich.progress import Progress, TextColumn

from npusim.trace.critical_path import CriticalPath, critical_path
from npusim.trace.events import events_frame
from npusim.config import LoadedConfig, load_config
from npusim.errors import DeadlockError, UsageError
from npusim.hw.pipes import Pipe
from npusim.hw.system import System, active_system, pop_active, push_active
from npusim.trace.chrome import write_chrome_trace
from npusim.trace.recorder import Recorder
from npusim.trace.summary import summarize
from npusim.units import Dimension, parse_quantity

DEFAULT_TIME_LIMIT_PS = 10 * 10**12  # 10 s of simulated time: a bound on runaway programs


@dataclass
class SimResult:
    """What a session produced: simulated time (ps), the summary, the recorded events and status."""

    config: LoadedConfig
    simulated_ps: int
    summary: dict
    recorder: Recorder
    system: System
    status: str = "ok"
    error: str | None = None
    wall_seconds: float = 0.0
    params: dict = field(default_factory=dict)

    @property
    def simulated_us(self) -> float:
        return self.simulated_ps / 1e6

    @property
    def events(self):
        """The events as a pandas DataFrame, one row per executed instruction (columns: die, unit,
        lane, name, start_us, end_us, duration_us, bytes, op, op_name, tile); needs pandas."""
        return events_frame(self.recorder)

    def critical_path(self) -> CriticalPath:
        """The critical path of the run (segments, events on it, breakdown per resource)."""
        return critical_path(self.system)

    def write_trace(self, path) -> Path:
        """Write the Chrome/Perfetto trace of the run to ``path`` (returned)."""
        return write_chrome_trace(self.system, path, metadata={"config": self.config.name, "config_sha256": self.config.sha256,
                                                               "status": self.status, "params": self.params})


class Session:
    """One simulated machine and the work issued to it."""

    def __init__(self, config: LoadedConfig, *, with_data: bool = True, seed: int = 0, time_limit_ps: int = DEFAULT_TIME_LIMIT_PS,
                 params: dict | None = None, network_quantum: str | None = None, progress: bool = False) -> None:
        self.config = config
        self.progress = RunProgress() if progress else None  # shown on the terminal while simulating
        self.network_quantum = network_quantum  # as given (e.g. '10ns'); None: the exact network
        self.seed = seed
        self.param_overrides: dict = dict(params or {})  # workload parameters given by the run
        self.params: dict[str, dict] = {}  # parameters the workload declared: name -> value, default, help
        self.system = System(config.spec, with_data=with_data, network_quantum_ps=network_quantum_ps(network_quantum, config))
        self.env: simpy.Environment = self.system.env
        self.time_limit_ps = time_limit_ps
        self._wall_start = time.perf_counter()
        self.pending: list[simpy.Event] = []
        self.result: SimResult | None = None

    @property
    def now_us(self) -> float:
        """The simulated time so far, in microseconds."""
        return self.env.now / 1e6

    @property
    def with_data(self) -> bool:
        return self.system.with_data

    def track(self, event: simpy.Event) -> simpy.Event:
        """Count ``event`` as issued work that ``synchronize`` must wait for."""
        self.pending.append(event)
        return event

    def synchronize(self) -> None:
        """Run the simulation until every issued task has finished; a DeadlockError when nothing
        more can happen while work is still waiting, or when the simulated-time bound is reached."""
        pending = [s.tail for s in self.system.streams if s.tail is not None and not s.tail.processed]
        pending += [e for e in self.pending if not e.processed]
        self.pending = [e for e in self.pending if not e.processed]
        if not pending:
            return
        self._run_until(self.env.all_of(pending))

    def _run_until(self, target: simpy.Event) -> None:
        """Step the simulation until ``target`` is processed. A DeadlockError when no event is left
        to process (nothing more can happen) or when the next event lies past the time bound.

        SimPy's ``run(until=...)`` cannot tell these apart from a bound kept as a pending event
        (that event alone would keep the simulation alive until the bound), so the loop looks at
        the event queue itself: ``env._queue`` is SimPy's heap of ``(time, priority, id, event)``.
        Each step is ``Environment.step`` inlined (the loop is the simulation's innermost one):
        pop the next event, run its callbacks, raise (a copy of) a failure no process handled."""
        env = self.env
        queue = env._queue
        limit = self.time_limit_ps
        steps, report_at = 0, PROGRESS_STEPS if self.progress is not None else -1
        while target.callbacks is not None:  # not processed yet
            if not queue:
                raise DeadlockError(self._deadlock_report("nothing more can happen, but issued work is still waiting"))
            if queue[0][0] > limit:
                raise DeadlockError(self._deadlock_report(f"the simulated-time bound of {limit / 1e6:.0f} us was reached"))
            env._now, _, _, event = heappop(queue)
            callbacks, event.callbacks = event.callbacks, None
            for callback in callbacks:
                callback(event)
            if not event._ok and not hasattr(event, "_defused"):  # a failure no process handled
                error = type(event._value)(*event._value.args)
                error.__cause__ = event._value
                raise error
            steps += 1
            if steps == report_at:
                report_at += PROGRESS_STEPS
                self.progress.update(env._now, self.system.recorder.events)

    def _deadlock_report(self, why: str) -> str:
        lines = [f"deadlock at {self.env.now / 1e6:.3f} us: {why}."]
        for die in self.system.dies:
            for core in die.cores:
                run = core.current
                if run is None:
                    continue
                for pipe, what in sorted(run.waits().items()):
                    lines.append(f"  die {die.index} {core.name} {Pipe(pipe).name} (kernel {run.program.name!r}) waits in: {what}")
        for reporter in self.system.deadlock_reporters:
            lines.extend(reporter())
        if len(lines) == 1:
            lines.append("  no core is blocked; a task waits for an event that is never triggered")
        return "\n".join(lines)

    def finish(self, status: str = "ok", error: str | None = None) -> SimResult:
        """Close the session: the result with the summary of everything simulated."""
        wall = time.perf_counter() - self._wall_start
        if self.progress is not None:
            self.progress.stop()
        summary = summarize(self.system, self.config, wall_seconds=wall, status=status, error=error)
        summary["params"] = {name: entry["value"] for name, entry in self.params.items()}
        if self.network_quantum is not None:
            summary["network_quantum"] = self.network_quantum
        self.result = SimResult(self.config, self.env.now, summary, self.system.recorder, self.system, status, error, wall,
                                params=summary["params"])
        return self.result


PROGRESS_STEPS = 2048  # SimPy steps between two looks at the wall clock for the progress line


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
# At 10,000 the young collections cost the same in total and the full ones stop; the session
# restores the caller's thresholds when it ends.
GC_YOUNG_THRESHOLD = 10_000


@contextlib.contextmanager
def session(config: str | LoadedConfig = "a3", overrides: Sequence[str] | Mapping[str, object] | None = None, data: bool = True,
            seed: int = 0, time_limit_us: float | None = None, params: Mapping[str, object] | None = None,
            network_quantum: str | None = None, progress: bool = False) -> Iterator[Session]:
    """Build the simulated machine of ``config`` (a built-in name or a YAML path, with ``overrides``
    as ``key.path=value``); ``data=False`` simulates timing only; ``params`` override the workload's
    declared parameters (:func:`npusim.param`); ``network_quantum`` (a time, e.g. ``'10ns'``) makes
    the bandwidth network approximate for speed (docs/architecture.md, "Time quantum"); ``progress``
    shows a progress line on the terminal while simulating (:class:`RunProgress`). numpy's
    global random generator is seeded with ``seed`` so workloads that draw random inputs are
    reproducible."""
    loaded = config if isinstance(config, LoadedConfig) else load_config(config, overrides or ())
    limit = DEFAULT_TIME_LIMIT_PS if time_limit_us is None else int(time_limit_us * 1e6)
    current = Session(loaded, with_data=data, seed=seed, time_limit_ps=limit, params=dict(params or {}), network_quantum=network_quantum,
                      progress=progress)
    np.random.seed(seed)
    push_active(current.system)
    current.system.session = current
    thresholds = gc.get_threshold()
    gc.set_threshold(max(thresholds[0], GC_YOUNG_THRESHOLD), *thresholds[1:])
    try:
        try:
            yield current
            current.synchronize()
        except BaseException as error:
            current.finish("failed", f"{type(error).__name__}: {error}")
            raise
        finally:
            pop_active(current.system)
        current.finish()
    finally:
        gc.set_threshold(*thresholds)


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
    quantum_ps = quantum.to_ps(config.spec.die.clock.hz)
    if quantum_ps < 1:
        raise UsageError(f"network quantum {network_quantum!r} is below 1 ps, the simulator's time step; give 1ps or more")
    return quantum_ps


def current_session() -> Session:
    """The innermost active session."""
    system = active_system()
    return system.session


def synchronize() -> None:
    """Run the active session until all issued work is done (like ``torch.npu.synchronize()``)."""
    current_session().synchronize()
