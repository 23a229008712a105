"""The hardware model: AI cores and their pipes, DMA engines and queues, caches, memories, the
AICPU, dies and their links (docs/architecture.md).

Its modules :mod:`npusim.hw.core`, :mod:`npusim.hw.queue`, :mod:`npusim.hw.cache`, :mod:`npusim.hw.dma`, :mod:`npusim.hw.aicpu`,
:mod:`npusim.hw.system`, :mod:`npusim.hw.topology`, :mod:`npusim.hw.stream` and :mod:`npusim.hw.memory` run compiled
with the engine, in the engine's shared library, or as Python with it: :mod:`npusim.engine`
chooses for all (all or none), and where it chose the compiled modules this package finds them in
the build's ``hw/`` folder before the sources.
"""

from npusim.engine import compiled_first

compiled_first(__name__, __path__)
