"""The axes of a sweep and their cartesian product.

An axis is a config key (``die.hbm.bandwidth``) or a workload parameter (``param.tile``) with the
values to try. On the command line one axis is ``--grid KEY=V1,V2,...``: values are separated by
commas and spaces around them are dropped; a value that holds a comma is written in double quotes
(``--grid 'fabrics.node.links.0.link.bandwidth="28 GB/s","56 GB/s"'``; CSV quoting, ``""`` is a quote
inside quotes). From Python an axis is a mapping entry ``{KEY: [V1, V2]}``.
"""

from __future__ import annotations

import csv
import itertools
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from npusim.errors import UsageError

PARAM_PREFIX = "param."


@dataclass(frozen=True)
class Axis:
    """One swept key and its values, in the order given."""

    key: str
    values: tuple[Any, ...]

    @property
    def is_param(self) -> bool:
        """A workload parameter (``param.NAME``) rather than a config key."""
        return self.key.startswith(PARAM_PREFIX)

    @property
    def param_name(self) -> str:
        return self.key[len(PARAM_PREFIX):]


@dataclass(frozen=True)
class Point:
    """One simulation of a sweep: config overrides (``key=value`` texts, applied after the sweep's
    fixed ones), workload parameters, and the value of each axis as text (for tables and files)."""

    overrides: tuple[str, ...]
    params: dict[str, Any]
    values: dict[str, str]


def value_text(value: Any) -> str:
    """How a value is written in an override, a results file and a point key: text as is, anything
    else as JSON (``4``, ``true``, ``null``), which the config loader reads back as the same value."""
    return value if isinstance(value, str) else json.dumps(value)


def parse_grid_option(text: str) -> Axis:
    """``KEY=V1,V2,...`` (the text of one ``--grid``) as an axis."""
    key, equals, values = text.partition("=")
    key = key.strip()
    if not equals or not key:
        raise UsageError(f"--grid {text!r}: write KEY=V1,V2,... e.g. --grid die.hbm.bandwidth=1.6TB/s,3.2TB/s or --grid param.tile=8192,16384")
    try:
        fields = next(csv.reader([values], skipinitialspace=True, strict=True), [])
    except csv.Error as error:
        raise UsageError(f"--grid {text!r}: cannot split the values ({error}); separate values with commas and put a value that holds a comma in double quotes") from None
    return make_axis(key, [field.strip() for field in fields], origin=f"--grid {text!r}")


def make_axis(key: str, values: Sequence[Any], *, origin: str) -> Axis:
    """An axis after checking its key and values; ``origin`` names where they were written."""
    if isinstance(key, str) and key.startswith(PARAM_PREFIX) and not key[len(PARAM_PREFIX):].isidentifier():
        raise UsageError(f"{origin}: {key!r} does not name a parameter; write param.NAME with the name the workload gives npusim.param")
    if not isinstance(key, str) or not key or any(not part for part in key.split(".")):
        raise UsageError(f"{origin}: the key {key!r} is not a dotted key path; write e.g. die.hbm.bandwidth or param.tile")
    if isinstance(values, (str, bytes)) or not isinstance(values, Sequence) or not values:
        raise UsageError(f"{origin}: give {key} a list of one or more values, e.g. {key}=V1,V2")
    texts = [value_text(value) for value in values]
    if "" in texts:
        raise UsageError(f"{origin}: value {texts.index('') + 1} of {key} is empty; remove the stray comma")
    repeated = sorted({text for text in texts if texts.count(text) > 1})
    if repeated:
        raise UsageError(f"{origin}: {key} lists {', '.join(map(repr, repeated))} more than once; list each value once")
    return Axis(key, tuple(values))


def axes_from(grid: Mapping[str, Sequence[Any]] | Sequence[str]) -> list[Axis]:
    """The axes of ``grid``: a mapping ``{KEY: [values]}`` or ``--grid`` texts; at least one, each key once."""
    if isinstance(grid, Mapping):
        axes = [make_axis(key, values, origin=f"grid[{key!r}]") for key, values in grid.items()]
    elif isinstance(grid, str):
        axes = [parse_grid_option(grid)]
    else:
        axes = [parse_grid_option(text) for text in grid]
    if not axes:
        raise UsageError("nothing to sweep: give at least one axis, e.g. --grid die.hbm.bandwidth=1.6TB/s,3.2TB/s (or use npusim run for one point)")
    keys = [axis.key for axis in axes]
    twice = sorted({key for key in keys if keys.count(key) > 1})
    if twice:
        raise UsageError(f"the grid gives {', '.join(twice)} more than once; give each key once with all its values")
    return axes


def points_of(axes: Sequence[Axis]) -> list[Point]:
    """The cartesian product of ``axes``, the last axis varying fastest."""
    points = []
    for combination in itertools.product(*(axis.values for axis in axes)):
        overrides, params, values = [], {}, {}
        for axis, value in zip(axes, combination):
            values[axis.key] = value_text(value)
            if axis.is_param:
                params[axis.param_name] = value
            else:
                overrides.append(f"{axis.key}={value_text(value)}")
        points.append(Point(tuple(overrides), params, values))
    return points
