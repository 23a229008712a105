"""``npusim run``: simulate a workload on a config, print the summary, write the run folder.

Everything the command line can get wrong is checked before simulating (exit 2, nothing written):
the config, the workload's parameters against its declarations, the trace options and the output
folder (created, writable, not a file, not a folder of something else; its path fixed before the
workload runs). A usage error the workload meets while it runs (an API misused) exits 2 too and
writes nothing. The default folder is ``traces/<workload>-<config>``, with ``-<8 hex digits>`` of
the run's settings (``--set``, ``--param``, ``--no-data``, ``--seed``, ``--network-quantum``) when
it has any. The run folder is written whole into a temporary folder beside ``--out`` and put in
place with one rename (npusim.files), so ``--out`` always holds one complete run:

- a run replaces the run in ``--out``; a good run it replaces moves to ``<out>.prev`` (replacing
  the one there), a failed one is deleted (what was there is decided on as the run is put in
  place, so two runs into one ``--out`` at once lose neither);
- a failed run never replaces a good one: it goes to ``<out>.failed`` (``--force`` puts it in
  ``--out`` anyway, the good run then moving to ``<out>.prev``);
- only npusim's own run folders are replaced, moved or deleted (their marker, npusim.files.MARKER).

Ctrl-C (or SIGTERM) stops the run, writes nothing and exits 130 (143).

Where it can and a core looks idle, the run folder is written on two cores: a forked copy of the
process writes most of a large ``trace.json`` while the process writes the rest
(``npusim.files.Forked``), and prints the report meanwhile; the same bytes, and the same errors, as one process writes
(``NPUSIM_FORK=never`` writes it in one process, ``always`` on two whatever the load).
"""

from __future__ import annotations

import contextlib
import functools
import gc
import io
import json
import sys
from collections.abc import Callable, Collection, Iterator
from pathlib import Path

import click

from npusim import __version__
from npusim.analysis.outputs import RUN_FOLDER_FILES, run_folder_files
from npusim.analysis.report import print_report
from npusim.cli import lasting_objects
from npusim.cli.errors import EXIT_USAGE, exit_code_for, report, stoppable
from npusim.config import LoadedConfig, load_config
from npusim.config.annotated import confidence_record
from npusim.engine import engine_record
from npusim.errors import MemoryLimitError, NpusimError, OutputError, UsageError
from npusim.files import FolderMark, Output, StagedFolder, default_folder_name, folder_mark, fork_mode, output_path
from npusim.frontend.memory import MemoryBudget, parse_memory
from npusim.frontend.session import MAX_SEED, Session, SimResult, network_quantum_ps, session, young_gc_threshold
from npusim.frontend.workload import WorkloadSource, check_param_overrides, parse_param_overrides, read_workload, run_workload_file
from npusim.isa.racecheck import RACE_MODES
from npusim.trace.chrome import TraceOnTwoCores, pays_on_two_cores, write_chrome_trace
from npusim.trace.selection import LEVELS, TraceSelection, trace_selection

PREVIOUS_SUFFIX = ".prev"  # <out>.prev: the good run a later run replaced
FAILED_SUFFIX = ".failed"  # <out>.failed: a failed run that did not replace the good run in <out>


@click.command("run")
@click.option("--config", "-c", "config_name", required=True, help="a built-in config (a2, a3) or a YAML path")
@click.argument("workload", type=click.Path(dir_okay=False, path_type=Path))
@click.argument("script_args", nargs=-1, type=click.UNPROCESSED, metavar="[-- SCRIPT_ARGS]...")
@click.option("--set", "overrides", multiple=True, metavar="KEY.PATH=VALUE", help="override a config value (repeatable)")
@click.option("--out", "out_dir", type=click.Path(file_okay=False, path_type=Path),
              help="output folder (default traces/<workload>-<config>/, -<hash> of --set, --param, --no-data, --seed, --network-quantum "
                   "added when given); the run it held moves to <out>.prev")
@click.option("--force", is_flag=True, help="put a failed run in --out even over a good run (default: in <out>.failed)")
@click.option("--param", "params", multiple=True, metavar="NAME=VALUE", help="override a parameter the workload declares with npusim.param (repeatable)")
@click.option("--no-data", is_flag=True, help="simulate timing only: no tensor values (timing is unchanged)")
@click.option("--seed", default=0, show_default=True, type=click.IntRange(0, MAX_SEED), help="seed of numpy's random generator for the workload")
@click.option("--plot", is_flag=True, help="also save timeline.png (the critical path's cores first, up to 32 lanes) next to the trace")
@click.option("--trace", "trace_level", type=click.Choice(LEVELS), default="all", show_default=True,
              help="what trace.json holds: every event, flow and counter; one slice per op and core; or no trace file")
@click.option("--trace-dies", metavar="RANGES", help="write only these dies' lanes, e.g. 0-15 or 0,2,8-11 (default: all)")
@click.option("--trace-window", metavar="START:END", help="write only what overlaps this simulated time, e.g. 10us:50us (default: all)")
@click.option("--network-quantum", metavar="TIME", help="approximate the bandwidth network for speed: rates change only at multiples "
              "of TIME, e.g. 10ns (default: exact; see docs/architecture.md)")
@click.option("--max-memory", "max_memory", metavar="SIZE", help="the memory the run may use, e.g. 8GiB (default: what the machine has "
              "available as it starts): a launch estimated to need more is refused before it simulates, a run that uses more is stopped")
@click.option("--races", type=click.Choice(RACE_MODES), default="warn", show_default=True,
              help="pipe races of ISA kernels (a read of bytes another pipe or core writes, unordered): warn, fail the run, or no check")
@click.option("--debug", is_flag=True, help="print full tracebacks")
def run_command(config_name: str, workload: Path, script_args: tuple[str, ...], overrides: tuple[str, ...], params: tuple[str, ...],
                out_dir: Path | None, force: bool, no_data: bool, seed: int, plot: bool, trace_level: str, trace_dies: str | None,
                trace_window: str | None, network_quantum: str | None, max_memory: str | None, races: str, debug: bool) -> None:
    """Simulate WORKLOAD (a Python file) on the machine of CONFIG. What follows ``--`` is the
    script's own command line (its ``sys.argv[1:]``, as ``python WORKLOAD ARGS`` gives it)."""
    with stoppable():
        try:
            _run(config_name, workload, overrides, params, out_dir, force, not no_data, seed, plot, trace_level, trace_dies, trace_window,
                 network_quantum, max_memory, races, debug, script_args)
        except KeyboardInterrupt as stop:  # before or after simulating (during it, _simulate says when)
            click.echo("npusim: interrupted; nothing was written", err=True)
            sys.exit(exit_code_for(stop))


def _run(config_name: str, workload: Path, overrides: tuple[str, ...], params: tuple[str, ...], out_dir: Path | None, force: bool,
         data: bool, seed: int, plot: bool, trace_level: str, trace_dies: str | None, trace_window: str | None,
         network_quantum: str | None, max_memory: str | None, races: str, debug: bool, script_args: tuple[str, ...] = ()) -> None:
    try:
        with lasting_objects():  # the config, its validators, the modules of its ops and fabrics
            loaded = load_config(config_name, overrides)
            param_overrides = parse_param_overrides(params)
            source = read_workload(workload)  # read once: what runs is what is hashed
            check_param_overrides(source, param_overrides)
            selection = trace_selection(trace_level, trace_dies, trace_window, die_count=loaded.spec.shape.dies)
            network_quantum_ps(network_quantum, loaded)  # refused here, before anything runs, if malformed
            fork_mode()  # NPUSIM_FORK too
            memory = MemoryBudget(parse_memory(max_memory), f"--max-memory {max_memory}") if max_memory else MemoryBudget.of_machine()
            if plot and trace_level == "none":
                raise UsageError("--plot draws the trace's timeline; drop --plot or use --trace all or ops")
            shown = out_dir or Path("traces") / default_folder_name(workload, loaded.name, run_settings(overrides, params, data, seed,
                                                                                                           network_quantum))
            out = output_path(shown)  # fixed now: the workload may change the working folder
            folder = StagedFolder(out, also=(suffixed(out, PREVIOUS_SUFFIX), suffixed(out, FAILED_SUFFIX)), legacy=legacy_run_mark)
    except NpusimError as error:
        sys.exit(report(error, debug=debug))

    with folder, run_collector():  # the folder is removed unless committed: on every failure below, an interrupt included
        active, failure = _simulate(loaded, source, data, seed, param_overrides, network_quantum, memory, races, debug, script_args)
        gc.freeze()  # see run_collector
        result = active.result
        assert result is not None
        if failure is not None and exit_code_for(failure) == EXIT_USAGE:  # the workload misused an API: as a usage error before simulating
            sys.exit(report(failure, debug=debug, context=f"workload {workload.name} stopped at {result.simulated_us:.3f} us simulated; "
                                                          "nothing was written"))
        engine = engine_record()  # which engine ran: compiled or interpreted (npusim.engine)
        manifest = {
            "npusim_version": __version__,
            **engine,
            "run_id": folder.id,
            "config": loaded.name,
            "config_source": loaded.source,
            "config_sha256": loaded.sha256,
            "overrides": list(overrides),
            "workload": str(workload),
            "workload_sha256": source.sha256,
            "command": ["npusim", *sys.argv[1:]],
            "seed": seed,
            "params": result.params,
            "data": data,
            "status": result.status,
            "error": result.error,
            "trace": selection.describe(),
            "network_quantum": network_quantum,
            "races": races,
            "config_confidence": confidence_record(loaded),  # what each value of the run rests on: its tag, or user (--set)
        }
        if active.pypto_hints:
            manifest["pypto_hints"] = active.pypto_hints  # accepted, not modelled (docs/pypto.md)
        metadata = {"config": loaded.name, "config_sha256": loaded.sha256, "workload": workload.name, "npusim_version": __version__,
                    "status": result.status, "op_names": sorted({op.name for op in result.recorder.ops}), "params": result.params,
                    "overrides": list(overrides), "seed": seed}
        if network_quantum is not None:
            metadata["network_quantum"] = network_quantum
        outputs = run_outputs(result, loaded, manifest, metadata, selection, plot)
        destination = placement(out, ok=failure is None, force=force)
        printed = []  # the report is printed while another core writes the trace, if one does

        def print_it() -> None:
            print_report(result.summary, title=f"{workload.name} on {loaded.name}", engine=str(engine["engine"]))
            printed.append(True)

        try:
            written = folder.write(outputs, meanwhile=print_it, ok=failure is None)
            folder.commit(destination, previous=suffixed(out, PREVIOUS_SUFFIX))
        except OutputError as error:
            sys.exit(report(error, debug=debug))
        except MemoryError:  # after a run that used up the machine's memory (its error says where): nothing was written
            if failure is not None:
                report(failure, debug=debug, context=f"workload {workload.name} failed at {result.simulated_us:.3f} us simulated")
            sys.exit(report(OutputError(f"cannot write the run folder {str(destination)!r}: the machine has no memory left for it; nothing "
                                        f"was written and {str(destination)!r} is as it was"), debug=debug))
        except OSError as error:
            if not printed:  # the terminal's error, not the folder's
                raise
            sys.exit(report(OutputError(f"cannot write the run folder {str(destination)!r}: {error.strerror or error}; nothing was written "
                                        f"and {str(destination)!r} is as it was"), debug=debug))
    opened = " (open trace.json in https://ui.perfetto.dev)" if trace_level != "none" else ""
    kept = f"; {shown} keeps the earlier good run (--force replaces it)" if destination != out else ""
    click.echo(f"wrote {', '.join(written)} in {shown if destination == out else suffixed(shown, FAILED_SUFFIX)}{opened}{kept}")
    if failure is not None:
        context = f"workload {workload.name} failed at {result.simulated_us:.3f} us simulated"
        sys.exit(report(failure, debug=debug, context=context))


def _simulate(loaded: LoadedConfig, source: WorkloadSource, data: bool, seed: int, params: dict, network_quantum: str | None,
              memory: MemoryBudget | None, races: str, debug: bool, script_args: tuple[str, ...] = ()) -> tuple[Session, BaseException | None]:
    """Run the workload in a session: the session and the workload's failure, if it failed. Ctrl-C
    (SIGTERM) ends the command here, saying how far the simulation got; so does a run that needs
    more memory than it may use (exit 2: writing the run folder would need more still)."""
    active = None
    try:
        with session(loaded, data=data, seed=seed, params=params, network_quantum=network_quantum, races=races,
                     progress=sys.stderr.isatty(), max_memory=memory) as active:
            run_workload_file(source, script_args)
    except KeyboardInterrupt as stop:
        where = f" at {active.now_us:,.3f} us simulated" if active is not None else ""
        click.echo(f"npusim: interrupted{where}; nothing was written", err=True)
        sys.exit(exit_code_for(stop))
    except MemoryLimitError as error:
        sys.exit(report(error, debug=debug))
    except BaseException as error:  # the workload is arbitrary user code
        if active is None:  # the session could not even be built
            sys.exit(report(error, debug=debug))
        return active, error
    return active, None


@contextlib.contextmanager
def run_collector() -> Iterator[None]:
    """CPython's garbage collector while a run is simulated and its folder written: at the
    session's young-generation threshold from start to end (a lower one restored as the session
    ends would set off collections that walk the whole simulated machine: ~0.3 s after the
    README's run), and blind to what the session left once it is over (``_run`` freezes it,
    gc.freeze), so that writing the folder collects only what writing allocates. Restored after."""
    with young_gc_threshold():
        try:
            yield
        finally:
            gc.unfreeze()


def run_outputs(result: SimResult, loaded: LoadedConfig, manifest: dict, metadata: dict, selection: TraceSelection, plot: bool) -> list[Output]:
    """The files of a run folder, in the order they are written: add a file here."""
    outputs = []
    if selection.level != "none":
        outputs.append(Output("trace.json", lambda path: write_chrome_trace(result.record, path, metadata=metadata, selection=selection),
                              start=(lambda path: TraceOnTwoCores(result.record, path, metadata=metadata, selection=selection))
                              if pays_on_two_cores(result.record) else None))
    outputs.append(Output.json("summary.json", result.summary))
    outputs.append(Output.json("manifest.json", manifest))
    files = functools.cache(lambda: run_folder_files(result.record, loaded, result.summary["ops"]))  # made as the first is written (as another core writes the trace)

    def file_named(name: str) -> Callable[[], bytes]:
        return lambda: files()[name]

    outputs.extend(Output.made(name, file_named(name)) for name in RUN_FOLDER_FILES)  # config.yaml, op_summary.csv, pipe_utilization.csv
    if plot and len(result.recorder):
        outputs.append(Output("timeline.png", lambda path: _save_timeline(result, path)))
    return outputs


def _save_timeline(result: SimResult, path: Path) -> None:
    from npusim.plot import timeline  # matplotlib is imported only when a plot is asked for

    image = io.BytesIO()
    timeline(result).savefig(image, format="png", dpi=110)
    path.write_bytes(image.getvalue())


def run_settings(overrides: tuple[str, ...], params: tuple[str, ...], data: bool, seed: int, network_quantum: str | None) -> list[str]:
    """The options of a run that change what is simulated, as given: the default run folder's name
    holds their hash (npusim.files.default_folder_name), so runs with different settings do not
    replace each other."""
    return [*(f"--set {override}" for override in overrides), *(f"--param {param}" for param in params), *([] if data else ["--no-data"]),
            *([f"--seed {seed}"] if seed else []), *([f"--network-quantum {network_quantum}"] if network_quantum is not None else [])]


def placement(out: Path, *, ok: bool, force: bool) -> Path:
    """Where a run goes: ``out``, or ``<out>.failed`` for a failed run that would replace a good
    one without ``force`` (what it replaces is decided on as it is committed: StagedFolder.commit)."""
    return suffixed(out, FAILED_SUFFIX) if not ok and not force and holds_good_run(out) else out


def holds_good_run(folder: Path) -> bool:
    """Whether ``folder`` holds a run of npusim's that ended well (its marker says so)."""
    mark = folder_mark(folder, legacy_run_mark)
    return mark is not None and mark.ok


LEGACY_RUN_FILES = frozenset({"trace.json", "summary.json", "manifest.json", "config.yaml", "op_summary.csv", "pipe_utilization.csv",
                              "timeline.png"})
"""The files of a run folder written by npusim 0.1.0 before run folders carried their marker."""


def legacy_run_mark(folder: Path, entries: Collection[str]) -> FolderMark | None:
    """A run folder of npusim from before markers (npusim.files.LegacyMark): nothing but the files
    of :data:`LEGACY_RUN_FILES` and a manifest.json of npusim's (its version and workload hash)."""
    if "manifest.json" not in entries or not LEGACY_RUN_FILES.issuperset(entries):
        return None
    try:
        manifest = json.loads((folder / "manifest.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(manifest, dict) or not isinstance(manifest.get("npusim_version"), str) or not isinstance(manifest.get("workload_sha256"), str):
        return None
    return FolderMark("", "run", manifest.get("status") == "ok", tuple(sorted(entries)))


def suffixed(folder: Path, suffix: str) -> Path:
    return folder.with_name(folder.name + suffix)
