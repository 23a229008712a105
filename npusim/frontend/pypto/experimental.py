"""``pypto.experimental``: the shmem ops that move data between remote GM and UB tiles (the ops
registered in this namespace, :mod:`npusim.runtime.ops`), and the operation options (compiler
hints: recorded, not modelled, as ``pypto.set_options``)."""

from npusim.frontend.pypto import ops as _ops  # noqa: F401 (registers the shmem ops)
from npusim.frontend.pypto.control import record_hint
from npusim.runtime.ops import offered as _offered
from npusim.runtime.ops import ops_in as _ops_in

globals().update(_ops_in("experimental"))
__all__ = ["set_operation_options", *sorted(_ops_in("experimental"))]


def set_operation_options(*, combine_axis: bool | None = None) -> None:
    """``pypto.experimental.set_operation_options(combine_axis=...)``: a hint to the framework's
    compiler, recorded in the session (``session.pypto_hints``); it does not change the model."""
    record_hint("set_operation_options", {"combine_axis": combine_axis} if combine_axis is not None else {})


def __getattr__(name: str):
    return _offered("experimental", name)  # an op registered since this module was imported
