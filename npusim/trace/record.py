"""What a finished run leaves behind: the one input of the trace writer, the summary and the
analysis, which never see the live simulated system.

A :class:`RunRecord` is built once, when the run has finished (``System.record()``); it holds the
recorder's events, a snapshot of every bandwidth resource of the network, the spec that was
simulated and the simulated time. Nothing in it changes afterwards: the recorder is complete and
the rate logs are the network's own, which no longer grow once the run is over (they are not
copied, since a long run's logs are large).
"""

from __future__ import annotations

from dataclasses import dataclass
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


@dataclass(frozen=True)
class RunRecord:
    """A finished run: the ``spec`` simulated (a :class:`~npusim.config.schema.SystemSpec`), the
    simulated time in ps, whether data was simulated, the ``recorder`` with every event, and the
    network's ``resources`` in registration order (their ``index``)."""

    spec: Any
    simulated_ps: int
    with_data: bool
    recorder: Recorder
    resources: tuple[ResourceRecord, ...]

    def package_of(self, die: int) -> int:
        """The NPU package die ``die`` belongs to."""
        package: int = self.spec.shape.package_of(die)
        return package
