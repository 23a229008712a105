"""The README's set-up commands on a fresh clone, as make plans them (``make -n``, nothing run):
``make run`` installs what ``npusim run`` needs and compiles the engine once; ``make test`` adds
the extras; CI runs ``make run``, ``make lint``, ``make test``."""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from npusim.engine import COMPILED

ROOT = Path(__file__).resolve().parents[1]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))

spec = importlib.util.spec_from_file_location("ci_requirements", ROOT / ".ci" / "requirements.py")
ci_requirements = importlib.util.module_from_spec(spec)
spec.loader.exec_module(ci_requirements)


def planned(tmp_path: Path, target: str) -> list[str]:
    """The commands ``make TARGET`` runs in a fresh clone (no .venv), one a line."""
    for name in ("Makefile", "pyproject.toml", "setup.py"):
        shutil.copy(ROOT / name, tmp_path / name)
    shutil.copytree(ROOT / ".ci", tmp_path / ".ci")
    (tmp_path / "examples").mkdir()
    for name in COMPILED:  # the compiled modules (the Makefile's prerequisites, from this list), whichever they are
        source = tmp_path / "npusim" / (name.replace(".", "/") + ".py")
        source.parent.mkdir(parents=True, exist_ok=True)
        source.write_text("")
    shutil.copy(ROOT / "npusim" / "engine" / "__init__.py", tmp_path / "npusim" / "engine" / "__init__.py")  # where the list is
    env = {name: value for name, value in os.environ.items() if name not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL")}  # not as a sub-make of make test
    run = subprocess.run(["make", "--no-print-directory", "-n", target], cwd=tmp_path, env=env, capture_output=True, text=True, check=True)
    return run.stdout.splitlines()


def installed_parts(commands: list[str]) -> list[str]:
    """The parts of pyproject.toml the commands install (``.ci/requirements.py PARTS``)."""
    return [part for command in commands if ".ci/requirements.py" in command
            for part in command.split(".ci/requirements.py", 1)[1].split(">", 1)[0].split()]


pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")


def test_make_run_installs_only_what_the_main_job_needs_and_compiles_once(tmp_path):
    commands = planned(tmp_path, "run")
    assert installed_parts(commands) == ["build", "run"]
    assert not any(re.search(r"-e\s+'?\.\[", command) for command in commands)  # no extras with the editable install
    assert sum(bool(re.search(r"pip install .*-e \.$", command)) for command in commands) == 1  # the engine is compiled once
    said = next(command for command in commands if command.startswith("echo ") and "compiling the engine" in command)  # says what it does
    assert all(f"npusim/{name.replace('.', '/')}.py" in said for name in COMPILED)  # every module of the list setup.py read
    assert commands[-1].endswith("npusim run --config a3 examples/shmem_allgather.py")


def test_make_test_adds_the_extras_without_compiling_again(tmp_path):
    commands = planned(tmp_path, "test")
    assert set(installed_parts(commands)) == {"build", "run", "test", "torch"}
    assert sum(bool(re.search(r"pip install .*-e \.$", command)) for command in commands) == 1
    assert commands[-1].endswith("python -m pytest -q -n auto --dist loadscope")  # on every core, a count at the end


def test_the_main_jobs_requirements_hold_no_extra():
    main_job = ci_requirements.requirements(["build", "run"], PYPROJECT)
    names = {re.split(r"[\[<>=!~ ]", requirement, maxsplit=1)[0].lower() for requirement in main_job}
    assert names.isdisjoint({"torch", "pyarrow", "pandas", "pytest", "hypothesis", "dask", "ruff"})
    assert {"simpy", "numpy", "mypy", "setuptools"} <= names


def test_an_unknown_part_is_refused_naming_the_extras():
    run = subprocess.run([sys.executable, str(ROOT / ".ci" / "requirements.py"), "tests"], capture_output=True, text=True)
    assert run.returncode != 0 and "no part 'tests'" in run.stderr and "torch" in run.stderr


def test_ci_runs_the_readmes_commands_and_the_lint():
    steps = [line for line in (ROOT / ".ci" / "run").read_text().splitlines() if line.startswith("make ")]
    assert steps == ["make run", "make lint", "make test"]
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    first_block = readme.split("```")[1].strip().splitlines()
    assert [line.split("#")[0].strip() for line in first_block] == ["make run", "make test"]
