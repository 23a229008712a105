"""A resolved config as YAML with the source of every value: ``npusim config show`` and the
``config.yaml`` of a run folder.

Each value is written on its own line, followed by a comment naming who set it: the comment the
config file wrote on that line (its source and confidence, as every number of a config carries)
and ``FILE:LINE``, or the override (``--set key=value``). A mapping or list that the file wrote on
one line (``L1: {size: 512 KiB, alignment: 32}``) stays on one line. The text loads back
(``yaml.safe_load``) to the resolved mapping, so a run folder's ``config.yaml`` can be run again.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import yaml

from npusim.config.loader import KeyPath, LoadedConfig, builtin_folder


def header(loaded: LoadedConfig) -> str:
    """The first line of ``npusim config show``: name, source, overrides and sha256, as a comment."""
    given = loaded.overrides.items() if isinstance(loaded.overrides, Mapping) else [text.partition("=")[::2] for text in loaded.overrides]
    overrides = "".join(f" --set {key}={value}" for key, value in given)
    return f"# {loaded.name}: {loaded.source}{overrides}  sha256 {loaded.sha256}\n"


def annotated_yaml(loaded: LoadedConfig) -> str:
    """``loaded.resolved`` as YAML, each value with its source comment (see the module)."""
    lines: list[str] = []
    _block(loaded.resolved, (), 0, lines, functools.partial(_source, loaded.locations))
    return "\n".join(lines) + "\n"


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


Source = Callable[[KeyPath, bool], str]  # (path, located even without a comment) -> the comment of its line


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


def _source(locations: Mapping[KeyPath, str], path: KeyPath, bare: bool) -> str:
    """The comment for the value at ``path``: what its config line says and where it is, or the
    override that set it (the nearest located parent's, for a value located nowhere); for a line
    without a comment, ``FILE:LINE`` alone if ``bare``, else nothing."""
    here = path
    while here and here not in locations:
        here = here[:-1]
    where = locations.get(here)
    if where is None:
        return ""
    if not where.startswith(tuple(f"{prefix} " for prefix in ("--set", "--grid"))) and ":" in where:
        file, _, line = where.rpartition(":")
        if line.isdigit():
            said = _comment(file, int(line))
            if said:
                return f"  # {said}  ({_short_name(file)}:{line})"
            return f"  # ({_short_name(file)}:{line})" if bare else ""
    return f"  # {where}"


@functools.lru_cache(maxsize=16)
def _short_name(file: str) -> str:
    """A built-in config by its file name (``a2.yaml``), any other as given."""
    path = Path(file)
    return path.name if path.parent == Path(str(builtin_folder())) else file


@functools.lru_cache(maxsize=16)
def _lines(file: str) -> tuple[str, ...]:
    try:
        return tuple(Path(file).read_text(encoding="utf-8").splitlines())
    except (OSError, UnicodeDecodeError):
        return ()


def _comment(file: str, line: int) -> str:
    """The comment on line ``line`` (from 1) of ``file``: the text after the first ``#`` that is
    outside quotes and starts the line or follows a blank; empty when there is none."""
    lines = _lines(file)
    if not 0 < line <= len(lines):
        return ""
    text, quote = lines[line - 1], ""
    for index, char in enumerate(text):
        if quote:
            quote = "" if char == quote else quote
        elif char in "'\"" and text[:index].rstrip()[-1:] in ("", ":", "-", "[", "{", ","):  # a quoted scalar starts
            quote = char
        elif char == "#" and (index == 0 or text[index - 1] in " \t"):
            return text[index + 1 :].strip()
    return ""
