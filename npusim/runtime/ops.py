"""The PyPTO ops npusim models, registered by name (``PYPTO_OPS``): each with the namespaces of
``npusim.pypto`` that offer it (``pypto.add``, ``pypto.distributed.shmem_put``) and the unit its
tile ops run on. An op is added by registering its API function
(``npusim.frontend.pypto.ops.pypto_op``, docs/architecture.md "Adding a PyPTO op"): the namespaces
then offer it by name, and its tile ops run on the unit it names."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from npusim.config.registry import Registry

NAMESPACES = ("pypto", "distributed", "experimental")
"""The namespaces of ``npusim.pypto`` that offer ops: ``pypto`` itself, ``pypto.distributed``,
``pypto.experimental``."""
UNITS = ("vector", "cube", "aicpu", "none")
"""Where an op's tile ops run: the cores the product runs vector / cube kernels on
(``config.products``), the AICPU that polls (the waits), or nowhere (an op that only makes or views
tensors)."""


@dataclass(frozen=True)
class PyptoOp:
    """One PyPTO op: ``name`` (as the framework spells it, the trace's op name), the ``namespaces``
    that offer it, the ``unit`` its tile ops run on and ``api``, the function a kernel calls."""

    name: str
    namespaces: tuple[str, ...]
    unit: str
    api: Callable[..., Any]

    def __post_init__(self) -> None:
        if not self.namespaces or not set(self.namespaces) <= set(NAMESPACES):
            raise ValueError(f"PyPTO op {self.name!r}: namespaces={self.namespaces!r} must be some of {', '.join(NAMESPACES)}")
        if self.unit not in UNITS:
            raise ValueError(f"PyPTO op {self.name!r}: unit={self.unit!r} must be one of {', '.join(UNITS)}")


PYPTO_OPS: Registry[PyptoOp] = Registry("PyPTO op")


def ops_in(namespace: str) -> dict[str, Callable[..., Any]]:
    """The API functions of the ops ``namespace`` offers, by name."""
    return {name: op.api for name, op in PYPTO_OPS if namespace in op.namespaces}


def offered(namespace: str, name: str) -> Callable[..., Any]:
    """The op ``name`` of ``namespace`` (a module ``__getattr__``: an op registered after the
    namespace was imported is offered too); AttributeError if none."""
    op = PYPTO_OPS.get(name) if name in PYPTO_OPS else None
    if op is None or namespace not in op.namespaces:
        raise AttributeError(f"module 'npusim.pypto{'' if namespace == 'pypto' else '.' + namespace}' has no attribute {name!r}")
    return op.api
