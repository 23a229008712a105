"""The SimPy core: integer-picosecond time, the fluid bandwidth network, progress counters, and the
event loop (the one module that uses SimPy's internals)."""

from npusim.engine.flow import FlowClass, FlowNetwork, Resource
from npusim.engine.loop import Stop, clock, run_until, succeed_at
from npusim.engine.progress import ProgressCounter

__all__ = ["FlowClass", "FlowNetwork", "ProgressCounter", "Resource", "Stop", "clock", "run_until", "succeed_at"]
