"""Where the points of a sweep run: local worker processes, or a Dask distributed cluster.

Both run :func:`~npusim.analysis.points.run_point` on :class:`~npusim.analysis.points.PointTask`
values and yield ``(index, outcome)`` as points finish, in whatever order they finish; the result
of a point does not depend on where or when it ran. A worker that dies (killed, out of memory) makes
its points failed outcomes, not an exception.
"""

from __future__ import annotations

import math
import multiprocessing
import os
import signal
from collections.abc import Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from typing import Any

from npusim.analysis.points import OUTCOME_COLUMNS, PointTask, run_point
from npusim.errors import UsageError


def default_workers() -> int:
    """All the cores this process may use."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def lost_outcome(error: BaseException) -> dict[str, Any]:
    """The outcome of a point whose worker failed (rather than its workload)."""
    outcome: dict[str, Any] = dict.fromkeys(OUTCOME_COLUMNS, math.nan)
    outcome.update(status="failed", bottleneck="", error_type=type(error).__name__, error=f"the worker running this point failed: {error}")
    return outcome


class LocalExecutor:
    """``workers`` local processes (forkserver where available, else spawn: workers start from a
    clean interpreter, not a copy of the caller, so no state of the caller leaks into a point; the
    fork server imports npusim once, so each worker starts fast). Use as a context manager. As with
    any process pool, a script that runs a sweep calls it under ``if __name__ == "__main__":``."""

    def __init__(self, workers: int) -> None:
        if not isinstance(workers, int) or isinstance(workers, bool) or workers < 1:
            raise UsageError(f"workers={workers!r}: give a whole number of worker processes, 1 or more (default: all {default_workers()} cores)")
        self.workers = workers
        self.where = f"{workers} local worker process{'es' if workers > 1 else ''}"
        if "forkserver" in multiprocessing.get_all_start_methods():
            self._context = multiprocessing.get_context("forkserver")
            self._context.set_forkserver_preload([run_point.__module__])  # workers fork with npusim imported
        else:
            self._context = multiprocessing.get_context("spawn")
        self._pool: ProcessPoolExecutor | None = None

    def __enter__(self) -> LocalExecutor:
        self._pool = ProcessPoolExecutor(max_workers=self.workers, mp_context=self._context, initializer=_ignore_interrupts)
        return self

    def __exit__(self, *exc_info) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)

    def run(self, tasks: Sequence[PointTask]) -> Iterator[tuple[int, dict[str, Any]]]:
        futures = {self._pool.submit(run_point, task): task for task in tasks}
        try:
            for future in as_completed(futures):
                try:
                    yield future.result()
                except Exception as error:  # the worker process died; the point is lost, the sweep goes on
                    yield futures[future].index, lost_outcome(error)
        finally:
            for future in futures:
                future.cancel()


def _ignore_interrupts() -> None:
    """Worker processes leave Ctrl-C to the parent, which stops the sweep cleanly."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


class DaskExecutor:
    """The workers of the Dask distributed scheduler at ``address`` (``tcp://HOST:PORT``); they
    need npusim installed (the same version). Use as a context manager."""

    def __init__(self, address: str) -> None:
        try:
            import distributed
        except ImportError:
            raise UsageError("--scheduler needs Dask distributed, which is not installed; install it with: pip install 'npusim[cluster]'") from None
        self._distributed = distributed
        self.address = address
        self.where = f"the Dask cluster at {address}"
        self._client = None

    def __enter__(self) -> DaskExecutor:
        try:
            self._client = self._distributed.Client(self.address, timeout="10s")
        except (OSError, TimeoutError, ValueError) as error:
            raise UsageError(f"--scheduler {self.address}: cannot reach a Dask scheduler there ({error}); check the address and that the scheduler runs") from None
        return self

    def __exit__(self, *exc_info) -> None:
        self._client.close()

    def run(self, tasks: Sequence[PointTask]) -> Iterator[tuple[int, dict[str, Any]]]:
        futures = [self._client.submit(run_point, task, pure=False) for task in tasks]
        index_of = {future.key: task.index for future, task in zip(futures, tasks)}
        try:
            for future in self._distributed.as_completed(futures):
                try:
                    yield future.result()
                except Exception as error:  # e.g. KilledWorker
                    yield index_of[future.key], lost_outcome(error)
        finally:
            self._client.cancel([future for future in futures if not future.done()])


def executor_for(workers: int | None, scheduler: str | None):
    """The executor of a sweep: the Dask cluster at ``scheduler`` if given, else local processes."""
    if scheduler is not None:
        if workers is not None:
            raise UsageError("give --workers or --scheduler, not both: a Dask cluster runs as many points at once as it has workers")
        if not isinstance(scheduler, str) or "://" not in scheduler:
            raise UsageError(f"--scheduler {scheduler!r}: give the scheduler's address, e.g. tcp://10.0.0.5:8786")
        return DaskExecutor(scheduler)
    return LocalExecutor(default_workers() if workers is None else workers)
