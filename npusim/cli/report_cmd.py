"""``npusim report DIR``: the report of a run folder (summary, bottlenecks, ops, pipes, links); for
a failed run, the report of what was simulated, then the stored error, and exit status 1."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from npusim.analysis.report import MAX_ROWS, load_run, print_report, version_warning
from npusim.cli.errors import EXIT_WORKLOAD
from npusim.cli.errors import report as report_error
from npusim.errors import NpusimError


@click.command("report")
@click.argument("folder", type=click.Path(path_type=Path))
@click.option("--rows", default=MAX_ROWS, show_default=True, help="rows kept per table (the largest)")
@click.option("--debug", is_flag=True, help="print full tracebacks")
def report_command(folder: Path, rows: int, debug: bool) -> None:
    """Print the report of FOLDER, the output folder of an `npusim run`."""
    try:
        run = load_run(folder)
    except NpusimError as error:
        sys.exit(report_error(error, debug=debug))
    warning = version_warning(run)
    if warning is not None:
        click.echo(warning, err=True)
    engine = run.manifest.get("engine")  # which engine ran it (a manifest older than the field has none)
    print_report(run.summary, title=run.title, rows=rows, engine=engine if isinstance(engine, str) else None)
    status = run.summary.get("status", "ok")
    if status != "ok":
        stored = run.summary.get("error") or run.manifest.get("error") or "no error was stored"
        click.echo(f"npusim: this run {status}: {stored}", err=True)
        sys.exit(EXIT_WORKLOAD)
