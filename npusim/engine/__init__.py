"""The SimPy core: integer-picosecond time, the fluid bandwidth network, progress counters, event triggering."""

from npusim.engine.events import succeed_at
from npusim.engine.flow import FlowClass, FlowNetwork, Resource
from npusim.engine.progress import ProgressCounter

__all__ = ["FlowClass", "FlowNetwork", "ProgressCounter", "Resource", "succeed_at"]
