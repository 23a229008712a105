"""``npusim.spawn``: an SPMD host program, one simulated host process per rank, as
``torch.multiprocessing.spawn(fn, args, nprocs)`` starts one Python process per device::

    def rank_main(rank, ep):
        torch.npu.set_device(rank)
        x = torch.randn(8, 7168, dtype=torch.bfloat16).npu()
        out = torch_npu.npu_moe_distribute_dispatch_v2(x, ids, "ep", ep, rank, 256)
        ...

    npusim.spawn(rank_main, args=(16,), nprocs=16)

Each rank runs ``fn(rank, *args)`` as its own host process (:class:`~npusim.frontend.host.HostProcess`):
its own host thread (its eager calls cost its own ``host.op_launch``, on the ``host launch`` lane of
the die it issues to, so 16 ranks issue at once, not one after the other), its own current device,
and synchronising calls (``torch.npu.synchronize()``, ``tensor.cpu()``, ``.item()``) that wait for
the work of its own devices only.

The ranks' code runs in threads of their own, one at a time, so the run is deterministic: each
rank runs, in rank order, until it returns or makes a synchronising call; when every rank has
returned or waits, the simulation runs until the first awaited work is done, and the ranks whose
work is done go on (in rank order). A rank waiting for work that can never finish (a collective
another rank never joins because it waits itself) is a :class:`~npusim.errors.DeadlockError` naming
the waiting ranks. ``spawn`` returns when every rank has returned, as ``join=True`` does; an
exception in a rank ends the program and is raised again with the rank named.
"""

from __future__ import annotations

import contextvars
import threading
from collections.abc import Callable

from npusim.errors import UsageError
from npusim.frontend.host import CURRENT_PROCESS, HostProcess
from npusim.frontend.session import current_session


class _Cancelled(BaseException):
    """Raised in a waiting rank's thread when the program ends early (another rank failed)."""


class _Rank:
    """The thread of one rank's code and the baton it passes with the scheduler (the thread that
    called ``spawn``): exactly one of them runs at a time."""

    def __init__(self, process: HostProcess, fn: Callable, args: tuple) -> None:
        self.process = process
        self.fn = fn
        self.args = args
        self.finished = False
        self.error: BaseException | None = None
        self._go = threading.Semaphore(0)
        self._back = threading.Semaphore(0)
        self._cancelled = False
        self._thread: threading.Thread | None = None
        process.yield_control = self._wait_turn

    @property
    def waiting(self) -> bool:
        return self.process.waiting is not None and not self.finished

    def resume(self) -> None:
        """Run the rank's code until it returns or waits (called by the scheduler)."""
        if self._thread is None:
            context = contextvars.copy_context()
            self._thread = threading.Thread(target=context.run, args=(self._main,), name=f"npusim rank {self.process.rank}", daemon=True)
            self._thread.start()
        else:
            self._go.release()
        self._back.acquire()

    def cancel(self) -> None:
        """End a waiting rank (the program failed elsewhere)."""
        if self._thread is not None and self.waiting:
            self._cancelled = True
            self._go.release()
            self._back.acquire()

    def _wait_turn(self) -> None:
        """In the rank's thread: hand control back and wait to be resumed."""
        self._back.release()
        self._go.acquire()
        if self._cancelled:
            raise _Cancelled()

    def _main(self) -> None:
        CURRENT_PROCESS.set(self.process)
        try:
            self.fn(self.process.rank, *self.args)
        except _Cancelled:
            pass
        except BaseException as error:  # the rank's code is user code: hand any failure to the scheduler
            self.error = error
        finally:
            self.finished = True
            self._back.release()


def spawn(fn: Callable, args: tuple = (), nprocs: int = 1, join: bool = True, daemon: bool = False, start_method: str = "spawn") -> None:
    """Run ``fn(rank, *args)`` for ranks 0 .. ``nprocs - 1``, each as its own simulated host process
    (see the module docstring); returns when all have returned. ``join``, ``daemon`` and
    ``start_method`` are torch's; only ``join=True`` is modelled (the program waits for its ranks)."""
    session = current_session()
    if not callable(fn):
        raise UsageError(f"npusim.spawn: fn={fn!r} must be a function of the rank (and args), as for torch.multiprocessing.spawn")
    if not isinstance(nprocs, int) or isinstance(nprocs, bool) or nprocs < 1:
        raise UsageError(f"npusim.spawn: nprocs={nprocs!r} must be a positive int (the ranks)")
    if not isinstance(args, tuple):
        raise UsageError(f"npusim.spawn: args={args!r} must be a tuple (passed after the rank), as for torch.multiprocessing.spawn")
    if join is not True:
        raise UsageError("npusim.spawn: join=False is not modelled; the program waits for its ranks (join=True)")
    if CURRENT_PROCESS.get() is not None:
        raise UsageError("npusim.spawn: called from inside a rank; spawn the ranks once, from the main program")
    ranks = [_Rank(HostProcess(session.system, rank), fn, args) for rank in range(nprocs)]

    def reporter() -> list[str]:
        return [f"  rank {r.process.rank} waits in a synchronising call (torch.npu.synchronize, .cpu(), .item()) for its device's work"
                for r in ranks if r.waiting]

    session.deadlock_reporters.append(reporter)
    try:
        for rank in ranks:
            _step(rank)
        while any(r.waiting for r in ranks):
            ready = [r for r in ranks if r.waiting and r.process.ready]
            if not ready:
                events = [event for r in ranks if r.waiting for event in r.process.waiting or () if not event.processed]
                session.run_until(session.env.any_of(events))
                continue
            for rank in ready:
                _step(rank)
    except BaseException:
        for rank in ranks:
            rank.cancel()
        raise
    finally:
        session.deadlock_reporters.remove(reporter)


def _step(rank: _Rank) -> None:
    """Resume ``rank`` and raise what it raised, naming it."""
    rank.resume()
    if rank.error is not None:
        error = rank.error
        if error.args and isinstance(error.args[0], str):
            error.args = (f"rank {rank.process.rank}: {error.args[0]}", *error.args[1:])
        raise error
