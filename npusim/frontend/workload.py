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
import functools
import hashlib
import operator
import sys
import types
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from npusim.errors import UnknownParameterError, UsageError, WorkloadError
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
"""The default of a declaration whose default is an expression known only when the file runs."""


@dataclass(frozen=True)
class DeclaredParams:
    """The ``npusim.param(NAME, DEFAULT)`` calls written in a workload file: ``defaults`` maps each
    literal NAME to its DEFAULT (or :data:`NOT_LITERAL`); ``complete`` is False when some call's
    name is an expression, so the file may declare names the scan cannot see."""

    defaults: dict[str, Any]
    complete: bool


def scan_declared_params(workload: str | Path | WorkloadSource) -> DeclaredParams:
    """The parameters the workload file declares, read from its source without running it, with
    those of the modules of its own folder it imports (each file read once, whatever imports it:
    importing one runs its top level, and any of its functions the workload calls may declare).
    Calls are recognised as ``npusim.param(...)`` (also under ``import npusim as X``) and ``param(...)``
    after ``from npusim import param``. The scan is ``complete`` unless some call's name is an
    expression, or a file imports a relative module or a local one that cannot be read or parsed
    (running the workload reports that); modules outside the folder are taken to declare nothing."""
    source = workload if isinstance(workload, WorkloadSource) else read_workload(workload)
    tree = parsed(source)
    folder = source.path.parent
    defaults: dict[str, Any] = {}
    complete = True
    files = [tree]
    scanned = {source.path.resolve()}
    while files:
        declared, file_complete, imported = _declarations(files.pop(0), folder)
        complete = complete and file_complete
        for name, default in declared.items():
            # two files declaring one name with different literal defaults: the run tells which
            defaults[name] = default if defaults.get(name, default) == default else NOT_LITERAL
        for module in imported:
            resolved = module.resolve()
            if resolved in scanned:
                continue
            scanned.add(resolved)
            try:
                files.append(ast.parse(module.read_bytes(), filename=str(module)))
            except (OSError, SyntaxError, ValueError):
                complete = False
    return DeclaredParams(defaults, complete)


def parsed(source: WorkloadSource) -> ast.Module:
    """The workload file parsed; a UsageError naming the line if it is not Python."""
    try:
        return source.tree
    except SyntaxError as error:
        raise UsageError(f"workload {source.path}:{error.lineno}: syntax error: {error.msg}; fix the file") from None


def _declarations(tree: ast.Module, folder: Path) -> tuple[dict[str, Any], bool, list[Path]]:
    """The ``param`` calls of one parsed file: the literal names with their defaults; whether every
    call's name is literal and no import is relative; the files of ``folder``'s modules it imports."""
    modules, functions = set(), set()
    complete = True
    imported: list[Path] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            modules.update(alias.asname or alias.name for alias in node.names if alias.name == "npusim")
            for alias in node.names:
                imported.extend(_local_module_files(folder, alias.name))
        elif isinstance(node, ast.ImportFrom):
            if node.module in ("npusim", "npusim.frontend.workload"):
                functions.update(alias.asname or alias.name for alias in node.names if alias.name == "param")
            if node.level:
                complete = False
            elif node.module:
                imported.extend(_local_module_files(folder, node.module))
                for alias in node.names:  # ``from package import module``
                    imported.extend(_local_module_files(folder, f"{node.module}.{alias.name}"))
    constants = _module_constants(tree)
    defaults: dict[str, Any] = {}
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call) or not _is_param_function(node.func, modules, functions):
            continue
        keywords = {keyword.arg: keyword.value for keyword in node.keywords}
        name = node.args[0] if node.args else keywords.get("name")
        default = node.args[1] if len(node.args) > 1 else keywords.get("default")
        if not (isinstance(name, ast.Constant) and isinstance(name.value, str)):
            complete = False
            continue
        defaults[name.value] = NOT_LITERAL if default is None else _constant(default, constants)
    return defaults, complete, imported


_ARITHMETIC = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.FloorDiv: operator.floordiv,
               ast.Div: operator.truediv, ast.Mod: operator.mod, ast.LShift: operator.lshift}
_LARGEST = 2**64  # a constant beyond this is left to the run (and so is every step towards one)


def _constant(node: ast.expr, constants: Mapping[str, ast.expr], depth: int = 0) -> Any:
    """The value of ``node`` when it is a literal, a name the module binds once to a constant, or
    arithmetic on numbers of those (``48 * 8 * TILE``); else :data:`NOT_LITERAL`."""
    if depth > 32:
        return NOT_LITERAL
    if isinstance(node, ast.Name):
        bound = constants.get(node.id)
        return NOT_LITERAL if bound is None else _constant(bound, constants, depth + 1)
    if isinstance(node, ast.BinOp) and type(node.op) in _ARITHMETIC:
        left, right = _constant(node.left, constants, depth + 1), _constant(node.right, constants, depth + 1)
        numbers = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in (left, right))
        if not numbers or (isinstance(node.op, ast.LShift) and not 0 <= right <= 64):
            return NOT_LITERAL
        try:
            value = _ARITHMETIC[type(node.op)](left, right)
        except (ArithmeticError, TypeError, ValueError):
            return NOT_LITERAL
        return value if abs(value) <= _LARGEST else NOT_LITERAL
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        value = _constant(node.operand, constants, depth + 1)
        return -value if isinstance(value, (int, float)) and not isinstance(value, bool) else NOT_LITERAL
    if isinstance(node, (ast.Tuple, ast.List)):
        items = [_constant(item, constants, depth + 1) for item in node.elts]
        if any(item is NOT_LITERAL for item in items):
            return NOT_LITERAL
        return tuple(items) if isinstance(node, ast.Tuple) else items
    try:
        return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return NOT_LITERAL


def _module_constants(tree: ast.Module) -> dict[str, ast.expr]:
    """The names the module's top level binds once (``TILE = 16384``, ``M, K = 256, 128``) and the
    file binds nowhere else, with the expression each is bound to."""
    stores: dict[str, int] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            stores[node.id] = stores.get(node.id, 0) + 1
    bound: dict[str, ast.expr] = {}
    for statement in tree.body:
        if isinstance(statement, ast.Assign) and len(statement.targets) == 1:
            target, value = statement.targets[0], statement.value
        elif isinstance(statement, ast.AnnAssign) and statement.value is not None:
            target, value = statement.target, statement.value
        else:
            continue
        if isinstance(target, ast.Name):
            bound[target.id] = value
        elif isinstance(target, ast.Tuple) and isinstance(value, ast.Tuple) and len(target.elts) == len(value.elts):
            bound.update((t.id, v) for t, v in zip(target.elts, value.elts) if isinstance(t, ast.Name))
    return {name: value for name, value in bound.items() if stores.get(name) == 1}


def _local_module_files(folder: Path, module: str) -> list[Path]:
    """The files of ``folder`` that importing ``module`` (dotted) runs: each package's
    ``__init__.py`` on the way and the module's own file (none when it is not a module there)."""
    files = []
    path = folder
    for part in module.split("."):
        path = path / part
        if path.with_suffix(".py").is_file():
            files.append(path.with_suffix(".py"))
            break
        if not path.is_dir():
            break
        if (path / "__init__.py").is_file():
            files.append(path / "__init__.py")
    return files


def check_param_overrides(source: WorkloadSource, overrides: Mapping[str, Any]) -> None:
    """Check ``overrides`` against the declarations of ``source`` before it runs: a value that does
    not convert to the type of a literal default is a UsageError, and so is a name the file does
    not declare when the scan sees all its declarations (:attr:`DeclaredParams.complete`); a name
    the scan cannot see is checked when the workload has run (:func:`check_params_used`). Without
    overrides there is nothing to scan for: the file is only parsed (a UsageError if it is not Python)."""
    if not overrides:
        parsed(source)
        return
    declared = scan_declared_params(source)
    unknown = []
    for name, raw in overrides.items():
        default = declared.defaults.get(name, NOT_LITERAL)
        if default is not NOT_LITERAL:
            convert_param(name, raw, default)
        elif name not in declared.defaults and declared.complete:
            unknown.append(name)
    if unknown:
        raise unknown_params_error(unknown, declared.defaults)


def _is_param_function(func: ast.expr, modules: set[str], functions: set[str]) -> bool:
    if isinstance(func, ast.Attribute):
        return func.attr == "param" and isinstance(func.value, ast.Name) and func.value.id in modules
    return isinstance(func, ast.Name) and func.id in functions


def has_main_block(source: str | bytes | ast.Module) -> bool:
    """Whether ``source`` (text, or text parsed) has a top-level ``if __name__ == "__main__":`` block."""
    try:
        tree = source if isinstance(source, ast.Module) else ast.parse(source)
    except SyntaxError:
        return False  # running the file reports the error
    for node in tree.body:
        test = node.test if isinstance(node, ast.If) else None
        if (isinstance(test, ast.Compare) and isinstance(test.left, ast.Name) and test.left.id == "__name__"
                and len(test.comparators) == 1 and isinstance(test.comparators[0], ast.Constant)
                and test.comparators[0].value == "__main__"):
            return True
    return False


@dataclass(frozen=True)
class WorkloadSource:
    """A workload file as read once: its path and bytes. A run executes exactly these bytes, so the
    hash recorded for it is the hash of what ran, whatever happens to the file meanwhile."""

    path: Path
    data: bytes

    @functools.cached_property
    def sha256(self) -> str:
        return hashlib.sha256(self.data).hexdigest()

    @functools.cached_property
    def tree(self) -> ast.Module:
        """The file parsed once, for the scans before it runs (``SyntaxError`` if it is not Python)."""
        return ast.parse(self.data, filename=str(self.path))


def read_workload(path: str | Path) -> WorkloadSource:
    """The bytes of the workload file ``path`` (a UsageError if it cannot be read)."""
    path = Path(path)
    if not path.is_file():
        raise UsageError(f"workload file {str(path)!r} does not exist")
    try:
        return WorkloadSource(path, path.read_bytes())
    except OSError as error:
        raise UsageError(f"workload file {str(path)!r} cannot be read: {error.strerror}") from None


def run_workload_file(workload: str | Path | WorkloadSource, argv: Sequence[str] = ()) -> dict:
    """Execute a workload (a file, or its bytes read once) in the active session; call its ``main()``
    if it defines one (unless it has its own ``__main__`` block, then it runs as ``__main__``); check
    that every parameter override was declared. Returns the module's globals. The file is the
    user's own Python, run as is; its folder is importable while it runs, and ``sys.argv`` is
    ``[file, *argv]`` (what ``python file argv...`` gives a script). ``sys.exit()`` or
    ``sys.exit(0)`` ends the workload normally; another exit status is a WorkloadError."""
    source = workload if isinstance(workload, WorkloadSource) else read_workload(workload)
    folder = str(source.path.resolve().parent)
    sys.path.insert(0, folder)
    try:
        try:
            script = has_main_block(source.tree)
        except SyntaxError:
            script = False  # running the file reports the error
        namespace, exited = _execute(source, SCRIPT_RUN_NAME if script else WORKLOAD_RUN_NAME, argv)
        entry = namespace.get("main")
        if callable(entry) and not script and not exited:
            _exiting_normally(entry)
    finally:
        sys.path.remove(folder)
    check_params_used(current_session())
    return namespace


def _execute(source: WorkloadSource, run_name: str, argv: Sequence[str] = ()) -> tuple[dict, bool]:
    """Run ``source``'s bytes as the module ``run_name`` (as ``runpy.run_path`` runs a file: a
    temporary module of that name, ``sys.argv`` the file and ``argv``); returns a copy of its
    globals and whether it ended with ``sys.exit``."""
    code = compile(source.data, str(source.path), "exec", dont_inherit=True)
    module = types.ModuleType(run_name)
    module.__dict__.update(__file__=str(source.path), __cached__=None, __loader__=None, __package__="", __spec__=None)
    saved_module, saved_argv = sys.modules.get(run_name), sys.argv
    sys.modules[run_name] = module
    sys.argv = [str(source.path), *argv]
    try:
        exited = _exiting_normally(lambda: exec(code, module.__dict__))
    finally:
        if saved_module is None:
            sys.modules.pop(run_name, None)
        else:
            sys.modules[run_name] = saved_module
        sys.argv = saved_argv
    return dict(module.__dict__), exited


def _exiting_normally(run: Callable[[], object]) -> bool:
    """Call ``run``; a ``sys.exit()`` with status 0 (or none) inside it just ends it (returns True)."""
    try:
        run()
    except SystemExit as stop:
        if isinstance(stop.code, str):
            raise WorkloadError(f"the workload exited with sys.exit: {stop.code}") from None
        if stop.code not in (None, 0):
            raise WorkloadError(f"the workload exited with status {stop.code!r} (sys.exit)") from None
        return True
    return False
