"""One point of a sweep as a self-contained task, and its run in a worker process.

A :class:`PointTask` carries everything a worker needs, so the same task gives the same result in a
local process or on a Dask worker of another machine: the point's config already loaded and
validated, the workload's source (the bytes every worker runs, wherever it is: the file it was read
from may have changed or may not exist there), the parameters, the data flag and the seed. Each task runs in a fresh session.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import math
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from npusim.analysis.bottleneck import bottleneck_of, class_utilisations, utilisation_columns
from npusim.config import LoadedConfig
from npusim.engine import engine_record
from npusim.errors import WorkloadError
from npusim.frontend.simulate import simulate
from npusim.frontend.workload import WorkloadSource

OUTCOME_COLUMNS = ["status", "simulated_us", "bottleneck", "bottleneck_share", *utilisation_columns(), "wall_s", "engine", "error_type", "error"]
"""What a worker reports for a point, in the order of the results file (``engine``: which engine
simulated it, ``compiled`` or ``interpreted``, as a run's manifest says; it explains ``wall_s``, and
a Dask worker on another machine may have an install of its own)."""


@dataclass(frozen=True)
class PointTask:
    """A point ready to simulate: ``index`` in the sweep, its ``key``, its loaded config, the workload
    (absolute path, source bytes and their sha256), the workload parameters, data flag and seed, and
    the wall-clock seconds it may take."""

    index: int
    key: str
    config: LoadedConfig
    workload: str
    workload_source: bytes
    workload_sha256: str
    params: dict[str, Any]
    data: bool
    seed: int
    timeout_s: float | None = None  # wall-clock seconds the point may take (the executor's point timeout)


def run_point(task: PointTask) -> tuple[int, dict[str, Any]]:
    """Simulate ``task`` and return its index and outcome (the :data:`OUTCOME_COLUMNS`). A failing
    workload is an outcome with status ``failed``, not an exception; the workload's own prints are
    dropped (run the point with ``npusim run`` to see them)."""
    start = time.perf_counter()
    outcome: dict[str, Any] = dict.fromkeys(OUTCOME_COLUMNS, math.nan)
    outcome.update(bottleneck="", engine=engine_record()["engine"], error_type="", error="")
    try:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            result = simulate(task.config, workload_source(task), params=task.params, data=task.data, seed=task.seed,
                              wall_limit_s=task.timeout_s)
    except (Exception, SystemExit) as error:  # the workload is arbitrary user code; its failure (even sys.exit) is this point's result
        outcome.update(status="failed", error_type=type(error).__name__, error=str(error).strip())
    else:
        bottleneck = bottleneck_of(result)
        outcome.update(status="ok", simulated_us=result.simulated_us, **class_utilisations(result.summary))
        if bottleneck is not None:
            outcome.update(bottleneck=bottleneck.name, bottleneck_share=bottleneck.share)
    outcome["wall_s"] = time.perf_counter() - start
    return task.index, outcome


def workload_source(task: PointTask) -> WorkloadSource:
    """The workload to run: the task's own bytes, checked against its hash, under the task's path
    (modules beside it import where this machine has them). Nothing is read from or written to a
    folder other users can write to, so no one can plant code that a point would run."""
    if hashlib.sha256(task.workload_source).hexdigest() != task.workload_sha256:
        raise WorkloadError(f"the workload bytes sent with point {task.index} do not match their sha256 {task.workload_sha256[:16]}...; "
                            "the task was damaged on its way: run the sweep again")
    return WorkloadSource(Path(task.workload), task.workload_source)
