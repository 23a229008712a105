"""The check that the compiled engine was built from the sources beside it (npusim/engine/__init__.py):
an edit or a pull after the build gives a clear error saying how to build again, not the old code."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import npusim.engine
from npusim.engine import COMPILED, stale_modules, stale_sources

ENGINE = Path(npusim.engine.__file__).parent
ROOT = Path(__file__).resolve().parents[2]
COMPILED_HERE = all(npusim.engine._compiled(name) for name in COMPILED)


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_the_installed_engine_matches_its_sources():
    assert stale_modules() == []


def test_setup_compiles_the_modules_the_check_knows():
    setup = (ROOT / "setup.py").read_text()
    assert all(f'"npusim/engine/{name}.py"' in setup for name in COMPILED)


def test_a_source_edited_after_the_build_is_stale(tmp_path):
    for name in ("flow.py", "loop.py"):
        (tmp_path / name).write_text(f"# {name}\n")
    built = {name: _digest(tmp_path / name) for name in ("flow.py", "loop.py")}
    assert stale_sources(tmp_path, ["flow.py", "loop.py"], built) == []
    (tmp_path / "loop.py").write_text("# loop.py, edited\n")
    assert stale_sources(tmp_path, ["flow.py", "loop.py"], built) == ["loop.py"]


def test_a_build_that_recorded_no_digests_is_stale(tmp_path):
    (tmp_path / "flow.py").write_text("x = 1\n")
    assert stale_sources(tmp_path, ["flow.py"], {}) == ["flow.py"]


def test_modules_running_as_python_are_never_stale(tmp_path):
    assert stale_sources(tmp_path, [], {}) == []


@pytest.mark.skipif(not COMPILED_HERE, reason="the engine runs as Python here: nothing compiled to be stale")
def test_every_command_says_how_to_build_again(tmp_path):
    """A copy of the package whose flow.py changed after the build: each command exits 1 with one
    error naming the file and `make`, no traceback; the Python API raises the same InstallError."""
    copy = tmp_path / "npusim"
    shutil.copytree(ENGINE.parent, copy, ignore=shutil.ignore_patterns("__pycache__"))
    with open(copy / "engine" / "flow.py", "a") as source:
        source.write("# edited after the build\n")
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    for command in (["run", "--config", "a3", str(ROOT / "examples" / "vector_add.py"), "--out", str(tmp_path / "out")],
                    ["config", "show", "a3"]):
        done = subprocess.run([sys.executable, "-m", "npusim", *command], cwd=tmp_path, env=env, capture_output=True, text=True,
                              timeout=120)
        assert done.returncode == 1, done.stderr
        assert done.stderr.startswith("npusim: error: npusim's compiled engine") and "flow.py" in done.stderr, done.stderr
        assert "`make`" in done.stderr and "Traceback" not in done.stderr and done.stderr.count("\n") == 1
        assert not (tmp_path / "out").exists()  # nothing written
    api = subprocess.run([sys.executable, "-c", "import npusim; npusim.session('a3')"], cwd=tmp_path, env=env, capture_output=True,
                         text=True, timeout=120)
    assert api.returncode == 1 and "npusim.errors.InstallError" in api.stderr and "flow.py" in api.stderr


@pytest.mark.skipif(not COMPILED_HERE, reason="the engine runs as Python here: nothing compiled to be stale")
def test_a_partial_rebuild_is_caught_whichever_compiled_files_are_left(tmp_path):
    """loop.py edited and only its own .so deleted: the other compiled modules still call the old
    compiled loop inside their shared library, so the check covers every module while any .so is there."""
    copy = tmp_path / "npusim"
    shutil.copytree(ENGINE.parent, copy, ignore=shutil.ignore_patterns("__pycache__"))
    with open(copy / "engine" / "loop.py", "a") as source:
        source.write("# edited after the build\n")
    (own,) = [path for path in (copy / "engine").iterdir() if path.name.startswith("loop.") and path.suffix == ".so"]
    own.unlink()
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    done = subprocess.run([sys.executable, "-m", "npusim", "run", "--config", "a2", str(ROOT / "examples" / "vector_add.py"), "--out",
                           str(tmp_path / "out")], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 1 and "other versions of loop.py" in done.stderr and "Traceback" not in done.stderr, done.stderr
    assert not (tmp_path / "out").exists()
    for path in (copy / "engine").iterdir():  # with no compiled file left, the Python sources run
        if path.suffix == ".so":
            path.unlink()
    python = subprocess.run([sys.executable, "-c", "import npusim.engine.loop as loop; print(loop.__file__)"], cwd=tmp_path, env=env,
                            capture_output=True, text=True, timeout=120)
    assert python.returncode == 0 and python.stdout.strip().endswith("loop.py"), python.stderr
