"""The build (setup.py) as an install without a C compiler meets it: ``pip install -e`` of a copy
of the checkout, with ``CC`` naming a compiler that is not there, into a fresh virtual environment
that sees this one's packages (as ``make`` runs it: ``--no-build-isolation --no-deps``). It installs
npusim, says once what is missing (and that runs are slower, and how to get the compiled engine),
runs the engine interpreted, recorded so in the manifest, and writes nothing into the checkout.

The same with a C compiler (mypyc compiling the engine, ~15 s more) is checked by CI (.ci/run) on
a clean clone after ``make run``: ``git status`` shows nothing new, and nothing inside npusim/
but bytecode; tests/engine/test_build_check.py checks the compiled install these tests run in."""

from __future__ import annotations

import json
import os
import site
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MISSING = "/nonexistent/cc"


def _files(folder: Path) -> set[str]:
    return {str(path.relative_to(folder)) for path in folder.rglob("*")}


def test_without_a_c_compiler_the_install_says_so_once_and_runs_interpreted(tmp_path):
    checkout = tmp_path / "checkout"
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT, capture_output=True, check=True)
    for name in sorted(set(listed.stdout.decode().split("\0")) - {""}):  # the checkout as a clone has it (with this worktree's edits)
        source, copy = ROOT / name, checkout / name
        copy.parent.mkdir(parents=True, exist_ok=True)
        if source.is_symlink():  # npusim/configs -> ../configs
            copy.symlink_to(os.readlink(source))
        elif source.is_file():
            copy.write_bytes(source.read_bytes())
    before = _files(checkout)
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=60)
    (installed,) = (venv / "lib").glob("python*/site-packages")
    (installed / "these-tests.pth").write_text(site.getsitepackages()[0] + "\n")  # pip, setuptools, mypy, numpy ... of this environment
    python = venv / "bin" / "python"
    env = {**os.environ, "CC": MISSING, "PYTHONDONTWRITEBYTECODE": "1"}
    env.pop("NPUSIM_ENGINE", None)
    install = subprocess.run([str(python), "-m", "pip", "install", "-v", "--no-deps", "--no-build-isolation", "-e", str(checkout)],
                             cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert install.returncode == 0, install.stdout + install.stderr
    said = [line.strip() for line in (install.stdout + install.stderr).splitlines() if "the engine is not compiled" in line]
    assert len(said) == 1, said  # the build's one line (pip shows a build's output with -v only: make prints it after, below)
    line = said[0]
    assert line.startswith("npusim: the engine is not compiled and runs as Python") and "slower" in line and f"{MISSING!r}" in line
    assert "is not found" in line and "gcc" in line and "`make`" in line
    assert not list((installed / "npusim_compiled").rglob("*.so"))

    told = subprocess.run([str(python), "-m", "npusim.engine"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60)
    assert told.returncode == 0 and told.stdout.strip() == line and told.stderr == "", told.stdout + told.stderr  # what make prints

    out = tmp_path / "out"
    run = subprocess.run([str(venv / "bin" / "npusim"), "run", "--config", "a2", str(checkout / "examples" / "vector_add.py"), "--param",
                          "elements=49152", "--param", "tile=1024", "--out", str(out)], cwd=tmp_path, env=env, capture_output=True,
                         text=True, timeout=120)
    assert run.returncode == 0 and "not compiled" not in run.stderr and "warning" not in run.stderr, run.stderr  # said once: at install
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["engine"] == "interpreted" and manifest["compiled_modules"] == [] and MISSING in manifest["engine_note"]
    assert "(interpreted engine)" in run.stdout
    assert _files(checkout) == before  # nothing written into the checkout, not even an ignored file
