"""``pypto.experimental``: the shmem ops that move data between remote GM and UB tiles."""

from npusim.frontend.pypto.ops import shmem_load, shmem_store

__all__ = ["shmem_load", "shmem_store"]
