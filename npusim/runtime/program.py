"""What one PE's kernel function built (:class:`PeProgram`): its ops in call order, its build
state, and its ranks in the launch's communication groups (:class:`GroupRanks`)."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from npusim.callsite import callsite
from npusim.errors import OutOfMemoryError, UsageError, WorkloadError
from npusim.kernels.compute.matmul import CubeTiles
from npusim.runtime.tasks import ControlRead, OpNode, Task

if TYPE_CHECKING:
    from npusim.runtime.launch import ShmemLaunch

BUILD_LOOK_OPS = 256
"""Ops a kernel function builds between two looks of its host (:meth:`~npusim.runtime.launch.LaunchHost.building`:
the run's memory, which reads /proc in ~7 us, and the collector's survivors; an op takes ~50 us to build)."""
BYTES_PER_TILE_OP = 11 << 10
"""Memory one PyPTO tile op takes while it is simulated and recorded (its events, flows, scheduler
and network state): 9.9 - 11.4 kB measured on the hierarchical all-gather at 32, 64 and 128 dies
and 9.2 kB on the a3 all-gather (the peak resident memory from the launch's submission to the end
of the simulation, over its tile ops; benchmarks/RESULTS.md, issue 32 and stop 50) [M]."""


class KernelBuilder(Protocol):
    """The thread a PE's kernel function runs in while the launch runs (the frontend's
    ``building.Builder``): it blocks until a device-valued read has run."""

    def block(self, read: ControlRead) -> None: ...


@dataclass
class RunningLoop:
    """A ``pypto.loop`` running in a kernel function: its ``name`` (as given, may be empty), where it
    is written (``file:line``), the iteration it is at (``index``) and its range."""

    name: str
    written_at: str
    start: int
    stop: int
    step: int
    index: int | None = None

    def __str__(self) -> str:
        named = f" {self.name!r}" if self.name else ""
        count = len(range(self.start, self.stop, self.step))
        at = f" at iteration {len(range(self.start, self.index, self.step)) + 1:,} of {count:,}" if self.index is not None else ""
        return f"pypto.loop{named} ({self.written_at}){at}"


class PeProgram:
    """What one PE's kernel function built: its ops, in call order, and its build state:
    ``creates`` counts its shmem tensors per group, ``control`` is its last device-valued read
    (the tile ops built after it wait for it), ``new_tasks`` the tile ops not yet handed to the
    scheduler, ``builder`` the thread its kernel function runs in, ``loops`` the ``pypto.loop`` calls
    its kernel function is in (innermost last) and ``left`` the innermost loop left before its end
    since the last op or iteration (a break, or an error)."""

    def __init__(self, launch: ShmemLaunch, pe: int, die: int, tile_shape: tuple[int, ...] | None = None) -> None:
        self.launch = launch
        self.pe = pe
        self.die = die
        self.ops: list[OpNode] = []
        self.tile_shape = tile_shape
        self.creates: dict[str, int] = {}
        self.cube_tiles: CubeTiles | None = None  # set_cube_tile_shapes
        self.control: ControlRead | None = None
        self.new_tasks: list[Task] = []
        self.builder: KernelBuilder | None = None  # the frontend's building.Builder while its kernel function runs
        self.loops: list[RunningLoop] = []
        self.left: RunningLoop | None = None
        self._ops_since_look = 0
        self._ranks: GroupRanks | None = None
        self._launch_record = -1

    @property
    def ranks(self) -> GroupRanks:
        """This PE's rank in each communication group (one mapping, kept: it looks the groups up when asked)."""
        ranks = self._ranks
        if ranks is None:
            ranks = self._ranks = GroupRanks(self.launch, self.pe)
        return ranks

    def wait_for(self, read: ControlRead) -> None:
        """The kernel function needs ``read``'s value: it waits while the launch runs (the builder thread blocks)."""
        if self.builder is None:
            raise UsageError(f"{read.what}: a device-valued scalar can only be read inside the kernel function of its PE (npusim.launch, "
                             "a jit kernel); a function recorded with pypto.function on host data has no data until it runs")
        self.builder.block(read)

    def where(self, loop: RunningLoop | None = None) -> str:
        """Where this PE's kernel function is being built (in ``loop``, else its innermost running
        loop), for messages: ``while PE 0's kernel was built, in pypto.loop 'ROWS' (kernel.py:12) at
        iteration 7 of 64``."""
        loop = loop or (self.loops[-1] if self.loops else self.left)
        return f" while PE {self.pe}'s kernel was built" + (f", in {loop}" if loop is not None else "")

    def look(self) -> None:
        """The host's limits, looked at as the kernel function builds: the wall clock at each op
        and loop iteration, the rest every :data:`BUILD_LOOK_OPS` ops (:meth:`LaunchHost.building
        <npusim.runtime.launch.LaunchHost.building>`)."""
        host = self.launch.host
        host.check_wall_clock(self.where)
        self._ops_since_look += 1
        if self._ops_since_look >= BUILD_LOOK_OPS:
            self._ops_since_look = 0
            host.building(self.where)

    def out_of_memory(self, loop: RunningLoop | None) -> OutOfMemoryError:
        """The error of a build that ran out of memory in ``loop``: where, and how many tile ops it had built."""
        built = sum(len(op.tasks) for op in self.ops)
        return OutOfMemoryError(f"the machine ran out of memory{self.where(loop)}, with {built:,} tile ops built (each takes about "
                                f"{BYTES_PER_TILE_OP >> 10} kB once simulated, docs/pypto.md); give the loop fewer iterations, or run it on a "
                                "machine with more memory")

    @property
    def launch_record(self) -> int:
        """The trace record of this PE's kernel launch, which its ops are part of (made with the first op)."""
        record = self._launch_record
        if record < 0:
            record = self._launch_record = self.launch.system.recorder.op(self.launch.name, self.die, pe=self.pe)
        return record

    def op(self, name: str, **args: Any) -> OpNode:
        """A new op of this PE, with its trace record (part of the PE's launch record)."""
        self.left = None
        self.look()
        record = self.launch.system.recorder.op(name, self.die, part_of=self.launch_record, pe=self.pe, **args)
        node = OpNode(self, name, record, source=callsite())
        self.ops.append(node)
        return node

    @property
    def tasks(self) -> list[Task]:
        seen: dict[int, Task] = {}
        for op in self.ops:
            for task in op.tasks:
                seen.setdefault(id(task), task)
        return list(seen.values())


class GroupRanks(Mapping[str, int]):
    """A PE's rank in each communication group: its index among the PEs of a group the launch
    declares (``groups=``), the PE itself in any other group (one of every PE of the launch)."""

    def __init__(self, launch: ShmemLaunch, pe: int) -> None:
        self.launch = launch
        self.pe = pe

    def __getitem__(self, group: str) -> int:
        members = self.launch.groups.get(group)
        if members is None:
            return self.pe
        if self.pe not in members:
            raise WorkloadError(
                f"PE {self.pe} uses communication group {group!r}, but it is not one of its PEs {list(members)}; "
                "a PE can only use the groups it is in (npusim.launch(..., groups={name: [pe, ...]}))"
            )
        return members.index(self.pe)

    def __iter__(self) -> Iterator[str]:
        return iter(self.launch.groups)

    def __len__(self) -> int:
        return len(self.launch.groups)


_BUILDING = threading.local()  # per thread: the PE programs whose kernel functions run (each PE's kernel runs in a builder thread)


def _building() -> list[PeProgram]:
    stack: list[PeProgram] | None = getattr(_BUILDING, "programs", None)
    if stack is None:
        stack = _BUILDING.programs = []
    return stack


def building_program() -> PeProgram | None:
    """The PE whose kernel function is running in this thread, if any: the PE the API's ops build
    for, and whose ranks a SymbolicScalar gives to Python (``int()``, ``if``)."""
    stack = _building()
    return stack[-1] if stack else None


@contextlib.contextmanager
def building(program: PeProgram) -> Iterator[PeProgram]:
    """PyPTO ops called inside (in this thread) build ``program``."""
    stack = _building()
    stack.append(program)
    try:
        yield program
    finally:
        stack.pop()
