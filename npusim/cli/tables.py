"""Rich tables of sweeps and what-if rankings, for the terminal (run reports: npusim.analysis.report)."""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from npusim.analysis.report import output_console

MAX_ROWS = 16


def print_sweep_table(rows: list[dict], value_columns: list[str], *, title: str, console: Console | None = None, limit: int = 2 * MAX_ROWS) -> None:
    """The points of a sweep, fastest first (failed points last), the first ``limit`` of them, then
    each distinct error of the failed points with how many points it stopped."""
    console = console or output_console()
    ordered = sorted(rows, key=lambda row: (row["status"] != "ok", row["simulated_us"] if row["status"] == "ok" else 0.0))
    best = next((row["simulated_us"] for row in ordered if row["status"] == "ok"), 0.0)  # read only if some point is ok
    table = Table(title=title, title_justify="left")
    for column in value_columns:
        table.add_column(column, justify="right", no_wrap=True)
    for column in ("simulated us", "x best", "bottleneck", "wall s", "status"):  # the bottleneck's label wraps on a narrow terminal, nothing else
        table.add_column(column, justify="left" if column in ("bottleneck", "status") else "right", no_wrap=column != "bottleneck", overflow="fold")
    for row in ordered[:limit]:
        values = [str(row[column]) for column in value_columns]
        if row["status"] == "ok":
            bottleneck = f"{row['bottleneck']} {row['bottleneck_share']:.0%}" if row["bottleneck"] else "-"
            table.add_row(*values, f"{row['simulated_us']:.3f}", f"{times_best(row['simulated_us'], best):.2f}", bottleneck, f"{row['wall_s']:.2f}", "ok")
        else:
            table.add_row(*values, "-", "-", "-", f"{row['wall_s']:.2f}", "[red]failed[/red]")
    console.print(table)
    if len(ordered) > limit:
        console.print(f"  ... {len(ordered) - limit} more points in the results file")
    errors: dict[str, int] = {}
    for row in ordered:
        if row["status"] != "ok":
            error = f"{row['error_type']}: {row['error']}"
            errors[error] = errors.get(error, 0) + 1
    for error, count in list(errors.items())[:MAX_ROWS]:
        console.print(f"[red]failed[/red] ({count} point{'s' if count > 1 else ''}): {error}", soft_wrap=True)


def times_best(simulated_us: float, best_us: float) -> float:
    """How many times the best time a point took: 1 for a point as fast as the best, also when the
    best simulated nothing (0 us; then any longer point is infinitely slower)."""
    if simulated_us == best_us:
        return 1.0
    return simulated_us / best_us if best_us > 0 else float("inf")


def print_whatif_table(rows: list[dict], reading: str, *, title: str, console: Console | None = None) -> None:
    """The baseline, then each factor by speedup, then the one-line reading."""
    console = console or output_console()
    baseline, *ranked = rows
    bottleneck = f", critical path mostly: {baseline['bottleneck']} ({baseline['bottleneck_share']:.0%})" if baseline["bottleneck"] else ""
    console.print(f"[bold]{title}[/bold]: baseline {baseline['simulated_us']:.3f} us simulated{bottleneck}")
    table = Table(title="each resource made twice as fast, by speedup", title_justify="left")
    for column in ("rank", "factor", "speedup", "simulated us", "bottleneck then", "overrides"):  # numbers never wrap or get cut; texts wrap
        number = column in ("rank", "speedup", "simulated us")
        table.add_column(column, justify="right" if number else "left", no_wrap=number, overflow="fold")
    for rank, row in enumerate(ranked, start=1):
        if row["status"] == "ok":
            limited_by = f"{row['bottleneck']} ({row['bottleneck_share']:.0%})" if row["bottleneck"] else "-"
            table.add_row(str(rank), row["factor"], f"{row['speedup']:.2f}x", f"{row['simulated_us']:.3f}", limited_by, row["changed"])
        else:
            table.add_row(str(rank), row["factor"], "[red]failed[/red]", "-", row["error"][:120], row["changed"])
    console.print(table)
    console.print(f"[bold]reading[/bold]: {reading}")


def print_sensitivity_table(baseline: dict, rows: list[dict], reading: str, *, title: str, console: Console | None = None,
                            limit: int = 2 * MAX_ROWS) -> None:
    """The config values by the size of their elasticity (most sensitive first), each with its
    value, the times at its lower and upper value, its confidence (low ones in yellow) and source,
    then the values that could not be varied and the one-line reading."""
    console = console or output_console()
    bottleneck = f", critical path mostly: {baseline['bottleneck']} ({baseline['share']:.0%})" if baseline["bottleneck"] else ""
    which = {"critical path": "the values its critical path rests on", "all": "every number of the config", "given": "the values given"}
    console.print(f"[bold]{title}[/bold]: baseline {baseline['simulated_us']:.3f} us simulated{bottleneck}; "
                  f"{which.get(baseline['which'], baseline['which'])} moved by -/+{baseline['step']:.0%}, one at a time")
    table = Table(title="the values the end-to-end time is most sensitive to (elasticity d ln T / d ln value)", title_justify="left")
    for column in ("rank", "value of", "is", "elasticity", f"us at -{baseline['step']:.0%}", f"us at +{baseline['step']:.0%}", "confidence", "source"):
        number = column in ("rank", "elasticity") or column.startswith("us at")  # numbers never wrap or get cut; texts wrap
        table.add_column(column, justify="right" if number else "left", no_wrap=number, overflow="fold")
    shown = [row for row in rows if row["status"] != "not varied"]
    for rank, row in enumerate(shown[:limit], start=1):
        confidence = {"user": "your value", "unrated": "none given"}.get(row["level"], row["confidence"])
        mark = f"[yellow]{escape(confidence)}[/yellow]" if row["low"] else escape(confidence)
        if row["status"] == "ok":
            times = [("-" if row[side] != row[side] else f"{row[side]:.3f}") for side in ("lower_us", "upper_us")]  # nan: a side not taken
            table.add_row(str(rank), row["key"], str(row["value"]), f"{row['elasticity']:+.3f}", *times, mark, escape(row["source"]))
        else:
            table.add_row(str(rank), row["key"], str(row["value"]), "[red]failed[/red]", "-", "-", mark, escape(row["error"][:120]))
    console.print(table)
    if len(shown) > limit:
        console.print(f"  ... {len(shown) - limit} more values, each changing the time less")
    for row in rows:
        if row["status"] == "not varied":
            console.print(f"not varied: {row['key']} = {row['value']}: {escape(row['error'])}", soft_wrap=True)
    console.print(f"[bold]reading[/bold]: {escape(reading)}", soft_wrap=True)
