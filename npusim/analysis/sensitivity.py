"""Which config values the end-to-end time is most sensitive to, with how far each can be trusted.

For each config value of a set (by default the values the baseline run's critical path rests on,
:mod:`npusim.trace.costs`; or the ``keys`` given; or every number of the config), the workload runs
twice, the value made ``step`` smaller and ``step`` larger (``1.6 TB/s`` -> ``1.44 TB/s`` and
``1.76 TB/s``, in the unit it is written in; a count moves by at least 1), the points in parallel as a
sweep's are. The value's **elasticity** is the slope of ln T against ln p between the two:

    elasticity = (ln T(p+) - ln T(p-)) / (ln p+ - ln p-)

so -1 means the time is inversely proportional to the value (a bandwidth the run is bound by), +1
proportional to it (a latency that is all of the path), 0 that it does not matter at this point. A
side the config refuses (an efficiency above 1, a count of 0) is left out and the slope taken
against the baseline on the other side (one-sided); a value neither side of which is valid is
listed as not varied, with the reason. The values are ranked by the size of their elasticity, each
with its value, its confidence and its source (:mod:`npusim.config.confidence`); the reading names
the most sensitive values and says so when the top ones are of low confidence (L, or none stated).

It is a local, one-at-a-time measure: two values that matter only together, or a value that
matters only once another changes (a path off the critical one becoming critical), do not show.
"""

from __future__ import annotations

import contextlib
import io
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from npusim.analysis.grid import Point
from npusim.analysis.sweep import SweepOutcome, plan, require_pandas, run_plan
from npusim.config import LoadedConfig, load_config
from npusim.config.annotated import values
from npusim.config.confidence import ABSENT, dotted, key_path, value_at, without_tags
from npusim.errors import ConfigError, UsageError, WorkloadError
from npusim.frontend.simulate import simulate
from npusim.frontend.workload import WorkloadSource, check_param_overrides, parse_param_overrides, read_workload
from npusim.units import scale_text

STEP = 0.1
"""How far each value is moved either way (a fraction of it)."""

TOP = 3
"""The reading looks at this many of the most sensitive values."""

NOTABLE = 0.05
"""An elasticity smaller than this (in size) is "the time hardly moves"."""

FROM_THE_PATH = "critical path"
"""Which values are varied by default: those the baseline's critical path rests on."""


@dataclass(frozen=True)
class Varied:
    """One value to vary: its dotted ``key``, ``value`` as the config writes it, the overrides
    that move it down and up (None for a side the config refuses, with the reason in ``refused``)
    and the ratio of each side's value to the value (``lower_ratio`` < 1 < ``upper_ratio``)."""

    key: str
    value: Any
    lower: str | None
    upper: str | None
    lower_ratio: float
    upper_ratio: float
    refused: str = ""


def moved(value: Any, factor: float) -> tuple[Any, float] | None:
    """``value`` (a number, or a quantity as written) moved by ``factor`` and the ratio it moved by
    (0 when the value is 0, which no share of itself moves); a whole number moves by at least 1;
    None for a value that is not a number."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        step = max(1, round(abs(value) * abs(factor - 1)))
        new = value + step if factor > 1 else value - step
        return (new, new / value) if value else (value, 0.0)
    if isinstance(value, float):
        return (value * factor, factor) if value else (value, 0.0)
    if isinstance(value, str):
        try:
            return scale_text(value, factor), factor
        except ValueError:
            return None
    return None


def numeric_values(loaded: LoadedConfig) -> list[str]:
    """The dotted keys of every number of ``loaded`` (quantities, counts, fractions), but the
    machine's shape (its size, not a parameter of its timing)."""
    return [dotted(path) for path in values(loaded.resolved)
            if path[0] != "shape" and moved(value_at(loaded.resolved, path), 1 + STEP) is not None]


def to_vary(config: str | Path, overrides: Sequence[str], keys: Sequence[str], step: float) -> tuple[list[Varied], list[Varied]]:
    """The values of ``keys`` on ``config`` (with the fixed ``overrides``) and the overrides that
    move each by ``step`` either way, each side checked by loading its config: the values to vary,
    and those neither side of which the config takes (with the reason). Raises ConfigError for a key
    the config does not have (the loader's error, with a did-you-mean) and UsageError for a key whose
    value is not a number."""
    base = load_config(config, tuple(overrides))
    varied: list[Varied] = []
    refused: list[Varied] = []
    unknown: list[str] = []
    errors: list[str] = []
    for key in keys:
        value = value_at(base.resolved, key_path(key))
        if value is ABSENT:
            try:  # the loader says whether the schema has such a key (and the nearest one if not)
                load_config(config, (*overrides, f"{key}=null"), origin="whatif --keys")
            except ConfigError as error:
                unknown.append(str(error))
                continue
            errors.append(f"whatif --keys {key}: the config does not set {key} (the schema's default applies); give it a value with "
                          f"--set {key}=VALUE to vary it")
            continue
        down, up = moved(value, 1 - step), moved(value, 1 + step)
        if down is None or up is None:
            errors.append(f"whatif --keys {key}: its value {value!r} is not a number; what-if varies numbers (quantities with their unit, "
                          "counts, fractions): pick a numeric key")
            continue
        sides: list[tuple[str | None, float]] = []
        reasons: list[str] = []
        for new, ratio in (down, up):
            text = f"{key}={new}"
            if ratio <= 0:
                sides.append((None, 1.0))
                reasons.append(f"{key} would be {new}: a value of 0 or a count of 1 moved down has no step to take")
                continue
            try:
                load_config(config, (*overrides, text), origin="what-if")
            except ConfigError as error:
                sides.append((None, ratio))
                reasons.append(str(error).splitlines()[-1])
            else:
                sides.append((text, ratio))
        entry = Varied(key, value, sides[0][0], sides[1][0], sides[0][1], sides[1][1], "; ".join(reasons))
        (varied if entry.lower or entry.upper else refused).append(entry)
    if unknown:  # keys the config cannot have: the loader's errors, with the nearest key
        raise ConfigError("\n".join(unknown + errors))
    if errors:
        raise UsageError("\n".join(errors))
    return varied, refused


def elasticity(base_us: float, lower_us: float | None, upper_us: float | None, entry: Varied) -> float:
    """The slope of ln T against ln p (see the module); nan when no side ran, or a time is 0."""
    points = [(math.log(entry.lower_ratio), lower_us), (0.0, base_us), (math.log(entry.upper_ratio), upper_us)]
    if lower_us is not None and upper_us is not None:
        (x0, t0), (x1, t1) = points[0], points[2]
    elif lower_us is not None:
        (x0, t0), (x1, t1) = points[0], points[1]
    elif upper_us is not None:
        (x0, t0), (x1, t1) = points[1], points[2]
    else:
        return math.nan
    if not (t0 and t1 and t0 > 0 and t1 > 0) or x1 == x0:
        return math.nan
    return (math.log(t1) - math.log(t0)) / (x1 - x0)


def run_sensitivity(config: str | Path, workload: str | Path, *, keys: Sequence[str] | None = None, all_values: bool = False,
                    step: float = STEP, overrides: Sequence[str] | None = None, params: Mapping[str, Any] | Sequence[str] | None = None,
                    workers: int | None = None, scheduler: str | None = None, data: bool = False, seed: int = 0,
                    progress: bool = True) -> tuple[dict[str, Any], list[dict[str, Any]], str]:
    """Rank the config values the end-to-end time of ``workload`` on ``config`` is most sensitive to
    (see the module): ``keys`` (dotted), or with ``all_values`` every number of the config (but the
    machine's shape), else the values the baseline's critical path rests on. Returns the baseline
    (``simulated_us``, ``bottleneck``, ``share``, the ``keys`` varied and ``which``), the rows by size of
    elasticity (``key``, ``value``, ``elasticity``, ``lower_us``, ``upper_us``, the sides' overrides,
    ``confidence``, ``level``, ``basis``, ``source``, ``where``, ``status``, ``error``) and the one-line
    reading. Raises WorkloadError when the baseline fails, ConfigError / UsageError for bad keys."""
    if not 0 < step < 1:
        raise UsageError(f"whatif --step {step:g}: give a fraction between 0 and 1 (e.g. 0.1 for 10%), the share each value moves either way")
    if keys and all_values:
        raise UsageError("whatif: give --keys or --all, not both")
    fixed = tuple(overrides or ())
    base = load_config(config, fixed)
    source = read_workload(workload)
    baseline = _baseline(base, source, params, data, seed)
    if keys:
        chosen, which = list(dict.fromkeys(keys)), "given"
    elif all_values:
        chosen, which = numeric_values(base), "all"
    else:
        chosen = [e["key"] for e in baseline["rests_on"] if value_at(base.resolved, key_path(e["key"])) is not ABSENT]
        which = FROM_THE_PATH
    varied, refused = to_vary(config, fixed, chosen, step)
    points = [Point((text,), {}, {"key": entry.key, "side": side})
              for entry in varied for side, text in (("lower", entry.lower), ("upper", entry.upper)) if text is not None]
    outcome: SweepOutcome | None = None
    if points:
        what_if = plan(config, source.path, points, ["key", "side"], overrides=fixed, params=params, data=data, seed=seed, origin="what-if")
        outcome = run_plan(what_if, workers=workers, scheduler=scheduler, progress=progress,
                           title=f"sensitivity of {what_if.workload.name} on {what_if.base.name}")
    times: dict[tuple[str, str], dict[str, Any]] = {}
    for point, row in zip(points, outcome.rows if outcome else []):
        times[(point.values["key"], point.values["side"])] = row
    rows = [_row(base, entry, baseline["simulated_us"], times.get((entry.key, "lower")), times.get((entry.key, "upper"))) for entry in varied]
    rows += [_row(base, entry, baseline["simulated_us"], None, None) for entry in refused]
    rows.sort(key=lambda row: (math.isnan(row["elasticity"]), -abs(row["elasticity"]) if not math.isnan(row["elasticity"]) else 0.0, row["key"]))
    summary = {"simulated_us": baseline["simulated_us"], "bottleneck": baseline["bottleneck"], "share": baseline["share"],
               "keys": chosen, "which": which, "step": step}
    return summary, rows, reading(rows)


def _baseline(base: LoadedConfig, source: WorkloadSource, params: Mapping[str, Any] | Sequence[str] | None, data: bool,
              seed: int) -> dict[str, Any]:
    """Simulate the baseline here (its critical path says which values to vary); its prints are dropped."""
    given = parse_param_overrides(params if isinstance(params, Mapping) else tuple(params or ()))
    check_param_overrides(source, given)  # a parameter the workload does not declare is the command's error, before anything runs
    try:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            result = simulate(base, source, params=given, data=data, seed=seed)
    except (Exception, SystemExit) as error:  # the workload is the user's code: its failure is the baseline's
        raise WorkloadError(f"the baseline run of {source.path.name} failed, so nothing can be compared: {type(error).__name__}: {error}") from None
    found = result.summary.get("bottlenecks") or {}
    top = next((row for row in found.get("breakdown", []) if row["kind"] != "other"), None)
    return {"simulated_us": result.simulated_us, "rests_on": [e for e in found.get("rests_on", []) if e.get("value") is not None],
            "bottleneck": top["label"] if top else "", "share": top["share"] if top else math.nan}


def _row(base: LoadedConfig, entry: Varied, base_us: float, lower: dict[str, Any] | None, upper: dict[str, Any] | None) -> dict[str, Any]:
    def ok(row: dict[str, Any] | None) -> float | None:
        return row["simulated_us"] if row is not None and row["status"] == "ok" else None

    failed = [row for row in (lower, upper) if row is not None and row["status"] != "ok"]
    confidence = base.confidence_of(entry.key)
    lower_us, upper_us = ok(lower), ok(upper)
    ran = lower_us is not None or upper_us is not None
    error = entry.refused if not ran and not failed else "; ".join(f"{row['error_type']}: {row['error']}" for row in failed)
    return {
        "key": entry.key,
        "value": entry.value,
        "elasticity": elasticity(base_us, lower_us, upper_us, entry),
        "lower": entry.lower or "",
        "upper": entry.upper or "",
        "lower_us": math.nan if lower_us is None else lower_us,
        "upper_us": math.nan if upper_us is None else upper_us,
        "confidence": confidence.tag if confidence.level in ("H", "M", "L") else confidence.level,
        "level": confidence.level,
        "low": confidence.low,
        "basis": confidence.basis,
        "source": without_tags(confidence.source),
        "where": confidence.where,
        "status": "ok" if ran and not failed else "failed" if failed else "not varied",
        "error": error,
    }


def reading(rows: Sequence[dict[str, Any]], top: int = TOP) -> str:
    """One line on ``rows`` (by size of elasticity): the most sensitive values, and a warning when
    the top ones are of low confidence."""
    done = [row for row in rows if not math.isnan(row["elasticity"])]
    if not done:
        return "no value could be varied" if rows else "no config value to vary: the critical path rests on none"
    notable = [row for row in done[:top] if abs(row["elasticity"]) >= NOTABLE]
    if not notable:
        return f"the time hardly moves with any value varied (largest elasticity: {done[0]['key']}, {done[0]['elasticity']:+.2f})"
    text = "the time is most sensitive to " + ", ".join(f"{row['key']} ({row['elasticity']:+.2f}) {_mark(row)}" for row in notable)
    low = [row for row in notable if row["low"]]
    if low:
        names = ", ".join(row["key"] for row in low)
        text += (f"; {'it is' if len(low) == 1 else 'these are'} of low confidence ({names}): the ranking and the time are only as good "
                 f"as {'that value' if len(low) == 1 else 'those values'}, measure {'it' if len(low) == 1 else 'them'} first")
    return text


def _mark(row: dict[str, Any]) -> str:
    if row["level"] == "user":
        return "[your value]"
    if row["level"] == "unrated":
        return "[no confidence given]"
    return f"[{row['confidence']}]"


def sensitivity(config: str | Path, workload: str | Path, *, keys: Sequence[str] | None = None, all_values: bool = False, step: float = STEP,
                overrides: Sequence[str] | None = None, params: Mapping[str, Any] | None = None, workers: int | None = None,
                scheduler: str | None = None, data: bool = False, seed: int = 0, progress: bool = True):
    """:func:`run_sensitivity` as a pandas DataFrame (most sensitive first); the baseline in
    ``frame.attrs['baseline']``, the reading in ``frame.attrs['reading']``."""
    pandas = require_pandas()
    baseline, rows, line = run_sensitivity(config, workload, keys=keys, all_values=all_values, step=step, overrides=overrides, params=params,
                                           workers=workers, scheduler=scheduler, data=data, seed=seed, progress=progress)
    frame = pandas.DataFrame(rows)
    frame.attrs.update(baseline=baseline, reading=line)
    return frame

