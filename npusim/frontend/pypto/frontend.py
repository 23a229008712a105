"""``pypto.frontend``: the framework's kernel decorators (``jit``, ``function``, ``dynamic``)."""

from npusim.frontend.pypto.control import dynamic, function, jit

__all__ = ["dynamic", "function", "jit"]
