"""Whole-command CPU of the command line: ``npusim --help``, ``npusim run --help`` and the README's
main job (``npusim run --config a3 examples/shmem_allgather.py --no-data``, also with ``--trace
none``), on 2 PEs (``--param n_pes=2``: the same imports, config and outputs around a simulation
that takes little) and of an empty workload (a file that only imports npusim: the fixed cost of
``npusim run``, its imports, config and outputs, without the simulation), each a fresh process,
against a baseline checkout measured in the same run.

    python benchmarks/startup.py [--baseline /path/to/main/checkout] [--repeat 3]

Each command runs ``--repeat`` times per checkout, the two checkouts interleaved, with each
checkout's own ``.venv``; CPU is user + system time of the process (os.wait4). Prints per command
the CPU seconds of every run and the ratio baseline / this checkout (min and median). Without
``--baseline`` the ratios are against ``python -c pass`` of this checkout's interpreter (the
cost of a bare interpreter).

Bytecode is cached in a temporary folder (PYTHONPYCACHEPREFIX, PYTHONDONTWRITEBYTECODE unset), as an
installed npusim has its .pyc files, and every command runs once untimed first, so no timed run
compiles sources.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from running_on import running_on

HERE = Path(__file__).resolve().parents[1]
MAIN_JOB = ["run", "--config", "a3", "examples/shmem_allgather.py", "--no-data"]
EMPTY_WORKLOAD = "empty_workload.py"
"""A workload that only imports npusim, written into the scratch folder of the measurement."""
COMMANDS = {
    "npusim --help": ["--help"],
    "npusim run --help": ["run", "--help"],
    "main job": MAIN_JOB,
    "main job --trace none": [*MAIN_JOB, "--trace", "none"],
    "small job": [*MAIN_JOB, "--param", "n_pes=2"],
    "empty workload": ["run", "--config", "a3", EMPTY_WORKLOAD, "--no-data"],
}
"""Name -> the arguments of ``npusim`` (a run's example path is taken in the checkout measured,
``EMPTY_WORKLOAD`` in the folder of the measurement)."""


def cpu_seconds(command: list[str], cwd: Path, env: dict[str, str]) -> float:
    """User + system CPU seconds of ``command`` run to its end (its output discarded); it must succeed."""
    with tempfile.TemporaryFile() as errors:
        process = subprocess.Popen(command, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=errors)
        _, status, usage = os.wait4(process.pid, 0)
        process.returncode = os.waitstatus_to_exitcode(status)
        if process.returncode != 0:
            errors.seek(0)
            raise SystemExit(f"{' '.join(command)} failed ({process.returncode}): {errors.read().decode()[-2000:]}")
    return usage.ru_utime + usage.ru_stime


class Checkout:
    """A checkout with its ``.venv``: runs npusim commands in a scratch folder."""

    def __init__(self, root: Path, scratch: Path, env: dict[str, str]) -> None:
        self.root, self.scratch, self.env = root, scratch, env
        self.npusim = root / ".venv" / "bin" / "npusim"
        if not self.npusim.exists():
            raise SystemExit(f"{self.npusim} does not exist: set up the checkout's venv (make .venv/.installed)")

    def run(self, arguments: list[str]) -> float:
        """CPU seconds of ``npusim ARGUMENTS`` (a run writes into the scratch folder)."""
        arguments = [str(self.root / a) if a.startswith("examples/") else str(self.scratch.parent / a) if a == EMPTY_WORKLOAD else a
                     for a in arguments]
        out = self.scratch / "out"
        is_run = arguments[0] == "run" and "--help" not in arguments
        return cpu_seconds([str(self.npusim), *arguments, *(["--out", str(out)] if is_run else [])], self.scratch, self.env)


def describe(runs: list[float]) -> str:
    return ", ".join(f"{x:.3f}" for x in runs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", type=Path, help="a checkout (with its .venv) to compare against, e.g. main's")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--only", choices=list(COMMANDS), action="append", help="measure only these commands (repeatable)")
    args = parser.parse_args()
    print(running_on())
    names = args.only or list(COMMANDS)

    with tempfile.TemporaryDirectory(prefix="npusim-startup-") as folder:
        env = {key: value for key, value in os.environ.items() if key != "PYTHONDONTWRITEBYTECODE"}
        env["PYTHONPYCACHEPREFIX"] = str(Path(folder) / "pycache")
        (Path(folder) / EMPTY_WORKLOAD).write_text("import npusim\n")
        this = Checkout(HERE, Path(folder) / "this", env)
        baseline = Checkout(args.baseline.resolve(), Path(folder) / "baseline", env) if args.baseline else None
        checkouts = [c for c in (baseline, this) if c is not None]
        for checkout in checkouts:
            checkout.scratch.mkdir()
            for name in names:
                checkout.run(COMMANDS[name])  # warm-up: bytecode cached, files in the page cache
        bare = [sys.executable, "-c", "pass"]
        floor = [cpu_seconds(bare, HERE, env) for _ in range(args.repeat)]
        results: dict[tuple[str, str], list[float]] = {}
        for _ in range(args.repeat):
            for name in names:
                for label, checkout in (("baseline", baseline), ("this", this)):
                    if checkout is not None:
                        results.setdefault((name, label), []).append(checkout.run(COMMANDS[name]))

    print(f"python -c pass: CPU s {describe(floor)}")
    print(f"{'command':24s} {'baseline CPU s' if baseline else '':28s} {'this checkout CPU s':28s} ratio min / median")
    for name in names:
        mine = results[(name, "this")]
        theirs = results[(name, "baseline")] if baseline else floor
        ratio = f"{min(theirs) / min(mine):.2f} / {statistics.median(theirs) / statistics.median(mine):.2f}"
        print(f"{name:24s} {describe(theirs) if baseline else '':28s} {describe(mine):28s} {ratio}")


if __name__ == "__main__":
    main()
