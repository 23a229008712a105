"""The hardware model: AI cores and their pipes, DMA engines and queues, caches, memories, the
AICPU, dies and their links (docs/architecture.md).

Its module :mod:`npusim.hw.core` runs compiled with the engine, in the engine's shared library,
or as Python with it: :mod:`npusim.engine` chooses for both (all or none), and where it chose the
compiled modules this package finds ``core`` in the build's ``hw/`` folder before the source.
"""

from npusim.engine import CHOICE

if CHOICE.folder is not None:
    __path__.insert(0, str(CHOICE.folder / "hw"))  # the package's own path: the compiled module is found before the source
