"""How far each value of a config can be trusted, as data: the confidence its line's comment gives it.

Every number of a built-in config carries, in the comment of its line, its source and a confidence
tag in brackets (the legend at the top of ``configs/a2.yaml``):

- ``[H]`` a vendor configuration file, or several sources agree; ``[M]`` one reasonable source, or
  derived from one; ``[L]`` conflicting sources, or assumed (no public number);
- two levels joined (``[M/L, knob]``: sources that disagree) count as the lower;
- after the level, ``; note`` qualifies it (``[H; fp32 M]``) and ``, item`` adds a mark: ``knob`` (a
  calibration knob: fit it to measurements rather than trust it) or ``assumed ...`` (``[M, assumed
  equal]``); ``[knob]`` alone is a knob of no stated level;
- a comment holding several tags gives a value every claim it rests on (``[M]; ... [L, knob]``: the
  lower level, the marks of both), except a mapping written on one line whose comment has one tag per
  key (``{size: 1 MiB, alignment: 512}  # ... [H]; ... [M]``): each key takes its own, in order;
- the comment's first word says how the number was obtained when it is ``assumed``, ``calibrated``,
  ``derived`` or ``fitted`` (``# assumed: ...``).

A value an override set (``--set``, a sweep's ``--grid``, a what-if's point) is the user's own
(:data:`USER`), and so is a value whose comment is an override's (the ``config.yaml`` of a run folder
writes ``# --set key=value`` beside it). A value whose comment gives no tag has no stated confidence
(:data:`UNRATED`): a user's own config may say nothing; every value of a built-in config must say it
(``tests/config/test_builtin_configs.py``), except its :data:`LABELS` (``name``, ``description``).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

KeyPath = tuple[str | int, ...]
"""Where a value sits in a config: mapping keys and list indices from the top."""

LEVELS = ("H", "M", "L")
"""The stated levels, most trusted first."""
USER = "user"
"""The level of a value the user gave (an override)."""
UNRATED = "unrated"
"""The level of a value whose comment states no confidence."""

OVERRIDE_ORIGINS = ("--set", "--grid", "what-if")
"""How the loader names the origin of an override (``--set key=value``): the values they set are the user's."""

LABELS: tuple[KeyPath, ...] = (("name",), ("description",))
"""Keys that name and describe a config: labels, not claims about the machine, so they carry no confidence."""

BASES = ("assumed", "calibrated", "derived", "fitted")
"""Words a comment may start with to say how its number was obtained."""

_BRACKETS = re.compile(r"\[([^\[\]]*)\]")
_LEVELS = re.compile(r"(?P<levels>[HML](?:\s*/\s*[HML])*)\s*(?P<rest>(?:[;,].*)?)")


@dataclass(frozen=True)
class Tag:
    """One bracketed confidence tag as written: its ``text`` (``M/L, knob``), ``level`` (the lowest
    of the levels it names; None for ``[knob]`` alone), whether it marks a ``knob``, and whether it
    says ``assumed``."""

    text: str
    level: str | None
    knob: bool
    assumed: bool


def without_tags(comment: str) -> str:
    """``comment`` without its confidence tags (its source alone)."""
    tags = {tag.text for tag in parse_tags(comment)}
    return " ".join(_BRACKETS.sub(lambda match: "" if match.group(1).strip() in tags else match.group(0), comment).split())


def parse_tags(comment: str) -> list[Tag]:
    """The confidence tags of a comment, in order (bracketed text that is no tag, such as
    ``[GM->UB]`` or ``[DtypeMKN]``, is skipped)."""
    tags = []
    for match in _BRACKETS.finditer(comment):
        text = match.group(1).strip()
        stated = _LEVELS.fullmatch(text)
        if stated is not None:
            levels, rest = [level.strip() for level in stated.group("levels").split("/")], stated.group("rest")
        elif text == "knob" or text.startswith(("knob,", "knob;")):
            levels, rest = [], text
        else:
            continue
        items = [item.strip() for item in re.split(r"[;,]", rest) if item.strip()]
        tags.append(Tag(text, lowest(levels) if levels else None, "knob" in items, any(item.startswith("assumed") for item in items)))
    return tags


def lowest(levels: list[str]) -> str:
    """The least trusted of ``levels`` (each H, M or L)."""
    return max(levels, key=LEVELS.index)


@dataclass(frozen=True)
class Confidence:
    """How far a config value can be trusted.

    ``level``: ``H``, ``M`` or ``L`` (the lowest its tags state), :data:`USER` for a value the user
    gave, :data:`UNRATED` when nothing was said; ``tag``: the tags as written (``M/L, knob``;
    ``--set key=value`` for the user's); ``knob``: a calibration knob; ``basis``: how the number was
    obtained (``assumed``, ``calibrated``, ``derived``, ``fitted``, or empty); ``source``: the comment
    of its line (its source), or the override; ``where``: ``FILE:LINE`` or the override."""

    level: str
    tag: str = ""
    knob: bool = False
    basis: str = ""
    source: str = ""
    where: str = ""

    @property
    def low(self) -> bool:
        """Low confidence: stated L (conflicting or assumed), or stated nowhere."""
        return self.level in ("L", UNRATED)

    @property
    def mark(self) -> str:
        """The short mark of reports: ``[L, knob]``, ``[your value]``, ``[no confidence given]``."""
        if self.level == USER:
            return "[your value]"
        if self.level == UNRATED:
            return "[no confidence given]"
        return f"[{self.tag}]"

    def as_dict(self) -> dict[str, Any]:
        """The fields as JSON-able data (summary.json, manifest.json)."""
        return {"level": self.level, "tag": self.tag, "knob": self.knob, "basis": self.basis, "source": self.source, "where": self.where}


NOT_IN_CONFIG = Confidence(UNRATED, source="not in the config: the schema's default", where="schema")
"""The confidence of a key the config does not set (its value is the schema's default)."""


def is_override(where: str) -> bool:
    """Whether a location names an override (``--set key=value``) rather than ``FILE:LINE``."""
    return where.startswith(tuple(f"{origin} " for origin in OVERRIDE_ORIGINS))


def of_comment(comment: str, where: str, tags: list[Tag] | None = None) -> Confidence:
    """The confidence a line's ``comment`` (at ``where``) gives its value; ``tags``: the tags that
    apply (default: all the comment's)."""
    if is_override(comment):
        return Confidence(USER, comment, source=comment, where=where)
    tags = parse_tags(comment) if tags is None else tags
    stated = [tag.level for tag in tags if tag.level is not None]
    first = comment.split(":", 1)[0].split(" ", 1)[0].strip().lower()
    basis = first if first in BASES else "assumed" if any(tag.assumed for tag in tags) else ""
    if not stated:
        return Confidence(UNRATED, "; ".join(tag.text for tag in tags), any(tag.knob for tag in tags), basis, comment, where)
    return Confidence(lowest(stated), "; ".join(tag.text for tag in tags), any(tag.knob for tag in tags), basis, comment, where)


def of_locations(resolved: Mapping[str, Any], locations: Mapping[KeyPath, str]) -> dict[KeyPath, Confidence]:
    """The confidence of every located key path of ``resolved`` (mapping keys and list items), from
    the comment of the line that set it (see the module), or the override that did."""
    confidence: dict[KeyPath, Confidence] = {}
    by_line: dict[str, list[KeyPath]] = {}
    for path, where in locations.items():
        if is_override(where):
            confidence[path] = Confidence(USER, where, source=where, where=where)
        else:
            by_line.setdefault(where, []).append(path)
    files: dict[str, tuple[str, ...]] = {}  # each file's lines, read (and its change checked) once
    for where, paths in by_line.items():
        file, _, line = where.rpartition(":")
        lines = files.get(file)
        if lines is None:
            lines = files[file] = _lines(file) if file and line.isdigit() else ()
        comment = comment_of(lines[int(line) - 1]) if line.isdigit() and 0 < int(line) <= len(lines) else ""
        tags = parse_tags(comment)
        leaves = _one_line_keys(paths, resolved)
        if leaves and len(tags) == len(leaves) > 1:  # a mapping on one line, one tag per key, in order
            for path, tag in zip(leaves, tags):
                confidence[path] = of_comment(comment, where, [tag])
            rest = [path for path in paths if path not in leaves]
        else:
            rest = paths
        whole = of_comment(comment, where, tags)
        for path in rest:
            confidence[path] = whole
    return confidence


def _one_line_keys(paths: list[KeyPath], resolved: Mapping[str, Any]) -> list[KeyPath]:
    """Of the key paths set on one line, the keys of a mapping written there whose values are plain
    (``L1: {size: 1 MiB, alignment: 512}``: size and alignment), in order; empty otherwise."""
    if len(paths) < 2:
        return []
    parent = min(paths, key=len)
    children = [path for path in paths if len(path) == len(parent) + 1 and path[:-1] == parent]
    node = value_at(resolved, parent)
    if not isinstance(node, Mapping) or len(children) != len(paths) - 1:
        return []
    order = {key: index for index, key in enumerate(node)}
    children.sort(key=lambda path: order.get(path[-1], len(order)))
    return [path for path in children if not isinstance(node.get(path[-1]), (Mapping, list))]


ABSENT = object()
"""What :func:`value_at` gives for a key path a config does not have."""


def value_at(data: Any, path: KeyPath) -> Any:
    """The value at ``path`` in a config's plain mapping ``data``, or :data:`ABSENT`."""
    for part in path:
        if isinstance(data, Mapping) and part in data:  # noqa: SIM114 (two branches: each narrows its type)
            data = data[part]
        elif isinstance(data, list) and isinstance(part, int) and part < len(data):
            data = data[part]
        else:
            return ABSENT
    return data


def of_path(resolved: Mapping[str, Any], confidence: Mapping[KeyPath, Confidence], path: KeyPath) -> Confidence:
    """The confidence of the value at ``path`` of ``resolved``: its own, or that of the nearest
    located parent (a list item takes its list's); :data:`NOT_IN_CONFIG` for a key ``resolved`` does
    not have (the schema's default applies)."""
    if value_at(resolved, path) is ABSENT:
        return NOT_IN_CONFIG
    here = path
    while here:
        found = confidence.get(here)
        if found is not None:
            return found
        here = here[:-1]
    return NOT_IN_CONFIG


def _lines(file: str) -> tuple[str, ...]:
    """The lines of ``file`` (none when it cannot be read), read again only when it changed."""
    try:
        status = Path(file).stat()
    except OSError:
        return ()
    return _read_lines(file, status.st_mtime_ns, status.st_size)


@functools.lru_cache(maxsize=16)
def _read_lines(file: str, _mtime_ns: int, _size: int) -> tuple[str, ...]:
    try:
        return tuple(Path(file).read_text(encoding="utf-8").splitlines())
    except (OSError, UnicodeDecodeError):
        return ()


def comment_at(file: str, line: int) -> str:
    """The comment on line ``line`` (from 1) of ``file`` (:func:`comment_of`); empty when there is none."""
    lines = _lines(file)
    return comment_of(lines[line - 1]) if 0 < line <= len(lines) else ""


def comment_of(text: str) -> str:
    """The comment of a YAML line: the text after the first ``#`` that is outside quotes and
    starts the line or follows a blank; empty when there is none."""
    quote = ""
    for index, char in enumerate(text):
        if quote:
            quote = "" if char == quote else quote
        elif char in "'\"" and text[:index].rstrip()[-1:] in ("", ":", "-", "[", "{", ","):  # a quoted scalar starts
            quote = char
        elif char == "#" and (index == 0 or text[index - 1] in " \t"):
            return text[index + 1 :].strip()
    return ""


def dotted(path: KeyPath) -> str:
    """``('die', 'hbm', 'bandwidth')`` as ``die.hbm.bandwidth``."""
    return ".".join(str(part) for part in path)


def key_path(key: str) -> KeyPath:
    """``die.hbm.bandwidth`` (list items by index: ``fabrics.node.links.0.link``) as a key path."""
    return tuple(int(part) if part.isdigit() else part for part in key.split("."))
