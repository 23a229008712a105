"""``npusim validate``: run the calibration cases and compare with the measured figures.

Prints one row per measured transfer (system, nodes, protocol, direction, block, measured and
simulated GiB/s, error), then the mean and worst absolute error per system and node count, and
overall; then one row per measured kernel (``npusim/calibration/measured_kernels.csv``: name,
config, measured, simulated, unit, error) and their summary. ``--only transfers|kernels`` runs one
table. Exits 0 when every case is within the tolerance, 1 when one is not, 2 on a usage or config
error.
"""

from __future__ import annotations

import sys

import click

from npusim.analysis.calibration import DATA_FILE, CalibrationResult, block_label, check_tolerance, run_calibration, summarize_errors
from npusim.analysis.kernel_rows import DATA_FILE as KERNELS_FILE
from npusim.analysis.kernel_rows import KernelResult, load_kernel_rows, run_kernel_rows
from npusim.cli.errors import EXIT_WORKLOAD, report
from npusim.errors import NpusimError, UsageError

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


KERNEL_COLUMNS = ("kernel", "config", "measured", "simulated", "unit", "error")


def figures(measured: float, simulated: float) -> tuple[str, str]:
    """A row's measured figure as published (up to 6 significant digits) and its simulated one with
    as many decimals, at least one (0.794 of peak beside 0.769, 0.7256 us beside 0.7329)."""
    shown = f"{measured:g}"
    decimals = max(1, len(shown.partition(".")[2]))
    return shown, f"{simulated:.{decimals}f}"


def format_kernel_table(results: list[KernelResult]) -> list[str]:
    """The measured-kernel rows as aligned text lines, headed by the column names."""
    rows = [KERNEL_COLUMNS] + [(r.row.name, r.row.config, *figures(r.row.measured, r.simulated), r.row.unit, f"{r.error:+.1%}")
                               for r in results]
    widths = [max(len(row[i]) for row in rows) for i in range(len(KERNEL_COLUMNS))]
    left = {0, 1, 4}
    return ["  ".join(cell.ljust(w) if i in left else cell.rjust(w) for i, (cell, w) in enumerate(zip(row, widths))).rstrip() for row in rows]


@click.command("validate")
@click.option("--config", "-c", "config_name", default=None, metavar="NAME", help="only the cases of this system (a2, a3); default: all")
@click.option("--tolerance", default=0.10, show_default=True, type=float, help="largest relative error allowed on a case (0.10 = 10%)")
@click.option("--set", "overrides", multiple=True, metavar="KEY.PATH=VALUE", help="override a config value in every case (repeatable)")
@click.option("--only", type=click.Choice(["transfers", "kernels"]), default=None, help="run one table only (default: both)")
@click.option("--kernel", "kernel_names", multiple=True, metavar="TEXT", help="only the measured kernels whose name contains TEXT (repeatable)")
@click.option("--debug", is_flag=True, help="print full tracebacks")
def validate_command(config_name: str | None, tolerance: float, overrides: tuple[str, ...], only: str | None, kernel_names: tuple[str, ...],
                     debug: bool) -> None:
    """Simulate the measured transfers and kernels of the calibration data and compare."""
    systems = [config_name] if config_name else None
    try:
        check_tolerance(tolerance)
        results = run_calibration(systems, overrides) if only != "kernels" and not kernel_names else []
        rows = [row for row in load_kernel_rows(systems) if not kernel_names or any(text in row.name for text in kernel_names)]
        if kernel_names and not rows:
            raise UsageError(f"no measured kernel's name contains {' or '.join(map(repr, kernel_names))}; the rows are in "
                             f"npusim/{KERNELS_FILE}")
        kernels = run_kernel_rows(rows, overrides) if only != "transfers" else []
    except NpusimError as error:
        sys.exit(report(error, debug=debug))
    outside = []
    if results:
        click.echo(f"calibration cases: npusim/{DATA_FILE} (HIXL TransferSync of 128 MiB in blocks; bandwidth in GiB/s as HIXL computes it)")
        for line in format_table(results):
            click.echo(line)
        click.echo("")
        for system, nodes in sorted({(r.case.system, r.case.nodes) for r in results}):
            click.echo(format_summary(f"{system} {nodes}-node", [r for r in results if (r.case.system, r.case.nodes) == (system, nodes)]))
        click.echo(format_summary("all", results))
        outside += [f"{r.case.label} ({r.error:+.1%})" for r in results if abs(r.error) > tolerance]
    if kernels:
        if results:
            click.echo("")
        click.echo(f"measured kernels: npusim/{KERNELS_FILE} (each row's source and set-up in the file)")
        for line in format_kernel_table(kernels):
            click.echo(line)
        worst = max(kernels, key=lambda k: abs(k.error))
        click.echo(f"kernels: {len(kernels)} cases, mean |error| {sum(abs(k.error) for k in kernels) / len(kernels):.1%}, "
                   f"worst {abs(worst.error):.1%} ({worst.row.label})")
        outside += [f"{k.row.label} ({k.error:+.1%})" for k in kernels if abs(k.error) > tolerance]
    total = len(results) + len(kernels)
    if outside:
        click.echo(f"FAIL: {len(outside)} of {total} cases are outside the tolerance of {tolerance:.0%}: " + ", ".join(outside))
        sys.exit(EXIT_WORKLOAD)
    click.echo(f"OK: every case is within {tolerance:.0%}")
