"""One point of a sweep as a self-contained task, and its run in a worker process.

A :class:`PointTask` carries everything a worker needs, so the same task gives the same result in a
local process or on a Dask worker of another machine: the point's config already loaded and
validated, the workload's source (used when the worker cannot see the file, or sees another
version of it), the parameters, the data flag and the seed. Each task runs in a fresh session.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import math
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from npusim.analysis.bottleneck import bottleneck_of, class_utilisations, utilisation_columns
from npusim.config import LoadedConfig
from npusim.frontend.simulate import simulate

OUTCOME_COLUMNS = ["status", "simulated_us", "bottleneck", "bottleneck_share", *utilisation_columns(), "wall_s", "error_type", "error"]
"""What a worker reports for a point, in the order of the results file."""


@dataclass(frozen=True)
class PointTask:
    """A point ready to simulate: ``index`` in the sweep, its ``key``, its loaded config, the workload
    (absolute path, source bytes and their sha256), the workload parameters, data flag and seed."""

    index: int
    key: str
    config: LoadedConfig
    workload: str
    workload_source: bytes
    workload_sha256: str
    params: dict[str, Any]
    data: bool
    seed: int


def run_point(task: PointTask) -> tuple[int, dict[str, Any]]:
    """Simulate ``task`` and return its index and outcome (the :data:`OUTCOME_COLUMNS`). A failing
    workload is an outcome with status ``failed``, not an exception; the workload's own prints are
    dropped (run the point with ``npusim run`` to see them)."""
    start = time.perf_counter()
    outcome: dict[str, Any] = dict.fromkeys(OUTCOME_COLUMNS, math.nan)
    outcome.update(bottleneck="", error_type="", error="")
    try:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            result = simulate(task.config, workload_file(task), params=task.params, data=task.data, seed=task.seed)
    except (Exception, SystemExit) as error:  # the workload is arbitrary user code; its failure (even sys.exit) is this point's result
        outcome.update(status="failed", error_type=type(error).__name__, error=str(error).strip())
    else:
        bottleneck = bottleneck_of(result)
        outcome.update(status="ok", simulated_us=result.simulated_us, **class_utilisations(result.summary))
        if bottleneck is not None:
            outcome.update(bottleneck=bottleneck.name, bottleneck_share=bottleneck.share)
    outcome["wall_s"] = time.perf_counter() - start
    return task.index, outcome


def workload_file(task: PointTask) -> Path:
    """The workload file to run: the task's path when this machine has that exact file (so modules
    next to it import), else a copy of the task's source in a temporary folder."""
    path = Path(task.workload)
    if path.is_file() and hashlib.sha256(path.read_bytes()).hexdigest() == task.workload_sha256:
        return path
    copy = Path(tempfile.gettempdir()) / f"npusim-workload-{task.workload_sha256[:16]}" / path.name
    if not copy.is_file():
        copy.parent.mkdir(parents=True, exist_ok=True)
        partial = copy.with_name(copy.name + f".{time.time_ns()}.tmp")
        partial.write_bytes(task.workload_source)
        partial.replace(copy)
    return copy
