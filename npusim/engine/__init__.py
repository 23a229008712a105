"""The SimPy core: integer-picosecond time, the fluid bandwidth network, progress counters."""

from npusim.engine.flow import FlowClass, FlowNetwork, Resource
from npusim.engine.progress import ProgressCounter

__all__ = ["FlowClass", "FlowNetwork", "ProgressCounter", "Resource"]
