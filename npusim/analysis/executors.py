"""Where the points of a sweep run: local worker processes, or a Dask distributed cluster.

Both run :func:`~npusim.analysis.points.run_point` on :class:`~npusim.analysis.points.PointTask`
values and yield ``(index, outcome)`` as points finish, in whatever order they finish; the result
of a point does not depend on where or when it ran. A point never takes the sweep down with it:

- a worker that dies (killed, out of memory) fails only the point it ran: the point is run once
  more on a new worker, and recorded as failed if that one dies too;
- a point running longer than ``point_timeout_s`` (wall clock) is stopped and recorded as failed:
  the session stops it from inside the simulation (:class:`~npusim.errors.WallTimeError`), and a
  local worker stuck outside it (in the workload's own Python) is killed a little later; on a Dask
  cluster such a point runs in a process of its own on the worker, killed the same way
  (:func:`run_point_in_a_process`: Dask cannot stop a running task's thread);
- local workers die with the sweep: each watches a pipe from the sweep process and exits when it
  closes, whatever ended the sweep (Ctrl-C, SIGTERM, SIGKILL); Ctrl-C stops at once, keeping every
  point that finished;
- workers import the installed npusim whatever the working folder holds (a folder named ``npusim``
  there is not imported: :func:`installed_imports_only`); a worker that dies as it starts, before
  running anything, is reported as such.
"""

from __future__ import annotations

import contextlib
import math
import multiprocessing
import os
import pickle
import select
import signal
import subprocess
import sys
import threading
import time
from collections import deque
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from multiprocessing.connection import Connection, wait
from typing import Any

from npusim.analysis.points import OUTCOME_COLUMNS, PointTask, run_point
from npusim.errors import UsageError, WallTimeError
from npusim.files import end_with

RETRIES = 1
"""How many times a point whose worker died is run again before it is recorded as failed."""
KILL_GRACE_S = 2.0
"""Seconds past its timeout after which a local worker still running a point is killed (the
session stops a simulating point by itself at the timeout)."""


def default_workers() -> int:
    """All the cores this process may use."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def lost_outcome(error: str, error_type: str = "WorkerLost") -> dict[str, Any]:
    """The outcome of a point that did not finish on its worker (rather than failing in its workload)."""
    outcome: dict[str, Any] = dict.fromkeys(OUTCOME_COLUMNS, math.nan)
    outcome.update(status="failed", bottleneck="", engine="", error_type=error_type, error=error)  # no worker said which engine
    return outcome


def timed_out_outcome(timeout_s: float) -> dict[str, Any]:
    return lost_outcome(f"the point ran longer than its timeout of {timeout_s:g} s (wall clock) and was stopped", WallTimeError.__name__)


def check_point_timeout(point_timeout_s: float | None) -> float | None:
    if point_timeout_s is None:
        return None
    if isinstance(point_timeout_s, bool) or not isinstance(point_timeout_s, (int, float)) or not 0 < point_timeout_s < math.inf:
        raise UsageError(f"point timeout {point_timeout_s!r}: give a number of seconds above 0, e.g. --point-timeout 600")
    return float(point_timeout_s)


STARTED = "started"
"""What a local worker sends first, once it runs npusim's code: a worker that dies before could not
start (an import failed), which says nothing of the point it was given."""


@contextlib.contextmanager
def installed_imports_only() -> Iterator[None]:
    """Processes started within (the fork server of the local workers, a point's own process)
    import npusim from where Python finds it installed, never from the working folder: a ``-c``
    command, as they are started, has the working folder first on its path (and Python 3.11's fork
    server does not take the sweep process's path), so a folder named ``npusim`` there (a
    checkout's parent folder) would be imported instead and every point would fail. Python's
    PYTHONSAFEPATH, set for them, leaves the working folder off."""
    before = os.environ.get("PYTHONSAFEPATH")
    os.environ["PYTHONSAFEPATH"] = "1"
    try:
        yield
    finally:
        if before is None:
            del os.environ["PYTHONSAFEPATH"]
        else:
            os.environ["PYTHONSAFEPATH"] = before


@dataclass
class _Worker:
    """One local worker process: its process, the pipe it reads tasks from and the pipe it sends
    outcomes on; the task it runs (None: idle), when it started it, and whether the process has
    started (sent :data:`STARTED`)."""

    process: Any
    tasks: Connection
    results: Connection
    lifeline: Connection
    task: PointTask | None = None
    started: float = 0.0
    running: bool = False

    def stop(self) -> None:
        """Kill the process (it may be running a point) and release its pipes."""
        if self.process.is_alive():
            self.process.kill()
        self.process.join()
        for connection in (self.tasks, self.results, self.lifeline):
            connection.close()


class LocalExecutor:
    """``workers`` local processes (forkserver where available, else spawn: workers start from a
    clean interpreter, not a copy of the caller, so no state of the caller leaks into a point; the
    fork server imports npusim once, so each worker starts fast), each running one point at a
    time. Use as a context manager: every worker is gone when the block ends. As with any process
    pool, a script that runs a sweep calls it under ``if __name__ == "__main__":``."""

    def __init__(self, workers: int, point_timeout_s: float | None = None) -> None:
        if not isinstance(workers, int) or isinstance(workers, bool) or workers < 1:
            raise UsageError(f"workers={workers!r}: give a whole number of worker processes, 1 or more (default: all {default_workers()} cores)")
        self.workers = workers
        self.point_timeout_s = check_point_timeout(point_timeout_s)
        self.where = f"{workers} local worker process{'es' if workers > 1 else ''}"
        self._context: Any
        if "forkserver" in multiprocessing.get_all_start_methods():
            self._context = multiprocessing.get_context("forkserver")
            self._context.set_forkserver_preload([run_point.__module__])  # workers fork with npusim imported
        else:
            self._context = multiprocessing.get_context("spawn")
        self._pool: list[_Worker] = []

    def __enter__(self) -> LocalExecutor:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._stop_all()

    def _stop_all(self) -> None:
        pool, self._pool = self._pool, []
        for worker in pool:
            worker.stop()

    def _start_worker(self) -> _Worker:
        task_r, task_w = self._context.Pipe(duplex=False)
        result_r, result_w = self._context.Pipe(duplex=False)
        life_r, life_w = self._context.Pipe(duplex=False)
        process = self._context.Process(target=_worker_main, args=(task_r, result_w, life_r), daemon=True, name="npusim sweep worker")
        with installed_imports_only():  # the first worker starts the fork server
            process.start()
        for end in (task_r, result_w, life_r):  # the worker's ends: closed here so that its death reads as EOF
            end.close()
        worker = _Worker(process, task_w, result_r, life_w)
        self._pool.append(worker)
        return worker

    def _replace(self, worker: _Worker) -> None:
        self._pool.remove(worker)
        worker.stop()

    def run(self, tasks: Sequence[PointTask]) -> Iterator[tuple[int, dict[str, Any]]]:
        todo = deque(replace(task, timeout_s=self.point_timeout_s) for task in tasks)
        tries: dict[int, int] = {}
        try:
            while todo or any(worker.task is not None for worker in self._pool):
                while todo and len(self._pool) < min(self.workers, len(todo) + self._busy()):
                    self._start_worker()
                for worker in self._pool:
                    if worker.task is None and todo:
                        worker.task, worker.started = todo.popleft(), time.monotonic()
                        with contextlib.suppress(OSError):  # it died as it started (a broken pipe): _collect sees its death, runs the point again
                            worker.tasks.send(worker.task)
                yield from self._collect(todo, tries)
        except BaseException:
            self._stop_all()  # at once: Ctrl-C stops the sweep without waiting for running points
            raise

    def _busy(self) -> int:
        return sum(worker.task is not None for worker in self._pool)

    def _collect(self, todo: deque[PointTask], tries: dict[int, int]) -> Iterator[tuple[int, dict[str, Any]]]:
        """Wait for the next finished, dead or overdue worker; yield what it gives."""
        busy = [worker for worker in self._pool if worker.task is not None]
        deadline = None
        if self.point_timeout_s is not None and busy:
            deadline = min(worker.started for worker in busy) + self.point_timeout_s + KILL_GRACE_S
        watched = [worker.process.sentinel for worker in self._pool] + [worker.results for worker in busy]
        ready = set(wait(watched, timeout=None if deadline is None else max(0.0, deadline - time.monotonic())))
        for worker in list(self._pool):
            if worker.process.sentinel not in ready and worker.results not in ready:
                continue
            task = worker.task
            while task is not None and worker.results.poll():  # its start, an outcome, perhaps sent just before the worker died
                try:
                    message = worker.results.recv()
                except (EOFError, OSError):  # it died while sending
                    break
                if message == STARTED:
                    worker.running = True
                else:
                    worker.task = task = None
                    yield message
            if worker.process.is_alive():
                continue
            self._replace(worker)  # dead: its point is run again, once
            if task is None:
                continue
            tries[task.index] = tries.get(task.index, 0) + 1
            if tries[task.index] <= RETRIES:
                todo.appendleft(task)
            elif not worker.running:
                yield task.index, lost_outcome(
                    f"the worker process died as it started ({_death(worker.process.exitcode)}), before running this point, "
                    f"{tries[task.index]} times: it could not import npusim (its error is on stderr); check that {sys.executable} "
                    "imports the npusim installed with it (PYTHONPATH), or run the sweep with --workers 1 from another folder")
            else:
                yield task.index, lost_outcome(f"the worker running this point died ({_death(worker.process.exitcode)}) "
                                               f"{tries[task.index]} times; it may need more memory than the machine has")
        now = time.monotonic()
        for worker in list(self._pool):
            task = worker.task
            if task is not None and self.point_timeout_s is not None and now >= worker.started + self.point_timeout_s + KILL_GRACE_S:
                self._replace(worker)  # stuck outside the simulation: only killing it stops it
                yield task.index, timed_out_outcome(self.point_timeout_s)


def _death(exitcode: int | None) -> str:
    if exitcode is not None and exitcode < 0:
        try:
            return f"killed by {signal.Signals(-exitcode).name}"
        except ValueError:
            return f"killed by signal {-exitcode}"
    return f"exit status {exitcode}"


def _worker_main(tasks: Connection, results: Connection, lifeline: Connection) -> None:
    """A local worker: runs the points it is sent, one at a time, until its pipe closes; exits as
    soon as the sweep process is gone (its lifeline closes), even in the middle of a point."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C reaches the whole process group: the sweep process handles it
    threading.Thread(target=_die_with_parent, args=(lifeline,), daemon=True, name="npusim lifeline").start()
    results.send(STARTED)
    while True:
        try:
            task = tasks.recv()
        except (EOFError, OSError):
            return
        results.send(run_point(task))


def _die_with_parent(lifeline: Connection) -> None:
    with contextlib.suppress(EOFError, OSError):
        lifeline.recv_bytes()  # the sweep process never writes: this returns only when it is gone
    os._exit(1)


POINT_PROCESS_START_S = 120.0
"""Seconds a point's own process (:func:`run_point_in_a_process`) may take to start, importing
npusim, before it counts as dead; the point's timeout counts from then."""


def run_point_in_a_process(task: PointTask) -> tuple[int, dict[str, Any]]:
    """:func:`~npusim.analysis.points.run_point` in a child process of this one (a fresh Python
    that imports the installed npusim, :func:`installed_imports_only`), killed
    :data:`KILL_GRACE_S` after the task's timeout (counted from its start) if it still runs: the
    session stops a simulating point at its timeout, but a point stuck in the workload's own
    Python only stops when its process is killed. For a Dask worker, which cannot stop the thread
    of a running task: the thread waits here, bounded, and nothing is left running. A process that
    dies runs the point once more (:data:`RETRIES`), as a local worker does. The child dies with
    this process (Linux) and prints the workload's output to stderr."""
    command = [sys.executable, "-c", f"from npusim.analysis.executors import _point_process; _point_process({os.getpid()})"]
    for _ in range(RETRIES + 1):
        with installed_imports_only():
            child = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        try:
            with contextlib.suppress(BrokenPipeError):  # it died before reading: seen below
                child.stdin.write(pickle.dumps(task))  # type: ignore[union-attr]
                child.stdin.close()  # type: ignore[union-attr]
            if _read_within(child.stdout, POINT_PROCESS_START_S, size=1) == STARTED_BYTE:
                sent = _read_within(child.stdout, math.inf if task.timeout_s is None else task.timeout_s + KILL_GRACE_S)
                if sent is None:
                    return task.index, timed_out_outcome(task.timeout_s or 0.0)
                if sent:
                    outcome: tuple[int, dict[str, Any]] = pickle.loads(sent)
                    return outcome
        finally:
            if child.poll() is None:
                child.kill()
            child.wait()
            child.stdout.close()  # type: ignore[union-attr]
    return task.index, lost_outcome(f"the process running this point died ({_death(child.returncode)}) {RETRIES + 1} times; "
                                    "it may need more memory than the machine has")


STARTED_BYTE = b"\x01"
"""What a point's own process writes first, once npusim is imported and the task read."""


def _read_within(stream: Any, seconds: float, size: int | None = None) -> bytes | None:
    """The bytes of ``stream`` (a pipe) to its end, or its first ``size`` bytes; None when
    ``seconds`` pass first."""
    deadline = time.monotonic() + seconds
    chunks: list[bytes] = []
    got = 0
    while size is None or got < size:
        if not select.select([stream], [], [], None if deadline == math.inf else max(0.0, deadline - time.monotonic()))[0]:
            return None
        chunk = os.read(stream.fileno(), 1 << 16 if size is None else size - got)
        if not chunk:
            break
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)


def _point_process(parent: int) -> None:
    """The child of :func:`run_point_in_a_process`: the task from stdin, its outcome to stdout."""
    end_with(parent)
    task = pickle.loads(sys.stdin.buffer.read())
    with os.fdopen(os.dup(1), "wb") as out:
        os.dup2(2, 1)  # what the workload prints goes to stderr, not into the outcome
        out.write(STARTED_BYTE)
        out.flush()
        out.write(pickle.dumps(run_point(task)))


class DaskExecutor:
    """The workers of the Dask distributed scheduler at ``address`` (``tcp://HOST:PORT``); they
    need npusim installed (the same version). Use as a context manager. A point whose worker dies
    is rescheduled by Dask until ``distributed.scheduler.allowed-failures`` + 1 workers died with it
    (a point merely queued on a dying worker counts too), then fails with KilledWorker; it is then
    submitted once more (:data:`RETRIES`) and recorded as failed if that fails too, so a point
    queued beside one that kills its workers is not lost with it. With a point timeout each point
    runs in a process of its own on the worker (:func:`run_point_in_a_process`), killed past its
    timeout: Dask cannot stop a running task, and a point stuck in the workload's own Python would
    keep its worker thread busy for good."""

    def __init__(self, address: str, point_timeout_s: float | None = None) -> None:
        try:
            import distributed
        except ImportError:
            raise UsageError("--scheduler needs Dask distributed, which is not installed; install it with: pip install 'npusim[cluster]'") from None
        self._distributed = distributed
        self.address = address
        self.point_timeout_s = check_point_timeout(point_timeout_s)
        self.where = f"the Dask cluster at {address}"
        self._client: Any = None

    def __enter__(self) -> DaskExecutor:
        try:
            self._client = self._distributed.Client(self.address, timeout="10s")
        except (OSError, TimeoutError, ValueError) as error:
            raise UsageError(f"--scheduler {self.address}: cannot reach a Dask scheduler there ({error}); check the address and that the scheduler runs") from None
        return self

    def __exit__(self, *exc_info) -> None:
        self._client.close()

    def run(self, tasks: Sequence[PointTask]) -> Iterator[tuple[int, dict[str, Any]]]:
        task_of: dict[Any, PointTask] = {}  # future key -> its task
        tries: dict[int, int] = {}
        futures: list[Any] = []

        def submit(task: PointTask) -> Any:
            future = self._client.submit(run_point if task.timeout_s is None else run_point_in_a_process, task, pure=False)
            task_of[future.key] = task
            futures.append(future)
            return future

        finished = self._distributed.as_completed([submit(replace(task, timeout_s=self.point_timeout_s)) for task in tasks])
        try:
            for future in finished:
                try:
                    yield future.result()
                except Exception as error:  # the point did not finish: KilledWorker (its workers died), a lost connection ...
                    task = task_of[future.key]
                    tries[task.index] = tries.get(task.index, 0) + 1
                    if tries[task.index] <= RETRIES:
                        finished.add(submit(task))
                    else:
                        yield task.index, lost_outcome(f"the worker running this point failed {tries[task.index]} times: {error}",
                                                       type(error).__name__)
        finally:
            self._client.cancel([future for future in futures if not future.done()])


def executor_for(workers: int | None, scheduler: str | None, point_timeout_s: float | None = None):
    """The executor of a sweep: the Dask cluster at ``scheduler`` if given, else local processes."""
    if scheduler is not None:
        if workers is not None:
            raise UsageError("give --workers or --scheduler, not both: a Dask cluster runs as many points at once as it has workers")
        if not isinstance(scheduler, str) or "://" not in scheduler:
            raise UsageError(f"--scheduler {scheduler!r}: give the scheduler's address, e.g. tcp://10.0.0.5:8786")
        return DaskExecutor(scheduler, point_timeout_s)
    return LocalExecutor(default_workers() if workers is None else workers, point_timeout_s)
