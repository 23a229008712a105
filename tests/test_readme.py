"""The README as a new user follows it: its Python example runs as written, and every `npusim`
command of its command blocks runs, in order, in a folder laid out as a fresh clone (the examples
and configs, no traces): each later command finds what the earlier ones wrote."""

import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")

FAST = {  # options the test adds to a README command that is slow as written: the same command, smaller or on fewer workers
    # smaller, into the folder the README's run writes (the default name of a run with --param holds a hash of them)
    "npusim run --config a3 examples/shmem_allgather.py": ["--param", "rows=16", "--param", "cols=512", "--param", "tile_rows=8", "--out",
                                                           "traces/shmem_allgather-a3"],
    "npusim sweep --config a3 examples/vector_add.py": ["--workers", "2"],
    "npusim whatif --config a3 examples/vector_add.py": ["--workers", "2"],
    "npusim validate": ["--only", "transfers"],  # the kernel rows (~4 min of CPU) run in .ci/run, after the tests
}


def readme_commands() -> list[str]:
    """The `npusim ...` lines of the README's command blocks (fenced without a language), in order."""
    commands, fence = [], None  # fence: the language of the open block ("" for none), None outside blocks
    for line in README.splitlines():
        if line.startswith("```"):
            fence = line[3:].strip() if fence is None else None
        elif fence == "" and line.startswith("npusim "):
            commands.append(shlex.join(shlex.split(line, comments=True)))
    return commands


def test_readme_python_example_runs():
    assert README.startswith("# npusim\n\n```\nmake run ") and "\nmake test " in README.split("```")[1]
    code = next(block for block in re.findall(r"```python\n(.*?)```", README, re.S) if "with npusim.session" in block)
    namespace: dict = {}
    exec(compile(code, "README.md", "exec"), namespace)
    assert namespace["s"].result.status == "ok"
    assert namespace["x"].numpy()[0] == 2.0


def test_the_fast_variants_name_readme_commands():
    commands = readme_commands()
    assert all(any(command.startswith(prefix) for command in commands) for prefix in FAST)


@pytest.fixture(scope="module")
def followed(tmp_path_factory):
    """Every README command run in order in a fresh clone's layout: (command, completed process)."""
    clone = tmp_path_factory.mktemp("clone")
    for folder in ("examples", "configs"):
        shutil.copytree(ROOT / folder, clone / folder)
    env = dict(os.environ, PYTHONPATH=str(ROOT), MPLBACKEND="Agg")
    runs = []
    for command in readme_commands():
        args = shlex.split(command)[1:] + next((extra for prefix, extra in FAST.items() if command.startswith(prefix)), [])
        run = subprocess.run([sys.executable, "-m", "npusim", *args], cwd=clone, env=env, capture_output=True, text=True, timeout=600)
        runs.append((command, run))
    return clone, runs


def test_every_readme_command_runs_in_order_on_a_fresh_clone(followed):
    _, runs = followed
    assert len(runs) >= 10
    for command, run in runs:
        assert run.returncode == 0, f"{command}\n{run.stdout[-2000:]}\n{run.stderr[-2000:]}"


def output_of(runs, start: str) -> str:
    return next(run.stdout for command, run in runs if command.startswith(start))


def test_the_commands_do_what_the_readme_says(followed):
    clone, runs = followed
    assert "shmem_allgather.py on a3" in output_of(runs, "npusim report traces/shmem_allgather-a3")
    assert {"trace.json", "summary.json", "manifest.json", "config.yaml", "op_summary.csv", "pipe_utilization.csv"} <= {
        path.name for path in (clone / "traces" / "base").iterdir()}
    compare = output_of(runs, "npusim compare traces/base traces/fast")
    assert "config keys that differ" in compare and "die.hbm.bandwidth" in compare and "3.2 TB/s" in compare
    shown = output_of(runs, "npusim config show a3").splitlines()
    assert "  # " in next(line for line in shown if line.strip().startswith("bandwidth: 1.6 TB/s"))  # with its source, as promised
    quoted = re.search(r'reads the ranking in one line \("(.*?)"\)', README.replace("\n", " "), re.S)
    assert quoted and f"reading: {quoted.group(1)}" in output_of(runs, "npusim whatif")  # the README quotes what whatif prints
