"""``npusim sweep``: simulate the cartesian product of config overrides and workload parameters in
parallel, one row per point; exit 0 when the sweep ran (some points may have failed), 1 when every
point failed, 2 for a usage or config error (found before anything runs), 130 when interrupted (143
by SIGTERM), with every finished point kept."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from npusim.analysis.sweep import RESULTS_CSV, run_sweep
from npusim.cli.errors import EXIT_WORKLOAD, exit_code_for, report, stoppable
from npusim.cli.tables import print_sweep_table
from npusim.config import load_config
from npusim.errors import NpusimError
from npusim.files import default_folder_name
from npusim.frontend.session import MAX_SEED


@click.command("sweep")
@click.option("--config", "-c", "config_name", required=True, help="a built-in config (a2, a3) or a YAML path")
@click.argument("workload", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--grid", "grid", multiple=True, metavar="KEY=V1,V2,...",
              help='an axis: a config key or param.NAME and its values, comma-separated (a value holding a comma in double quotes: KEY=\'"a,b",c\'); repeatable, the sweep is the product of all axes')
@click.option("--set", "overrides", multiple=True, metavar="KEY.PATH=VALUE", help="a config value fixed for every point (repeatable)")
@click.option("--param", "params", multiple=True, metavar="NAME=VALUE", help="a workload parameter fixed for every point (repeatable)")
@click.option("--workers", type=int, help="local worker processes (default: all cores)")
@click.option("--scheduler", metavar="tcp://HOST:PORT", help="run the points on this Dask distributed scheduler's workers (needs npusim[cluster])")
@click.option("--no-data", is_flag=True, help="simulate timing only: no tensor values (timing is unchanged)")
@click.option("--seed", default=0, show_default=True, type=click.IntRange(0, MAX_SEED), help="seed of numpy's random generator, the same for every point")
@click.option("--out", "out_dir", type=click.Path(file_okay=False, path_type=Path), help="output folder (default sweeps/<workload>-<config>/)")
@click.option("--resume", is_flag=True, help="continue the sweep in --out: points already recorded ok are not simulated again")
@click.option("--point-timeout", type=float, metavar="SECONDS", help="stop a point after this many wall-clock seconds and record it failed (default: none)")
@click.option("--debug", is_flag=True, help="print full tracebacks")
def sweep_command(config_name: str, workload: Path, grid: tuple[str, ...], overrides: tuple[str, ...], params: tuple[str, ...],
                  workers: int | None, scheduler: str | None, no_data: bool, seed: int, out_dir: Path | None, resume: bool,
                  point_timeout: float | None, debug: bool) -> None:
    """Simulate WORKLOAD on CONFIG at every point of the --grid axes, in parallel.

    Writes results.csv (one row per point: swept values, simulated time, bottleneck, utilisations,
    bandwidths, wall time, status, error), results.parquet (with pyarrow), simulated_time.png and
    sweep.json to the output folder, and prints the points sorted by simulated time.
    """
    try:
        with stoppable():  # SIGTERM (as timeout sends) stops it as Ctrl-C does
            out_dir = out_dir or Path("sweeps") / default_folder_name(workload, load_config(config_name, overrides).name)
            outcome = run_sweep(config_name, workload, grid, overrides=overrides, params=params, workers=workers, scheduler=scheduler,
                                data=not no_data, seed=seed, out=out_dir, resume=resume, command=["npusim", *sys.argv[1:]],
                                point_timeout_s=point_timeout)
    except NpusimError as error:
        sys.exit(report(error, debug=debug))
    except KeyboardInterrupt as stop:  # every worker is gone; finished points are in the results file
        kept = f"the points finished so far are in {out_dir / RESULTS_CSV}: " if out_dir is not None else ""
        click.echo(f"npusim: interrupted; {kept}run the same command with --resume to simulate only the others", err=True)
        sys.exit(exit_code_for(stop))
    value_columns = outcome.columns[1 : outcome.columns.index("status")]
    print_sweep_table(outcome.rows, value_columns, title=f"sweep of {workload.name} on {config_name}: {len(outcome.rows)} points")
    reused = f", {outcome.reused} already in {RESULTS_CSV}" if outcome.reused else ""
    failed = f"; {outcome.failed} failed" if outcome.failed else "; none failed"
    click.echo(f"{outcome.ran} point{'' if outcome.ran == 1 else 's'} simulated on {outcome.where}{reused}{failed}")
    click.echo("wrote " + ", ".join(str(path) for path in outcome.files.values()))
    if outcome.rows and outcome.failed == len(outcome.rows):
        click.echo("npusim: every point failed; see the error column", err=True)
        sys.exit(EXIT_WORKLOAD)
