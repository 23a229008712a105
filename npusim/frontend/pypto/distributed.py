"""``pypto.distributed``: PyPTO's distributed shared-memory ops (``docs/shmem.md``): the ops
registered in this namespace (:mod:`npusim.runtime.ops`, registered in :mod:`.ops`).

``shmem_load`` is here too, under the name the op's documentation page uses; the framework
defines it as ``pypto.experimental.shmem_load``.
"""

from npusim.frontend.pypto import ops as _ops  # noqa: F401 (registers the shmem ops)
from npusim.frontend.pypto.ops import my_symbolic_pe
from npusim.frontend.pypto.tensors import ShmemTensor
from npusim.runtime.ops import offered as _offered
from npusim.runtime.ops import ops_in as _ops_in

globals().update(_ops_in("distributed"))
__all__ = ["ShmemTensor", "my_symbolic_pe", *sorted(_ops_in("distributed"))]


def __getattr__(name: str):
    return _offered("distributed", name)  # an op registered since this module was imported
