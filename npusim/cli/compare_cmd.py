"""``npusim compare DIR_A DIR_B``: two runs side by side (end to end, per op, per resource)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from npusim.analysis.report import MAX_ROWS, compare, load_run, print_comparison, version_warning
from npusim.cli.errors import report as report_error
from npusim.errors import NpusimError


@click.command("compare")
@click.argument("folder_a", type=click.Path(path_type=Path))
@click.argument("folder_b", type=click.Path(path_type=Path))
@click.option("--rows", default=MAX_ROWS, show_default=True, help="rows kept per table (the largest changes)")
@click.option("--json", "as_json", is_flag=True, help="print the comparison as JSON instead of tables")
@click.option("--debug", is_flag=True, help="print full tracebacks")
def compare_command(folder_a: Path, folder_b: Path, rows: int, as_json: bool, debug: bool) -> None:
    """Compare two run folders: what changed from FOLDER_A to FOLDER_B."""
    try:
        a, b = load_run(folder_a), load_run(folder_b)
    except NpusimError as error:
        sys.exit(report_error(error, debug=debug))
    for warning in filter(None, (version_warning(a), version_warning(b))):
        click.echo(warning, err=True)
    if as_json:
        click.echo(json.dumps(compare(a, b), indent=2, sort_keys=True))
        return
    print_comparison(a, b, rows=rows)
