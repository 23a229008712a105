"""The SimPy core: integer-picosecond time, the fluid bandwidth network, progress counters, and the
event loop (the one module that uses SimPy's internals).

Its modules ``flow``, ``loop`` and ``progress`` run compiled where the install built them (setup.py:
mypyc), else as Python. Python would import a compiled module even if its source has changed since
the build (a pull, an edit), and run the old code; so, before importing them, this package checks
that the extension was built from the sources beside it (``built_from``, their SHA-256 digests,
written by setup.py) and refuses to run otherwise, saying how to build it again.
"""

import hashlib
import importlib
import importlib.machinery
import importlib.util
from pathlib import Path

from npusim.errors import InstallError

COMPILED = ("flow", "loop", "progress")
"""The modules setup.py compiles."""


def _compiled(name: str) -> bool:
    """Whether the module ``name`` of this package would be imported from a compiled extension."""
    spec = importlib.util.find_spec(f"{__name__}.{name}")
    return spec is not None and isinstance(spec.loader, importlib.machinery.ExtensionFileLoader)


def stale_sources(folder: Path, compiled: list[str], built: dict[str, str]) -> list[str]:
    """Of the source files ``compiled`` (``flow.py`` ...) in ``folder``, those whose SHA-256 is not
    the one ``built`` records for them (the build's digests by file name)."""
    return [source for source in compiled if built.get(source) != hashlib.sha256((folder / source).read_bytes()).hexdigest()]


def stale_modules() -> list[str]:
    """The source files of this package whose compiled module was built from another version of
    them, or by a build that recorded no digests; empty when they match, or when the modules run as
    Python. The digests are read from the compiled ``built_from`` only, which the same build made
    with them (a ``built_from.py`` written by a build that then failed to compile says nothing)."""
    compiled = [f"{name}.py" for name in COMPILED if _compiled(name)]
    built: dict[str, str] = importlib.import_module(f"{__name__}.built_from").SOURCES if compiled and _compiled("built_from") else {}
    return stale_sources(Path(__file__).parent, compiled, built)


if stale := stale_modules():
    raise InstallError(f"npusim's compiled engine ({Path(__file__).parent}) was built from other versions of {', '.join(stale)} than the "
                       "ones there now (changed since the build, by an edit or a pull): run `make` in the checkout to build it again (or "
                       f"`pip install --no-deps -e .` in your environment), or delete {Path(__file__).parent / '*.so'} to run the Python "
                       "sources (slower)")

from npusim.engine.flow import FlowClass, FlowNetwork, Resource  # noqa: E402  (after the check: else the old code runs)
from npusim.engine.loop import Stop, clock, run_until, succeed_at  # noqa: E402
from npusim.engine.progress import ProgressCounter  # noqa: E402

__all__ = ["FlowClass", "FlowNetwork", "ProgressCounter", "Resource", "Stop", "clock", "run_until", "succeed_at"]
