"""Rich tables of a run summary, for the terminal."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

MAX_ROWS = 16


def print_summary(summary: dict, *, title: str, console: Console | None = None) -> None:
    """Print simulated time, busy pipes and bandwidths; long tables keep their busiest rows."""
    console = console or Console(highlight=False)
    status = summary["status"]
    console.print(
        f"[bold]{title}[/bold]: simulated {summary['simulated_time_us']:.3f} us, {summary['events']} events, "
        f"wall {summary['wall_time_s']:.2f} s" + ("" if status == "ok" else f", [red]{status}[/red]")
    )
    pipes = sorted(summary["pipes"], key=lambda r: -r["busy_us"])
    if pipes:
        table = Table(title="pipes (busy time summed over the cores that used them)", title_justify="left")
        for column in ("die", "pipe", "cores", "busy us", "utilisation"):
            table.add_column(column, justify="right" if column != "pipe" else "left")
        for row in pipes[:MAX_ROWS]:
            table.add_row(str(row["die"]), row["pipe"], str(row["cores"]), f"{row['busy_us']:.3f}", f"{row['utilisation']:.1%}")
        console.print(table)
        if len(pipes) > MAX_ROWS:
            console.print(f"  ... {len(pipes) - MAX_ROWS} more rows in summary.json")
    links = sorted(summary["bandwidth"], key=lambda r: -r["bytes"])
    if links:
        table = Table(title="memory and links (achieved over the whole run)", title_justify="left")
        for column in ("resource", "bytes", "achieved GB/s", "peak GB/s", "utilisation"):
            table.add_column(column, justify="left" if column == "resource" else "right")
        for row in links[:MAX_ROWS]:
            table.add_row(row["resource"], f"{row['bytes']:,}", f"{row['achieved_GBps']:.2f}", f"{row['peak_GBps']:.1f}", f"{row['utilisation']:.1%}")
        console.print(table)
        if len(links) > MAX_ROWS:
            console.print(f"  ... {len(links) - MAX_ROWS} more rows in summary.json")
    for warning in summary.get("warnings", [])[:MAX_ROWS]:
        console.print(f"[yellow]warning[/yellow] at {warning['time_us']:.3f} us on die {warning['die']}: {warning['message']}")
