"""How much memory a run may use (``npusim run --max-memory``, ``session(max_memory=...)``), what
it is estimated to need, and the watch that stops it before the operating system kills it.

What a run needs is known in part before it simulates, and npusim checks each part as soon as it is
known, against :class:`MemoryBudget`:

- before the workload runs: what the process holds already and what a session needs besides
  (:data:`SESSION_BYTES`): a limit below that is refused at once;
- before a PyPTO launch simulates (its kernel functions built, so its tile ops counted): each tile
  op costs :data:`~npusim.runtime.program.BYTES_PER_TILE_OP` while it is simulated and recorded, whatever the trace level
  (the trace is written in chunks of bounded memory). A launch that would take the run past its
  limit is refused with that estimate, before simulating it; one that needs more than
  :data:`LARGE_BYTES` is announced on stderr;
- before a device tensor's values are allocated (a run with data: ``npusim.tensor`` / ``empty``,
  ``torch.empty(device="npu")`` and the like, a PyPTO launch's shmem data windows): its bytes, held
  in this process as the simulated GM's (:meth:`MemoryBudget.expect_bytes`), refused and announced
  the same way, before they are allocated. A timing-only run (``--no-data``) holds none;
- while simulating, for what cannot be counted before it runs (an ISA kernel's or an op's
  instructions come from Python code as it runs; a workload's own memory): the process's resident
  memory is looked at with the wall clock (every 2048 simulation steps and at every
  synchronisation); past the limit the run stops, saying how far it got.

The machine's size (dies, cores) is within :data:`SESSION_BYTES` for every config (the largest, 768
dies, included); the trace level changes only what is written, in chunks of bounded memory, never
what is held while simulating.

The default limit of ``npusim run`` is the memory the machine had available as the run started
(:func:`available_bytes`, the cgroup's limit included): what it could use before being killed.
"""

from __future__ import annotations

import os
import resource
import sys
from pathlib import Path

from npusim.errors import MemoryLimitError, UsageError
from npusim.units import Dimension, format_bytes, parse_quantity

SESSION_BYTES = 48 << 20
"""What a session needs beyond what the process holds as it starts one: the simulated machine's
structures, the summary and the writing of the run folder (an empty workload's `npusim run` on a3,
48 nodes: 61 MB peak, of which the imports ~45 MB, measured; rounded up)."""
LARGE_BYTES = 1 << 30
"""An estimate this large is announced on stderr before the launch simulates."""


def available_bytes() -> int | None:
    """The memory this process could still take before the system runs out: what the machine has
    available (Linux: ``MemAvailable``), at most what its cgroup still allows; None where unknown."""
    found = []
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                found.append(int(line.split()[1]) * 1024)
    except (OSError, ValueError, IndexError):
        pass
    try:
        limit = Path("/sys/fs/cgroup/memory.max").read_text().strip()
        if limit != "max":
            found.append(int(limit) - int(Path("/sys/fs/cgroup/memory.current").read_text()))
    except (OSError, ValueError):
        pass
    return max(0, min(found)) if found else None


def peak_bytes() -> int:
    """The most resident memory this process has held (its peak RSS)."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak if sys.platform == "darwin" else peak * 1024  # bytes on macOS, KiB on Linux


_statm: tuple[int, int] | None = None  # (pid, descriptor of /proc/<pid>/statm), kept open: reading it is then a few us


def resident_bytes() -> int:
    """The resident memory this process holds now (its peak where the current one is unknown)."""
    global _statm
    try:
        if _statm is None or _statm[0] != os.getpid():  # a forked copy reads its own
            _statm = (os.getpid(), os.open(f"/proc/{os.getpid()}/statm", os.O_RDONLY))
        return int(os.pread(_statm[1], 128, 0).split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return peak_bytes()


def parse_memory(text: str) -> int:
    """A memory size as written on the command line (``4GiB``, ``500 MB``) in bytes."""
    try:
        size = parse_quantity(text, Dimension.SIZE).bytes
    except ValueError as error:
        raise UsageError(f"--max-memory {text!r}: {error}") from None
    if size <= 0:
        raise UsageError(f"--max-memory {text!r}: give a size above 0, e.g. 4GiB")
    return size


class MemoryBudget:
    """The memory a run may use, ``limit`` bytes in all (the process's own included); ``source``
    says where the limit came from, for messages."""

    def __init__(self, limit: int, source: str) -> None:
        self.limit = limit
        self.source = source
        self.announced = False

    @classmethod
    def of_machine(cls) -> MemoryBudget | None:
        """The memory the machine has available now, with what the process holds (None where unknown)."""
        available = available_bytes()
        if available is None:
            return None
        return cls(available + resident_bytes(), "the memory this machine had available as the run started; raise or lower it with --max-memory")

    def describe(self) -> str:
        return f"{format_bytes(self.limit)} ({self.source})"

    def check_start(self) -> None:
        """A session is about to start: refused when what the process holds and what a session
        needs do not fit."""
        needed = resident_bytes() + SESSION_BYTES
        if needed > self.limit:
            raise MemoryLimitError(f"this run needs at least {format_bytes(needed)} of memory to start (the {format_bytes(resident_bytes())} "
                                   f"npusim holds and {format_bytes(SESSION_BYTES)} for the session), more than its limit of {self.describe()}")

    def expect(self, extra: int, what: str, *, instead: str = "launch fewer PEs or fewer, larger tiles") -> None:
        """``what`` is about to simulate and will take about ``extra`` more bytes: refused (before
        simulating) when the run would then exceed its limit, saying what to do ``instead``;
        announced on stderr when large."""
        held = resident_bytes()
        estimate = held + extra
        if estimate > self.limit:
            raise MemoryLimitError(f"{what} would need about {format_bytes(extra)} more memory, {format_bytes(estimate)} with the "
                                   f"{format_bytes(held)} the run holds: more than its limit of {self.describe()}; {instead}, or run it "
                                   "where more memory is available")
        if extra >= LARGE_BYTES and not self.announced:
            self.announced = True
            print(f"npusim: {what} will need about {format_bytes(estimate)} of memory, with the {format_bytes(held)} the run holds "
                  f"(limit {format_bytes(self.limit)})", file=sys.stderr)

    def expect_bytes(self, size_bytes: int, what: str) -> None:
        """A device tensor's values, ``size_bytes`` (``what``: the tensor and its die), are about
        to be allocated in this process (npusim.hw.memory.DeviceMemory.before_bytes): as :meth:`expect`."""
        self.expect(size_bytes, f"allocating {what}", instead="use smaller tensors or simulate timing only (--no-data, data=False)")

    def watch_build(self, where: str) -> None:
        """Looked at while a PyPTO kernel builds (``where``: the kernel and loop): past the limit, the
        build stops here, saying where."""
        held = resident_bytes()
        if held > self.limit:
            raise MemoryLimitError(f"the run used {format_bytes(held)} of memory{where}: more than its limit of {self.describe()}; it was "
                                   "stopped before the system would kill it: give the loop fewer iterations, or run it where more memory "
                                   "is available")

    def watch(self, now_ps: int, events: int) -> None:
        """Looked at while simulating: past the limit, the run stops here, saying how far it got."""
        held = resident_bytes()
        if held > self.limit:
            per_event = f", {format_bytes(held / events)} per event" if events else ""
            raise MemoryLimitError(f"the run used {format_bytes(held)} of memory at {now_ps / 1e6:,.3f} us simulated, after {events:,} "
                                   f"events{per_event}: more than its limit of {self.describe()}; it was stopped before the system "
                                   "would kill it: simulate fewer dies or a smaller problem, or run it where more memory is available")
