"""Output files written so that a reader (or an interrupted run) never sees half of one, and the
default names of output folders."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

_NOT_IN_A_FOLDER_NAME = re.compile(r"[^\w.-]")


def default_folder_name(workload: Path, config_name: str) -> str:
    """``<workload>-<config>``, the default output folder of a run or a sweep (under ``traces/`` or
    ``sweeps/``), made one safe path component: every character but letters, digits, ``_``, ``.``
    and ``-`` (a ``/`` above all) becomes ``_``, and so does a leading ``.``; the folder stays inside
    its parent whatever the names hold."""
    name = _NOT_IN_A_FOLDER_NAME.sub("_", f"{workload.stem}-{config_name}")
    return "_" + name[1:] if name.startswith(".") else name


def write_bytes_atomically(path: Path, data: bytes) -> None:
    """Write ``data`` to a temporary name next to ``path``, then rename it over ``path``."""
    temporary = path.with_name(path.name + ".tmp")
    temporary.write_bytes(data)
    os.replace(temporary, path)


def write_json_atomically(path: Path, data: dict) -> None:
    """``data`` as indented JSON with sorted keys, written atomically."""
    write_bytes_atomically(path, (json.dumps(data, indent=2, sort_keys=True) + "\n").encode("utf-8"))
