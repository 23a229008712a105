"""HCCL's collectives as schedules over the fabric (docs/collectives.md).

- :mod:`.schedule`: steps of transfers between the ranks' work buffers;
- :mod:`.algorithm` and one module per algorithm (ring, mesh, double_ring, rhd, nhr, nb, pairwise,
  pipeline), each registered in :data:`npusim.config.registry.COLLECTIVES`;
- :mod:`.hierarchy`: the levels of a communicator and HCCL's hierarchical phases of each op;
- :mod:`.plan`: a whole op in single-op mode (staging through the communication buffer, passes);
- :mod:`.selection`: which algorithm HCCL takes per level, and what it refuses;
- :mod:`.reduce`: the reductions on real bytes, the dtypes and ops HCCL takes.

Nothing here touches SimPy; the runtime (``npusim.frontend.hccl``) plays a schedule.

:mod:`.staging` runs compiled with the engine, in the engine's shared library, or as Python with it:
:mod:`npusim.engine` chooses for all (all or none), and where it chose the compiled modules this
package finds it in the build's ``kernels/hccl/`` folder before the source.
"""

from npusim.engine import compiled_first

compiled_first(__name__, __path__)
