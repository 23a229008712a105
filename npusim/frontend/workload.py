"""Workload files and their parameters.

A workload is a Python file run like a script inside a session; a ``main()`` function, if it defines
one, is called. A file with a top-level ``if __name__ == "__main__":`` block is a script written to
be run by Python: it runs as ``__main__`` (its own block decides what runs) and no ``main()`` is
called for it. It declares its parameters with :func:`param`::

    tokens = npusim.param("tokens", 256, "new tokens written per step")

and a run overrides them (``npusim run ... --param tokens=1024``, ``simulate(..., params=...)``).
The values used are recorded in the session (and so in the manifest). :func:`scan_declared_params`
finds the declarations written in a file without running it (sweeps check their parameters with it).
"""

from __future__ import annotations

import ast
import difflib
import runpy
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from npusim.errors import UnknownParameterError, UsageError
from npusim.frontend.session import Session, current_session

WORKLOAD_RUN_NAME = "__npusim_workload__"
SCRIPT_RUN_NAME = "__main__"


def param(name: str, default: Any, help: str = "") -> Any:
    """The value of workload parameter ``name``: the run's override if given (converted to the type
    of ``default``), else ``default``."""
    session = current_session()
    declared = session.params
    if name in declared:
        return declared[name]["value"]
    value = default
    if name in session.param_overrides:
        value = convert_param(name, session.param_overrides[name], default)
    declared[name] = {"value": value, "default": default, "help": help}
    return value


def convert_param(name: str, raw: Any, default: Any) -> Any:
    """``raw`` (often a string from the command line) as the type of ``default``."""
    if not isinstance(raw, str) or isinstance(default, str):
        return raw
    try:
        if isinstance(default, bool):
            lowered = raw.strip().lower()
            if lowered not in ("true", "false", "1", "0", "yes", "no"):
                raise ValueError
            return lowered in ("true", "1", "yes")
        if isinstance(default, int):
            return int(raw)
        if isinstance(default, float):
            return float(raw)
        if isinstance(default, (tuple, list)):
            return type(default)(type(default[0])(part) for part in raw.split(",")) if default else raw
    except ValueError:
        raise UsageError(f"parameter {name}={raw!r}: expected a {type(default).__name__} like its default {default!r}") from None
    return raw


def parse_param_overrides(items: list[str] | tuple[str, ...] | Mapping[str, Any]) -> dict[str, Any]:
    """``["tokens=256", ...]`` (or a mapping) as a dict; a malformed item is a UsageError."""
    if isinstance(items, Mapping):
        return dict(items)
    parsed = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or not name.strip():
            raise UsageError(f"--param {item!r}: write NAME=VALUE, e.g. --param tokens=256")
        parsed[name.strip()] = value
    return parsed


def check_params_used(session: Session) -> None:
    """Every overridden parameter must have been declared by the workload."""
    unknown = [name for name in session.param_overrides if name not in session.params]
    if unknown:
        raise unknown_params_error(unknown, session.params)


def unknown_params_error(unknown: list[str], declared) -> UnknownParameterError:
    """The error for overrides of parameters the workload does not declare, with a did-you-mean."""
    hints = []
    for name in unknown:
        close = difflib.get_close_matches(name, list(declared), n=1)
        hints.append(f"{name!r}" + (f" (did you mean {close[0]!r}?)" if close else ""))
    return UnknownParameterError(f"the workload declares no parameter {', '.join(hints)}; its parameters: {', '.join(sorted(declared)) or 'none'}")


NOT_LITERAL = object()
"""The default of a declaration whose default is an expression (known only when the file runs)."""


@dataclass(frozen=True)
class DeclaredParams:
    """The ``npusim.param(NAME, DEFAULT)`` calls written in a workload file: ``defaults`` maps each
    literal NAME to its DEFAULT (or :data:`NOT_LITERAL`); ``complete`` is False when some call's
    name is an expression, so the file may declare names the scan cannot see."""

    defaults: dict[str, Any]
    complete: bool


def scan_declared_params(path: str | Path) -> DeclaredParams:
    """The parameters the workload file ``path`` declares, read from its source without running it.
    Calls are recognised as ``npusim.param(...)`` (also under ``import npusim as X``) and ``param(...)``
    after ``from npusim import param``; declarations in other modules the file imports are not seen."""
    try:
        tree = ast.parse(Path(path).read_text(encoding="utf-8"), filename=str(path))
    except SyntaxError as error:
        raise UsageError(f"workload {path}:{error.lineno}: syntax error: {error.msg}; fix the file") from None
    modules, functions = set(), set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            modules.update(alias.asname or alias.name for alias in node.names if alias.name == "npusim")
        elif isinstance(node, ast.ImportFrom) and node.module in ("npusim", "npusim.frontend.workload"):
            functions.update(alias.asname or alias.name for alias in node.names if alias.name == "param")
    defaults: dict[str, Any] = {}
    complete = True
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call) or not _is_param_function(node.func, modules, functions):
            continue
        keywords = {keyword.arg: keyword.value for keyword in node.keywords}
        name = node.args[0] if node.args else keywords.get("name")
        default = node.args[1] if len(node.args) > 1 else keywords.get("default")
        if not (isinstance(name, ast.Constant) and isinstance(name.value, str)):
            complete = False
            continue
        try:
            defaults[name.value] = ast.literal_eval(default) if default is not None else NOT_LITERAL
        except (ValueError, TypeError, SyntaxError):
            defaults[name.value] = NOT_LITERAL
    return DeclaredParams(defaults, complete)


def _is_param_function(func: ast.expr, modules: set[str], functions: set[str]) -> bool:
    if isinstance(func, ast.Attribute):
        return func.attr == "param" and isinstance(func.value, ast.Name) and func.value.id in modules
    return isinstance(func, ast.Name) and func.id in functions


def has_main_block(source: str) -> bool:
    """Whether ``source`` has a top-level ``if __name__ == "__main__":`` block."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return False  # running the file reports the error
    for node in tree.body:
        test = node.test if isinstance(node, ast.If) else None
        if (isinstance(test, ast.Compare) and isinstance(test.left, ast.Name) and test.left.id == "__name__"
                and len(test.comparators) == 1 and isinstance(test.comparators[0], ast.Constant)
                and test.comparators[0].value == "__main__"):
            return True
    return False


def run_workload_file(path: str | Path) -> dict:
    """Execute a workload file in the active session; call its ``main()`` if it defines one (unless
    it has its own ``__main__`` block, then it runs as ``__main__``); check that every parameter
    override was declared. Returns the module's globals. The file is the user's own Python, run as
    is; its folder is importable while it runs."""
    path = Path(path)
    if not path.is_file():
        raise UsageError(f"workload file {str(path)!r} does not exist")
    folder = str(path.resolve().parent)
    sys.path.insert(0, folder)
    try:
        script = has_main_block(path.read_text(encoding="utf-8"))
        namespace = runpy.run_path(str(path), run_name=SCRIPT_RUN_NAME if script else WORKLOAD_RUN_NAME)
        entry = namespace.get("main")
        if callable(entry) and not script:
            entry()
    finally:
        sys.path.remove(folder)
    check_params_used(current_session())
    return namespace
