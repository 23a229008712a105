"""``npusim config``: show a resolved hardware config, or check one.

``show`` prints the config after ``extends`` and ``--set`` as YAML (quantities with their units),
each value with its source (the comment its config line carries, with its confidence tag, and
FILE:LINE, or the ``--set``, marked as your value), headed by its source and sha256 and followed by
the count of its values by confidence; ``validate`` prints ``OK: ...`` or every located error. A config
error is printed to stderr and exits with code 2.
"""

from __future__ import annotations

from collections.abc import Sequence

import click

from npusim.config import LoadedConfig, load_config
from npusim.config.annotated import annotated_yaml, confidence_summary, header
from npusim.errors import ConfigError


def _load(config: str, overrides: Sequence[str] = ()) -> LoadedConfig:
    """The loaded config, or exit 2 after printing the config error to stderr."""
    try:
        return load_config(config, overrides)
    except ConfigError as err:
        click.echo(str(err), err=True)
        raise click.exceptions.Exit(2) from None


@click.group("config")
def config_group() -> None:
    """Show and check hardware configs (a YAML path, or a built-in name: a2, a3)."""


@config_group.command("show")
@click.argument("config", metavar="NAME|PATH")
@click.option("--set", "overrides", multiple=True, metavar="KEY.PATH=VALUE", help="Override one value, e.g. --set shape.nodes=4 (repeatable).")
def show(config: str, overrides: tuple[str, ...]) -> None:
    """Print the resolved config NAME|PATH as YAML, each value with its source."""
    loaded = _load(config, overrides)
    click.echo(header(loaded) + annotated_yaml(loaded) + confidence_summary(loaded), nl=False)


@config_group.command("validate")
@click.argument("path")
def validate(path: str) -> None:
    """Check the config PATH (or a built-in name) and report every error."""
    loaded = _load(path)
    click.echo(f"OK: {path} ({loaded.name}, {loaded.spec.shape.dies} dies)")
