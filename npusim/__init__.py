"""npusim: a cycle-approximate simulator of Huawei Ascend NPUs (Atlas A2 / A3) on SimPy."""

__version__ = "0.1.0"

from npusim.frontend.session import SimResult, Session, current_session, session, synchronize  # noqa: E402
from npusim.frontend.tensor import DeviceTensor, empty, tensor, zeros  # noqa: E402
from npusim.frontend.workload import param  # noqa: E402
from npusim.frontend.simulate import simulate  # noqa: E402
from npusim.frontend.transfer import transfer  # noqa: E402
from npusim.frontend import pypto  # noqa: E402
from npusim.frontend.launch import launch  # noqa: E402

__all__ = ["DeviceTensor", "Session", "SimResult", "current_session", "empty", "launch", "param", "pypto", "session", "simulate",
           "synchronize", "tensor", "transfer", "zeros", "__version__"]

_LAZY_MODULES = {"torch_npu": "npusim.frontend.torch_npu", "plot": "npusim.plot"}
"""Imported on first use (``from npusim import torch_npu``; ``npusim.plot`` imports matplotlib), so
``import npusim`` stays light."""


def __getattr__(name: str):
    if name in _LAZY_MODULES:
        import importlib

        module = importlib.import_module(_LAZY_MODULES[name])
        globals()[name] = module
        return module
    raise AttributeError(f"module 'npusim' has no attribute {name!r}")
