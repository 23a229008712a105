"""mypy over npusim as CI runs it: no error in the strict layers, and elsewhere a ratchet.

The strict layers are the modules of pyproject.toml's ``[[tool.mypy.overrides]]`` entry that sets
``disallow_untyped_defs`` (engine, config, trace): any error there fails. Every other error is
counted against the number in ``.ci/mypy-ratchet``: more fails (fix the new ones), fewer fails too
until the file holds the new count, so the count may only fall. Exit status 0 when both hold.
"""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RATCHET = ROOT / ".ci" / "mypy-ratchet"
ERROR = re.compile(r"^(?P<path>[\w/.]+\.py):\d+: error: ")


def strict_prefixes() -> tuple[str, ...]:
    """The sources of the strict modules: a package's folder (``npusim.engine.*`` -> ``npusim/engine/``),
    a module's file (``npusim.hw.device_task`` -> ``npusim/hw/device_task.py``)."""
    overrides = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["mypy"]["overrides"]
    modules = [m for entry in overrides if entry.get("disallow_untyped_defs") for m in entry["module"]]
    return tuple(m.removesuffix(".*").replace(".", "/") + "/" if m.endswith(".*") else m.replace(".", "/") + ".py" for m in modules)


def main() -> int:
    run = subprocess.run([sys.executable, "-m", "mypy"], cwd=ROOT, capture_output=True, text=True)
    errors = [line for line in run.stdout.splitlines() if ERROR.match(line)]
    if run.returncode not in (0, 1) or (run.returncode == 1 and not errors):
        print(run.stdout + run.stderr, file=sys.stderr)
        print("typecheck: mypy did not run; see its output above", file=sys.stderr)
        return 2
    strict = strict_prefixes()
    in_strict = [line for line in errors if line.startswith(strict)]
    others = len(errors) - len(in_strict)
    allowed = int(RATCHET.read_text().split()[0])
    status = 0
    if in_strict:
        print("\n".join(in_strict))
        print(f"typecheck: {len(in_strict)} error(s) in the strict layers ({', '.join(strict)}): fix them", file=sys.stderr)
        status = 1
    if others > allowed:
        print("\n".join(line for line in errors if not line.startswith(strict)))
        print(f"typecheck: {others} errors outside the strict layers, more than the {allowed} of {RATCHET.relative_to(ROOT)}: "
              "fix the new ones (the count may only fall)", file=sys.stderr)
        status = 1
    elif others < allowed:
        print(f"typecheck: {others} errors outside the strict layers, fewer than the {allowed} of {RATCHET.relative_to(ROOT)}: "
              f"write {others} there so the ratchet keeps the gain", file=sys.stderr)
        status = 1
    if status == 0:
        print(f"typecheck: strict layers clean; {others} errors elsewhere (ratchet {allowed})")
    return status


if __name__ == "__main__":
    sys.exit(main())
