"""``npusim run``: simulate a workload on a config, print the summary, write trace and summary."""

from __future__ import annotations

import hashlib
import io
import sys
from pathlib import Path

import click

from npusim import __version__
from npusim.analysis.report import print_report
from npusim.cli.errors import EXIT_WORKLOAD, report
from npusim.config import load_config
from npusim.errors import NpusimError, UsageError
from npusim.files import default_folder_name, write_bytes_atomically, write_json_atomically
from npusim.frontend.session import MAX_SEED, network_quantum_ps, session
from npusim.frontend.workload import parse_param_overrides, run_workload_file
from npusim.trace.chrome import write_chrome_trace
from npusim.trace.selection import LEVELS, trace_selection


@click.command("run")
@click.option("--config", "-c", "config_name", required=True, help="a built-in config (a2, a3) or a YAML path")
@click.argument("workload", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--set", "overrides", multiple=True, metavar="KEY.PATH=VALUE", help="override a config value (repeatable)")
@click.option("--out", "out_dir", type=click.Path(file_okay=False, path_type=Path), help="output folder (default traces/<workload>-<config>/)")
@click.option("--param", "params", multiple=True, metavar="NAME=VALUE", help="override a parameter the workload declares with npusim.param (repeatable)")
@click.option("--no-data", is_flag=True, help="simulate timing only: no tensor values (timing is unchanged)")
@click.option("--seed", default=0, show_default=True, type=click.IntRange(0, MAX_SEED), help="seed of numpy's random generator for the workload")
@click.option("--plot", is_flag=True, help="also save timeline.png (the first 48 lanes) next to the trace")
@click.option("--trace", "trace_level", type=click.Choice(LEVELS), default="all", show_default=True,
              help="what trace.json holds: every event, flow and counter; one slice per op and core; or no trace file")
@click.option("--trace-dies", metavar="RANGES", help="write only these dies' lanes, e.g. 0-15 or 0,2,8-11 (default: all)")
@click.option("--trace-window", metavar="START:END", help="write only what overlaps this simulated time, e.g. 10us:50us (default: all)")
@click.option("--network-quantum", metavar="TIME", help="approximate the bandwidth network for speed: rates change only at multiples "
              "of TIME, e.g. 10ns (default: exact; see docs/architecture.md)")
@click.option("--debug", is_flag=True, help="print full tracebacks")
def run_command(config_name: str, workload: Path, overrides: tuple[str, ...], params: tuple[str, ...], out_dir: Path | None,
                no_data: bool, seed: int, plot: bool, trace_level: str, trace_dies: str | None, trace_window: str | None,
                network_quantum: str | None, debug: bool) -> None:
    """Simulate WORKLOAD (a Python file) on the machine of CONFIG."""
    try:
        loaded = load_config(config_name, overrides)
        param_overrides = parse_param_overrides(params)
        if not workload.is_file():
            raise UsageError(f"workload file {str(workload)!r} does not exist")
        selection = trace_selection(trace_level, trace_dies, trace_window, die_count=loaded.spec.shape.dies)
        network_quantum_ps(network_quantum, loaded)  # refused here, before anything runs, if malformed
        if plot and trace_level == "none":
            raise UsageError("--plot draws the trace's timeline; drop --plot or use --trace all or ops")
    except NpusimError as error:
        sys.exit(report(error, debug=debug))
    out_dir = out_dir or Path("traces") / default_folder_name(workload, loaded.name)
    out_dir.mkdir(parents=True, exist_ok=True)

    failure: BaseException | None = None
    active = None
    try:
        with session(loaded, data=not no_data, seed=seed, params=param_overrides, network_quantum=network_quantum,
                     progress=sys.stderr.isatty()) as active:
            run_workload_file(workload)
    except BaseException as error:  # the workload is arbitrary user code
        if isinstance(error, (KeyboardInterrupt, SystemExit)) and active is None:
            raise
        failure = error
    if active is None:  # the session could not even be built
        sys.exit(report(failure, debug=debug))

    result = active.result
    manifest = {
        "npusim_version": __version__,
        "config": loaded.name,
        "config_source": loaded.source,
        "config_sha256": loaded.sha256,
        "overrides": list(overrides),
        "workload": str(workload),
        "workload_sha256": hashlib.sha256(workload.read_bytes()).hexdigest(),
        "command": ["npusim", *sys.argv[1:]],
        "seed": seed,
        "params": result.params,
        "data": not no_data,
        "status": result.status,
        "trace": selection.describe(),
        "network_quantum": network_quantum,
    }
    if active.pypto_hints:
        manifest["pypto_hints"] = active.pypto_hints  # accepted, not modelled (docs/pypto.md)
    metadata = {"config": loaded.name, "config_sha256": loaded.sha256, "workload": workload.name, "npusim_version": __version__,
                "status": result.status, "op_names": sorted({op.name for op in result.recorder.ops}), "params": result.params,
                "overrides": list(overrides), "seed": seed}
    if network_quantum is not None:
        metadata["network_quantum"] = network_quantum
    written = ["summary.json", "manifest.json"]
    if trace_level != "none":
        write_chrome_trace(result.record, out_dir / "trace.json", metadata=metadata, selection=selection)
        written.insert(0, "trace.json")
    else:
        (out_dir / "trace.json").unlink(missing_ok=True)  # a trace of an earlier run would not be this run's
    write_json_atomically(out_dir / "summary.json", result.summary)
    write_json_atomically(out_dir / "manifest.json", manifest)
    if plot and len(result.recorder):
        from npusim.plot import timeline  # matplotlib is imported only when a plot is asked for

        image = io.BytesIO()
        timeline(result).savefig(image, format="png", dpi=110)
        write_bytes_atomically(out_dir / "timeline.png", image.getvalue())
        written.append("timeline.png")
    print_report(result.summary, title=f"{workload.name} on {loaded.name}")
    opened = " (open trace.json in https://ui.perfetto.dev)" if trace_level != "none" else ""
    click.echo(f"wrote {', '.join(written)} in {out_dir}{opened}")
    if failure is not None:
        report(failure, debug=debug, context=f"workload {workload.name} failed at {result.simulated_us:.3f} us simulated")
        sys.exit(EXIT_WORKLOAD)
