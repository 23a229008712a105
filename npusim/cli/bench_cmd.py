"""``npusim bench collectives``: HCCL's collectives over a range of sizes, hccl_test / nccl-tests style
(:mod:`npusim.analysis.collectives`); exit 2 for a usage or config error, 1 for a failed point."""

from __future__ import annotations

import csv
import dataclasses
import io
import sys
from pathlib import Path

import click

from npusim.analysis.collectives import DTYPES, OPS, measure, sizes
from npusim.cli.errors import report
from npusim.errors import NpusimError, UsageError
from npusim.files import write_bytes_atomically
from npusim.units import Dimension, format_bytes, parse_quantity

BUSBW = {"allreduce": "2(n-1)/n", "allgather": "(n-1)/n", "reducescatter": "(n-1)/n", "alltoall": "(n-1)/n", "broadcast": "1", "reduce": "1"}


@click.group("bench")
def bench_group() -> None:
    """Benchmark the simulated machine: HCCL's collectives over a range of sizes (hccl_test style)."""


def _size(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        try:
            return parse_quantity(text, Dimension.SIZE).bytes
        except ValueError as error:
            raise click.BadParameter(f"{text!r}: {error}") from None


@bench_group.command("collectives")
@click.option("--config", "-c", "config_name", required=True, help="a built-in config (a2, a3) or a YAML path")
@click.option("--op", "op", default="allreduce", show_default=True, type=click.Choice(OPS), help="the collective")
@click.option("-b", "--minbytes", "begin", default="8", show_default=True, help="smallest size (bytes, or 1KiB ...)")
@click.option("-e", "--maxbytes", "end", default="1GiB", show_default=True, help="largest size")
@click.option("-f", "--stepfactor", "factor", default=2, show_default=True, type=int, help="multiply the size by this each step")
@click.option("--sizes", "explicit", default=None, metavar="N,N,...", help="exact sizes instead of -b / -e / -f")
@click.option("--ranks", "-n", type=int, default=None, help="ranks, one per die (default: every die of the config)")
@click.option("--dtype", "-d", default="float16", show_default=True, type=click.Choice(DTYPES))
@click.option("--set", "overrides", multiple=True, metavar="KEY.PATH=VALUE", help="override a config value (repeatable)")
@click.option("--sweep", "sweep", default=None, metavar="LEVEL=ALGO,ALGO,...",
              help="also run each size with each algorithm forced at LEVEL (e.g. level1=ring,rhd,nhr,nb,pipeline), next to HCCL's choice")
@click.option("--check/--no-check", default=False, help="simulate the data and check every result (slower)")
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="folder for bench.csv and busbw.png (default traces/bench-<op>-<config>)")
@click.option("--debug", is_flag=True, help="print full tracebacks")
def collectives_command(config_name: str, op: str, begin: str, end: str, factor: int, explicit: str | None, ranks: int | None, dtype: str,
                        overrides: tuple[str, ...], sweep: str | None, check: bool, out: Path | None, debug: bool) -> None:
    """Run OP at each size and print time, algbw and busbw (nccl-tests' definitions); with --sweep,
    which algorithm wins where."""
    try:
        points = _run(config_name, op, begin, end, factor, explicit, ranks, dtype, overrides, sweep, check, out)
    except NpusimError as error:
        sys.exit(report(error, debug=debug))
    if check and any(p.correct is False for p in points):
        sys.exit(1)


def _run(config_name, op, begin, end, factor, explicit, ranks, dtype, overrides, sweep, check, out):
    size_list = [_size(s) for s in explicit.split(",")] if explicit else sizes(_size(begin), _size(end), factor)
    forced = ["auto"]
    if sweep:
        level, sep, names = sweep.partition("=")
        if not sep or level not in ("level0", "level1", "level2") or not names:
            raise UsageError(f"--sweep {sweep!r}: write LEVEL=ALGO,ALGO,... with LEVEL level0, level1 or level2, e.g. level1=ring,nhr")
        forced += [f"{level}={name.strip()}" for name in names.split(",") if name.strip()]
    points = []
    header = f"{'size':>12} {'count':>12} {'type':>9} {'forced':>16} {'algorithms':>24} {'time us':>12} {'algbw':>8} {'busbw':>8}"
    click.echo(f"# npusim bench collectives: {op} on {config_name}{' ' + ' '.join(overrides) if overrides else ''}, {dtype}; busbw = algbw x "
               f"{BUSBW[op]} (nccl-tests), GB/s = 1e9 B/s; simulated, {'data checked' if check else 'timing only'}")
    click.echo("#" + header[1:])
    for size in size_list:
        for name in forced:
            point = measure(config_name, op, size, ranks=ranks, dtype=dtype, overrides=overrides, forced=name, data=check)
            points.append(point)
            mark = "" if point.correct is None else ("  ok" if point.correct else "  WRONG")
            click.echo(f"{size:>12} {point.count:>12} {dtype:>9} {name:>16} {point.algorithms:>24} {point.time_us:>12.3f} "
                       f"{point.algbw:>8.2f} {point.busbw:>8.2f}{mark}")
    if len(forced) > 1:
        click.echo("# fastest per size: " + ", ".join(f"{format_bytes(size)} {min((p for p in points if p.size == size), key=lambda p: p.time_us).forced}"
                                                     for size in size_list))
    folder = out or Path("traces") / f"bench-{op}-{Path(config_name).stem}"
    folder.mkdir(parents=True, exist_ok=True)
    rows = [dataclasses.asdict(p) for p in points]
    text = _csv(rows)
    write_bytes_atomically(folder / "bench.csv", text.encode())
    from npusim.plot.collectives import plot_collectives

    figure = plot_collectives(points, title=f"{op} on {config_name}, {ranks or 'all'} ranks, {dtype}")
    image = io.BytesIO()
    figure.savefig(image, format="png", dpi=110)
    write_bytes_atomically(folder / "busbw.png", image.getvalue())
    click.echo(f"wrote bench.csv and busbw.png in {folder}")
    return points


def _csv(rows: list[dict]) -> str:
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=list(rows[0]))
    writer.writeheader()
    writer.writerows(rows)
    return buffer.getvalue()
