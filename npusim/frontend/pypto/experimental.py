"""``pypto.experimental``: the shmem ops that move data between remote GM and UB tiles, and the
operation options (compiler hints: recorded, not modelled, as ``pypto.set_options``)."""

from npusim.frontend.pypto.control import record_hint
from npusim.frontend.pypto.ops import shmem_load, shmem_store

__all__ = ["set_operation_options", "shmem_load", "shmem_store"]


def set_operation_options(*, combine_axis: bool | None = None) -> None:
    """``pypto.experimental.set_operation_options(combine_axis=...)``: a hint to the framework's
    compiler, recorded in the session (``session.pypto_hints``); it does not change the model."""
    record_hint("set_operation_options", {"combine_axis": combine_axis} if combine_axis is not None else {})
