"""Building a launch's PE programs, and running it while they are still being built.

Each PE's kernel function runs in a builder thread of its own (:class:`Builder`); the thread that
called ``npusim.launch`` hands control to one builder at a time and waits until it returns control,
so exactly one of them runs at any moment and the build is deterministic. A kernel function gives
control back when it returns, or when it needs a device-valued scalar that has not been read yet
(:meth:`Builder.block`: an ``if`` on ``t[i] == 1``, a loop bound, a PE number or an offset read from
device memory, see ``ControlRead``).

:func:`build_launch` runs every builder in PE order. When all have returned (the kernels read no
device values) the launch is finished and submitted as before: nothing of it has run yet. When some
wait for values, the tile ops built so far are submitted (``ShmemLaunch.start_running``) and the
simulation runs until one of those values has been read; the builders whose values are there go on
(in PE order), their new tile ops join the running device tasks, and so on until every kernel
function has returned. A value that can never be read (its writers wait for something that does not
come) is a deadlock, reported with the reads still waiting.
"""

from __future__ import annotations

import contextvars
import threading
from collections.abc import Callable, Sequence

import simpy

from npusim.errors import NpusimError, OutOfMemoryError
from npusim.frontend.session import current_session
from npusim.runtime.launch import ShmemLaunch
from npusim.runtime.program import PeProgram, building
from npusim.runtime.tasks import ControlRead


class _Cancelled(BaseException):
    """Raised in a waiting builder thread when the launch gives up (another PE failed)."""


class Builder:
    """The thread that runs one PE's kernel function (``body``) for the launch."""

    def __init__(self, launch: ShmemLaunch, program: PeProgram, body: Callable[[], object]) -> None:
        self.launch = launch
        self.program = program
        self.body = body
        self.waiting_for: ControlRead | None = None  # the read it waits for
        self.finished = False
        self.error: BaseException | None = None
        self._go = threading.Semaphore(0)  # the launch's thread lets it run
        self._back = threading.Semaphore(0)  # it gives control back
        self._cancelled = False
        self._thread: threading.Thread | None = None
        program.builder = self

    @property
    def waiting(self) -> bool:
        return self.waiting_for is not None

    def resume(self) -> None:
        """Run the kernel function until it returns or waits for a value (in the launch's thread)."""
        self.waiting_for = None
        if self._thread is None:
            context = contextvars.copy_context()
            self._thread = threading.Thread(target=context.run, args=(self._main,), name=f"npusim PE {self.program.pe} builder", daemon=True)
            self._thread.start()
        else:
            self._go.release()
        self._back.acquire()

    def block(self, read: ControlRead) -> None:
        """Wait (in the builder's thread) until ``read`` has run; the launch's thread goes on meanwhile."""
        self.waiting_for = read
        self._back.release()
        self._go.acquire()
        if self._cancelled:
            raise _Cancelled()

    def cancel(self) -> None:
        """End a waiting kernel function (the launch failed elsewhere)."""
        if self._thread is not None and self.waiting:
            self._cancelled = True
            self._go.release()
            self._back.acquire()
        self.program.builder = None

    def _main(self) -> None:
        out_of_memory, loop = False, None
        try:
            with building(self.program):
                self.body()
        except _Cancelled:
            pass
        except MemoryError as error:
            if isinstance(error, NpusimError):
                self.error = error
            else:  # said below, once the kernel function's frames (and all they held) are freed with the error
                out_of_memory, loop = True, self.program.loops[-1] if self.program.loops else self.program.left
        except BaseException as error:  # the kernel function is user code: hand any failure to the launch
            self.error = error
        finally:
            if out_of_memory:
                try:
                    self.error = self.program.out_of_memory(loop)
                except MemoryError:
                    self.error = NO_MEMORY
            self.finished = True
            self.waiting_for = None
            self.program.builder = None
            self._back.release()


NO_MEMORY = OutOfMemoryError("the machine ran out of memory while a PyPTO kernel was built; give its loops fewer iterations, or run it "
                             "on a machine with more memory")
"""The error of a build that ran out of memory when even its message could not be made."""


def build_launch(launch: ShmemLaunch, bodies: Sequence[Callable[[], object]]) -> simpy.Event:
    """Build every PE's program (``bodies[pe]`` is its kernel call), running the launch while kernel
    functions wait for device values; returns the event of the launch's end (see the module docstring)."""
    builders = [Builder(launch, program, body) for program, body in zip(launch.programs, bodies)]
    try:
        for builder in builders:
            _step(builder)
        if not any(b.waiting for b in builders):
            launch.finish()
            return launch.submit()
        done = launch.start_running()
        session = current_session()
        session.deadlock_reporters.append(lambda: [f"  {read.report()}" for read in _waited_reads(builders)])
        while any(b.waiting for b in builders):
            ready = [b for b in builders if b.waiting_for is not None and b.waiting_for.done_event.triggered]
            if not ready:
                session.run_until(launch.system.env.any_of([read.done_event for read in _waited_reads(builders)]))
                continue
            for builder in ready:
                _step(builder)
                launch.add_new_tasks(builder.program)
        launch.close()
        return done
    except BaseException:
        for builder in builders:
            builder.cancel()
        if not launch.running:  # nothing of it was submitted: what it built goes
            launch.abandon()
        raise


def _waited_reads(builders: list[Builder]) -> list[ControlRead]:
    """The device reads the builders wait for."""
    return [b.waiting_for for b in builders if b.waiting_for is not None]


def _step(builder: Builder) -> None:
    builder.resume()
    if builder.error is not None:
        raise builder.error

