"""Which engine npusim.engine runs (npusim/engine/__init__.py): the compiled modules of the build
(the package ``npusim_compiled``: the engine's and hw.core) only when they were built from the sources here, else the sources
interpreted, said once on stderr when a build is there but older than them; ``NPUSIM_ENGINE``
chooses; compiled files beside the sources are refused; a run's manifest records what ran."""

from __future__ import annotations

import hashlib
import importlib.machinery
import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

import npusim.engine
import npusim.hw.core  # noqa: F401  (as a run imports it: the engine's record names the compiled modules imported)
from npusim.engine import COMPILED, COMPILED_PACKAGE, ENGINE_VARIABLE, PACKAGES, choose_engine, engine_record, stale_sources
from npusim.errors import InstallError, UsageError

ENGINE = Path(npusim.engine.__file__).parent
ROOT = Path(__file__).resolve().parents[2]
BUILD = importlib.import_module(COMPILED_PACKAGE) if importlib.util.find_spec(COMPILED_PACKAGE) is not None else None
COMPILED_HERE = BUILD is not None and not BUILD.NOT_COMPILED
"""Whether this environment's build compiled the engine (a machine with a C compiler)."""
SUFFIX = importlib.machinery.EXTENSION_SUFFIXES[0]
SMALL = ["--param", "elements=49152", "--param", "tile=1024"]  # vector_add on a2 in a fraction of a second


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _path(name: str) -> str:
    """The source of the compiled module ``name`` (``engine.flow`` -> ``engine/flow.py``)."""
    return name.replace(".", "/") + ".py"


def _sources(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    """An npusim folder with the compiled modules' sources (stand-ins), and their digests as a build records them."""
    root = tmp_path / "npusim"
    for name in COMPILED:
        (root / _path(name)).parent.mkdir(parents=True, exist_ok=True)
        (root / _path(name)).write_text(f"# {name}\n")
    return root, {_path(name): _digest(root / _path(name)) for name in COMPILED}


def _build(tmp_path: Path, sources: dict[str, str], not_compiled: str | None = None,
           modules=(*COMPILED, "engine.compiled__mypyc")) -> SimpleNamespace:
    """A build's record (the module npusim_compiled) with extension files (empty stand-ins) for ``modules``."""
    folder = tmp_path / COMPILED_PACKAGE
    for package in PACKAGES:
        (folder / package.replace(".", "/")).mkdir(parents=True)
    for name in modules:
        (folder / f"{name.replace('.', '/')}{SUFFIX}").write_bytes(b"")
    return SimpleNamespace(__file__=str(folder / "__init__.py"), SOURCES=sources, NOT_COMPILED=not_compiled)


def _choose(request: str, build, root: Path):
    return choose_engine(request, build, root=root)


def test_the_engine_the_pipes_the_kernel_builder_and_the_event_rows_are_compiled():
    assert {"engine.loop", "engine.flow", "hw.core", "isa.program", "trace.rows", "frontend.pypto.ops"} <= set(COMPILED)
    assert PACKAGES == ("engine", "hw", "isa", "trace", "kernels.hccl", "runtime", "kernels.shmem", "frontend.pypto")


def test_each_package_of_compiled_modules_finds_them_in_its_build_folder_first():
    """compiled_first: under the compiled engine each package of PACKAGES has its build folder
    (npusim_compiled/kernels/hccl ...) first on its path, under the interpreted one its sources
    only; a package with no compiled module is refused."""
    folder = npusim.engine.CHOICE.folder
    for package in PACKAGES:
        path = importlib.import_module(f"npusim.{package}").__path__
        first = Path(path[0])
        if folder is None:
            assert first == ROOT / "npusim" / package.replace(".", "/"), package
        else:
            assert first == folder.joinpath(*package.split(".")) and Path(path[1]) == ROOT / "npusim" / package.replace(".", "/"), package
    with pytest.raises(ValueError, match=r"npusim\.frontend has no compiled modules: add them to npusim\.engine\.COMPILED first"):
        npusim.engine.compiled_first("npusim.frontend", [])


def test_a_build_from_these_sources_runs_compiled(tmp_path):
    root, digests = _sources(tmp_path)
    build = _build(tmp_path, digests)
    for request in ("auto", "compiled"):
        choice = _choose(request, build, root)
        assert choice.folder == tmp_path / COMPILED_PACKAGE and choice.warning is None and choice.note.startswith("by mypyc")


def test_a_source_edited_after_the_build_runs_interpreted_and_says_so(tmp_path):
    root, digests = _sources(tmp_path)
    build = _build(tmp_path, digests)
    (root / "engine" / "loop.py").write_text("# loop, edited\n")
    choice = _choose("auto", build, root)
    assert choice.folder is None and "engine/loop.py" in choice.note and "flow" not in choice.note
    assert choice.warning.startswith("npusim: warning: the compiled engine") and "runs as Python" in choice.warning
    assert "`make`" in choice.warning and "\n" not in choice.warning
    with pytest.raises(InstallError, match=r"NPUSIM_ENGINE=compiled, but .* other versions of engine/loop\.py .*`make`"):
        _choose("compiled", build, root)


@pytest.mark.parametrize("lacking", ["engine.loop", "hw.core"])
def test_a_build_missing_a_module_runs_interpreted_and_says_so(tmp_path, lacking):
    root, digests = _sources(tmp_path)
    modules = [name for name in (*COMPILED, "engine.compiled__mypyc") if name != lacking]
    choice = _choose("auto", _build(tmp_path, digests, modules=modules), root)
    assert choice.folder is None and choice.warning is not None and f"lacks {lacking}" in choice.warning


def test_a_pipes_source_edited_after_the_build_runs_all_interpreted(tmp_path):
    """hw/core.py is in the engine's shared library: an edit of it alone makes every module run as Python."""
    root, digests = _sources(tmp_path)
    (root / "hw" / "core.py").write_text("# core, edited\n")
    choice = _choose("auto", _build(tmp_path, digests), root)
    assert choice.folder is None and "hw/core.py" in choice.note and "engine/" not in choice.note.split("than")[0]


def test_without_a_compiled_build_the_sources_run_quietly(tmp_path):
    """No build installed (a checkout on PYTHONPATH), or a build that compiled nothing (it said so at install): no warning."""
    root, digests = _sources(tmp_path)
    nothing = _choose("auto", None, root)
    assert nothing.folder is None and nothing.warning is None and "no compiled engine is installed" in nothing.note
    not_compiled = _choose("auto", _build(tmp_path, {}, not_compiled="no C compiler: 'cc' is not found", modules=()), root)
    assert not_compiled.folder is None and not_compiled.warning is None and not_compiled.note.endswith("no C compiler: 'cc' is not found")
    with pytest.raises(InstallError, match="no compiled engine is installed"):
        _choose("compiled", None, root)


def test_interpreted_is_chosen_whatever_is_built(tmp_path):
    root, digests = _sources(tmp_path)
    choice = _choose("interpreted", _build(tmp_path, digests), root)
    assert choice.folder is None and choice.warning is None and choice.note == f"{ENGINE_VARIABLE}=interpreted"


@pytest.mark.parametrize("beside", ["engine/flow", "hw/core"])
def test_compiled_files_beside_the_sources_are_refused_whatever_is_chosen(tmp_path, beside):
    """An earlier build's files in npusim/engine or npusim/hw would be imported before the sources, whichever engine is chosen."""
    root, digests = _sources(tmp_path)
    (root / f"{beside}{SUFFIX}").write_bytes(b"")
    name = beside.split("/")[1]
    for request in ("auto", "interpreted", "compiled"):
        with pytest.raises(InstallError, match=rf"compiled files of an earlier build \({name}{SUFFIX}\).*delete them"):
            _choose(request, _build(tmp_path / request, digests), root)


def test_an_unknown_choice_is_a_usage_error(tmp_path):
    root, _ = _sources(tmp_path)
    with pytest.raises(UsageError, match=r"NPUSIM_ENGINE='fast' is not one of auto, compiled, interpreted"):
        _choose("fast", None, root)


def test_a_build_that_recorded_no_digests_is_stale(tmp_path):
    root, _ = _sources(tmp_path)
    assert stale_sources(root, ["engine/flow.py"], {}) == ["engine/flow.py"]
    assert stale_sources(root, [], {}) == []


def test_setup_compiles_the_modules_the_check_knows(monkeypatch):
    """setup.py's modules and package, as it reads them from npusim/engine/__init__.py (its setup()
    call replaced: the module is loaded, nothing is built)."""
    import setuptools

    monkeypatch.setattr(setuptools, "setup", lambda **_: None)
    spec = importlib.util.spec_from_file_location("npusim_setup", ROOT / "setup.py")
    setup = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(setup)
    assert [f"npusim/{_path(name)}" for name in COMPILED] == setup.COMPILED and setup.PACKAGE == COMPILED_PACKAGE


def test_this_process_runs_what_its_build_made():
    """The install these tests run in: compiled where its build compiled (from these sources) unless
    NPUSIM_ENGINE asks for the interpreted engine, else interpreted (``compiled`` asked of a build that
    is not from these sources fails at the import: test_a_build_from_these_sources_runs_compiled)."""
    for name in COMPILED:  # engine_record names those imported
        importlib.import_module(f"npusim.{name}")
    record = engine_record()
    if os.environ.get(ENGINE_VARIABLE, "auto") != "interpreted" and COMPILED_HERE:
        assert record["engine"] == "compiled" and record["compiled_modules"] == [f"npusim.{name}" for name in COMPILED]
        assert all(Path(sys.modules[f"npusim.{name}"].__file__).is_relative_to(Path(BUILD.__file__).parent) for name in COMPILED)
    else:
        assert record["engine"] == "interpreted" and record["compiled_modules"] == []


def test_the_build_wrote_nothing_beside_the_sources():
    assert not [path.name for package in PACKAGES for path in (ENGINE.parent / package.replace(".", "/")).iterdir()
                if path.name.endswith(tuple(importlib.machinery.EXTENSION_SUFFIXES))]
    assert not (ENGINE / "built_from.py").exists()
    if BUILD is not None:
        assert not Path(BUILD.__file__).resolve().is_relative_to(ENGINE.parent.resolve())  # in site-packages (.venv's, in a checkout)


def _npusim(args: list[str], cwd: Path, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "npusim", *args], cwd=cwd, env={**os.environ, **env}, capture_output=True, text=True,
                          timeout=120)


def _run_args(out: Path) -> list[str]:
    return ["run", "--config", "a2", str(ROOT / "examples" / "vector_add.py"), *SMALL, "--out", str(out)]


def _manifest(out: Path) -> dict:
    return json.loads((out / "manifest.json").read_text())


def test_a_run_records_and_shows_its_engine(tmp_path):
    """The manifest's engine fields, and the report's first line, for the engine of this install and
    for the interpreted one (NPUSIM_ENGINE=interpreted): the same results, to the byte."""
    env = {ENGINE_VARIABLE: "auto"}
    compiled = _npusim(_run_args(tmp_path / "default"), tmp_path, **env)
    interpreted = _npusim(_run_args(tmp_path / "interpreted"), tmp_path, **{ENGINE_VARIABLE: "interpreted"})
    assert compiled.returncode == 0 and interpreted.returncode == 0, compiled.stderr + interpreted.stderr
    kind = "compiled" if COMPILED_HERE else "interpreted"
    default = _manifest(tmp_path / "default")
    # the modules of COMPILED the run imported: vector_add calls no collective and runs no device task (not HCCL's staging, nor
    # hw.aicpu, nor the PyPTO runtime, its shmem ops and their API)
    imported = [f"npusim.{name}" for name in COMPILED
                if name not in ("kernels.hccl.staging", "hw.aicpu") and not name.startswith(("runtime.", "kernels.shmem.", "frontend.pypto."))]
    assert default["engine"] == kind and default["compiled_modules"] == (imported if COMPILED_HERE else [])
    assert f"({kind} engine)" in compiled.stdout
    python = _manifest(tmp_path / "interpreted")
    assert python["engine"] == "interpreted" and python["compiled_modules"] == [] and python["engine_note"] == f"{ENGINE_VARIABLE}=interpreted"
    assert "(interpreted engine)" in interpreted.stdout and "warning" not in interpreted.stderr
    default_summary, python_summary = ({key: value for key, value in json.loads((tmp_path / name / "summary.json").read_text()).items()
                                        if key != "wall_time_s"} for name in ("default", "interpreted"))
    assert default_summary == python_summary
    assert (tmp_path / "default" / "trace.json").read_bytes() == (tmp_path / "interpreted" / "trace.json").read_bytes()
    shown = _npusim(["report", str(tmp_path / "interpreted")], tmp_path)
    assert shown.returncode == 0 and "(interpreted engine)" in shown.stdout.splitlines()[0], shown.stdout + shown.stderr


def test_an_unknown_engine_choice_stops_every_command(tmp_path):
    done = _npusim(["config", "show", "a3"], tmp_path, **{ENGINE_VARIABLE: "fast"})
    assert done.returncode == 2 and done.stderr.startswith("npusim: error: NPUSIM_ENGINE='fast'") and done.stderr.count("\n") == 1, done.stderr


def _copy_of_the_package(tmp_path: Path) -> Path:
    """npusim copied to tmp_path/npusim (what PYTHONPATH=tmp_path imports), without bytecode."""
    shutil.copytree(ENGINE.parent, tmp_path / "npusim", ignore=shutil.ignore_patterns("__pycache__"))
    return tmp_path / "npusim"


@pytest.mark.skipif(not COMPILED_HERE, reason="the engine runs as Python here: nothing compiled to be stale")
def test_a_stale_build_runs_the_sources_and_says_so_once(tmp_path):
    """A copy of the package whose flow.py changed after the build: the run runs the sources,
    warns once (one line naming the file and `make`) and records why in its manifest; asked for the
    compiled engine, every command exits 1 with one line, writing nothing; the Python API raises."""
    copy = _copy_of_the_package(tmp_path)
    with open(copy / "engine" / "flow.py", "a") as source:
        source.write("# edited after the build\n")
    env = {"PYTHONPATH": str(tmp_path), ENGINE_VARIABLE: "auto"}
    done = _npusim(_run_args(tmp_path / "out"), tmp_path, **env)
    assert done.returncode == 0, done.stderr
    warnings = [line for line in done.stderr.splitlines() if line.startswith("npusim: warning: the compiled engine")]
    assert len(warnings) == 1 and "engine/flow.py" in warnings[0] and "`make`" in warnings[0] and done.stderr.count("compiled engine") == 1
    manifest = _manifest(tmp_path / "out")
    assert manifest["engine"] == "interpreted" and "engine/flow.py" in manifest["engine_note"] and "(interpreted engine)" in done.stdout
    env[ENGINE_VARIABLE] = "compiled"
    for command in (_run_args(tmp_path / "refused"), ["config", "show", "a3"]):
        refused = _npusim(command, tmp_path, **env)
        assert refused.returncode == 1 and refused.stderr.startswith("npusim: error: NPUSIM_ENGINE=compiled, but the compiled engine")
        assert "engine/flow.py" in refused.stderr and refused.stderr.count("\n") == 1 and "Traceback" not in refused.stderr, refused.stderr
    assert not (tmp_path / "refused").exists()
    api = subprocess.run([sys.executable, "-c", "import npusim; npusim.session('a3')"], cwd=tmp_path, env={**os.environ, **env},
                         capture_output=True, text=True, timeout=120)
    assert api.returncode == 1 and "npusim.errors.InstallError" in api.stderr and "engine/flow.py" in api.stderr


def test_compiled_files_beside_the_sources_stop_every_command(tmp_path):
    """A checkout built before npusim_compiled (its .so beside the sources): Python would run them
    whatever the choice, so every command exits 1 with one line saying to delete them, writing nothing."""
    copy = _copy_of_the_package(tmp_path)
    (copy / "engine" / f"loop{SUFFIX}").write_bytes(b"")
    for command in (_run_args(tmp_path / "out"), ["config", "show", "a3"]):
        done = _npusim(command, tmp_path, PYTHONPATH=str(tmp_path))
        assert done.returncode == 1 and done.stderr.startswith("npusim: error: ") and f"loop{SUFFIX}" in done.stderr, done.stderr
        assert "delete them" in done.stderr and done.stderr.count("\n") == 1 and "Traceback" not in done.stderr
    assert not (tmp_path / "out").exists()
