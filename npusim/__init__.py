"""npusim: a cycle-approximate simulator of Huawei Ascend NPUs (Atlas A2 / A3) on SimPy.

The public names (``npusim.session``, ``npusim.tensor``, ``npusim.launch``, ``npusim.pypto`` ...) live
in the frontend and are imported on first use, so that importing a lower layer (``npusim.hw``,
``npusim.isa`` ...) does not pull in the frontend (docs/architecture.md: imports go one way);
``npusim.<subpackage>`` is likewise imported on first use.
"""

import importlib
import importlib.util

__version__ = "0.1.0"

_PUBLIC = {
    "SimResult": "npusim.frontend.session",
    "Session": "npusim.frontend.session",
    "current_session": "npusim.frontend.session",
    "session": "npusim.frontend.session",
    "synchronize": "npusim.frontend.session",
    "DeviceTensor": "npusim.frontend.tensor",
    "empty": "npusim.frontend.tensor",
    "tensor": "npusim.frontend.tensor",
    "zeros": "npusim.frontend.tensor",
    "param": "npusim.frontend.workload",
    "simulate": "npusim.frontend.simulate",
    "transfer": "npusim.frontend.transfer",
    "launch": "npusim.frontend.launch",
    "spawn": "npusim.frontend.ranks",
}
"""Public name -> the frontend module that defines it."""

_MODULES = {"pypto": "npusim.frontend.pypto", "plot": "npusim.plot"}
"""Public modules by their short name (``npusim.plot`` imports matplotlib when first used)."""

__all__ = ["DeviceTensor", "Session", "SimResult", "current_session", "empty", "launch", "param", "pypto", "session", "simulate",
           "spawn", "synchronize", "tensor", "transfer", "zeros", "__version__"]


def __getattr__(name: str):
    if name in _PUBLIC:
        value = getattr(importlib.import_module(_PUBLIC[name]), name)
    elif name in _MODULES:
        value = importlib.import_module(_MODULES[name])
    elif not name.startswith("_") and importlib.util.find_spec(f"npusim.{name}") is not None:
        value = importlib.import_module(f"npusim.{name}")
    else:
        raise AttributeError(f"module 'npusim' has no attribute {name!r}")
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
