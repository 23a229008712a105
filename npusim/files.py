"""Output files written so that a reader (or an interrupted run) never sees half of one."""

from __future__ import annotations

import json
import os
from pathlib import Path


def write_bytes_atomically(path: Path, data: bytes) -> None:
    """Write ``data`` to a temporary name next to ``path``, then rename it over ``path``."""
    temporary = path.with_name(path.name + ".tmp")
    temporary.write_bytes(data)
    os.replace(temporary, path)


def write_json_atomically(path: Path, data: dict) -> None:
    """``data`` as indented JSON with sorted keys, written atomically."""
    write_bytes_atomically(path, (json.dumps(data, indent=2, sort_keys=True) + "\n").encode("utf-8"))
