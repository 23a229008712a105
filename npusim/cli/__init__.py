"""The ``npusim`` command line: ``run``, ``config show|validate``, and the analyses ``sweep`` and ``whatif``."""

from __future__ import annotations

import click

from npusim import __version__
from npusim.cli.compare_cmd import compare_command
from npusim.cli.config_cmd import config_group
from npusim.cli.report_cmd import report_command
from npusim.cli.run import run_command
from npusim.cli.sweep_cmd import sweep_command
from npusim.cli.validate_cmd import validate_command
from npusim.cli.whatif_cmd import whatif_command


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="npusim")
def cli() -> None:
    """npusim: a cycle-approximate simulator of Huawei Ascend NPUs (Atlas A2 / A3)."""


cli.add_command(run_command)
cli.add_command(report_command)
cli.add_command(compare_command)
cli.add_command(config_group)
cli.add_command(validate_command)
cli.add_command(sweep_command)
cli.add_command(whatif_command)


def main() -> None:
    """Console-script entry point."""
    cli(prog_name="npusim")
