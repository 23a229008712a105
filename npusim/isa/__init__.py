"""The ISA every op is written in: per-core programs of DMA, vector, cube, scalar and sync
instructions on the pipes SCALAR, VECTOR, CUBE, MTE1, MTE2, MTE3, FIXP."""

from npusim.hw.pipes import Pipe
from npusim.isa.instructions import GmAddress, LocalTensor
from npusim.isa.program import CoreProgram, Kernel, ProgramTemplate, building_for, default_system, gm
from npusim.isa.scalar import ScalarExpr, ScalarReg

__all__ = ["CoreProgram", "GmAddress", "Kernel", "LocalTensor", "Pipe", "ProgramTemplate", "ScalarExpr", "ScalarReg", "building_for", "default_system", "gm"]
