"""An AI core: in-order pipes that run concurrently, flags between them, on-chip buffers.

A program (built with :mod:`npusim.isa`) gives each pipe its instructions in program order. Each
pipe is one SimPy process that runs its instructions one after the other. The scalar unit issues
every instruction, so an instruction never starts before the scalar instructions that precede it in
program order have finished (``s_dep``); ``set_flag``/``wait_flag`` order two pipes; a
``pipe_barrier(ALL)`` on the scalar pipe waits for every pipe to drain.

Instructions are duck-typed: ``pipe``, ``s_dep``, ``name_id``, ``nbytes``, ``tile``, ``effect``
(None or a callable applied to real data at completion; with data off only the effects of
``control`` instructions, which write signals, are applied) and ``start(core, run)``, which returns
the busy time in ps or a SimPy event that fires when the instruction completes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import simpy

from npusim.engine.progress import ProgressCounter
from npusim.hw.memory import LocalBuffer
from npusim.hw.pipes import CoreKind, Pipe
from npusim.hw.topology import Route

if TYPE_CHECKING:
    from npusim.hw.system import Die


class KernelRun:
    """The state of one program running on one core: per-pipe progress, flag counters, scalar
    registers, and what each blocked pipe is waiting for (for deadlock reports)."""

    __slots__ = ("env", "core", "program", "op", "progress", "flags", "flag_waiters", "regs", "blocked")
    # ``blocked`` maps a pipe (its int value) to the instruction it waits in, or a sentence, for
    # deadlock reports.

    def __init__(self, env: simpy.Environment, core: "AICore", program, op: int) -> None:
        self.env = env
        self.core = core
        self.program = program
        self.op = op
        self.progress = [ProgressCounter(env) for _ in Pipe]
        self.flags: dict[tuple[int, int, int], int] = {}
        self.flag_waiters: dict[tuple[int, int, int], list[simpy.Event]] = {}
        self.regs: dict[int, int | float] = {}
        self.blocked: dict[int, object] = {}

    def set_flag(self, key: tuple[int, int, int]) -> None:
        """Raise a flag (src pipe, dst pipe, event id); wakes the oldest waiter if any."""
        waiters = self.flag_waiters.get(key)
        if waiters:
            waiters.pop(0).succeed()
        else:
            self.flags[key] = self.flags.get(key, 0) + 1

    def take_flag(self, key: tuple[int, int, int]) -> simpy.Event | None:
        """Consume a raised flag; if none is raised, an event that fires when one is."""
        count = self.flags.get(key, 0)
        if count:
            self.flags[key] = count - 1
            return None
        event = self.env.event()
        self.flag_waiters.setdefault(key, []).append(event)
        return event


class AICore:
    """One AIC or AIV of a die: its pipes, buffers and DMA engines."""

    def __init__(self, die: "Die", kind: CoreKind, index: int) -> None:
        system = die.system
        self.die = die
        self.system = system
        self.env = system.env
        self.kind = kind
        self.index = index
        self.name = f"{kind.value}{index}"
        timing = die.timing
        self.timing = timing
        self.buffers = {name: LocalBuffer(name, timing.buffer_bytes[(kind, name)]) for name in kind.buffers}
        # This core's DMA engines (MTE1/2/3, FIXP): each caps the rate of the copies it drives.
        self.dma_timing = {pipe: dma for (engine_kind, pipe), dma in timing.dma.items() if engine_kind is kind}
        recorder = system.recorder
        order_base = (0 if kind is CoreKind.AIC else 1, index)
        self.tracks = {pipe: recorder.track(die.index, self.name, pipe.name, order_base + (int(pipe),)) for pipe in kind.pipes}
        self.lock = simpy.Resource(self.env, capacity=1)
        self.current: KernelRun | None = None

    def __repr__(self) -> str:
        return f"die{self.die.index} {self.name}"

    def gm_route(self, gm_die: int, to_gm: bool) -> Route:
        """The shared resources a DMA of this core crosses to read (or write, ``to_gm``) the GM of
        ``gm_die``, and its fixed latency in ps."""
        return self.system.gm_route(self.die.index, gm_die, to_gm)

    def execute(self, program, op: int) -> simpy.Process:
        """Run ``program`` on this core once the core is free; the process ends when every pipe is done."""
        return self.env.process(self._execute(program, op))

    def _execute(self, program, op: int):
        with self.lock.request() as granted:
            yield granted
            run = KernelRun(self.env, self, program, op)
            self.current = run
            pipes = [self.env.process(self._pipe_loop(run, pipe, instructions)) for pipe, instructions in program.by_pipe.items() if instructions]
            yield self.env.all_of(pipes)
            self.current = None

    def _pipe_loop(self, run: KernelRun, pipe: Pipe, instructions):
        # The hot loop of the simulator: locals instead of attribute look-ups, int keys (an enum
        # member hashes in Python code), and the recorder's columns appended to directly.
        env = self.env
        timeout = env.timeout
        recorder = self.system.recorder
        track = self.tracks[pipe]
        put_track, put_name, put_start, put_end, put_bytes, put_op, put_tile = (
            recorder.track_col.append, recorder.name_col.append, recorder.start_col.append, recorder.end_col.append,
            recorder.bytes_col.append, recorder.op_col.append, recorder.tile_col.append)
        issued = run.progress[Pipe.SCALAR]
        done = run.progress[pipe]
        blocked = run.blocked
        pipe_id = int(pipe)
        with_data = self.system.with_data
        op = run.op
        for instruction in instructions:
            if instruction.s_dep > issued.count:
                blocked[pipe_id] = "waiting for the scalar unit to issue it"
                yield issued.reached(instruction.s_dep)
                del blocked[pipe_id]
            start = env._now  # the property costs a call per read on this hot path
            busy = instruction.start(self, run)
            if busy.__class__ is int:
                if busy:
                    yield timeout(busy)
            elif instruction.may_block:
                blocked[pipe_id] = instruction
                yield busy
                del blocked[pipe_id]
            else:
                yield busy
            if instruction.effect is not None and (with_data or instruction.control):
                instruction.effect(self, run)
            put_track(track)
            put_name(instruction.name_id)
            put_start(start)
            put_end(env._now)
            put_bytes(instruction.nbytes)
            put_op(op)
            put_tile(instruction.tile)
            done.count += 1
            if done.waiting:
                done.wake()
