"""The requirements of named parts of pyproject.toml, one a line, for ``pip install -r``.

``build`` is ``[build-system] requires`` (what compiles the engine), ``run`` the project's own
dependencies (what ``npusim run`` imports), any other name an extra (``test``, ``torch``, ``lint``,
...). The Makefile installs the parts each of its targets needs from here, so that pyproject.toml
stays the one list: ``make run`` installs ``build`` and ``run`` only, ``make test`` the extras.

    python .ci/requirements.py build run > requirements.txt
"""

from __future__ import annotations

import sys
import tomllib
from pathlib import Path

PYPROJECT = Path(__file__).resolve().parents[1] / "pyproject.toml"


def requirements(parts: list[str], pyproject: dict) -> list[str]:
    """The requirement specifiers of ``parts``, in order, each once."""
    extras = pyproject["project"].get("optional-dependencies", {})
    found: list[str] = []
    for part in parts:
        if part == "build":
            found += pyproject["build-system"]["requires"]
        elif part == "run":
            found += pyproject["project"]["dependencies"]
        elif part in extras:
            found += extras[part]
        else:
            raise SystemExit(f"requirements.py: no part {part!r} in {PYPROJECT.name}: give build, run or one of the extras {', '.join(extras)}")
    return list(dict.fromkeys(found))


if __name__ == "__main__":
    if len(sys.argv) < 2:
        raise SystemExit(__doc__)
    print("\n".join(requirements(sys.argv[1:], tomllib.loads(PYPROJECT.read_text(encoding="utf-8")))))
