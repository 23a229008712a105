"""npusim: a cycle-approximate simulator of Huawei Ascend NPUs (Atlas A2 / A3) on SimPy."""

__version__ = "0.1.0"

from npusim.frontend.session import SimResult, Session, current_session, session, synchronize  # noqa: E402
from npusim.frontend.tensor import DeviceTensor, empty, tensor, zeros  # noqa: E402
from npusim.frontend.workload import param  # noqa: E402
from npusim.frontend.simulate import simulate  # noqa: E402


def __getattr__(name: str):
    """``npusim.plot`` is imported on first use (it imports matplotlib)."""
    if name == "plot":
        import importlib

        return importlib.import_module("npusim.plot")
    raise AttributeError(f"module 'npusim' has no attribute {name!r}")


__all__ = ["DeviceTensor", "Session", "SimResult", "current_session", "empty", "param", "simulate", "session", "synchronize", "tensor", "zeros", "__version__"]
