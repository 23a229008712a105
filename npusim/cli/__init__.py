"""The ``npusim`` command line: ``run``, ``config show|validate``, and the analyses ``sweep`` and ``whatif``.

Each command's module is imported when the command is looked up to run it (or to show its own
``--help``), so a command does not pay for the imports of the others; ``npusim --help`` lists the
commands by their summaries without importing any."""

from __future__ import annotations

import atexit
import contextlib
import gc
import importlib
import os
import sys
import threading
from collections.abc import Iterator, MutableMapping
from gettext import gettext
from typing import TextIO

import click

from npusim import __version__
from npusim.errors import InstallError, UsageError

COMMANDS = {
    "bench": ("npusim.cli.bench_cmd:bench_group", "Benchmark the simulated machine: HCCL's collectives over a range of sizes (hccl_test style)."),
    "compare": ("npusim.cli.compare_cmd:compare_command", "Compare two run folders: what changed from FOLDER_A to FOLDER_B."),
    "config": ("npusim.cli.config_cmd:config_group", "Show and check hardware configs (a YAML path, or a built-in name: a2, a3)."),
    "report": ("npusim.cli.report_cmd:report_command", "Print the report of FOLDER, the output folder of an `npusim run`."),
    "run": ("npusim.cli.run:run_command", "Simulate WORKLOAD (a Python file) on the machine of CONFIG."),
    "sweep": ("npusim.cli.sweep_cmd:sweep_command", "Simulate WORKLOAD on CONFIG at every point of the --grid axes, in parallel."),
    "validate": ("npusim.cli.validate_cmd:validate_command", "Simulate the measured transfers and kernels of the calibration data and compare."),
    "whatif": ("npusim.cli.whatif_cmd:whatif_command", "Rank the config values of CONFIG the end-to-end time of WORKLOAD is most sensitive to (each "
               "moved -/+ a step, the runs in parallel), with each value's confidence and source."),
}
"""Command name -> ``module:attribute`` of its click command, and its summary: the first sentence
of its help, which ``npusim --help`` lists (a test keeps the two equal)."""


@contextlib.contextmanager
def lasting_objects() -> Iterator[None]:
    """CPython's garbage collector paused while the block makes objects that last as long as the
    process (a command's modules, a run's config and its pydantic validators), which then go
    straight to the oldest generation (gc.freeze, gc.unfreeze): while the heap grows by importing,
    the collector would otherwise walk all of it again at each 25% of growth for the little garbage
    importing leaves (~0.1 s of full collections before `npusim run` simulates), and young
    collections would walk the new objects after. The caller's collector state is restored."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        gc.unfreeze()
        if enabled:
            gc.enable()


class LazyCommands(MutableMapping[str, click.Command]):
    """A click group's commands by name, each imported from its ``module:attribute`` the first
    time it is looked up; until then known by its summary."""

    def __init__(self, where: dict[str, tuple[str, str]]) -> None:
        self._where = dict(where)
        self._loaded: dict[str, click.Command] = {}

    def __getitem__(self, name: str) -> click.Command:
        if name not in self._loaded:
            module, attribute = self._where[name][0].split(":")
            with lasting_objects():
                self._loaded[name] = getattr(importlib.import_module(module), attribute)
        return self._loaded[name]

    def __setitem__(self, name: str, command: click.Command) -> None:
        self._where[name] = ("", "")  # imported: no module to import, no summary to list
        self._loaded[name] = command

    def __delitem__(self, name: str) -> None:
        del self._where[name]
        self._loaded.pop(name, None)

    def __iter__(self) -> Iterator[str]:
        return iter(self._where)

    def __len__(self) -> int:
        return len(self._where)

    def listed(self, name: str) -> click.Command:
        """The command if it is imported, else a stand-in with its summary as help, to list it."""
        return self._loaded.get(name) or click.Command(name, help=self._where[name][1])


class LazyGroup(click.Group):
    """A group of :class:`LazyCommands`, listed by their summaries (importing none)."""

    commands: LazyCommands

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """click's listing (click.Group.format_commands), of the commands as :meth:`LazyCommands.listed`."""
        commands = [(name, command) for name in self.list_commands(ctx) if not (command := self.commands.listed(name)).hidden]
        if commands:
            limit = formatter.width - 6 - max(len(name) for name, _ in commands)
            with formatter.section(gettext("Commands")):
                formatter.write_dl([(name, command.get_short_help_str(limit)) for name, command in commands])


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="npusim")
def cli() -> None:
    """npusim: a cycle-approximate simulator of Huawei Ascend NPUs (Atlas A2 / A3)."""


cli.commands = LazyCommands(COMMANDS)


class PrintedOutput:
    """``sys.stdout`` while a command runs: once the reader of the pipe it writes to has gone
    (``npusim run ... | head -3``), what is printed after is dropped instead of failing the command,
    so a closed pipe ends only the printing (the run folder is written as always, the exit code is
    the command's). Everything else is the stream's own."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        try:
            return self._stream.write(text)
        except BrokenPipeError:
            self._reader_gone()
            return len(text)

    def flush(self) -> None:
        try:
            self._stream.flush()
        except BrokenPipeError:
            self._reader_gone()

    def _reader_gone(self) -> None:
        """Point the stream's file descriptor at /dev/null: what it still holds, and all that follows, goes nowhere."""
        null = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(null, self._stream.fileno())
        finally:
            os.close(null)

    def __getattr__(self, name: str) -> object:
        if name == "buffer":  # writing past this object (click rewraps a stream's buffer) would fail again
            raise AttributeError(name)
        return getattr(self._stream, name)


BLAS_THREAD_VARIABLES = ("OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "OMP_NUM_THREADS", "GOTO_NUM_THREADS")
"""The environment variables by which the BLAS libraries numpy and torch load take their thread count
(OpenBLAS reads the first, then GOTO's and OpenMP's; MKL its own, then OpenMP's)."""


def one_blas_thread(environ: MutableMapping[str, str]) -> None:
    """Sets the numerics' BLAS to one thread (OpenBLAS and MKL) unless the user chose a thread count
    by any of :data:`BLAS_THREAD_VARIABLES`; called before numpy is first imported, which is when
    the libraries read them. The simulated kernels' numerics are many small matrix products (a
    cube's fractal tiles: 32,768 of them in the MC2 example with data); a BLAS thread per core
    contending for two shared cores made that run 14x slower (335 s against 24 s wall), and a sweep
    already runs one point per core. The outputs are the same bytes either way
    (benchmarks/RESULTS.md, "MC2 with data"); set e.g. ``OPENBLAS_NUM_THREADS=4`` to choose."""
    if not any(name in environ for name in BLAS_THREAD_VARIABLES):
        environ["OPENBLAS_NUM_THREADS"] = "1"
        environ["MKL_NUM_THREADS"] = "1"


def main() -> None:
    """Console-script entry point: the command, then the end of the process (:func:`exit_now`)."""
    one_blas_thread(os.environ)
    if sys.stdout is not None and hasattr(sys.stdout, "fileno"):
        sys.stdout = PrintedOutput(sys.stdout)
    try:
        try:
            cli(prog_name="npusim")
        except (InstallError, UsageError) as error:  # from any command, as it first imports the engine (NPUSIM_ENGINE): what to do, not a traceback
            from npusim.cli.errors import report

            raise SystemExit(report(error, debug=False)) from None
    except SystemExit as end:  # how click ends every command it runs (standalone mode)
        exit_now(end)
    finally:
        # the process ends here: its objects (a whole simulated machine after a run) need no final
        # garbage collection, which would walk every one of them (~0.3 s after the README's run)
        gc.freeze()


def exit_now(end: SystemExit) -> None:
    """End the process with ``end``'s exit status as ``sys.exit`` does, without tearing its objects
    down: the exit functions run (atexit), stdout and stderr are flushed, then ``os._exit`` (freeing
    the modules and a whole simulated machine after a run, one object at a time, takes ~20 ms of the
    README's run for nothing). Raises ``end`` instead (the ordinary exit) where that could lose
    anything: a status that is not a number, another thread still running, or output that cannot
    be flushed (a closed pipe: Python's own exit then says so)."""
    code = 0 if end.code is None else end.code
    if not isinstance(code, int) or threading.active_count() != 1:
        raise end
    atexit._run_exitfuncs()
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except (OSError, ValueError):  # a closed pipe or stream
        raise end from None
    os._exit(code)
