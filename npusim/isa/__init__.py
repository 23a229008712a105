"""The ISA every op is written in: per-core programs of DMA, vector, cube, scalar and sync
instructions on the pipes SCALAR, VECTOR, CUBE, MTE1, MTE2, MTE3, FIXP.

Its modules :mod:`npusim.isa.program` and :mod:`npusim.isa.instructions` run compiled with the
engine, in the engine's shared library, or as Python with it: :mod:`npusim.engine` chooses for all
of them (all or none), and where it chose the compiled modules this package finds ``program`` and
``instructions`` in the build's ``isa/`` folder before the sources.
"""

from npusim.engine import compiled_first

compiled_first(__name__, __path__)

from npusim.hw.pipes import Pipe  # noqa: E402  (after the choice: it sets where program is found)
from npusim.isa.instructions import GmAddress, LocalTensor  # noqa: E402
from npusim.isa.program import CoreProgram, Kernel, ProgramTemplate, building_for, default_system, gm  # noqa: E402
from npusim.isa.scalar import ScalarExpr, ScalarReg  # noqa: E402

__all__ = ["CoreProgram", "GmAddress", "Kernel", "LocalTensor", "Pipe", "ProgramTemplate", "ScalarExpr", "ScalarReg", "building_for", "default_system", "gm"]
