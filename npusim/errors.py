"""The one exception family of npusim.

Every error a user can meet is an :class:`NpusimError`; its message names the thing that is wrong
(config file and key, op and argument, PE / core / tile) and what to do. The CLI maps
:class:`UsageError` and :class:`ConfigError` to exit code 2 and every other error to exit code 1.
docs/reliability.md lists what is guaranteed under faults and hostile input.
"""

from __future__ import annotations


class NpusimError(Exception):
    """Base of every error npusim raises on bad input or a failing simulated program."""


class UsageError(NpusimError):
    """Wrong use of the command line or of the Python API (exit code 2)."""


class UnknownParameterError(UsageError):
    """A run overrides a workload parameter that the workload does not declare (exit code 2)."""


class MemoryLimitError(UsageError):
    """A run needs more memory than it may use (``--max-memory``, by default what the machine has
    available): refused before it simulates the work that would exceed it, or stopped as it does,
    before the system kills it (exit code 2, nothing written)."""


class ConfigError(NpusimError):
    """A hardware config that cannot be loaded or is invalid (exit code 2)."""


class InstallError(NpusimError):
    """An installation that cannot run as it is: compiled files beside the engine's sources, or
    ``NPUSIM_ENGINE=compiled`` without a compiled engine built from them (exit code 1)."""


class OutputError(NpusimError):
    """An output that cannot be written (a full disk, a folder removed meanwhile); nothing half-written
    is left (exit code 1)."""


class WorkloadError(NpusimError):
    """A workload that fails: its own exception, or a misuse of a facade (exit code 1)."""


class OpArgumentError(WorkloadError, ValueError):
    """An op called with an argument that the real op rejects; names op, argument, value and rule."""


class NoRouteError(WorkloadError):
    """No level of the interconnect joins two dies for a load/store access (dies of two A2 servers:
    they reach each other by RDMA only)."""


class ResourceError(WorkloadError):
    """A simulated resource is exceeded, e.g. a UB allocation past the 192 KiB of a core."""


class DeadlockError(WorkloadError):
    """Nothing more can happen while a wait is still unsatisfied."""


class TimeBoundError(WorkloadError):
    """The simulated-time bound of the session was reached while issued work was still running."""


class WallTimeError(WorkloadError):
    """A run went past its wall-clock limit (a sweep's ``--point-timeout``)."""


class OutOfMemoryError(WorkloadError, MemoryError):
    """The machine running npusim ran out of memory while a run was built (says where: the PyPTO
    loop and iteration); the run's objects are freed, so the process can go on."""


class NoProgressError(WorkloadError):
    """The simulation processed a bounded number of events without simulated time advancing (work
    that loops in zero time)."""


class RaceError(WorkloadError):
    """A data race reported as an error (races are warnings unless the user asks for errors).
    ``blame``: the line of the user's program whose access races (a frontend Callsite, or None), which
    the CLI names instead of the line where the error surfaced (the synchronisation that ran it)."""

    blame: object = None


class GraphCaptureError(WorkloadError):
    """A call that a graph being captured cannot contain (a synchronisation), or a misuse of capture."""
