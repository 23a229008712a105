"""The SimPy core: integer-picosecond time, the fluid bandwidth network, progress counters, and the
event loop (the one module that uses SimPy's internals).

Its modules ``flags``, ``flow``, ``loop`` and ``progress``, and those of other packages that the
hot loop runs (:data:`COMPILED`: the hardware model's :mod:`npusim.hw.core`, the ISA's program
builder, the recorder's rows, HCCL's staging rewrite, the PyPTO runtime's device tasks, the PyPTO ops ...), run compiled where the install built them (setup.py:
mypyc), else as Python: the same code, the same results. The build writes the compiled modules
into a package of their own, ``npusim_compiled`` (site-packages; ``engine/``, ``hw/``, ``isa/``, ``trace/``,
``kernels/hccl/``, ``kernels/shmem/``, ``runtime/``, ``frontend/pypto/``: the extension files of each package, ``__init__``: the SHA-256 of the sources they were compiled
from), never beside the sources. As it is imported this package chooses (:func:`choose_engine`),
for every compiled module: the compiled modules when their digests match every one of the sources
(they are one shared library and call each other inside it, so all or none), by putting their
folder first on its ``__path__`` (:func:`compiled_first`: ``engine/`` here, and each other package of
:data:`PACKAGES`, :mod:`npusim.hw` ..., calls it for its own);
otherwise the sources, interpreted. A build from other sources (an edit or a pull since) is never
run: the sources run, and the process says so once on stderr, with how to build again. ``NPUSIM_ENGINE`` chooses:
``auto`` (unset: as above), ``interpreted`` (the sources, whatever is built) or ``compiled`` (the
compiled modules, or :class:`~npusim.errors.InstallError` saying why they cannot run).
:func:`engine_record` is what ran, as a run's manifest records it.
"""

import hashlib
import importlib
import importlib.machinery
import importlib.util
import os
import sys
from dataclasses import dataclass
from pathlib import Path

from npusim.errors import InstallError, UsageError

COMPILED = ("engine.flags", "engine.flow", "engine.loop", "engine.progress", "hw.core", "hw.queue", "hw.cache", "hw.dma", "hw.aicpu", "hw.system", "hw.topology", "hw.stream", "hw.memory", "isa.program", "isa.instructions", "trace.rows", "trace.recorder", "kernels.hccl.staging", "runtime.tasks", "runtime.symbolic", "runtime.writes", "runtime.launch", "runtime.program", "runtime.templates", "runtime.shmem", "kernels.shmem.checks", "kernels.shmem.tiling", "kernels.shmem.layout", "kernels.shmem.races", "kernels.shmem.tile_ops", "frontend.pypto.ops")
"""The modules the build compiles (setup.py, which reads this list, as the Makefile does: on one line), by their names in the npusim package."""
PACKAGES = tuple(dict.fromkeys(name.rpartition(".")[0] for name in COMPILED))
"""The packages of the compiled modules (``engine``, ``hw`` ... ``kernels.shmem``, ``frontend.pypto``): the build's folders, by the same
names (``kernels/hccl``)."""
COMPILED_PACKAGE = "npusim_compiled"
"""The package the build writes the compiled modules into (setup.py)."""
ENGINE_VARIABLE = "NPUSIM_ENGINE"
"""The environment variable choosing the engine: one of :data:`ENGINE_CHOICES`."""
ENGINE_CHOICES = ("auto", "compiled", "interpreted")
HOW_TO_BUILD = "run `make` in the checkout (or `pip install --no-deps -e .` in your environment) to compile it again"
SOURCES_ROOT = Path(__file__).resolve().parents[1]
"""The npusim package's folder: the digests are of the files under it (``engine/flow.py`` ...)."""


@dataclass(frozen=True)
class EngineChoice:
    """Which engine this process runs: the build's folder of the compiled modules
    (``npusim_compiled``, a folder in it per package of :data:`PACKAGES`; None: the sources,
    interpreted), why (where they were compiled, or why they are not used), and what to say once
    on stderr (None: nothing)."""

    folder: Path | None
    note: str
    warning: str | None = None


def stale_sources(root: Path, sources: list[str], built: dict[str, str]) -> list[str]:
    """Of the source files ``sources`` (``engine/flow.py`` ...) under ``root``, those whose SHA-256
    is not the one ``built`` records for them (the build's digests by the same paths)."""
    return [source for source in sources if built.get(source) != hashlib.sha256((root / source).read_bytes()).hexdigest()]


def compiled_files(folder: Path) -> list[Path]:
    """The compiled extension files in ``folder`` (``*.so`` and the like; none where there is no such folder)."""
    return sorted(path for path in folder.iterdir() if path.name.endswith(tuple(importlib.machinery.EXTENSION_SUFFIXES))) if folder.is_dir() else []


def choose_engine(request: str, build: object | None, root: Path = SOURCES_ROOT) -> EngineChoice:
    """The engine to run for ``request`` (one of :data:`ENGINE_CHOICES`), given ``build``, the
    record the build wrote (the module ``npusim_compiled``: ``__file__``, ``SOURCES``,
    ``NOT_COMPILED``; None when no build is installed), and the npusim package's folder ``root``:
    its ``folder`` is the build's (``npusim_compiled``, holding a folder per package of :data:`PACKAGES`). Raises
    InstallError where compiled files lie beside the sources of a package of :data:`PACKAGES`
    (Python would run them, whatever their sources) or where ``compiled`` is asked for and cannot
    run."""
    if request not in ENGINE_CHOICES:
        raise UsageError(f"{ENGINE_VARIABLE}={request!r} is not one of {', '.join(ENGINE_CHOICES)}: unset it (auto: the compiled engine when "
                         "it was built from these sources, else the Python sources) or set one of those")
    for here in (root / package.replace(".", "/") for package in PACKAGES):
        if leftovers := compiled_files(here):
            raise InstallError(f"{here} holds compiled files of an earlier build ({', '.join(path.name for path in leftovers)}), which Python would "
                               "run instead of the sources beside them: delete them (`make` in the checkout does)")
    if request == "interpreted":
        return EngineChoice(None, f"{ENGINE_VARIABLE}=interpreted")
    folder = Path(getattr(build, "__file__", "")).parent
    sources = [f"{name.replace('.', '/')}.py" for name in COMPILED]
    said = False  # whether the install told the user already (it did when it compiled nothing)
    if build is None:
        problem = f"no compiled engine is installed (no {COMPILED_PACKAGE} package: a checkout on PYTHONPATH, or not installed by its build)"
    elif not_compiled := getattr(build, "NOT_COMPILED", None):
        problem, said = f"its build compiled nothing: {not_compiled}", True
    elif missing := [name for name in COMPILED if not _built(folder, name)]:
        problem = f"the compiled engine in {folder} lacks {', '.join(missing)}"
    elif stale := stale_sources(root, sources, getattr(build, "SOURCES", {})):
        problem = (f"the compiled engine in {folder} was built from other versions of {', '.join(stale)} than the ones in {root} now (changed "
                   "since the build, by an edit or a pull)")
    else:
        return EngineChoice(folder, f"by mypyc, in {folder}")
    if request == "compiled":
        raise InstallError(f"{ENGINE_VARIABLE}=compiled, but {problem}: {HOW_TO_BUILD}, or unset {ENGINE_VARIABLE} to run the Python sources")
    if build is None or said:  # a checkout on PYTHONPATH runs its sources as a matter of course
        return EngineChoice(None, problem)
    return EngineChoice(None, problem, f"npusim: warning: {problem}: the engine runs as Python (the same results, slower); {HOW_TO_BUILD}")


def _built(folder: Path, name: str) -> bool:
    """Whether the build's ``folder`` holds the extension file of the module ``name`` (``engine.flow`` ...)."""
    package, _, module = name.rpartition(".")
    return any(path.name.startswith(f"{module}.") for path in compiled_files(folder / package.replace(".", "/")))


def _installed_build() -> object | None:
    """The record the build wrote (the module ``npusim_compiled``), None when none is installed."""
    return importlib.import_module(COMPILED_PACKAGE) if importlib.util.find_spec(COMPILED_PACKAGE) is not None else None


def _compiled_module(name: str) -> bool:
    """Whether the module ``name`` of the npusim package (``engine.flow`` ...), imported, runs compiled."""
    return str(getattr(sys.modules.get(f"npusim.{name}"), "__file__", "")).endswith(tuple(importlib.machinery.EXTENSION_SUFFIXES))


def engine_record() -> dict[str, object]:
    """Which engine this process runs, as a run's manifest records it: ``engine`` (``compiled``,
    ``interpreted``, or ``partly compiled``: of the modules of :data:`COMPILED` imported so far,
    all, none or some run compiled), ``compiled_modules`` (those that run compiled) and
    ``engine_note`` (where they were compiled, or why the sources run)."""
    imported = [name for name in COMPILED if f"npusim.{name}" in sys.modules]
    compiled = [f"npusim.{name}" for name in imported if _compiled_module(name)]
    kind = "compiled" if compiled and len(compiled) == len(imported) else "partly compiled" if compiled else "interpreted"
    return {"engine": kind, "compiled_modules": compiled, "engine_note": CHOICE.note}


CHOICE = choose_engine(os.environ.get(ENGINE_VARIABLE) or "auto", _installed_build())
"""This process's engine."""


def compiled_first(package: str, path: list[str]) -> None:
    """Where :data:`CHOICE` chose the compiled modules, put the build's folder of ``package`` (a
    package of :data:`PACKAGES` by its full name, ``npusim.kernels.hccl``) first on ``path``, the
    package's ``__path__``, so its compiled modules are found before their sources. Each such
    package's ``__init__`` calls it with its ``__name__`` and ``__path__``."""
    name = package.removeprefix("npusim.")
    if name not in PACKAGES:
        raise ValueError(f"{package} has no compiled modules: add them to npusim.engine.COMPILED first (packages: {', '.join(PACKAGES)})")
    if CHOICE.folder is not None:
        path.insert(0, str(CHOICE.folder.joinpath(*name.split("."))))


compiled_first(__name__, __path__)
if CHOICE.warning is not None:
    print(CHOICE.warning, file=sys.stderr)

from npusim.engine.flags import Flags  # noqa: E402  (after the choice: it sets where they are found)
from npusim.engine.flow import FlowClass, FlowNetwork, Resource  # noqa: E402
from npusim.engine.loop import Stop, clock, run_until, succeed_at  # noqa: E402
from npusim.engine.progress import ProgressCounter  # noqa: E402

__all__ = ["Flags", "FlowClass", "FlowNetwork", "ProgressCounter", "Resource", "Stop", "clock", "run_until", "succeed_at"]
