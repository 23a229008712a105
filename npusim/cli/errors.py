"""How the CLI reports errors: one or two lines (a traceback with ``--debug``) and an exit code
of 2 for usage and config errors, 1 for a failing workload (or outputs that cannot be written),
130 when interrupted (Ctrl-C), 143 when terminated (SIGTERM, as ``timeout`` sends). An error raised
while the workload ran names the workload's line it came from (the innermost frame of the user's
own code)."""

from __future__ import annotations

import contextlib
import signal
import sys
import threading
from collections.abc import Iterator

import click

from npusim.callsite import blamed, shown, user_frame
from npusim.errors import ConfigError, InstallError, NpusimError, UsageError

EXIT_WORKLOAD = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 128 + signal.SIGINT
EXIT_TERMINATED = 128 + signal.SIGTERM


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised in the main thread like Ctrl-C so that every clean-up runs (:func:`stoppable`)."""


def npusim_error(error: BaseException) -> BaseException:
    """``error``, or the npusim error it wraps: a library that catches what code it called raised
    and raises its own error holding it (torch's BackendCompilerFailed keeps what a torch.compile
    backend raised as ``inner_exception``) is reported as npusim's error."""
    inner = getattr(error, "inner_exception", None)
    return inner if isinstance(inner, NpusimError) else error


def exit_code_for(error: BaseException) -> int:
    error = npusim_error(error)
    if isinstance(error, Terminated):
        return EXIT_TERMINATED
    if isinstance(error, KeyboardInterrupt):
        return EXIT_INTERRUPTED
    return EXIT_USAGE if isinstance(error, (ConfigError, UsageError)) else EXIT_WORKLOAD


def report(error: BaseException, *, debug: bool, context: str = "") -> int:
    """Print ``error`` for a person and return the exit code to use."""
    if debug:
        import traceback

        traceback.print_exception(error, file=sys.stderr)
    frame = None if debug else user_frame(error)  # the wrapper's traceback passed through the user's code
    error = npusim_error(error)
    kind = "error" if isinstance(error, NpusimError) else f"error ({type(error).__name__})"
    prefix = f"{context}: " if context else ""
    click.echo(f"npusim: {kind}: {prefix}{error}", err=True)
    line = None if debug else blamed(error)  # the user's line an error is about (a race's access), when not where it surfaced
    if line is not None:
        function = f" in {line.function}" if line.function != "<module>" else ""
        code = line.code()
        click.echo(f"        at {line}{function}{': ' + code if code else ''}", err=True)
    elif frame is not None:
        function = f" in {frame.name}" if frame.name != "<module>" else ""
        code = f": {frame.line.strip()}" if frame.line else ""
        click.echo(f"        at {shown(frame.filename)}:{frame.lineno}{function}{code}", err=True)
    if not debug and not isinstance(error, (ConfigError, UsageError, InstallError)):  # a traceback would not help
        click.echo("        (run again with --debug for the full traceback)", err=True)
    return exit_code_for(error)


@contextlib.contextmanager
def stoppable() -> Iterator[None]:
    """Within the block, SIGTERM raises :class:`Terminated` in the main thread (as Ctrl-C raises
    KeyboardInterrupt), so a command stopped by ``timeout`` or ``kill`` cleans up before it exits."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def terminate(signum: int, frame: object) -> None:
        raise Terminated()

    previous = signal.signal(signal.SIGTERM, terminate)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
