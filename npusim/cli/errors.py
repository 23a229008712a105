"""How the CLI reports errors: one or two lines (a traceback with ``--debug``) and an exit code
of 2 for usage and config errors, 1 for a failing workload."""

from __future__ import annotations

import sys
import traceback

import click

from npusim.errors import ConfigError, NpusimError, UsageError

EXIT_WORKLOAD = 1
EXIT_USAGE = 2


def exit_code_for(error: BaseException) -> int:
    return EXIT_USAGE if isinstance(error, (ConfigError, UsageError)) else EXIT_WORKLOAD


def report(error: BaseException, *, debug: bool, context: str = "") -> int:
    """Print ``error`` for a person and return the exit code to use."""
    if debug:
        traceback.print_exception(error, file=sys.stderr)
    kind = "error" if isinstance(error, NpusimError) else f"error ({type(error).__name__})"
    prefix = f"{context}: " if context else ""
    click.echo(f"npusim: {kind}: {prefix}{error}", err=True)
    if not debug and not isinstance(error, (ConfigError, UsageError)):
        click.echo("        (run again with --debug for the full traceback)", err=True)
    return exit_code_for(error)
