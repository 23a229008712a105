"""The host thread of a torch program, streams the user makes, and events between streams.

The host has its own clock (integer ps), apart from the device's: an eager op costs the host
``host.op_launch`` (and ``host.tiling`` for an op with a host tiling) before its kernels can start,
and the host goes on to the next call without waiting for the device, so it runs ahead until it
synchronises (``tensor.cpu()``, ``torch.npu.synchronize()``, ``event.synchronize()``), when its
clock moves to the time the awaited work ended. Each launch is an event on the die's ``host
launch`` lane, with a ``launch`` flow arrow to the first instruction of every kernel it queued.

An SPMD program (:func:`npusim.spawn`) runs one simulated host process per rank
(:class:`HostProcess`), each with its own host thread and current device, as each rank of a real
deployment is its own Python process driving its own device.

Streams are in-order task queues of one die (:class:`npusim.hw.stream.Stream`); a kernel is gated
on its stream until the host has issued it. Events mark a point of a stream's work; another
stream can wait for that point. Nothing here charges time on the numpy path (``npusim.tensor`` with
the torch_npu facade): only torch programs have a host thread (docs/torch.md).
"""

from __future__ import annotations

from collections.abc import Callable
from contextvars import ContextVar

import simpy

from npusim.errors import UsageError
from npusim.hw.stream import Stream
from npusim.isa.instructions import on_recorded
from npusim.trace.costs import CostRule, Term

HOST_UNIT, HOST_LANE = "host", "launch"
HOST_ORDER = (-2,)
"""The host lane sorts first in its die: before its AICPU lanes (``hw.aicpu.AICPU_ORDER``) and its cores."""


class HostThread:
    """The one thread of a session's torch program that issues work; ``now_ps`` is its clock."""

    def __init__(self, system) -> None:
        self.system = system
        self.now_ps = 0
        host, hz = system.spec.host, system.spec.die.clock.hz
        self.op_launch_ps = host.op_launch.to_ps(hz) if host is not None else 0
        self.tiling_ps = host.tiling.to_ps(hz) if host is not None else 0
        self.graph_launch_ps = host.graph_launch.to_ps(hz) if host is not None else 0

    def eager_call(self, tiling: bool) -> tuple[Term, ...]:
        """The cost of one eager call, by config key: ``host.op_launch``, and ``host.tiling`` for an
        op with a host tiling."""
        return (Term(("host.op_launch",), self.op_launch_ps),) + ((Term(("host.tiling",), self.tiling_ps),) if tiling else ())

    def graph_replay(self) -> tuple[Term, ...]:
        """The cost of one replay of a captured graph on a die, by config key."""
        return (Term(("host.graph_launch",), self.graph_launch_ps),)

    def issue(self, die: int, name: str, cost: tuple[Term, ...], args: dict) -> HostLaunch:
        """The host spends ``cost`` (ps by config key: :meth:`eager_call`, :meth:`graph_replay`)
        issuing ``name`` to die ``die``, from its clock on."""
        recorder = self.system.recorder
        start = self.now_ps
        self.now_ps = start + sum(term.ps for term in cost)
        track = recorder.track(die, HOST_UNIT, HOST_LANE, HOST_ORDER)
        name_id = recorder.name_id(name)
        recorder.costs.rule(HOST_LANE, name_id, CostRule(cost))
        event = recorder.record(track, name_id, start, self.now_ps, 0, recorder.op(name, die, **args), -1)
        return HostLaunch(self.system, die, self.now_ps, event)

    def waited_until(self, time_ps: int) -> None:
        """The host blocked until ``time_ps`` (a synchronisation)."""
        self.now_ps = max(self.now_ps, time_ps)


class HostProcess:
    """One simulated host process of an SPMD program (a rank of :func:`npusim.spawn`): its host
    thread, its current device (``torch.npu.set_device``) and the dies it has queued work on (what
    its synchronising calls wait for)."""

    def __init__(self, system, rank: int) -> None:
        self.rank = rank
        self.host = HostThread(system)
        self.device: int | None = None
        self.dies: set[int] = set()
        self.waiting: list[simpy.Event] | None = None  # what its blocked synchronising call waits for
        self.yield_control: Callable[[], None] | None = None  # set by the SPMD scheduler (npusim.frontend.ranks): gives control back until woken

    def block(self, events: list[simpy.Event]) -> None:
        """Wait until every one of ``events`` is processed: the other ranks' code and the simulation
        run meanwhile. (A list, not a condition event: SimPy unhooks the conditions nested in a
        condition once it triggers, so the scheduler waits on the events themselves.)"""
        if self.yield_control is None:
            raise UsageError("a host process blocked outside an SPMD program: only ranks of npusim.spawn block")
        self.waiting = events
        try:
            self.yield_control()
        finally:
            self.waiting = None

    @property
    def ready(self) -> bool:
        """Whether what it waits for has happened."""
        return self.waiting is not None and all(event.processed for event in self.waiting)


CURRENT_PROCESS: ContextVar[HostProcess | None] = ContextVar("npusim_host_process", default=None)
"""The host process whose code runs now (None: the session's own, single host program)."""


def current_process() -> HostProcess | None:
    """The SPMD rank whose code runs now, or None outside :func:`npusim.spawn`."""
    return CURRENT_PROCESS.get()


class HostLaunch:
    """One host launch: the device may start its kernels from ``ready_ps``; ``event`` is the host
    lane's event that the flow arrows start from."""

    def __init__(self, system, die: int, ready_ps: int, event: int) -> None:
        self.system, self.die, self.ready_ps, self.event = system, die, ready_ps, event
        self._gated: set[int] = set()

    def gate(self, stream: Stream) -> None:
        """Hold ``stream`` (once per stream) until the host has issued the work that follows."""
        if id(stream) in self._gated:
            return
        self._gated.add(id(stream))
        env, ready = self.system.env, self.ready_ps

        def task():
            yield env.timeout(max(ready - env.now, 0))

        stream.submit(task)

    def arrow_to(self, kernel) -> None:
        """A ``launch`` flow from the host event to the kernel's first instruction once recorded (a
        kernel made when it starts, :class:`~npusim.isa.program.KernelAtStart` or an op's
        :class:`~npusim.frontend.aclnn.DeviceTask`: once made)."""
        if hasattr(kernel, "when_built"):
            kernel.when_built(self.arrow_to)
            return
        programs = kernel.ordered_programs()
        first = programs[0].instructions if programs else None  # a kernel of no work (an empty tensor's copy) has no program
        if first:
            recorder, source = self.system.recorder, self.event
            on_recorded(first[0], lambda index: recorder.flow(source, index, "launch"))


class DeviceEvent:
    """A point in a stream's work (``torch.npu.Event``): recorded on a stream, waited for by
    another stream or by the host. Times in ps."""

    def __init__(self, session) -> None:
        self.session = session
        self.recorded: simpy.Process | None = None
        self.time_ps: int | None = None

    def record(self, stream: Stream) -> None:
        """Mark the point after everything queued on ``stream`` so far."""
        env = self.session.env

        def task():
            self.time_ps = env.now
            yield env.timeout(0)

        self.time_ps = None
        self.recorded = self.session.submit(stream, task)

    def wait_on(self, stream: Stream) -> None:
        """Work queued on ``stream`` after this starts only once the recorded point is reached
        (an event never recorded makes this a no-op, as in torch)."""
        recorded = self.recorded
        if recorded is None:
            return

        def task():
            if not recorded.processed:
                yield recorded
            else:
                yield self.session.env.timeout(0)

        self.session.submit(stream, task)

    def query(self) -> bool:
        """Whether the recorded point has been reached in the simulation so far."""
        return self.recorded is None or self.recorded.processed

    def synchronize(self) -> None:
        """The host waits until the recorded point is reached."""
        if self.recorded is not None:
            self.session.synchronize(self.recorded)

    def elapsed_ps(self, end: DeviceEvent) -> int:
        """Simulated time from this event to ``end``, both reached."""
        for which, event in (("this event", self), ("the end event", end)):
            if event.recorded is None or event.time_ps is None:
                raise UsageError(f"elapsed_time: {which} has not been recorded and reached yet; record it and synchronise first")
        return end.time_ps - self.time_ps

