"""A resolved config as YAML with the source of every value: ``npusim config show`` and the
``config.yaml`` of a run folder.

Each value is written on its own line, followed by a comment naming who set it: the comment the
config file wrote on that line (its source and confidence, as every number of a config carries)
and ``FILE:LINE``, or the override (``--set key=value``) marked ``[your value]``; a value whose
line states no confidence is marked ``[no confidence given]`` (:mod:`npusim.config.confidence`).
A mapping or list that the file wrote on one line (``L1: {size: 512 KiB, alignment: 32}``) stays on
one line. The text loads back (``yaml.safe_load``) to the resolved mapping, so a run folder's
``config.yaml`` can be run again (with the same confidence: its comments carry the tags, and an
override's comment marks the user's value). :func:`confidence_summary` counts the values by
confidence, as comment lines.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import yaml

from npusim.config.confidence import LABELS, LEVELS, UNRATED, USER, KeyPath, comment_at, is_override
from npusim.config.loader import LoadedConfig, builtin_folder


def header(loaded: LoadedConfig) -> str:
    """The first line of ``npusim config show``: name, source, overrides and sha256, as a comment."""
    given = loaded.overrides.items() if isinstance(loaded.overrides, Mapping) else [text.partition("=")[::2] for text in loaded.overrides]
    overrides = "".join(f" --set {key}={value}" for key, value in given)
    return f"# {loaded.name}: {loaded.source}{overrides}  sha256 {loaded.sha256}\n"


def annotated_yaml(loaded: LoadedConfig) -> str:
    """``loaded.resolved`` as YAML, each value with its source comment (see the module)."""
    lines: list[str] = []
    _block(loaded.resolved, (), 0, lines, functools.partial(_source, loaded))
    return "\n".join(lines) + "\n"


def values(resolved: Mapping[str, Any], path: KeyPath = ()) -> list[KeyPath]:
    """The key paths of the config's values: every plain value, a list of plain values counting as
    one (``pipes: [SCALAR, ...]``), a list of mappings as its entries' values; not its
    :data:`~npusim.config.confidence.LABELS`."""
    found: list[KeyPath] = []
    for key, child in resolved.items():
        here = path + (key,)
        if here in LABELS:
            continue
        if isinstance(child, Mapping):
            found += values(child, here)
        elif isinstance(child, list) and any(isinstance(item, (Mapping, list)) for item in child):
            for index, item in enumerate(child):
                found += values(item, here + (index,)) if isinstance(item, Mapping) else [here + (index,)]
        else:
            found.append(here)
    return found


def confidence_record(loaded: LoadedConfig) -> dict[str, str]:
    """Every value's confidence by dotted key, as a run's manifest records it: the tag as written
    (``M/L, knob``), ``user`` for a value the user gave, ``unrated`` when none is stated."""
    record = {}
    for path in values(loaded.resolved):
        confidence = loaded.confidence_of(path)
        record[".".join(str(part) for part in path)] = confidence.tag if confidence.level in LEVELS else confidence.level
    return record


def confidence_summary(loaded: LoadedConfig) -> str:
    """Comment lines counting the config's values by confidence (the last lines of ``npusim config
    show``): how many are H, M, L (and knobs), the user's own, and stated nowhere."""
    levels = [loaded.confidence_of(path) for path in values(loaded.resolved)]
    count = {level: sum(c.level == level for c in levels) for level in (*LEVELS, USER, UNRATED)}
    knobs = sum(c.knob for c in levels)
    parts = [f"{count[level]} {level}" for level in LEVELS] + [f"{knobs} calibration knobs"]
    if count[USER]:
        parts.append(f"{count[USER]} given by you (--set)")
    if count[UNRATED]:
        parts.append(f"{count[UNRATED]} with no confidence given")
    return (f"# confidence of its {len(levels)} values: {', '.join(parts)}\n"
            "# [H] vendor file or sources agree, [M] one source or derived, [L] conflicting or assumed; a verdict that rests\n"
            "# on an [L] value says so (npusim run / report: \"rests on\"; npusim whatif ranks the values the time is sensitive to)\n")


def _scalar(value: Any) -> str:
    """One value (or a mapping or list) as YAML on one line."""
    return _repeated(value) if type(value) in _REPEATED else _one_line(value)


def _one_line(value: Any) -> str:
    text: str = yaml.safe_dump(value, default_flow_style=True, allow_unicode=True, sort_keys=False, width=1 << 30)
    return text.removesuffix("\n").removesuffix("\n...")


_REPEATED = (str, int, bool, type(None))
"""The kinds of scalar a config repeats (keys, quantities, counts): each is dumped once (not
floats: 0.0 and -0.0 are equal, yet written apart)."""
_repeated = functools.lru_cache(maxsize=1024, typed=True)(_one_line)


Source = Callable[[KeyPath, bool], str]  # (path, a value's line rather than a mapping's head) -> the comment of its line


def _block(value: Mapping[str, Any] | list[Any], path: KeyPath, indent: int, lines: list[str], source: Source) -> None:
    """Append the entries of a mapping or list, each on its line with its comment."""
    pad = " " * indent
    entries = list(value.items()) if isinstance(value, Mapping) else list(enumerate(value))
    for key, child in entries:
        here = path + (key,)
        head = f"{pad}{_scalar(key)}:" if isinstance(value, Mapping) else f"{pad}-"
        if isinstance(child, (Mapping, list)) and child and not _written_on_one_line(child, here, source):
            lines.append(head + source(here, False))
            _block(child, here, indent + 2, lines, source)
        else:
            lines.append(f"{head} {_scalar(child)}{source(here, True)}")


def _written_on_one_line(value: Mapping[str, Any] | list[Any], path: KeyPath, source: Source) -> bool:
    """Whether every entry of ``value`` is a plain value set where ``value`` itself was."""
    entries = value.items() if isinstance(value, Mapping) else enumerate(value)
    mine = source(path, True)
    return all(not isinstance(child, (Mapping, list)) and source(path + (key,), True) == mine for key, child in entries)


def _source(loaded: LoadedConfig, path: KeyPath, bare: bool) -> str:
    """The comment for the value at ``path``: what its config line says and where it is, or the
    override that set it (the nearest located parent's, for a value located nowhere); for a line
    without a comment, ``FILE:LINE`` alone if ``bare`` (a value's line), else nothing. A value's
    line is marked when the value is the user's or states no confidence."""
    locations = loaded.locations
    here = path
    while here and here not in locations:
        here = here[:-1]
    where = locations.get(here)
    if where is None:
        return ""
    if is_override(where):
        return f"  # {where}  [your value]" if bare else f"  # {where}"
    if ":" in where:
        file, _, line = where.rpartition(":")
        if line.isdigit():
            said = comment_at(file, int(line))
            unstated = " [no confidence given]" if bare and path not in LABELS and loaded.confidence_of(path).level == UNRATED else ""
            if said:
                return f"  # {said}{unstated}  ({_short_name(file)}:{line})"
            if not bare:
                return ""
            return f"  #{unstated}  ({_short_name(file)}:{line})" if unstated else f"  # ({_short_name(file)}:{line})"
    return f"  # {where}"


@functools.lru_cache(maxsize=16)
def _short_name(file: str) -> str:
    """A built-in config by its file name (``a2.yaml``), any other as given."""
    path = Path(file)
    return path.name if path.parent == Path(str(builtin_folder())) else file
