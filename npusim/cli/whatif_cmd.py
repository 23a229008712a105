"""``npusim whatif``: re-run a workload with each main resource made twice as fast and rank the
speedups (:mod:`npusim.analysis.whatif`); exit 1 when the baseline run fails, 2 for a usage or
config error."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from npusim.analysis.whatif import run_whatif
from npusim.cli.errors import report
from npusim.cli.tables import print_whatif_table
from npusim.errors import NpusimError
from npusim.frontend.session import MAX_SEED


@click.command("whatif")
@click.option("--config", "-c", "config_name", required=True, help="a built-in config (a2, a3) or a YAML path")
@click.argument("workload", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--set", "overrides", multiple=True, metavar="KEY.PATH=VALUE", help="override a config value of the baseline (repeatable)")
@click.option("--param", "params", multiple=True, metavar="NAME=VALUE", help="a workload parameter (repeatable)")
@click.option("--workers", type=int, help="local worker processes (default: all cores)")
@click.option("--scheduler", metavar="tcp://HOST:PORT", help="run on this Dask distributed scheduler's workers (needs npusim[cluster])")
@click.option("--data", is_flag=True, help="simulate tensor values too (default: timing only, which gives the same times)")
@click.option("--seed", default=0, show_default=True, type=click.IntRange(0, MAX_SEED), help="seed of numpy's random generator")
@click.option("--debug", is_flag=True, help="print full tracebacks")
def whatif_command(config_name: str, workload: Path, overrides: tuple[str, ...], params: tuple[str, ...], workers: int | None,
                   scheduler: str | None, data: bool, seed: int, debug: bool) -> None:
    """Rank what doubling each main resource of CONFIG (HBM, L2, each link class, vector, cube and
    MTE rates, AICPU times, AI cores) gains for WORKLOAD."""
    try:
        rows, reading = run_whatif(config_name, workload, overrides=overrides, params=params, workers=workers, scheduler=scheduler,
                                   data=data, seed=seed)
    except NpusimError as error:
        sys.exit(report(error, debug=debug))
    print_whatif_table(rows, reading, title=f"what-if of {workload.name} on {config_name}")
