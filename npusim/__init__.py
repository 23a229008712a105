"""npusim: a cycle-approximate simulator of Huawei Ascend NPUs (Atlas A2 / A3) on SimPy."""

__version__ = "0.1.0"

from npusim.frontend.session import SimResult, Session, current_session, session, synchronize  # noqa: E402
from npusim.frontend.tensor import DeviceTensor, empty, tensor, zeros  # noqa: E402
from npusim.frontend import pypto  # noqa: E402
from npusim.frontend.launch import launch  # noqa: E402

__all__ = ["DeviceTensor", "Session", "SimResult", "current_session", "empty", "launch", "pypto", "session", "synchronize",
           "tensor", "zeros", "__version__"]
