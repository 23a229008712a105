"""What a finished run leaves behind: the one input of the trace writer, the summary and the
analysis, which never see the live simulated system.

A :class:`RunRecord` is built once, when the run has finished (``System.record()``); it holds the
recorder's events, a snapshot of every bandwidth resource of the network, the spec that was
simulated and the simulated time. Nothing in it changes afterwards: the recorder is complete and
the rate logs are the network's own, which no longer grow once the run is over (they are not
copied, since a long run's logs are large).
"""

from __future__ import annotations

from array import array
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from npusim.engine.flow import RateLog
from npusim.trace.recorder import Recorder

if TYPE_CHECKING:
    from npusim.engine.flow import Resource


@dataclass(frozen=True)
class ResourceRecord:
    """One bandwidth resource at the end of a run: its name, kind (``hbm``, ``l2``, ``link``,
    ``credits``, ``nic`` ...), die (-1 for none), index in the network (the trace's bottleneck
    ids), capacity in bytes/ps, the bytes and flows it carried, and ``rate_log``: ``(time_ps,
    bytes_per_ps)`` at every change of its total rate (a :class:`~npusim.engine.flow.RateLog`,
    empty for resources that keep no log)."""

    name: str
    kind: str
    die: int
    index: int
    capacity: float
    bytes_moved: int
    flows_done: int
    rate_log: RateLog

    @classmethod
    def of(cls, resource: Resource) -> ResourceRecord:
        return cls(resource.name, resource.kind, resource.die, resource.index, resource.capacity, resource.bytes_moved,
                   resource.flows_done, resource.rate_log if resource.rate_log is not None else RateLog())


L2_COUNTS = ("read_hit", "read_miss", "write_hit", "write_miss", "written_back")
"""What an L2 tally counts, in lines (``hw.cache.L2Tally``), in this order in :class:`L2Record`."""


@dataclass(frozen=True)
class L2Record:
    """The L2 of a run (``hw.cache``), in lines of ``line_bytes``: per die, every access of its memory
    (``dies``: die -> the counts of :data:`L2_COUNTS`); per op and kind of unit that accessed memory
    (``ops``: (op, ``aic`` / ``aiv`` / ``sdma`` ...) -> the same, on whichever die's L2); and per die,
    the accesses as the trace's hit-rate counter reads them (``log``: die -> three arrays: per
    microsecond of the run in which accesses reached the L2, its start in ps, the lines that hit,
    the lines; a microsecond may appear more than once)."""

    line_bytes: int
    dies: dict[int, list[float]] = field(default_factory=dict)
    ops: dict[tuple[int, str], list[float]] = field(default_factory=dict)
    log: dict[int, tuple[array[int], array[float], array[int]]] = field(default_factory=dict)


@dataclass(frozen=True)
class RunRecord:
    """A finished run: the ``spec`` simulated (a :class:`~npusim.config.schema.SystemSpec`), the
    simulated time in ps, whether data was simulated, the ``recorder`` with every event, the
    network's ``resources`` in registration order (their ``index``), and the L2 counters."""

    spec: Any
    simulated_ps: int
    with_data: bool
    recorder: Recorder
    resources: tuple[ResourceRecord, ...]
    l2: L2Record = field(default_factory=lambda: L2Record(0))

    def package_of(self, die: int) -> int:
        """The NPU package die ``die`` belongs to."""
        package: int = self.spec.shape.package_of(die)
        return package
