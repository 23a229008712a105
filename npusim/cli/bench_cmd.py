"""``npusim bench collectives``: HCCL's collectives over a range of sizes, hccl_test / nccl-tests style
(:mod:`npusim.analysis.collectives`); exit 2 for a usage or config error, 1 for a failed point."""

from __future__ import annotations

import csv
import dataclasses
import io
import sys
from pathlib import Path

import click

from npusim.analysis.collectives import DTYPES, OPS, check_sweep, measure, sizes
from npusim.cli.errors import report
from npusim.errors import NpusimError, UsageError
from npusim.files import MARKER, Output, StagedFolder
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
        chosen = [name.strip() for name in names.split(",") if name.strip()]
        check_sweep(config_name, overrides, op, level, chosen)
        forced += [f"{level}={name}" for name in chosen]
    folder = out or Path("traces") / f"bench-{op}-{Path(config_name).stem}"
    with StagedFolder(folder) as staged:  # checks the folder can be written before the work
        points = _measure_all(config_name, op, size_list, forced, ranks, dtype, overrides, check)
        rows = [dataclasses.asdict(p) for p in points]
        title = f"{op} on {config_name}{' ' + ' '.join(overrides) if overrides else ''}, {points[0].ranks} ranks, {dtype}"
        manifest = {"command": "npusim bench collectives", "config": config_name, "overrides": list(overrides), "op": op, "dtype": dtype,
                    "ranks": points[0].ranks, "sizes": size_list, "forced": forced, "data": check}
        staged.write([Output.made("bench.csv", lambda: _csv(rows).encode()), Output.made("busbw.png", lambda: _png(points, title)),
                      Output.json(MARKER, manifest)])
        staged.commit(folder)
    click.echo(f"wrote bench.csv, busbw.png and {MARKER} in {folder}")
    return points


def _measure_all(config_name, op, size_list, forced, ranks, dtype, overrides, check):
    """Each size with each forced algorithm, a line printed for each; the fastest per size."""
    points = []
    header = f"{'size':>12} {'count':>12} {'type':>9} {'forced':>16} {'algorithms':>24} {'time us':>12} {'algbw':>8} {'busbw':>8}"
    click.echo(f"# npusim bench collectives: {op} on {config_name}{' ' + ' '.join(overrides) if overrides else ''}, {dtype}; busbw = algbw x "
               f"{BUSBW[op]} (nccl-tests), GB/s = 1e9 B/s; simulated, {'data checked' if check else 'timing only'}")
    click.echo("#" + header[1:])
    fastest = []
    for size in size_list:
        row = []
        for name in forced:
            point = measure(config_name, op, size, ranks=ranks, dtype=dtype, overrides=overrides, forced=name, data=check)
            row.append(point)
            mark = "" if point.correct is None else ("  ok" if point.correct else "  WRONG")
            click.echo(f"{point.size:>12} {point.count:>12} {dtype:>9} {name:>16} {point.algorithms:>24} {point.time_us:>12.3f} "
                       f"{point.algbw:>8.2f} {point.busbw:>8.2f}{mark}")
        points += row
        best = min(p.time_us for p in row)
        fastest.append(f"{format_bytes(row[0].size)} {'/'.join(p.forced for p in row if p.time_us <= best * 1.001)}")
    if len(forced) > 1:
        click.echo("# fastest per size (several: within 0.1%): " + ", ".join(fastest))
    return points


def _png(points, title: str) -> bytes:
    from npusim.plot.collectives import plot_collectives

    image = io.BytesIO()
    plot_collectives(points, title=title).savefig(image, format="png", dpi=110)
    return image.getvalue()


def _csv(rows: list[dict]) -> str:
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=list(rows[0]))
    writer.writeheader()
    writer.writerows(rows)
    return buffer.getvalue()
