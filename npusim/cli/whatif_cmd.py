"""``npusim whatif``: rank the config values the end-to-end time of a workload is most sensitive to,
each with its confidence (:mod:`npusim.analysis.sensitivity`); ``--doubling`` gives the earlier
view, each main resource made twice as fast (:mod:`npusim.analysis.whatif`). Exit 1 when the
baseline run fails, 2 for a usage or config error (an unknown key, a value that is not a number)."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from npusim.analysis.sensitivity import STEP, run_sensitivity
from npusim.analysis.whatif import run_whatif
from npusim.cli.errors import report
from npusim.cli.tables import print_sensitivity_table, print_whatif_table
from npusim.errors import NpusimError, UsageError
from npusim.frontend.session import MAX_SEED


def _step(text: str) -> float:
    """``10%`` or ``0.1`` as a fraction."""
    try:
        return float(text[:-1]) / 100 if text.endswith("%") else float(text)
    except ValueError:
        raise UsageError(f"--step {text}: give a percentage or a fraction, e.g. --step 10% or --step 0.1") from None


@click.command("whatif")
@click.option("--config", "-c", "config_name", required=True, help="a built-in config (a2, a3) or a YAML path")
@click.argument("workload", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--keys", "keys", multiple=True, metavar="KEY[,KEY...]",
              help="the config values to vary (dotted keys, repeatable; default: those the baseline's critical path rests on)")
@click.option("--all", "all_values", is_flag=True, help="vary every number of the config (but its shape): two runs per value")
@click.option("--step", "step_text", default=f"{STEP:.0%}", show_default=True, metavar="PERCENT",
              help="how far each value moves either way")
@click.option("--doubling", is_flag=True, help="instead: make each main resource twice as fast and rank the speedups")
@click.option("--set", "overrides", multiple=True, metavar="KEY.PATH=VALUE", help="override a config value of the baseline (repeatable)")
@click.option("--param", "params", multiple=True, metavar="NAME=VALUE", help="a workload parameter (repeatable)")
@click.option("--workers", type=int, help="local worker processes (default: all cores)")
@click.option("--scheduler", metavar="tcp://HOST:PORT", help="run on this Dask distributed scheduler's workers (needs npusim[cluster])")
@click.option("--data", is_flag=True, help="simulate tensor values too (default: timing only, which gives the same times)")
@click.option("--seed", default=0, show_default=True, type=click.IntRange(0, MAX_SEED), help="seed of numpy's random generator")
@click.option("--debug", is_flag=True, help="print full tracebacks")
def whatif_command(config_name: str, workload: Path, keys: tuple[str, ...], all_values: bool, step_text: str, doubling: bool,
                   overrides: tuple[str, ...], params: tuple[str, ...], workers: int | None, scheduler: str | None, data: bool, seed: int,
                   debug: bool) -> None:
    """Rank the config values of CONFIG the end-to-end time of WORKLOAD is most sensitive to (each
    moved -/+ a step, the runs in parallel), with each value's confidence and source."""
    try:
        if doubling:
            if keys or all_values:
                raise UsageError("--doubling ranks a fixed set of resources made twice as fast; drop --keys / --all, or drop --doubling")
            rows, reading = run_whatif(config_name, workload, overrides=overrides, params=params, workers=workers, scheduler=scheduler,
                                       data=data, seed=seed)
        else:
            chosen = [key.strip() for text in keys for key in text.split(",") if key.strip()]
            baseline, ranked, reading = run_sensitivity(config_name, workload, keys=chosen or None, all_values=all_values, step=_step(step_text),
                                                        overrides=overrides, params=params, workers=workers, scheduler=scheduler, data=data,
                                                        seed=seed)
    except NpusimError as error:
        sys.exit(report(error, debug=debug))
    if doubling:
        print_whatif_table(rows, reading, title=f"what-if of {workload.name} on {config_name}")
    else:
        print_sensitivity_table(baseline, ranked, reading, title=f"what-if of {workload.name} on {config_name}")
