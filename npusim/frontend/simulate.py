"""Simulate a workload file from Python (notebooks, sweeps): ``npusim.simulate(config, workload)``."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from npusim.frontend.session import SimResult, session
from npusim.frontend.workload import WorkloadSource, check_param_overrides, parse_param_overrides, read_workload, run_workload_file


def simulate(config, workload: str | Path | WorkloadSource, *, overrides: Sequence[str] | Mapping[str, object] | None = None,
             params: Mapping[str, Any] | Sequence[str] | None = None, data: bool = True, seed: int = 0,
             network_quantum: str | None = None, wall_limit_s: float | None = None, races: str = "warn") -> SimResult:
    """Run ``workload`` (a Python file, or its bytes read once) on ``config`` and return its result (simulated time,
    summary, events, the parameters used); ``network_quantum`` (e.g. ``'10ns'``) makes the
    bandwidth network approximate for speed, ``wall_limit_s`` stops a run that takes longer, ``races``
    says what pipe races do (see ``session``). Errors propagate; ``result.status`` is ``ok``. A
    parameter the workload does not declare, or a value that does not convert to its default's
    type, is refused before anything runs when the file's declarations show it (as ``npusim run``)."""
    source = workload if isinstance(workload, WorkloadSource) else read_workload(workload)  # read once: what runs is what is checked
    param_overrides = parse_param_overrides(params or {})
    check_param_overrides(source, param_overrides)
    with session(config, overrides=overrides, data=data, seed=seed, params=param_overrides,
                 network_quantum=network_quantum, wall_limit_s=wall_limit_s, races=races) as active:
        run_workload_file(source)
    return active.result
