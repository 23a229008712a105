"""A simulation session: the simulated machine that workloads issue work to.

``with npusim.session("a3") as s:`` builds the system of a config; inside, the facades
(``npusim.torch_npu``, ``npusim.pypto``, the ISA builder) issue work to it; ``synchronize()`` runs the
simulation until all issued work is done. After the block, ``s.result`` holds the simulated time,
the summary and the events.
"""

from __future__ import annotations

import contextlib
import gc
import numbers
import time
import weakref
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator, Mapping, Sequence

import numpy as np
import simpy

from npusim.engine.loop import Stop, run_until
from npusim.trace.critical_path import CriticalPath, critical_path
from npusim.trace.events import events_frame
from npusim.config import LoadedConfig, load_config
from npusim.errors import DeadlockError, GraphCaptureError, UsageError
from npusim.frontend.host import HostThread
from npusim.hw.pipes import Pipe
from npusim.hw.stream import Stream
from npusim.hw.system import System
from npusim.isa import building_for
from npusim.trace.chrome import write_chrome_trace
from npusim.trace.record import RunRecord
from npusim.trace.recorder import Recorder
from npusim.trace.summary import summarize

DEFAULT_TIME_LIMIT_PS = 10 * 10**12  # 10 s of simulated time: a bound on runaway programs
MAX_SEED = 2**32 - 1
"""Largest seed numpy's global random generator takes (``np.random.seed``: 0 .. 2**32 - 1)."""


def check_seed(seed: object) -> int:
    """``seed`` when numpy's global random generator takes it; else a :class:`UsageError` saying what it takes."""
    if isinstance(seed, bool) or not isinstance(seed, numbers.Integral) or not 0 <= seed <= MAX_SEED:
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
                 params: dict | None = None) -> None:
        self.config = config
        self.seed = seed
        self.param_overrides: dict = dict(params or {})  # workload parameters given by the run
        self.params: dict[str, dict] = {}  # parameters the workload declared: name -> value, default, help
        self.system = System(config.spec, with_data=with_data)
        self.env: simpy.Environment = self.system.env
        self.time_limit_ps = time_limit_ps
        self._wall_start = time.perf_counter()
        self.pending: list[simpy.Event] = []
        self.result: SimResult | None = None
        self.host = HostThread(self.system)  # the torch program's host thread (docs/torch.md)
        self.user_streams: list[Stream] = []  # streams made with new_stream, besides each die's default
        self.current_streams: dict[int, Stream] = {}  # die -> the stream work is queued on, when not the default
        self.capture = None  # the graph being captured (npusim.frontend.graphs), if any
        self.deadlock_reporters: list = []  # callables returning report lines (e.g. unsatisfied waits)

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
        waiting, or when the simulated-time bound is reached; a GraphCaptureError while a graph is
        being captured (a captured graph cannot synchronise)."""
        if self.capture is not None:
            raise GraphCaptureError(
                "a synchronising call (tensor.cpu(), .item(), a host copy, torch.npu.synchronize(), event.synchronize()) "
                f"during the capture of {self.capture.name}: captured work does not run until the graph is replayed, so "
                "there is nothing to wait for; move the call out of the captured region"
            )
        if until is not None:
            pending = [] if until.processed else [until]
        else:
            streams = self.system.streams + self.user_streams
            pending = [s.tail for s in streams if s.tail is not None and not s.tail.processed]
            pending += [e for e in self.pending if not e.processed]
            self.pending = [e for e in self.pending if not e.processed]
        if pending:
            self._run_until(self.env.all_of(pending))
        self.host.waited_until(self.env.now)

    def _run_until(self, target: simpy.Event) -> None:
        """Step the simulation until ``target`` is processed (``engine.loop.run_until``). A
        DeadlockError when nothing more can happen or when the next event lies past the time bound."""
        stop = run_until(self.env, target, self.time_limit_ps)
        if stop is Stop.IDLE:
            raise DeadlockError(self._deadlock_report("nothing more can happen, but issued work is still waiting"))
        if stop is Stop.BOUND:
            raise DeadlockError(self._deadlock_report(f"the simulated-time bound of {self.time_limit_ps / 1e6:.0f} us was reached"))

    def _deadlock_report(self, why: str) -> str:
        lines = [f"deadlock at {self.env.now / 1e6:.3f} us: {why}."]
        for die in self.system.dies:
            for core in die.cores:
                run = core.current
                if run is None:
                    continue
                for pipe, what in sorted(run.waits().items()):
                    lines.append(f"  die {die.index} {core.name} {Pipe(pipe).name} (kernel {run.program.name!r}) waits in: {what}")
        for reporter in self.deadlock_reporters:
            lines.extend(reporter())
        if len(lines) == 1:
            lines.append("  no core is blocked; a task waits for an event that is never triggered")
        return "\n".join(lines)

    def finish(self, status: str = "ok", error: str | None = None) -> SimResult:
        """Close the session: the result with the summary of everything simulated."""
        wall = time.perf_counter() - self._wall_start
        record = self.system.record()
        summary = summarize(record, self.config, wall_seconds=wall, status=status, error=error)
        summary["params"] = {name: entry["value"] for name, entry in self.params.items()}
        self.result = SimResult(self.config, record.simulated_ps, summary, record, status, error, wall, params=summary["params"])
        return self.result


# Allocations between two collections of CPython's youngest generation while a session is open
# (default 700). Building programs and simulating them keep many objects alive, so at the default a
# full collection runs each time the heap grows by a quarter: ~15% of the a3 all-gather's time.
# At 10,000 the young collections cost the same in total and the full ones stop; the session
# restores the caller's thresholds when it ends.
GC_YOUNG_THRESHOLD = 10_000


@contextlib.contextmanager
def session(config: str | LoadedConfig = "a3", overrides: Sequence[str] | Mapping[str, object] | None = None, data: bool = True,
            seed: int = 0, time_limit_us: float | None = None, params: Mapping[str, object] | None = None) -> Iterator[Session]:
    """Build the simulated machine of ``config`` (a built-in name or a YAML path, with ``overrides``
    as ``key.path=value``); ``data=False`` simulates timing only; ``params`` override the workload's
    declared parameters (:func:`npusim.param`). numpy's global random generator is seeded with
    ``seed`` so workloads that draw random inputs are reproducible."""
    check_seed(seed)
    loaded = config if isinstance(config, LoadedConfig) else load_config(config, overrides or ())
    limit = DEFAULT_TIME_LIMIT_PS if time_limit_us is None else int(time_limit_us * 1e6)
    current = Session(loaded, with_data=data, seed=seed, time_limit_ps=limit, params=dict(params or {}))
    np.random.seed(seed)
    _SESSIONS.append(current)
    _SESSION_OF[current.system] = current
    thresholds = gc.get_threshold()
    gc.set_threshold(max(thresholds[0], GC_YOUNG_THRESHOLD), *thresholds[1:])
    try:
        try:
            with building_for(current.system):
                yield current
                current.synchronize()
        except BaseException as error:
            current.finish("failed", f"{type(error).__name__}: {error}")
            raise
        finally:
            _SESSIONS.remove(current)
        current.finish()
    finally:
        gc.set_threshold(*thresholds)


_SESSIONS: list[Session] = []
"""The open sessions, innermost last."""

_SESSION_OF: "weakref.WeakKeyDictionary[System, Session]" = weakref.WeakKeyDictionary()
"""The session of each system a session built (tensors reach their session through their system)."""


def current_session() -> Session:
    """The innermost open session (a UsageError when none is open)."""
    if not _SESSIONS:
        raise UsageError("no npusim session is active: wrap the code in `with npusim.session('a3'):` or run the file with `npusim run`")
    return _SESSIONS[-1]


def session_of(system: System) -> Session | None:
    """The session that built ``system``."""
    return _SESSION_OF.get(system)


def active_system() -> System:
    """The system of the innermost open session."""
    return current_session().system


def synchronize() -> None:
    """Run the active session until all issued work is done (like ``torch.npu.synchronize()``)."""
    current_session().synchronize()
