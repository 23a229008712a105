"""The PyPTO runtime: one ``npusim.launch`` of a PyPTO kernel below the frontend's API, as the
framework's device runtime runs it. The frontend (``npusim.frontend.pypto``) runs the user's kernel
function once per PE and calls down into this package; the AICPU schedulers of ``hw.aicpu`` call
its tasks through the typed protocols of :mod:`npusim.hw.device_task`, which the tasks here
implement, so a tile op goes down through the layers (frontend -> runtime -> kernels / isa -> hw)
without coming back up.

- :mod:`.launch`: :class:`~.launch.ShmemLaunch`, the launch: its PEs' programs, their symmetric
  memory (windows), linking the tile ops into each PE's device task and submitting it to the PE's
  AICPU scheduler; the host it runs for (:class:`~.launch.LaunchHost`, the session).
- :mod:`.program`: :class:`~.program.PeProgram`, what one PE's kernel function built (its ops, in
  call order, and its build state), its ranks in the communication groups; which PE's kernel
  function runs in this thread (:func:`~.program.building_program`).
- :mod:`.symbolic`: :class:`~.symbolic.SymbolicScalar`, PyPTO's runtime integer, which a kernel
  builds its op arguments from and each PE evaluates to its own value.
- :mod:`.writes`: :class:`~.writes.Writes`, which tile ops wrote which part of a tensor: what an op
  that reads a part waits for.
- :mod:`.tasks`: the device tasks, one per tile op: :class:`~.tasks.CoreTask` (a program on one AI
  core), :class:`~.tasks.WaitTask` (a signal slot an AICPU polls), :class:`~.tasks.ControlRead` (a
  device value the control AICPU reads), and :class:`~.tasks.OpNode` (one PyPTO op of a PE).
- :mod:`.templates`: a tile op's program kept for reuse (:class:`~.templates.TileTemplate`) and the
  builders' shares of a program (:class:`~.templates.ProgramPiece`).
- :mod:`.shmem`: the launch's symmetric tensors (:class:`~.shmem.ShmemArea`), the shmem data a tile
  op writes (:class:`~.shmem.RemoteWrite`), what landed in a signal slot (:class:`~.shmem.SlotHistory`).
- :mod:`.ops`: the registry of PyPTO ops (``PYPTO_OPS``): each op of ``npusim.pypto`` by name with
  the unit its tile ops run on.

Building: the kernel function runs once per PE (:class:`~.program.PeProgram` is the PE whose ops are
being built); each op becomes an :class:`~.tasks.OpNode` with one task per tile
(:class:`~.tasks.CoreTask` for an AI core, :class:`~.tasks.WaitTask` for an AICPU poll), each
depending on the tile ops its preds name.

Finishing (:meth:`~.launch.ShmemLaunch.finish`): every create_shmem_tensor / create_shmem_signal is
one :class:`~.shmem.ShmemArea`, the same on every PE; each group gets, on each PE's die, a data
window and a signal window (real GM allocations, as large as the areas the program created need;
signals are control memory, kept even when data is off). Tasks get their successors and their
happens-before bits, and each PE gets an :class:`~npusim.hw.aicpu.AicpuScheduler` on its die's stream.

Running: a core task builds its tile op's ISA program when it is dispatched and runs it on the
chosen core through that core's stream; a wait task reads its slot in the PE's signal window, and
the launch tells the PE's scheduler which waits to read again as their slots change (a signal store
landing, a clear: :meth:`~.launch.ShmemLaunch.slot_changed`). Races are checked as tile ops start; a
deadlock report lists every wait still polling.

Flows (arrows in the trace, edges of the critical path) across PEs, besides the scheduler's own:
``put->signal`` from the last store of a shmem_put (or shmem_store) tile op to each signal store
of a shmem_signal tile op that had it as pred and writes to the PE it wrote to (when the signal is
on the same shmem tensor, only if the signal's tile overlaps the box the put wrote);
``signal->wait`` from each signal store that landed in a slot since it was last cleared to the
poll pass that saw the slot match; ``wait->load`` from that poll pass to the first event of each
shmem_load or shmem_get tile op that had the wait as pred.

Every module here but :mod:`.ops` runs compiled with the engine, in the engine's shared library, or as Python with it:
:mod:`npusim.engine` chooses for all (all or none), and where it chose the compiled modules this
package finds it in the build's ``runtime/`` folder before the source.
"""

from npusim.engine import compiled_first

compiled_first(__name__, __path__)
