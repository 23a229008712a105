"""The SimPy core: integer-picosecond time, the fluid bandwidth network, progress counters, and the
event loop (the one module that uses SimPy's internals).

Its modules ``flow``, ``loop`` and ``progress`` run compiled where the install built them (setup.py:
mypyc), else as Python. Python would import a compiled module even if its source has changed since
the build (a pull, an edit), and run the old code; so, before importing them, this package checks
that the extension was built from the sources beside it (``built_from``, their SHA-256 digests,
written by setup.py) and refuses to run otherwise, saying how to build it again. The check covers
every compiled module as soon as any compiled file is there: the modules are compiled into one
shared library (``compiled__mypyc``) and call each other inside it, so deleting one module's
``.so`` after editing its source would still run its old code through the others.
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


def compiled_files(folder: Path) -> list[Path]:
    """The compiled extension files in ``folder`` (``*.so`` and the like)."""
    return sorted(path for suffix in importlib.machinery.EXTENSION_SUFFIXES for path in folder.glob(f"*{suffix}"))


def stale_modules() -> list[str]:
    """The source files of the compiled modules whose build was made from another version of them,
    or by a build that recorded no digests: every one of :data:`COMPILED` is checked once any
    compiled file is in this package's folder, whichever they are (a module whose own ``.so`` was
    deleted still runs compiled through the others). Empty when they match, or when nothing is
    compiled (the modules run as Python). The digests are read from the compiled ``built_from``
    only, which the same build made with them (a ``built_from.py`` written by a build that then
    failed to compile says nothing)."""
    folder = Path(__file__).parent
    if not compiled_files(folder):
        return []
    built: dict[str, str] = importlib.import_module(f"{__name__}.built_from").SOURCES if _compiled("built_from") else {}
    return stale_sources(folder, [f"{name}.py" for name in COMPILED], built)


if stale := stale_modules():
    raise InstallError(f"npusim's compiled engine ({Path(__file__).parent}) was built from other versions of {', '.join(stale)} than the "
                       "ones there now (changed since the build, by an edit or a pull): run `make` in the checkout to build it again (or "
                       f"`pip install --no-deps -e .` in your environment), or delete {Path(__file__).parent / '*.so'} to run the Python "
                       "sources (slower)")

from npusim.engine.flow import FlowClass, FlowNetwork, Resource  # noqa: E402  (after the check: else the old code runs)
from npusim.engine.loop import Stop, clock, run_until, succeed_at  # noqa: E402
from npusim.engine.progress import ProgressCounter  # noqa: E402

__all__ = ["FlowClass", "FlowNetwork", "ProgressCounter", "Resource", "Stop", "clock", "run_until", "succeed_at"]
