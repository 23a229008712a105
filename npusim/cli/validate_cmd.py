"""``npusim validate``: run the calibration cases and compare with the measured bandwidths.

Prints one row per case (system, nodes, protocol, direction, block, measured and simulated GiB/s,
error), then the mean and worst absolute error per system and node count, and overall. Exits 0 when every case is
within the tolerance, 1 when one is not, 2 on a usage or config error.
"""

from __future__ import annotations

import sys

import click

from npusim.analysis.calibration import DATA_FILE, CalibrationResult, block_label, check_tolerance, run_calibration, summarize_errors
from npusim.cli.errors import EXIT_WORKLOAD, report
from npusim.errors import NpusimError

COLUMNS = ("system", "nodes", "protocol", "direction", "block", "measured GiB/s", "simulated GiB/s", "error")


def format_table(results: list[CalibrationResult]) -> list[str]:
    """The result rows as aligned text lines, headed by the column names."""
    rows = [COLUMNS] + [
        (r.case.system, str(r.case.nodes), r.case.protocol, r.case.direction, block_label(r.case.block_bytes),
         f"{r.case.measured_GiBps:.3f}", f"{r.simulated_GiBps:.3f}", f"{r.error:+.1%}")
        for r in results
    ]
    widths = [max(len(row[i]) for row in rows) for i in range(len(COLUMNS))]
    left = {0, 2, 3}
    return ["  ".join(cell.ljust(w) if i in left else cell.rjust(w) for i, (cell, w) in enumerate(zip(row, widths))).rstrip() for row in rows]


def format_summary(name: str, results: list[CalibrationResult]) -> str:
    """``name: N cases, mean |error| x%, worst y% (case)``."""
    summary = summarize_errors(results)
    return (f"{name}: {summary.cases} cases, mean |error| {summary.mean_abs_error:.1%}, "
            f"worst {abs(summary.worst.error):.1%} ({summary.worst.case.label})")


@click.command("validate")
@click.option("--config", "-c", "config_name", default=None, metavar="NAME", help="only the cases of this system (a2, a3); default: all")
@click.option("--tolerance", default=0.10, show_default=True, type=float, help="largest relative error allowed on a case (0.10 = 10%)")
@click.option("--set", "overrides", multiple=True, metavar="KEY.PATH=VALUE", help="override a config value in every case (repeatable)")
@click.option("--debug", is_flag=True, help="print full tracebacks")
def validate_command(config_name: str | None, tolerance: float, overrides: tuple[str, ...], debug: bool) -> None:
    """Simulate the measured transfers of the calibration data and compare."""
    try:
        check_tolerance(tolerance)
        results = run_calibration([config_name] if config_name else None, overrides)
    except NpusimError as error:
        sys.exit(report(error, debug=debug))
    click.echo(f"calibration cases: npusim/{DATA_FILE} (HIXL TransferSync of 128 MiB in blocks; bandwidth in GiB/s as HIXL computes it)")
    for line in format_table(results):
        click.echo(line)
    click.echo("")
    for system, nodes in sorted({(r.case.system, r.case.nodes) for r in results}):
        click.echo(format_summary(f"{system} {nodes}-node", [r for r in results if (r.case.system, r.case.nodes) == (system, nodes)]))
    click.echo(format_summary("all", results))
    outside = [r for r in results if abs(r.error) > tolerance]
    if outside:
        click.echo(f"FAIL: {len(outside)} of {len(results)} cases are outside the tolerance of {tolerance:.0%}: "
                   + ", ".join(f"{r.case.label} ({r.error:+.1%})" for r in outside))
        sys.exit(EXIT_WORKLOAD)
    click.echo(f"OK: every case is within {tolerance:.0%}")
