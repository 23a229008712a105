"""HCCL's environment variables against npusim's config.

HCCL reads its settings from the environment of the process that creates a communicator
(``HCCL_ALGO``, ``HCCL_BUFFSIZE`` in MB, ``HCCL_OP_EXPANSION_MODE``, ``HCCL_DETERMINISTIC``: the HCCL
user guide's environment variable pages). npusim takes them from the config's ``hccl`` section
(``--set hccl.algo=...``), so that a run is reproduced from its folder alone. A program or shell that
sets one of them to something other than the config's value would otherwise be simulated with a
setting it did not ask for, silently: :func:`check_environment` warns, once per variable and
value, naming the ``--set`` that runs what the environment says.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Callable, Mapping

from npusim.config.schema import HcclAlgoSpec, HcclSpec, parse_hccl_algo


class HcclEnvironmentWarning(UserWarning):
    """An HCCL environment variable is set to something other than what npusim's config runs."""


def _algo(value: str, hccl: HcclSpec) -> tuple[bool, str]:
    try:
        wanted = HcclAlgoSpec.model_validate(parse_hccl_algo(value))
    except ValueError:
        return False, f"hccl.algo={value}"  # not HCCL_ALGO's syntax: the config's check names the fault when it is passed
    return wanted == hccl.algo, f"hccl.algo={value}"


def _buffer(value: str, hccl: HcclSpec) -> tuple[bool, str]:
    megabytes = value.strip()
    same = megabytes.isdigit() and int(megabytes) * 2**20 == hccl.buffer.bytes
    return same, f"hccl.buffer={megabytes}MiB"


def _expansion(value: str, hccl: HcclSpec) -> tuple[bool, str]:
    mode = value.strip().lower()
    return mode == hccl.expansion_mode, f"hccl.expansion_mode={mode}"


def _deterministic(value: str, hccl: HcclSpec) -> tuple[bool, str]:
    flag = value.strip().lower()
    return flag == str(hccl.deterministic).lower(), f"hccl.deterministic={flag}"


VARIABLES: dict[str, Callable[[str, HcclSpec], tuple[bool, str]]] = {
    "HCCL_ALGO": _algo,
    "HCCL_BUFFSIZE": _buffer,
    "HCCL_OP_EXPANSION_MODE": _expansion,
    "HCCL_DETERMINISTIC": _deterministic,
}
"""Each variable -> whether its value is what ``hccl`` runs, and the override that would run it."""


def check_environment(hccl: HcclSpec, environ: Mapping[str, str] | None = None) -> None:
    """Warn for each HCCL variable set in ``environ`` (the process's) whose value the config does not run."""
    environ = os.environ if environ is None else environ
    for name, compare in VARIABLES.items():
        value = environ.get(name)
        if value is None or value.strip() == "":
            continue
        same, override = compare(value, hccl)
        if not same:
            warnings.warn(f"{name}={value} is set in the environment, but npusim takes HCCL's settings from its config, not from the "
                          f"environment (so that a run folder reproduces the run); to simulate it, pass --set '{override}' to npusim "
                          f"run / bench, or overrides=['{override}'] to npusim.session", HcclEnvironmentWarning, stacklevel=2)
