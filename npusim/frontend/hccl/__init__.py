"""HCCL on the simulated machine: communicators, the play of a collective's schedule
(:mod:`.runtime`), and the Python API that calls a collective for every rank at once (:mod:`.api`)."""
