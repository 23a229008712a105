"""PyPTO's kernel structure on npusim: jit kernels, loops, conditions and the compiler hints.

The framework traces a kernel once, with symbolic loop indices, and runs its control flow on the
device. npusim runs the kernel function once per PE while it builds (``npusim.launch``): a loop runs
its body once per iteration with the index as a constant SymbolicScalar, an ``if`` takes the branch
its condition gives on that PE, so the tile ops are the ones the device would run. A bound or a
condition read from device memory (``pypto.loop(counts[0])``, ``if mask[i] == 1:``) is a
device-valued scalar: the build waits until the device has read it (``ControlRead``).

- ``pypto.frontend.jit`` (also ``pypto.jit``; bare, called, or with the framework's keyword options)
  makes a :class:`JitKernel`. Called inside a kernel it runs its function there; called from a host
  program with device tensors (npusim's or torch npu tensors) it launches itself: on the one die of
  its tensors, or, called by every rank of an SPMD world (``npusim.pypto.ranks``), over all of them.
- ``pypto.frontend.function`` marks a function the framework inlines: here it is the function.
- ``pypto.loop(stop)``, ``loop(start, stop[, step])`` (``name``, ``idx_name``, ``unroll_list``,
  ``submit_before_loop``, ``parallel`` accepted), ``pypto.loop_unroll`` (yields ``(index, factor)``),
  ``pypto.cond(x)``, ``pypto.is_loop_begin(i)`` / ``is_loop_end(i)``.
- Compiler hints (``pypto.options`` as decorator or ``with``, ``set_pass_options``,
  ``set_runtime_options``, ``set_host_options``, ``set_codegen_options``, ``set_verify_options``,
  ``set_debug_options``, ``set_options``, and the jit keywords): accepted and recorded in the
  session (``session.pypto_hints``, written to ``manifest.json`` by ``npusim run``); they do not
  change the model, since npusim runs each op's tiles as they are and does not model the passes
  that merge them (docs/pypto.md, "Departures").
"""

from __future__ import annotations

import contextlib
import enum
import functools
import inspect
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path

from npusim.errors import OpArgumentError, UsageError
from npusim.frontend.pypto.runtime import building_program
from npusim.frontend.pypto.tensors import Tensor, TensorAnnotation
from npusim.frontend.session import innermost_session
from npusim.runtime.program import RunningLoop
from npusim.runtime.symbolic import LoopIndex, SymbolicScalar, value_of

JIT_OPTIONS = ("host_options", "codegen_options", "pass_options", "runtime_options", "verify_options", "debug_options")
"""The option groups of ``pypto.frontend.jit`` and ``pypto.options`` (python/pypto/frontend/parser/entry.py, config.py)."""
SCOPE_OPTIONS = JIT_OPTIONS + ("operation_options", "vec_tile_shapes", "cube_tile_shapes", "conv_tile_shapes", "matrix_size")


def record_hint(where: str, options: dict) -> None:
    """Note a compiler hint in the active session (once per distinct hint), if one is open."""
    session = innermost_session()
    if session is None or not options:
        return
    hints = session.pypto_hints
    entry = {"where": where, "options": {key: _plain(value) for key, value in options.items()}}
    if entry not in hints:
        hints.append(entry)


def _plain(value):
    """A hint's value as JSON can hold it."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, (bool, int, float, str)) or value is None:
        return value
    return repr(value)


# -- jit kernels ---------------------------------------------------------------------------------------


class JitKernel:
    """``@pypto.frontend.jit``: a kernel function with the framework's options (see the module docstring)."""

    def __init__(self, function: Callable, options: dict) -> None:
        if not callable(function):
            raise UsageError(f"pypto.frontend.jit: {function!r} is not a function")
        self.function = function
        self.options = options
        self.__name__ = getattr(function, "__name__", "kernel")
        self.__doc__ = function.__doc__
        self._signature = _signature(function)
        functools.update_wrapper(self, function)

    def __call__(self, *args, **kwargs):
        if building_program() is not None:
            return self.run(*args, **kwargs)
        from npusim.frontend.pypto import ranks

        return ranks.host_call(self, args, kwargs)

    def run(self, *args, **kwargs):
        """The kernel function on the PE being built, its tensor arguments checked against its annotations."""
        record_hint(f"jit {self.__name__}", {key: value for key, value in self.options.items() if value is not None})
        try:
            bound = self._signature.bind(*args, **kwargs)
        except TypeError as error:
            raise UsageError(f"jit kernel {self.__name__}: {error}") from None
        for name, value in bound.arguments.items():
            if isinstance(value, Tensor) and not value.name:
                value.name = name  # the framework names a kernel's tensor arguments after its parameters
            annotation = self._signature.parameters[name].annotation
            if isinstance(annotation, TensorAnnotation):
                if not isinstance(value, Tensor):
                    raise OpArgumentError(f"jit kernel {self.__name__}: argument {name}={value!r} must be a tensor ({annotation!r})")
                annotation.check(f"jit kernel {self.__name__}: argument {name}", value)
        return self.function(*args, **kwargs)

    def __repr__(self) -> str:
        return f"<pypto jit kernel {self.__name__}>"


def _signature(function: Callable) -> inspect.Signature:
    """The function's signature with its annotations evaluated (a module with ``from __future__
    import annotations`` keeps them as strings); as written when they cannot be evaluated."""
    try:
        return inspect.signature(function, eval_str=True)
    except Exception:  # noqa: BLE001 - an annotation that does not evaluate is only not checked
        return inspect.signature(function)


def jit(function: Callable | None = None, *, new_ir: bool = True, create_new_logical_tensor: bool = False, **options):
    """``pypto.frontend.jit``: ``@jit``, ``@jit()`` or ``@jit(pass_options=..., runtime_options=..., new_ir=False, ...)``."""
    unknown = sorted(set(options) - set(JIT_OPTIONS))
    if unknown:
        raise UsageError(f"pypto.frontend.jit: unknown option(s) {unknown}; the framework's are {', '.join(JIT_OPTIONS)}, new_ir, "
                         "create_new_logical_tensor")
    recorded = dict(options, new_ir=new_ir, create_new_logical_tensor=create_new_logical_tensor)
    if function is None:
        return lambda f: JitKernel(f, recorded)
    return JitKernel(function, recorded)


def function(func: Callable | None = None):
    """``pypto.frontend.function``: the framework inlines it into the calling kernel; here it is the function."""
    if func is None:
        return lambda f: f
    return func


def dynamic(name: str) -> SymbolicScalar:
    """``pypto.frontend.dynamic``: a dim bound at run time; npusim takes the size of each argument."""
    raise UsageError(f"pypto.frontend.dynamic({name!r}): symbolic dims in annotations are not modelled; annotate the dim "
                     "with pypto.DYNAMIC (npusim takes the argument's size)")


# -- loops and conditions --------------------------------------------------------------------------------


LOOP_KEYWORDS = ("name", "idx_name", "unroll_list", "submit_before_loop", "parallel")


def _loop_range(args: tuple, kwargs: dict, what: str) -> tuple[int, int, int]:
    unknown = sorted(set(kwargs) - set(LOOP_KEYWORDS))
    if unknown:  # the framework ignores them (test_page_attention.py passes unroll_List=): so does npusim, saying so
        warnings.warn(f"pypto.{what}: unknown keyword(s) {unknown} ignored, as the framework ignores them; it takes "
                      f"{', '.join(LOOP_KEYWORDS)}", UserWarning, stacklevel=3)
    if not 1 <= len(args) <= 3:
        raise UsageError(f"pypto.{what} takes 1 to 3 positional arguments (stop, or start, stop[, step]), got {len(args)}")
    start, stop, step = (0, args[0], 1) if len(args) == 1 else (args[0], args[1], args[2] if len(args) == 3 else 1)
    program = building_program()
    values = []
    for name, value in (("start", start), ("stop", stop), ("step", step)):
        if isinstance(value, SymbolicScalar):
            value = value_of(program, value) if program is not None else value.concrete()
        if not isinstance(value, int) or isinstance(value, bool):
            raise UsageError(f"pypto.{what}: {name}={value!r} must be an int or a SymbolicScalar")
        values.append(value)
    if values[2] == 0:
        raise UsageError(f"pypto.{what}: step=0 would never end")
    return values[0], values[1], values[2]


@contextlib.contextmanager
def _running(kwargs: dict, start: int, stop: int, step: int) -> Iterator[RunningLoop | None]:
    """The loop as its PE's kernel function runs it (:class:`RunningLoop`, None outside a kernel):
    known while it runs, for the messages of a build stopped inside it (the wall-clock limit, memory)."""
    program = building_program()
    if program is None:
        yield None
        return
    caller = inspect.currentframe()
    for _ in range(3):  # this function, contextlib's __enter__, the loop generator: then the kernel function's frame
        caller = caller.f_back if caller is not None else None
    written_at = f"{Path(caller.f_code.co_filename).name}:{caller.f_lineno}" if caller is not None else "?"
    running = RunningLoop(str(kwargs.get("name") or ""), written_at, start, stop, step)
    program.loops.append(running)
    program.left = None
    try:
        yield running
    except GeneratorExit:  # left before its end: a break, or an error raised in its body (the innermost loop is closed first)
        if program.left is None:
            program.left = running
        raise
    finally:
        program.loops.remove(running)


def _iteration(running: RunningLoop | None, index: int) -> None:
    """Note the iteration a loop in a kernel function begins, and look at the wall clock."""
    if running is not None:
        running.index = index
        program = building_program()
        if program is not None:
            program.left = None
            program.look()


def loop(*args, **kwargs) -> Iterator[SymbolicScalar]:
    """``pypto.loop``: the body once per iteration (module docstring)."""
    start, stop, step = _loop_range(args, kwargs, "loop")
    last = start + ((stop - start - (1 if step > 0 else -1)) // step) * step if (stop - start) * step > 0 else start
    with _running(kwargs, start, stop, step) as running:
        for index in range(start, stop, step):
            _iteration(running, index)
            yield LoopIndex(index, start, last)


def loop_unroll(*args, unroll_list=(1,), **kwargs) -> Iterator[tuple[SymbolicScalar, int]]:
    """``pypto.loop_unroll``: as the framework, the range in chunks of the largest unroll factor that
    fits, then the smaller ones; yields ``(index, factor)``, the body doing ``factor`` iterations."""
    start, stop, step = _loop_range(args, kwargs, "loop_unroll")
    factors = sorted(set(unroll_list) | {1}, reverse=True)
    begin = start
    with _running(kwargs, start, stop, step) as running:
        for factor in factors:
            stride = step * factor
            end = stop - (stop - start) % stride
            for index in range(begin, end, stride):
                _iteration(running, index)
                yield LoopIndex(index, begin, end - stride), factor
            begin = end


def cond(scalar, file: str | None = None, lineno: int | None = None) -> bool:
    """``pypto.cond``: the condition of an ``if`` (its value on the PE being built)."""
    if (file is None) != (lineno is None):
        raise UsageError("pypto.cond: file and lineno must be given together or not at all")
    return bool(scalar)


def is_loop_begin(index) -> SymbolicScalar:
    """1 in the first iteration of the loop of ``index``, else 0."""
    if not isinstance(index, LoopIndex):
        raise UsageError(f"pypto.is_loop_begin({index!r}): the argument must be a pypto.loop index")
    return index == index.loop_begin


def is_loop_end(index) -> SymbolicScalar:
    """1 in the last iteration of the loop of ``index``, else 0."""
    if not isinstance(index, LoopIndex):
        raise UsageError(f"pypto.is_loop_end({index!r}): the argument must be a pypto.loop index")
    return index == index.loop_end


# -- compiler hints ---------------------------------------------------------------------------------------


class CompStage(enum.Enum):
    """``pypto.CompStage``: where the framework's compiler stops (``host_options={"compile_stage": ...}``,
    config.py); a hint here: npusim builds and runs the kernel whatever the stage."""

    ALL_COMPLETE = 0
    TENSOR_GRAPH = 1
    TILE_GRAPH = 2
    EXECUTE_GRAPH = 3
    CODEGEN_INSTRUCTION = 4
    CODEGEN_BINARY = 5


class Options:
    """``pypto.options(...)``: a decorator or a ``with`` block whose options are recorded as hints."""

    def __init__(self, name: str = "", **options) -> None:
        unknown = sorted(set(options) - set(SCOPE_OPTIONS))
        if unknown:
            raise UsageError(f"pypto.options: unknown option(s) {unknown}; it takes name, {', '.join(SCOPE_OPTIONS)}")
        self.name = name
        self.options = {key: value for key, value in options.items() if value is not None}

    def __enter__(self) -> Options:
        record_hint(f"options {self.name}".rstrip(), self.options)
        return self

    def __exit__(self, *exc) -> None:
        return None

    def __call__(self, func: Callable) -> Callable:
        name = self.name or getattr(func, "__name__", "")

        @functools.wraps(func)
        def wrapper(*args, **kwargs):
            record_hint(f"options {name}", self.options)
            return func(*args, **kwargs)

        return wrapper


def options(name: str = "", **kwargs) -> Options:
    """``pypto.options``: see :class:`Options`."""
    return Options(name, **kwargs)


def _setter(group: str) -> Callable[..., None]:
    def setter(**options) -> None:
        record_hint(f"set_{group}", options)

    setter.__name__ = f"set_{group}"
    setter.__doc__ = f"``pypto.set_{group}(**options)``: recorded as a hint (module docstring)."
    return setter


set_pass_options = _setter("pass_options")
set_runtime_options = _setter("runtime_options")
set_host_options = _setter("host_options")
set_codegen_options = _setter("codegen_options")
set_verify_options = _setter("verify_options")
set_debug_options = _setter("debug_options")


def set_options(**options) -> None:
    """``pypto.set_options(pass_options=..., ...)``: recorded as a hint (module docstring)."""
    unknown = sorted(set(options) - set(SCOPE_OPTIONS))
    if unknown:
        raise UsageError(f"pypto.set_options: unknown option(s) {unknown}; it takes {', '.join(SCOPE_OPTIONS)}")
    record_hint("set_options", {key: value for key, value in options.items() if value is not None})
