"""Ranks of an SPMD program inside one session: ``torch.multiprocessing.spawn(fn, nprocs=8)`` runs
``fn(rank, ...)`` once per rank, as a process per device would on the machine.

Each rank is a thread of the session, run one at a time in rank order (deterministically): a rank
runs until it synchronises with the device (``tensor.cpu()``, ``.item()``, ``torch.npu.synchronize()``,
a blocking wait), then the next runnable rank runs. When every rank that has not ended waits, the
simulation advances until the first awaited point is reached (the ranks waiting for it go on from
there, their host clocks at that time). So no rank's host issues work at a time the simulation has
already passed, and a collective whose peers have not called it yet simply waits for them.

A rank has its own host thread (its host clock and ``host launch`` lane: each rank is a process
with its CPU thread on the machine), its own current device, and its own torch.distributed state
(``npusim.frontend.torch_device.distributed``). Its synchronisations wait for the work of its own
device. An exception in a rank ends the program: the other ranks are stopped and the exception is
raised where ``spawn`` was called; a deadlock (every rank waiting for what no rank will do) is the
session's deadlock report.
"""

from __future__ import annotations

import contextvars
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import simpy

from npusim.errors import UsageError
from npusim.frontend.host import HostThread
from npusim.frontend.session import RankHooks, Session, current_session, rank_hooks


class _Stopped(BaseException):
    """Raised in a waiting rank when the program ends without it (another rank failed)."""


@dataclass
class Rank(RankHooks):
    """One rank: its index, its world, its thread's hand-over, what it waits for."""

    index: int
    world: World
    host: HostThread
    device: int | None = None
    state: dict = field(default_factory=dict)
    """What other layers keep per rank (torch.distributed's state)."""
    waiting: simpy.Event | None = None
    ended: bool = False
    error: BaseException | None = None
    _go: threading.Semaphore = field(default_factory=lambda: threading.Semaphore(0))
    _back: threading.Semaphore = field(default_factory=lambda: threading.Semaphore(0))
    _stop: bool = False

    # -- RankHooks: what the session asks of the rank it is called from ------------------------

    def wait_for(self, event: simpy.Event) -> None:
        """Block this rank until ``event`` is processed (the other ranks run meanwhile)."""
        if event.processed:
            return
        self.waiting = event
        self._back.release()
        self._go.acquire()
        if self._stop:
            raise _Stopped
        self.waiting = None

    def dies(self) -> list[int]:
        """The dies whose work this rank's synchronisations wait for: its current device's."""
        return [self.device if self.device is not None else self.index % self.world.session.system.die_count]


class World:
    """The ranks of one SPMD program of a session."""

    def __init__(self, session: Session, nprocs: int) -> None:
        self.session = session
        start = session.host.now_ps
        self.ranks = [Rank(i, self, _host_from(session, start)) for i in range(nprocs)]

    def run(self, target: Callable[[int], object]) -> None:
        """Run ``target(rank)`` on every rank to its end (module docstring); re-raise the first
        exception a rank raised."""
        threads = []
        for rank in self.ranks:
            context = contextvars.copy_context()
            thread = threading.Thread(target=context.run, args=(self._main, rank, target), name=f"npusim rank {rank.index}", daemon=True)
            threads.append(thread)
        started = [False] * len(self.ranks)
        try:
            while True:
                for rank in self.ranks:
                    if rank.ended or rank.waiting is not None:
                        continue
                    if not started[rank.index]:
                        started[rank.index] = True
                        threads[rank.index].start()
                    else:
                        rank._go.release()
                    rank._back.acquire()
                    if rank.error is not None:
                        raise rank.error
                alive = [r for r in self.ranks if not r.ended]
                if not alive:
                    return
                self.session.run_events(_first_of([r.waiting for r in alive if r.waiting is not None], self.session.env))
                for rank in alive:
                    if rank.waiting is not None and rank.waiting.processed:
                        rank.host.waited_until(int(self.session.env.now))
                        rank.waiting = None
        finally:
            for rank, thread in zip(self.ranks, threads):
                if thread.is_alive() and not rank.ended:
                    rank._stop = True
                    rank._go.release()
                    thread.join()

    def _main(self, rank: Rank, target: Callable[[int], object]) -> None:
        token = rank_hooks.set(rank)
        try:
            target(rank.index)
        except _Stopped:
            pass
        except BaseException as error:  # the rank's own exception: handed to the caller of run
            rank.error = error
        finally:
            rank.ended = True
            rank.waiting = None
            rank_hooks.reset(token)
            rank._back.release()


def _first_of(events: list, env: simpy.Environment) -> simpy.Event:
    """An event processed once the first of ``events`` has been (not SimPy's AnyOf: a condition
    that fires detaches itself from the conditions inside it, which the ranks still wait on)."""
    first = simpy.Event(env)

    def reached(_event: simpy.Event) -> None:
        if not first.triggered:
            first.succeed()

    for event in events:
        if event.processed:
            reached(event)
        else:
            event.callbacks.append(reached)
    return first


def _host_from(session: Session, start_ps: int) -> HostThread:
    host = HostThread(session.system)
    host.now_ps = start_ps
    return host


def current_rank() -> Rank | None:
    """The rank whose thread this is, if any."""
    hooks = rank_hooks.get()
    return hooks if isinstance(hooks, Rank) else None


def spawn(fn: Callable, args: Sequence = (), nprocs: int = 1) -> None:
    """``torch.multiprocessing.spawn(fn, args, nprocs)`` in the running session: ``fn(rank, *args)``
    on ``nprocs`` ranks."""
    session = current_session()
    if not isinstance(nprocs, int) or isinstance(nprocs, bool) or nprocs < 1:
        raise UsageError(f"spawn: nprocs={nprocs!r} must be a positive int (the ranks, one per device)")
    if nprocs > session.system.die_count:
        raise UsageError(f"spawn: nprocs={nprocs} is more than the {session.system.die_count} devices of config {session.config.name!r}; "
                         "each rank runs on its own device: spawn at most that many, or use a config with more dies (--set shape.nodes=2)")
    if current_rank() is not None:
        raise UsageError("spawn: called from inside a rank; spawn the ranks once, from the program's main thread")
    World(session, nprocs).run(lambda rank: fn(rank, *args))
