"""Loading a hardware config: a YAML file or a built-in name -> a validated :class:`SystemSpec`.

A config is a YAML mapping of the keys of :class:`~npusim.config.schema.SystemSpec`. A file may name
a parent with ``extends:`` (merged first: mappings deep-merged, lists and scalars replaced); overrides
(``--set key.path=value``) apply last. Every key remembers the file and line, or the ``--set``, that
gave its value, so that each error reads ``FILE:LINE: key.path: what is wrong; how to fix``.
YAML aliases and merge keys, in files and in override values, are bounded before they are expanded
(:data:`MAX_ALIAS_VALUES`, :data:`MAX_DEPTH`), and a value that contains itself is refused.
"""

from __future__ import annotations

import copy
import difflib
import functools
import hashlib
import json
import os
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path
from types import UnionType
from typing import Any, Union, get_args, get_origin

import yaml
from pydantic import BaseModel, ValidationError
from pydantic.fields import FieldInfo

from npusim.config.confidence import ABSENT, Confidence, KeyPath, key_path, of_locations, of_path, value_at
from npusim.config.registry import KindOf, SettingsOf
from npusim.config.schema import SystemSpec
from npusim.errors import ConfigError


class Locations:
    """For each key path, who set its value: ``FILE:LINE`` or ``--set key=value``. Kept as a tree
    (the keys located below each path), so that forgetting or copying what is below a path costs
    what is there, not the size of the whole config: merging a child config is linear in its keys."""

    def __init__(self) -> None:
        self._where: dict[KeyPath, str] = {}
        self._below: dict[KeyPath, dict[str | int, None]] = {}

    def __setitem__(self, path: KeyPath, where: str) -> None:
        if path:
            self._below.setdefault(path[:-1], {})[path[-1]] = None
        self._where[path] = where

    def __getitem__(self, path: KeyPath) -> str:
        return self._where[path]

    def __contains__(self, path: object) -> bool:
        return path in self._where

    def get(self, path: KeyPath, default: str | None = None) -> str | None:
        return self._where.get(path, default)

    def pop(self, path: KeyPath) -> str:
        """The location of ``path``, forgetting it and everything below it."""
        where = self._where[path]
        self.forget(path)
        return where

    def forget(self, path: KeyPath) -> None:
        """Drop the location of ``path`` and of everything below it."""
        if path:
            self._below.get(path[:-1], {}).pop(path[-1], None)
        stack = [path]
        while stack:
            here = stack.pop()
            self._where.pop(here, None)
            stack.extend(here + (key,) for key in self._below.pop(here, ()))

    def snapshot(self) -> dict[KeyPath, str]:
        """Every located key path and who set it (a copy)."""
        return dict(self._where)

    def copy_below(self, other: Locations, path: KeyPath) -> None:
        """Take from ``other`` the location of ``path`` and of everything below it."""
        stack = [path]
        while stack:
            here = stack.pop()
            if here in other._where:
                self[here] = other._where[here]
            stack.extend(here + (key,) for key in other._below.get(here, ()))

SUFFIX = ".yaml"
EXTENDS = "extends"
_MERGE_TAG = "tag:yaml.org,2002:merge"
_STR_TAG = "tag:yaml.org,2002:str"

MAX_DEPTH = 32
"""Deepest nesting of mappings and lists in a config or an override value (the schema needs 6)."""

MAX_ALIAS_VALUES = 10_000
"""Most values YAML aliases and merge keys may add to a config or an override value beyond those
written in it: far more than a real config uses, and a bound on the work an alias bomb (lists of
aliases of lists of aliases ...) can cause."""


@dataclass(frozen=True)
class LoadedConfig:
    """A validated config and where it came from.

    ``resolved`` is the plain mapping after ``extends`` and overrides, quantities as written
    (``'28 GB/s'``); ``sha256`` is the hash of its canonical JSON (sorted keys), so two runs with the
    same hash simulated the same hardware. ``source`` is the path as given or ``builtin:NAME``.
    ``locations`` says who set each key path of ``resolved``: ``FILE:LINE`` of the file that wrote
    it last, or the override (``--set key=value``); ``confidence`` how far each located value can be
    trusted (:mod:`npusim.config.confidence`: the tag of its line's comment, or the user's own
    value for an override; :meth:`confidence_of` finds a value's).
    """

    spec: SystemSpec
    name: str
    source: str
    resolved: dict[str, Any]
    sha256: str
    overrides: tuple[str, ...] | Mapping[str, object]
    locations: Mapping[KeyPath, str] = field(default_factory=dict)
    confidence: Mapping[KeyPath, Confidence] = field(default_factory=dict)

    def confidence_of(self, key: str | KeyPath) -> Confidence:
        """The confidence of the value at ``key`` (``die.hbm.bandwidth`` or a key path): its own, or
        its nearest located parent's (a list item takes its list's); for a key the config does not
        set, :data:`~npusim.config.confidence.NOT_IN_CONFIG`."""
        path = key_path(key) if isinstance(key, str) else key
        return of_path(self.resolved, self.confidence, path)


@dataclass(frozen=True)
class _ConfigFile:
    """A YAML file to read: ``label`` names it in errors, ``folder`` resolves its relative ``extends``."""

    file: Traversable
    label: str
    folder: Traversable

    @property
    def identity(self) -> str:
        """The same for two names of one file (to detect ``extends`` cycles)."""
        return os.path.realpath(self.file) if isinstance(self.file, Path) else self.label


def builtin_configs() -> list[str]:
    """Names of the configs shipped in ``npusim/configs`` (``a2``, ``a3``), usable wherever a path is."""
    return sorted(entry.name.removesuffix(SUFFIX) for entry in builtin_folder().iterdir() if entry.name.endswith(SUFFIX))


def load_config(config: str | os.PathLike[str], overrides: Sequence[str] | Mapping[str, object] = (), *, origin: str = "--set") -> LoadedConfig:
    """Read, merge, override and validate a config.

    ``config`` is a YAML path or a built-in name (``a3`` or ``a3.yaml``; an existing file wins).
    ``overrides`` are ``'key.path=value'`` strings (the value read as YAML: ``4``, ``3.2TB/s``,
    ``null`` to remove a key) or a mapping ``{'key.path': value}``; they apply in order, after
    ``extends``, and merge like a child config; errors name each one as ``ORIGIN key=value``
    (``origin``: the option that gave them, ``--set``, ``--grid``). Raises :class:`ConfigError`
    naming the file and line (or the ``--set``), the key path and the fix of every problem found.
    """
    start, source = _locate(os.fspath(config))
    resolved, locations = _read_tree(start, ())
    if isinstance(overrides, str):
        overrides = (overrides,)
    given = dict(overrides) if isinstance(overrides, Mapping) else tuple(overrides)
    _apply_overrides(resolved, locations, given, origin)
    spec = _validate(resolved, locations, source)
    canonical = json.dumps(resolved, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
    where = locations.snapshot()
    return LoadedConfig(spec, spec.name, source, resolved, hashlib.sha256(canonical.encode()).hexdigest(), given, where,
                        of_locations(resolved, where))


# -- finding files -----------------------------------------------------------------------------


def builtin_folder() -> Traversable:
    return resources.files("npusim").joinpath("configs")


def _config_file(file: Traversable, label: str, fallback_folder: Traversable) -> _ConfigFile:
    return _ConfigFile(file, label, file.parent if isinstance(file, Path) else fallback_folder)


def _builtin(name: str) -> _ConfigFile | None:
    stem = name.removesuffix(SUFFIX)
    if stem not in builtin_configs():
        return None
    file = builtin_folder().joinpath(stem + SUFFIX)
    return _config_file(file, str(file), builtin_folder())


def _locate(config: str) -> tuple[_ConfigFile, str]:
    """The file ``config`` names and how LoadedConfig.source shows it."""
    path = Path(config)
    if path.is_file():
        return _config_file(path, config, path.parent), config
    builtin = _builtin(config)
    if builtin is not None:
        return builtin, f"builtin:{config.removesuffix(SUFFIX)}"
    what = "is a folder, not a YAML file" if path.is_dir() else "does not exist"
    raise ConfigError(
        f"{config}: {what}, and it is not a built-in config; give the path of a YAML config "
        f"or a built-in name: {', '.join(builtin_configs())}"
    )


def _parent(name: object, child: _ConfigFile, where: str) -> _ConfigFile:
    """The file an ``extends: name`` in ``child`` refers to: a file next to the child, else a built-in."""
    if not isinstance(name, str) or not name.strip():
        raise ConfigError(f"{where}: {EXTENDS}: expected the name of a YAML file or a built-in config, got {name!r}; write e.g. `extends: a2.yaml`")
    candidate = child.folder.joinpath(name)
    if candidate.is_file():
        return _config_file(candidate, str(candidate), child.folder)
    builtin = _builtin(name)
    if builtin is not None:
        return builtin
    raise ConfigError(
        f"{where}: {EXTENDS}: no file {name!r} next to {child.label} (looked for {candidate}) and no built-in "
        f"config of that name ({', '.join(builtin_configs())}); fix the path"
    )


# -- reading YAML with line numbers ------------------------------------------------------------


def _read_tree(config: _ConfigFile, chain: tuple[_ConfigFile, ...]) -> tuple[dict[str, Any], Locations]:
    """``config`` merged over its ``extends`` ancestors, with the location of every key."""
    data, locations = _read_yaml(config)
    if EXTENDS not in data:
        return data, locations
    where = locations.pop((EXTENDS,))
    parent = _parent(data.pop(EXTENDS), config, where)
    seen = chain + (config,)
    identities = [link.identity for link in seen]
    if parent.identity in identities:
        loop = " -> ".join(link.label for link in seen[identities.index(parent.identity):] + (parent,))
        raise ConfigError(f"{where}: {EXTENDS}: cycle {loop}; remove the `extends` that closes the loop")
    base, base_locations = _read_tree(parent, seen)
    _merge(base, data, base_locations, locations, ())
    base_locations[()] = locations[()]
    return base, base_locations


def _read_yaml(config: _ConfigFile) -> tuple[dict[str, Any], Locations]:
    """The mapping of one file and the location of every key. Parsing YAML with line numbers is
    most of the cost of loading a config, and a sweep loads the same files once per point, so the
    parse of each (label, text) is kept; callers get copies they may change."""
    try:
        text = config.file.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as err:
        raise ConfigError(f"{config.label}: cannot read the config ({err}); check the path and that it is UTF-8 text") from None
    return copy.deepcopy(_parse_yaml(config.label, text, builtin=config.folder == builtin_folder()))


_YamlLoader = Union[yaml.SafeLoader, "yaml.CSafeLoader"]
_LIBYAML_LOADER: type[yaml.CSafeLoader] | None = getattr(yaml, "CSafeLoader", None)
"""PyYAML's safe loader on libyaml (~15x faster to compose), where PyYAML was built with it."""


@functools.lru_cache(maxsize=64)
def _parse_yaml(label: str, text: str, *, builtin: bool = False) -> tuple[dict[str, Any], Locations]:
    """``builtin``: a config shipped with npusim, which libyaml composes (a test keeps what it
    composes equal to PyYAML's for each of them); any other text, and any text libyaml refuses, is
    composed by PyYAML, with its nesting bound and its error messages."""
    if builtin and _LIBYAML_LOADER is not None:
        try:
            return _parse_nodes(label, text, _LIBYAML_LOADER)
        except (yaml.YAMLError, ConfigError):
            pass  # said again below, as PyYAML says it
    return _parse_nodes(label, text, _NestingBoundLoader)


def _parse_nodes(label: str, text: str, loader_type: Callable[[str], _YamlLoader]) -> tuple[dict[str, Any], Locations]:
    locations = Locations()
    root, data = _read_nodes(text, label, locations, loader_type=loader_type)
    if not isinstance(data, dict):
        found = "the file is empty" if data is None else f"found a {type(data).__name__}"
        raise ConfigError(f"{label}:1: a config is a mapping of keys (name, product, shape, die, fabrics, or `extends`); {found}")
    assert root is not None  # a mapping came from a node
    locations[()] = f"{label}:{root.start_mark.line + 1}"
    return data, locations


def _read_nodes(text: str, label: str, locations: Locations, *, lines: bool = True, prefix: KeyPath = (),
                loader_type: Callable[[str], _YamlLoader] | None = None) -> tuple[yaml.Node | None, Any]:
    """The YAML node of ``text`` and its Python value, recording in ``locations`` the line of every key and list
    item (``prefix``: where the value will sit, for messages; ``lines``: whether ``label`` is a file). The nodes
    are checked (:func:`_check_nodes`) before any alias is expanded. Raises :class:`ConfigError`, or
    ``yaml.YAMLError`` for text that is not YAML at all. ``loader_type``: the loader's class (default
    :class:`_NestingBoundLoader`)."""
    loader = (loader_type or _NestingBoundLoader)(text)
    try:
        root = loader.get_single_node()
        if root is None:
            return None, None
        _check_nodes(root, label, lines, prefix)
        return root, _to_plain(root, (), locations, label, loader)
    except yaml.MarkedYAMLError as err:
        if not lines:
            raise
        mark = err.problem_mark or err.context_mark
        line = f":{mark.line + 1}" if mark else ""
        raise ConfigError(f"{label}{line}: YAML syntax error: {err.problem or err.context}; fix the file at this line") from None
    except _TooDeep as err:
        raise ConfigError(f"{label}{f':{err.line + 1}' if lines else ''}: nested more than {MAX_DEPTH} levels deep; a config needs far fewer, flatten it") from None
    finally:
        loader.dispose()


class _TooDeep(Exception):
    """Composing YAML reached a node nested more than MAX_DEPTH levels deep, at ``line``."""

    def __init__(self, line: int) -> None:
        super().__init__(line)
        self.line = line


class _NestingBoundLoader(yaml.SafeLoader):
    """PyYAML's safe loader, refusing to compose nodes nested more than MAX_DEPTH levels deep (its
    composer recurses once per level, so deep text would end in a RecursionError after much work)."""

    def __init__(self, text: str) -> None:
        super().__init__(text)
        self._depth = 0

    def compose_node(self, parent: yaml.Node | None, index: int) -> yaml.Node | None:
        if self._depth >= MAX_DEPTH:
            raise _TooDeep(self.peek_event().start_mark.line)  # type: ignore[no-untyped-call]  # PyYAML's stubs leave it untyped
        self._depth += 1
        try:
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1


def _check_nodes(root: yaml.Node, label: str, lines: bool, prefix: KeyPath) -> None:
    """Refuse, on the YAML as composed (an alias is the very node it names, shared, not yet expanded),
    what cannot become a config: a key given twice in one mapping (YAML would silently keep the last),
    a key that is not a name, a value that contains itself through an alias, nesting deeper than
    :data:`MAX_DEPTH`, and aliases or merge keys (``<<``) that would add more than
    :data:`MAX_ALIAS_VALUES` values. Each node is measured once, so this costs the size of the text
    whatever the aliases would expand to."""
    measured: dict[int, tuple[int, int]] = {}  # node -> (values it expands to, levels of nesting); a mapping's own level included
    uses: dict[int, int] = {}
    first_seen: dict[int, tuple[yaml.Node, KeyPath]] = {}
    active: set[int] = set()

    def at(line: int) -> str:
        return f"{label}:{line + 1}" if lines else label

    def where(line: int, path: KeyPath) -> str:
        return f"{at(line)}: {_dotted(prefix + path)}"

    def measure(node: yaml.Node, path: KeyPath, depth: int, line: int) -> tuple[int, int]:
        if depth > MAX_DEPTH:
            raise ConfigError(f"{where(line, path)}: nested more than {MAX_DEPTH} levels deep; a config needs far fewer, flatten it")
        if id(node) in active:
            raise ConfigError(f"{where(line, path)}: a value that contains itself (a recursive alias); remove the alias that refers back")
        uses[id(node)] = uses.get(id(node), 0) + 1
        if id(node) not in measured:
            first_seen[id(node)] = (node, path)
            active.add(id(node))
            measured[id(node)] = measure_children(node, path, depth)
            active.discard(id(node))
        size, levels = measured[id(node)]
        if depth - 1 + levels > MAX_DEPTH:
            raise ConfigError(f"{where(line, path)}: the alias here nests the value more than {MAX_DEPTH} levels deep; use fewer aliases")
        return size, levels

    def measure_children(node: yaml.Node, path: KeyPath, depth: int) -> tuple[int, int]:
        if isinstance(node, yaml.ScalarNode):
            return 1, 1
        size, levels = 1, 0
        if isinstance(node, yaml.SequenceNode):
            for index, item in enumerate(node.value):
                item_size, item_levels = measure(item, path + (index,), depth + 1, node.start_mark.line)
                size, levels = size + item_size, max(levels, item_levels)
            return size, levels + 1
        first_line: dict[str, int] = {}
        for key_node, value_node in node.value:
            line = key_node.start_mark.line
            if key_node.tag == _MERGE_TAG:  # the merged mappings' entries become this mapping's
                sources = value_node.value if isinstance(value_node, yaml.SequenceNode) else [value_node]
                for source in sources:
                    if isinstance(source, yaml.MappingNode):
                        source_size, source_levels = measure(source, path, depth, line)
                        size, levels = size + source_size - 1, max(levels, source_levels - 1)
                continue
            if not isinstance(key_node, yaml.ScalarNode):
                raise ConfigError(f"{at(line)}: a key must be a name, not a {'list' if isinstance(key_node, yaml.SequenceNode) else 'mapping'}")
            if key_node.tag != _STR_TAG:
                raise ConfigError(f"{where(line, path)}: key {key_node.value} is not a name; write keys as words")
            if key_node.value in first_line:
                raise ConfigError(f"{at(line)}: key {key_node.value!r} given twice in one mapping (first at line {first_line[key_node.value] + 1}); keep one")
            first_line[key_node.value] = line
            value_size, value_levels = measure(value_node, path + (key_node.value,), depth + 1, line)
            size, levels = size + value_size, max(levels, value_levels)
        return size, levels + 1

    total, _ = measure(root, (), 1, root.start_mark.line)
    if total - len(measured) > MAX_ALIAS_VALUES:
        shared = [key for key, count in uses.items() if count > 1]
        node, path = first_seen[max(shared, key=lambda key: measured[key][0] * uses[key])]
        raise ConfigError(
            f"{where(node.start_mark.line, path)}: aliases expand this value to {measured[id(node)][0]} values, used "
            f"{uses[id(node)]} times: more than the {MAX_ALIAS_VALUES} values aliases may add (an alias bomb?); use fewer aliases"
        )


def _to_plain(node: yaml.Node, path: KeyPath, locations: Locations, label: str, loader: _YamlLoader) -> Any:
    """The Python value of ``node`` (checked by :func:`_check_nodes`), recording the line of every key and list
    item below ``path``."""
    if isinstance(node, yaml.ScalarNode):
        return loader.construct_object(node)
    if isinstance(node, yaml.SequenceNode):
        items = []
        for index, item in enumerate(node.value):
            locations[path + (index,)] = f"{label}:{item.start_mark.line + 1}"
            items.append(_to_plain(item, path + (index,), locations, label, loader))
        return items
    assert isinstance(node, yaml.MappingNode)  # the one kind of node left
    loader.flatten_mapping(node)  # YAML merge keys (<<: *anchor) become ordinary entries, own keys last
    mapping: dict[str, Any] = {}
    for key_node, value_node in node.value:
        key = loader.construct_object(key_node)
        locations[path + (key,)] = f"{label}:{key_node.start_mark.line + 1}"
        mapping[key] = _to_plain(value_node, path + (key,), locations, label, loader)
    return mapping


# -- merging and overrides ---------------------------------------------------------------------


def _merge(base: dict[str, Any], over: Mapping[str, Any], locations: Locations, over_locations: Locations, prefix: KeyPath) -> None:
    """Merge ``over`` into ``base`` in place, moving the locations of what ``over`` sets from
    ``over_locations`` into ``locations`` (a merged mapping is located where ``over`` wrote it):
    mappings merge recursively, ``null`` removes the key (as in JSON Merge Patch, RFC 7386),
    anything else replaces."""
    for key, value in over.items():
        path = prefix + (key,)
        if value is None:
            locations.forget(path)
            locations[path] = over_locations[path]  # a required key removed is reported where it was removed
            base.pop(key, None)
        elif isinstance(value, Mapping) and isinstance(base.get(key), dict):
            locations[path] = over_locations[path]
            _merge(base[key], value, locations, over_locations, path)
        else:
            _replace(base, key, value, path, locations, over_locations)


def _replace(container: dict[str, Any] | list[Any], key: str | int, value: Any, path: KeyPath, locations: Locations, over_locations: Locations) -> None:
    locations.forget(path)
    locations.copy_below(over_locations, path)
    container[key] = copy.deepcopy(value)  # type: ignore[index]  # a key of a mapping, an index of a list


def _apply_overrides(resolved: dict[str, Any], locations: Locations, overrides: tuple[str, ...] | dict[str, object], origin: str) -> None:
    """Apply overrides in order; every malformed one or unknown key is reported, all at once."""
    items, errors = _override_items(overrides, origin)
    for key, value, label in items:
        path, problem = _override_path(key, resolved)
        if problem:
            errors.append(f"{label}: {key}: {problem}")
        else:
            _set(resolved, locations, path, value, label)
    if errors:
        raise ConfigError(_combine(errors, "the overrides"))


def _override_items(overrides: tuple[str, ...] | dict[str, object], origin: str) -> tuple[list[tuple[str, Any, str]], list[str]]:
    """``(key, value, label)`` of each override, and an error for each malformed one."""
    if isinstance(overrides, dict):
        return [(str(key), value, f"{origin} {key}={value}") for key, value in overrides.items()], []
    items, errors = [], []
    for text in overrides:
        key, equals, raw = text.partition("=")
        if equals and key.strip():
            try:
                items.append((key.strip(), _yaml_value(raw, f"{origin} {text}", key.strip()), f"{origin} {text}"))
            except ConfigError as error:
                errors.append(str(error))
        else:
            errors.append(f"{origin} {text}: malformed override; write KEY.PATH=VALUE, e.g. {origin} die.hbm.bandwidth=3.2TB/s or {origin} shape.nodes=4")
    return items, errors


def _yaml_value(text: str, label: str, key: str) -> Any:
    """``text`` as YAML reads it (``4`` -> 4, ``true`` -> True, ``'3.2 TB/s'`` and ``3.2TB/s`` -> str,
    ``null`` -> None, ``[1, 2]`` -> a list); text YAML cannot read stays the string as written. Its
    aliases are bounded as a file's are; a value that breaks the bounds is a :class:`ConfigError`
    named by ``label`` (the override) and ``key``."""
    try:
        return _read_nodes(text, label, Locations(), lines=False, prefix=tuple(key.split(".")))[1]
    except yaml.YAMLError:
        return text


def _override_path(key: str, resolved: dict[str, Any]) -> tuple[KeyPath, str | None]:
    """The key path ``key`` names, or the reason it names none (with a did-you-mean)."""
    parts = key.split(".")
    if not all(parts):
        return (), "empty part in the key path; separate keys with single dots, e.g. die.hbm.bandwidth"
    path: list[str | int] = []
    node: Any = resolved
    for part in parts:
        here = _dotted(tuple(path))
        if isinstance(node, list):
            if not part.isdigit() or int(part) >= len(node):
                return (), f"{here} is a list of {len(node)} entries; use an index 0..{len(node) - 1}"
            path.append(int(part))
            node = node[int(part)]
            continue
        if node is not None and not isinstance(node, dict):
            return (), f"{here} is a value ({node!r}), not a mapping; set {here} itself"
        allowed = _allowed_keys(tuple(path), resolved)
        if allowed is not None:
            allowed |= set(node or ())
            if part not in allowed:
                return (), _unknown_key(part, allowed, here)
        path.append(part)
        node = node.get(part) if isinstance(node, dict) else None
    return tuple(path), None


def _set(resolved: dict[str, Any], locations: Locations, path: KeyPath, value: Any, label: str) -> None:
    """Merge ``value`` at ``path`` (as a child config would: a mapping merges, ``None`` removes),
    creating the missing mappings on the way; everything set is located at ``label``."""
    container: Any = resolved
    for depth, part in enumerate(path[:-1]):
        if isinstance(container, dict) and not isinstance(container.get(part), (dict, list)):
            container[part] = {}
            locations[path[: depth + 1]] = label
        container = container[part]
    over_locations = Locations()
    for sub in _sub_paths(value):
        over_locations[path + sub] = label
    if isinstance(container, dict):
        _merge(container, {str(path[-1]): value}, locations, over_locations, path[:-1])
    elif isinstance(value, Mapping) and isinstance(container[path[-1]], dict):
        _merge(container[path[-1]], value, locations, over_locations, path)
    else:
        _replace(container, path[-1], value, path, locations, over_locations)


def _sub_paths(value: Any) -> list[KeyPath]:
    """``()`` and the path of every key and item inside ``value``."""
    children = value.items() if isinstance(value, Mapping) else enumerate(value) if isinstance(value, list) else ()
    return [()] + [(key,) + sub for key, child in children for sub in _sub_paths(child)]


# -- the schema, seen from a key path ----------------------------------------------------------


def _declared(field: FieldInfo) -> Any:
    """What a field declares: its annotation, or the registry marker that decides its model."""
    markers = [m for m in field.metadata if isinstance(m, (KindOf, SettingsOf))]
    return markers[0] if markers else field.annotation


def _models_of(annotation: Any, data: Any) -> list[type[BaseModel]]:
    """The spec models ``annotation`` stands for: the model of an optional section, or of a section
    whose registered ``kind`` (in ``data``) decides its model."""
    if isinstance(annotation, KindOf):
        model = annotation.model_for(data)
        return [model] if model is not None else []
    if isinstance(annotation, SettingsOf):
        return []
    members = get_args(annotation) if get_origin(annotation) in (Union, UnionType) else (annotation,)
    return [m for m in members if isinstance(m, type) and issubclass(m, BaseModel)]


def _annotation_at(path: KeyPath, resolved: dict[str, Any]) -> Any:
    """The schema type of the value at ``path`` (None when the schema does not declare it)."""
    annotation: Any = SystemSpec
    for depth, part in enumerate(path):
        models = _models_of(annotation, value_at(resolved, path[:depth]))
        if models:
            fields = [m.model_fields[part] for m in models if part in m.model_fields]
            if not fields:
                return None
            annotation = _declared(fields[0])
        elif isinstance(annotation, SettingsOf):
            annotation = annotation.model_for(part)
        elif get_origin(annotation) in (dict, list):
            annotation = get_args(annotation)[-1]
        else:
            return None
    return annotation


def _field_at(path: KeyPath, resolved: dict[str, Any]) -> FieldInfo | None:
    """The schema field that declares the key at ``path``, if any."""
    if not path:
        return None
    for model in _models_of(_annotation_at(path[:-1], resolved), value_at(resolved, path[:-1])):
        if path[-1] in model.model_fields:
            return model.model_fields[path[-1]]
    return None


def _allowed_keys(path: KeyPath, resolved: dict[str, Any]) -> set[str] | None:
    """The keys the schema accepts in the mapping at ``path``; None when any key is (``vector.latency``).
    A section picked by its ``kind:`` that names no kind yet accepts ``kind`` only."""
    annotation = _annotation_at(path, resolved)
    if isinstance(annotation, SettingsOf):
        return set(annotation.registry.names())
    if isinstance(annotation, KindOf) and annotation.model_for(value_at(resolved, path)) is None:
        return {"kind"}
    models = _models_of(annotation, value_at(resolved, path))
    if models:
        return set().union(*(m.model_fields for m in models))
    return None if get_origin(annotation) is dict else set()


def _unknown_key(key: str, allowed: set[str], here: str) -> str:
    match = difflib.get_close_matches(key, sorted(allowed), n=1)
    if match:
        return f"unknown key {key!r}; did you mean {match[0]!r}?"
    if not allowed:
        return f"unknown key {key!r}; {here} takes no keys"
    return f"unknown key {key!r}; remove it, or use one of the keys of {here}: {', '.join(sorted(allowed))}"


def _inherited_hint(path: KeyPath, locations: Locations) -> str:
    """When the mapping's ``kind`` was changed by another file than the one that set ``path``."""
    kind_at, key_at = locations.get(path[:-1] + ("kind",)), _where(path, locations)
    if kind_at is None or kind_at.rpartition(":")[0] == key_at.rpartition(":")[0]:
        return ""
    return f" (inherited: {kind_at} changed the kind; drop the key there with `{path[-1]}: null`)"


# -- validation and error messages -------------------------------------------------------------


def _validate(resolved: dict[str, Any], locations: Locations, source: str) -> SystemSpec:
    try:
        return SystemSpec.model_validate(resolved)
    except ValidationError as err:
        lines = sorted({line for error in err.errors(include_url=False) for line in _explain_all(error, resolved, locations)}, key=_reading_order)
        raise ConfigError(_combine(lines, source)) from None


def _explain_all(error: Mapping[str, Any], resolved: dict[str, Any], locations: Locations) -> list[str]:
    """The lines of one pydantic error: a check of a whole model may report several problems, one
    per line, each starting with the key path it is about (``die.hbm.size: ...``)."""
    message = str(error.get("ctx", {}).get("error", error["msg"]))
    at = tuple(error["loc"])
    if error["type"] != "value_error" or not isinstance(value_at(resolved, at), dict) or not message.strip():
        return [_explain(error, resolved, locations)]
    lines = []
    for line in message.splitlines():
        key, colon, problem = line.partition(": ")
        path = _mentioned_path(key, at, resolved) if colon and _KEY_PATH.fullmatch(key) else None
        lines.append(f"{_where(path, locations)}: {_dotted(path)}: {problem}" if path else _explain({**error, "ctx": {"error": line}}, resolved, locations))
    return lines


def _explain(error: Mapping[str, Any], resolved: dict[str, Any], locations: Locations) -> str:
    """One pydantic error as ``WHERE: key.path: problem; fix``."""
    path = tuple(error["loc"])
    kind, ctx, given = error["type"], error.get("ctx", {}), _short(error.get("input"))
    field = _field_at(path, resolved)
    meaning = f" [{field.description}]" if field is not None and field.description else ""
    if kind == "extra_forbidden":
        allowed = (_allowed_keys(path[:-1], resolved) or set()) | ({EXTENDS} if len(path) == 1 else set())
        problem = _unknown_key(str(path[-1]), allowed, _dotted(path[:-1])) + _inherited_hint(path, locations)
    elif kind == "missing":
        parent = f"under {_dotted(path[:-1])}" if len(path) > 1 else "at the top level"
        problem = f"missing required key {path[-1]!r}{meaning}; add it {parent} (see docs/configs.md)"
    elif kind in ("value_error", "assertion_error"):
        problem = str(ctx.get("error", error["msg"]))
        if isinstance(value_at(resolved, path), dict):  # a check of a whole model: locate the key it names
            path = _mentioned_path(problem, path, resolved) or path or ("fabrics",)
        if problem.endswith("must be positive"):
            problem += "; use a value greater than zero"
    else:
        problem = f"{_must(error['msg'])}, got {given}; {_FIXES.get(kind, 'see docs/configs.md for this key')}{meaning}"
    return f"{_where(path, locations)}: {_dotted(path)}: {problem}"


_FIXES = {
    "int_type": "write a whole number, e.g. 8",
    "int_parsing": "write a whole number, e.g. 8",
    "int_from_float": "write a whole number, e.g. 8",
    "float_type": "write a number, e.g. 0.9",
    "float_parsing": "write a number, e.g. 0.9",
    "greater_than": "give a larger value",
    "greater_than_equal": "give a larger value",
    "less_than": "give a smaller value",
    "less_than_equal": "give a smaller value",
    "literal_error": "use one of the values listed",
    "string_type": "write text, in quotes if it looks like a number or holds ': '",
    "model_type": "write a mapping of keys here",
    "model_attributes_type": "write a mapping of keys here",
    "dict_type": "write a mapping of keys here",
    "list_type": "write a list of entries here",
}


def _must(message: str) -> str:
    return "must be " + message[len("Input should be "):] if message.startswith("Input should be ") else message


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


_KEY_PATH = re.compile(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*(?:->[A-Za-z_]\w*)?|\[\d+\])+")
"""A key path in a message: names joined by dots (a name may be a move, ``L1->L0A``), list indices in brackets."""
_KEY_PART = re.compile(r"[A-Za-z_]\w*(?:->[A-Za-z_]\w*)?|\d+")


def _mentioned_path(message: str, at: KeyPath, resolved: dict[str, Any]) -> KeyPath | None:
    """The first key path written in ``message`` (``fabrics.node.links[0].a``) that exists in the config,
    read from ``at`` or one of its ancestors: where a model-level check points to."""
    for match in _KEY_PATH.finditer(message):
        parts = tuple(int(p) if p.isdigit() else p for p in _KEY_PART.findall(match.group()))
        for depth in range(len(at), -1, -1):
            if value_at(resolved, at[:depth] + parts) is not ABSENT:
                return at[:depth] + parts
    return None


def _where(path: KeyPath, locations: Locations) -> str:
    """Who set ``path``, or else its nearest ancestor (a missing key is reported at its parent)."""
    for depth in range(len(path), -1, -1):
        if path[:depth] in locations:
            return locations[path[:depth]]
    raise AssertionError("the top level is always located")


def _dotted(path: KeyPath) -> str:
    return ".".join(str(part) for part in path) or "(top level)"


def _reading_order(line: str) -> tuple[int, str, int]:
    """Errors in files first, by file and line; then those of overrides, in order of their text."""
    where = line.split(": ", 1)[0]
    file, _, number = where.rpartition(":")
    return (0, file, int(number)) if number.isdigit() else (1, line, 0)


def _combine(lines: list[str], what: str) -> str:
    return lines[0] if len(lines) == 1 else f"{len(lines)} errors in {what}:\n" + "\n".join(lines)
