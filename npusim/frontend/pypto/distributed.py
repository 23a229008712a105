"""``pypto.distributed``: PyPTO's distributed shared-memory ops (``docs/shmem.md``).

``shmem_load`` is here too, under the name the op's documentation page uses; the framework
defines it as ``pypto.experimental.shmem_load``.
"""

from npusim.frontend.pypto.ops import (
    create_shmem_signal,
    create_shmem_tensor,
    my_symbolic_pe,
    shmem_barrier_all,
    shmem_clear_data,
    shmem_clear_signal,
    shmem_get,
    shmem_load,
    shmem_put,
    shmem_signal,
    shmem_view,
    shmem_wait_until,
)
from npusim.frontend.pypto.tensors import ShmemTensor

__all__ = [
    "ShmemTensor",
    "create_shmem_signal",
    "create_shmem_tensor",
    "my_symbolic_pe",
    "shmem_barrier_all",
    "shmem_clear_data",
    "shmem_clear_signal",
    "shmem_get",
    "shmem_load",
    "shmem_put",
    "shmem_signal",
    "shmem_view",
    "shmem_wait_until",
]
