"""One ``npusim.launch`` of a PyPTO kernel on its PEs (:class:`ShmemLaunch`): the symmetric memory
of its groups, linking each PE's tile ops into its device task, and the AICPU scheduler that runs
it on the PE's die (:mod:`npusim.runtime` describes the whole)."""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

import simpy

from npusim.callsite import Callsite
from npusim.config.products import PRODUCTS, pypto_products
from npusim.config.schema import SystemSpec
from npusim.engine.loop import clock
from npusim.errors import ConfigError, OpArgumentError, RaceError, UsageError, WorkloadError
from npusim.hw.aicpu import AicpuScheduler
from npusim.hw.memory import Allocation
from npusim.hw.stream import Stream
from npusim.hw.system import System
from npusim.kernels.shmem.dtypes import DataType
from npusim.kernels.shmem.layout import ShmemGroupRegistry
from npusim.kernels.shmem.races import Access, RaceDetector, ShmemRaceWarning
from npusim.runtime.program import BYTES_PER_TILE_OP, PeProgram
from npusim.runtime.shmem import ShmemArea, SlotHistory
from npusim.runtime.tasks import Task, WaitTask, joined
from npusim.runtime.templates import TileTemplate


def check_product(spec: SystemSpec, what: str) -> None:
    """Refuse a PyPTO launch (``what``: the call) on a product PyPTO does not run on (the product's
    ``pypto``, :mod:`npusim.config.products`)."""
    product = PRODUCTS.get(spec.product)
    if not product.pypto:
        raise UsageError(f"{what}: PyPTO runs on {pypto_products()} only (its docs), not on {product.label} of config {spec.name!r}; "
                         "run the PyPTO kernel with a config of those products (--config a2, a3 or ascend-950pr)")


class BuildMemory(Protocol):
    """The run's memory budget as a launch uses it (the frontend's ``memory.MemoryBudget``)."""

    def expect(self, extra: int, what: str) -> None: ...

    def watch_build(self, where: str) -> None: ...


class LaunchHost(Protocol):
    """What a launch needs of the host program that makes it (the frontend's session): its memory
    budget, the limit of its wall clock, the work issued before the launch, and the reports of a
    deadlock."""

    @property
    def memory(self) -> BuildMemory | None: ...

    @property
    def deadlock_reporters(self) -> list[Callable[[], list[str]]]: ...

    def check_wall_clock(self, where: Callable[[], str]) -> None: ...

    def building(self, where: Callable[[], str]) -> None:
        """Called every :data:`~npusim.runtime.program.BUILD_LOOK_OPS` ops a kernel function builds
        (``where()``: the kernel and loop, for messages): the run's memory limit, and what the
        host does with the objects that live on (the session freezes them out of the collector's
        sight)."""

    def unfinished_work(self) -> list[simpy.Event]: ...


class ShmemLaunch:
    """One launch of a PyPTO kernel on ``n_pes`` PEs (PE i on die ``dies[i]``); ``groups`` names
    communication groups of some of its PEs (each a list of PEs, by rank); every other group a
    kernel uses spans all PEs."""

    def __init__(self, system: System, name: str, dies: Sequence[int], races: str,
                 groups: Mapping[str, Sequence[int]] | None = None, *, host: LaunchHost,
                 tile_shape: tuple[int, ...] | None = None) -> None:
        spec = system.spec.shmem
        if spec is None:
            raise ConfigError(f"config {system.spec.name!r} has no shmem: section, which a PyPTO launch needs (the scheduler and the "
                              "communication windows); add one, as in configs/a2.yaml")
        self.system = system
        self.spec = spec
        self.name = name
        self.dies = list(dies)
        self.races_mode = races
        self.groups = {name: tuple(members) for name, members in (groups or {}).items()}
        self._every_pe = tuple(range(len(self.dies)))  # the members of a group that ``groups`` does not name
        self.registry = ShmemGroupRegistry(data_window_bytes=spec.data_window.bytes, signal_window_bytes=spec.signal_window.bytes)
        self.areas: list[ShmemArea] = []
        self.group_areas: dict[str, list[ShmemArea]] = {}  # per group, its areas in creation order
        product = PRODUCTS.get(system.spec.product)
        self.core_kinds = {"vector": product.vector_cores, "cube": product.cube_cores}  # the core kind of each unit's tile ops
        self.programs = [PeProgram(self, pe, die, tile_shape=tile_shape) for pe, die in enumerate(self.dies)]  # tile_shape: the host's scope default
        self.data_windows: dict[tuple[str, int], Allocation] = {}
        self.signal_windows: dict[tuple[str, int], Allocation] = {}
        self.slots: dict[tuple[int, int], SlotHistory] = {}  # (die, absolute address) of a slot -> what landed there
        self.slot_waits: dict[tuple[int, int], list[WaitTask]] = {}  # (die, absolute address) of a slot -> its waits not yet satisfied
        self.races = RaceDetector(self._race)
        self.templates: dict[tuple[Any, ...], TileTemplate] = {}  # the programs of tile ops kept for reuse, by their pieces' keys
        self.schedulers: list[AicpuScheduler] = []
        self._core_streams: dict[tuple[int, int, str], Stream] = {}
        self.done: simpy.Event | None = None
        self.running = False  # submitted while its kernel functions still build (they read device values)
        self.awaiting_host_data = False  # a pypto.function recorded on host tensors: its parameters have no data until it runs
        self._next_bit = 0
        self.host = host
        self.prior_work = host.unfinished_work()  # issued before it: may still write its tensors
        self.first_op = len(system.recorder.ops)  # the trace id of its first op

    @property
    def n_pes(self) -> int:
        return len(self.dies)

    def prior_work_done(self) -> bool:
        """True once the work issued before this launch has been simulated to its end."""
        self.prior_work = [event for event in self.prior_work if not event.processed]
        return not self.prior_work

    def group_members(self, group_name: str) -> tuple[int, ...]:
        """The PEs of a group, by rank: those ``groups`` gives it, else every PE."""
        members = self.groups.get(group_name)
        return members if members is not None else self._every_pe

    # -- building ----------------------------------------------------------------------------------

    def create(self, program: PeProgram, op: str, group_name: str, n_pes: int, dtype: DataType | None,
               shape: Sequence[int] | None) -> ShmemArea:
        """The next shmem tensor of a PE in a group: created by the first PE of the group that gets
        there, matched by the others (every PE of a group must create the group's tensors in the same order). The op has
        checked ``group_name`` and ``n_pes`` (npusim.frontend.pypto.ops)."""
        used = program.creates
        if group_name not in used and len(used) >= self.spec.max_groups:
            raise OpArgumentError(
                f"{op}: group_name={group_name!r} would be communication group number {len(used) + 1}, "
                f"but a program may use at most {self.spec.max_groups} (it has {sorted(used)})"
            )
        members = self.group_members(group_name)
        if n_pes != len(members):
            if group_name in self.groups:
                raise WorkloadError(f"{op}: n_pes={n_pes}, but group {group_name!r} has the {len(members)} PEs {list(members)}")
            raise WorkloadError(
                f"{op}: n_pes={n_pes}, but npusim.launch started {self.n_pes} PEs; a communication group spans "
                "every PE of the launch unless npusim.launch(..., groups={name: [pe, ...]}) gives its PEs"
            )
        program.ranks[group_name]  # refuses a PE outside the group
        index = used.get(group_name, 0)
        used[group_name] = index + 1
        areas = self.group_areas.setdefault(group_name, [])
        if index < len(areas):
            area = areas[index]
            mine = (group_name, n_pes, dtype, tuple(shape) if shape is not None else None)
            first = (area.allocation.group_name, area.allocation.n_pes, area.dtype, area.allocation.data_shape)
            if mine != first:
                raise WorkloadError(
                    f"{op}: PE {program.pe} creates shmem tensor #{area.index} as {_created(*mine)}, but PE {area.creator} created it "
                    f"as {_created(*first)}; every PE must create the same shmem tensors in the same order"
                )
            return area
        if dtype is None:
            allocation = self.registry.create_signal(group_name, n_pes, op=op)
        else:
            assert shape is not None, op  # a data tensor has a shape
            allocation = self.registry.create_tensor(group_name, n_pes, dtype, shape, op=op)
        area = ShmemArea(self, len(self.areas), allocation, program.pe)
        self.areas.append(area)
        areas.append(area)
        if self.running:
            self._open_windows(area.allocation.group_name)
        return area

    def core_stream(self, die: int, core: int, kind: str) -> Stream:
        """The in-order queue of tile ops of core ``core`` of ``kind`` on die ``die``."""
        key = (die, core, kind)
        stream = self._core_streams.get(key)
        if stream is None:
            stream = self._core_streams[key] = Stream(self.system.env, die, f"{kind}{core}")
        return stream

    # -- finishing and running ---------------------------------------------------------------------

    def finish(self) -> None:
        """Check the PEs built the same shmem tensors, allocate the windows, link the tile ops."""
        self._check_creates()
        self._allocate_windows()
        for program in self.programs:
            tasks = program.tasks
            program.new_tasks = []
            self._link(program, tasks)

    def _check_creates(self) -> None:
        for group_name, areas in self.group_areas.items():
            for pe in self.group_members(group_name):
                count = self.programs[pe].creates.get(group_name, 0)
                if count != len(areas):
                    most = next(p for p in self.group_members(group_name) if self.programs[p].creates.get(group_name, 0) == len(areas))
                    raise WorkloadError(
                        f"npusim.launch: PE {pe} created {count} shmem tensors, but PE {most} created {len(areas)}"
                        f"{'' if group_name not in self.groups else f' in group {group_name!r}'}; every PE must create "
                        "the same shmem tensors"
                    )

    def new_bit(self) -> int:
        """The position of a happens-before bit no tile op of the launch has yet (see :class:`Task`)."""
        bit = self._next_bit
        self._next_bit += 1
        return bit

    def _link(self, program: PeProgram, tasks: list[Task]) -> None:
        """Give ``tasks`` (new tile ops of ``program``) their successors' links and pending counts
        (predecessors already done do not count)."""
        for task in tasks:
            task.linked = True
            if isinstance(task, WaitTask):
                task.locate()
            pending = 0
            for predecessor in task.deps.values():
                if not predecessor.done:
                    predecessor.successors.append(task)
                    pending += 1
            task.pending = pending
        _check_acyclic(program, tasks)

    def _allocate_windows(self) -> None:
        for group in self.registry.groups:
            data_end = max(((group.data_offset_bytes(a) or 0) + a.data_bytes for a in group.allocations if a.data_shape is not None), default=0)
            signal_end = max(group.signal_offset_bytes(a) + a.signal_bytes for a in group.allocations)
            self._allocate_group_windows(group.name, data_end, signal_end)

    def _allocate_group_windows(self, group_name: str, data_bytes: int, signal_bytes: int) -> None:
        for pe in self.group_members(group_name):
            memory = self.system.die(self.dies[pe]).memory
            if data_bytes:
                self.data_windows[(group_name, pe)] = memory.allocate(data_bytes, f"shmem data window {group_name!r} PE {pe}")
            self.signal_windows[(group_name, pe)] = memory.allocate(signal_bytes, f"shmem signal window {group_name!r} PE {pe}", control=True)

    def _open_windows(self, group_name: str) -> None:
        """A running launch: the group's windows at their full size (later areas go in them), once."""
        group = self.registry.group(group_name)
        group.freeze()
        if (group_name, self.group_members(group_name)[0]) not in self.signal_windows:
            self._allocate_group_windows(group_name, group.data_window_bytes, group.signal_window_bytes)

    def submit(self) -> simpy.Event:
        """Queue each PE's device task on its die's stream; the event fires when all have ended. A
        run with a memory limit refuses first a launch whose tile ops would take it past the limit
        (:meth:`npusim.frontend.memory.MemoryBudget.expect`)."""
        memory = self.host.memory
        if memory is not None:
            tiles = sum(len(program.tasks) for program in self.programs)
            memory.expect(tiles * BYTES_PER_TILE_OP, f"the launch of {self.name} on {self.n_pes} PE{'s' if self.n_pes > 1 else ''} "
                                                     f"({tiles:,} tile ops)")
        threads, choice = self.spec.schedulers, self.spec.core_choice
        processes = []
        for program in self.programs:
            die = self.system.die(program.die)
            scheduler = AicpuScheduler(die, program.tasks, threads=threads, core_choice=choice, name=f"{self.name} PE {program.pe}")
            self.schedulers.append(scheduler)
            processes.append(self.system.stream(program.die).submit(scheduler.run))
        self.host.deadlock_reporters.append(self._deadlock_lines)
        self.done = self.system.env.all_of(processes)
        return self.done

    # -- running while building (kernels that read device values) -----------------------------------

    def start_running(self) -> simpy.Event:
        """Submit the tile ops built so far while the kernel functions are still building: the
        groups' windows open at full size, each PE's scheduler stays open for more
        (:meth:`add_new_tasks`) until :meth:`close`. Returns the launch's done event."""
        self._allocate_windows_running()
        self.running = True
        for program in self.programs:
            tasks = program.tasks
            program.new_tasks = []
            self._link(program, tasks)
        done = self.submit()
        for scheduler in self.schedulers:
            scheduler.hold()
        return done

    def _allocate_windows_running(self) -> None:
        for group in self.registry.groups:
            self._open_windows(group.name)

    def add_new_tasks(self, program: PeProgram) -> None:
        """Hand the tile ops ``program`` built since the last call to its running scheduler."""
        tasks, program.new_tasks = program.new_tasks, []
        if not tasks:
            return
        self._link(program, tasks)
        self.schedulers[program.pe].add(tasks)

    def abandon(self) -> None:
        """The build failed before anything of it ran: drop what it made (the tile ops, their
        programs and templates, the trace's records of its ops), so that its memory is freed even
        while its error, and the frames that refer to this launch, are kept."""
        for program in self.programs:
            program.ops.clear()
            program.new_tasks.clear()
            program.control = None
        self.templates.clear()
        self.system.recorder.forget_ops(self.first_op)

    def close(self) -> None:
        """Every kernel function has returned: check the shmem tensors and let the schedulers end."""
        self._check_creates()
        for scheduler in self.schedulers:
            scheduler.release()

    def publish(self, task: Task, key: tuple[int, int], event: int) -> None:
        """A signal store of ``task`` (event ``event``) landed in the slot ``key``: a wait that sees
        it is ordered after ``task``."""
        history = self.slots.get(key)
        if history is None:
            history = self.slots[key] = SlotHistory()
        history.clock = joined(history.clock, task.clock)
        history.signals.append(event)
        self.slot_changed(key)

    def forget_slots(self, die: int, start: int, end: int) -> None:
        """Slots ``[start, end)`` (absolute addresses on ``die``) were cleared."""
        for key in [k for k in self.slots if k[0] == die and start <= k[1] < end]:
            del self.slots[key]
        for key in [k for k in self.slot_waits if k[0] == die and start <= k[1] < end]:
            self.slot_changed(key)

    def slot_changed(self, key: tuple[int, int]) -> None:
        """The word of slot ``key`` has just changed: its waits may match now (each PE's scheduler
        reads only the waits it is told of, see :meth:`~npusim.hw.aicpu.AicpuScheduler.may_match`)."""
        waits = self.slot_waits.get(key)
        if waits:
            schedulers = self.schedulers
            for task in waits:
                schedulers[task.op.program.pe].may_match(task)

    def _race(self, message: str, reader: Access, writer: Access, racing: Access) -> None:
        if self.races_mode == "off":
            return
        if self.races_mode == "error":
            error = RaceError(message)
            error.blame = racing.source  # the access that races (started last), not the synchronisation that ran it
            raise error
        source = racing.source
        if isinstance(source, Callsite):
            warnings.warn_explicit(message, ShmemRaceWarning, source.filename, source.lineno)
        else:
            warnings.warn_explicit(message, ShmemRaceWarning, f"npusim launch {self.name!r}", 0)
        self.system.recorder.instant(clock(self.system.env), reader.memory[0], "data race", message)

    def _deadlock_lines(self) -> list[str]:
        lines: list[str] = []
        for program, scheduler in zip(self.programs, self.schedulers):
            waiting = scheduler.waiting
            lines.extend(f"  {task.report()}" for task in waiting if isinstance(task, WaitTask))  # a launch queues no other waits
            blocked = scheduler.remaining - len(waiting)
            if scheduler.remaining and blocked:
                lines.append(f"  PE {program.pe} (die {program.die}): {blocked} more tile ops of {self.name!r} have not finished")
        return lines


def _created(group_name: str, n_pes: int, dtype: DataType | None, shape: Sequence[int] | None) -> str:
    what = "a signal tensor" if dtype is None else f"{dtype.name} {list(shape or ())}"
    return f"{what} of group {group_name!r} with n_pes={n_pes}"


def _check_acyclic(program: PeProgram, tasks: list[Task]) -> None:
    """A cycle would never run: it comes from a tile op that consumes a loaded tile (and so runs
    with the load) and also waits, through its preds, for something after the load."""
    pending = {id(t): 0 for t in tasks}  # predecessors among ``tasks`` (those built earlier have no cycle with them)
    for task in tasks:
        pending[id(task)] = sum(1 for dep in task.deps.values() if id(dep) in pending)
    ready = [t for t in tasks if pending[id(t)] == 0]
    done = 0
    while ready:
        task = ready.pop()
        done += 1
        for successor in task.successors:
            if id(successor) in pending:
                pending[id(successor)] -= 1
                if pending[id(successor)] == 0:
                    ready.append(successor)
    if done < len(tasks):
        stuck = sorted({t.op.name + f"#{t.op.record}" for t in tasks if pending[id(t)] > 0})
        raise WorkloadError(
            f"PE {program.pe}: the preds form a cycle among {', '.join(stuck)}: a tile op that stores or assigns a "
            "loaded tile runs with its shmem_load, so its preds must not wait for ops that come after the load"
        )
