"""HCCL's collectives as schedules over the fabric (docs/collectives.md).

- :mod:`.schedule`: steps of transfers between the ranks' work buffers;
- :mod:`.algorithm` and one module per algorithm (ring, mesh, double_ring, rhd, nhr, nb, pairwise,
  pipeline), each registered in :data:`npusim.config.registry.COLLECTIVES`;
- :mod:`.hierarchy`: the levels of a communicator and HCCL's hierarchical phases of each op;
- :mod:`.plan`: a whole op in single-op mode (staging through the communication buffer, passes);
- :mod:`.selection`: which algorithm HCCL takes per level, and what it refuses;
- :mod:`.reduce`: the reductions on real bytes, the dtypes and ops HCCL takes.

Nothing here touches SimPy; the runtime (``npusim.frontend.hccl``) plays a schedule.
"""
