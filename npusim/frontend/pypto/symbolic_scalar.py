"""``pypto.symbolic_scalar`` (the framework's module path, ``from pypto.symbolic_scalar import SymInt``):
``SymbolicScalar`` and ``SymInt``, the type of an int argument that may be symbolic."""

from __future__ import annotations

from npusim.runtime.symbolic import SymbolicScalar

SymInt = int | SymbolicScalar
"""An int or a SymbolicScalar (symbolic_scalar.py)."""

__all__ = ["SymInt", "SymbolicScalar"]
