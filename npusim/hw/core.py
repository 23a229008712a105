"""An AI core: in-order pipes that run concurrently, flags between them, on-chip buffers.

A program (built with :mod:`npusim.isa`) gives each pipe its instructions in program order. Each
pipe is one SimPy process that runs its instructions one after the other. The scalar unit issues
every instruction, so an instruction never starts before the scalar instructions that precede it in
program order have finished (``s_dep``); ``set_flag``/``wait_flag`` order two pipes; a
``pipe_barrier(ALL)`` on the scalar pipe waits for every pipe to drain.

Instructions are duck-typed: ``pipe``, ``s_dep``, ``label_id``, ``nbytes``, ``effect`` (None or a
callable applied to real data at completion), ``step`` (one of the constants below, saying how the
pipe executes it) and what that step needs: ``fixed_ps`` (FIXED), ``key``/``cost_ps`` (SET_FLAG,
WAIT_FLAG), ``start(core, run, delay_ps)`` returning an event (TRANSFER), or ``start(core, run)``
returning ps or an event (WAITING: barriers).

A pipe other than SCALAR lets the small fixed cost of its flag instructions run ahead of SimPy's
clock and folds it into its next wait, so a ``set_flag`` costs no SimPy event: the flag is stamped
with the exact time it is raised and a waiter sees it then. The times recorded are exact; only a
``pipe_barrier(ALL)`` may see such a pipe's progress up to one flag cost early.

For the analysis, the pipes record (all O(1) per instruction): a ``flag`` flow from the
``set_flag`` event to the ``wait_flag`` event that consumed its flag (the set's event index travels
with the flag); for a TRANSFER whose event reports ``(bottleneck index, ps the bytes started
flowing)`` (the bandwidth network's transfers do), the DMA's fixed part and bottleneck; and, per
run, the bytes of each buffer the program reserved (:class:`~npusim.trace.recorder.BufferSpan`).
"""

from __future__ import annotations

import collections

from typing import TYPE_CHECKING

import simpy

from npusim.engine.progress import ProgressCounter
from npusim.hw.memory import LocalBuffer
from npusim.hw.pipes import CoreKind, Pipe
from npusim.hw.topology import Route
from npusim.trace.recorder import BufferSpan, pack

if TYPE_CHECKING:
    from npusim.hw.system import Die


FIXED, SET_FLAG, WAIT_FLAG, TRANSFER, WAITING = range(5)


def succeed_at(env: simpy.Environment, event: simpy.Event, delay_ps: int, value=None) -> None:
    """Trigger ``event`` with ``value`` ``delay_ps`` from now (what ``Timeout`` does for a new event)."""
    event._ok = True
    event._value = value
    env.schedule(event, delay=delay_ps)


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
        # raised flags not consumed yet: (time it became visible, event index of its set_flag)
        self.flags: dict[tuple[int, int, int], collections.deque[tuple[int, int]]] = {}
        self.flag_waiters: dict[tuple[int, int, int], collections.deque[simpy.Event]] = {}
        self.regs: dict[int, int | float] = {}
        self.blocked: dict[int, object] = {}

    def set_flag(self, key: tuple[int, int, int], at_ps: int, set_event: int) -> None:
        """Raise flag (src pipe, dst pipe, event id) at time ``at_ps`` (now or later) by the
        ``set_flag`` of event index ``set_event``: the oldest waiter wakes then (the event's value
        is ``set_event``), or the flag is kept for the next wait."""
        waiters = self.flag_waiters.get(key)
        if waiters:
            succeed_at(self.env, waiters.popleft(), at_ps - self.env._now, set_event)
        else:
            raised = self.flags.get(key)
            if raised is None:
                raised = self.flags[key] = collections.deque()
            raised.append((at_ps, set_event))

    def take_flag(self, key: tuple[int, int, int]) -> tuple[int, int] | simpy.Event:
        """Consume the oldest raised flag: (the time it is or becomes visible, its set's event
        index); if none is raised, an event that fires when one is (its value: the set's index)."""
        raised = self.flags.get(key)
        if raised:
            return raised.popleft()
        event = self.env.event()
        waiters = self.flag_waiters.get(key)
        if waiters is None:
            waiters = self.flag_waiters[key] = collections.deque()
        waiters.append(event)
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
        """Run ``program`` (``by_pipe``: its instructions per pipe; ``name``; optionally
        ``buffer_bytes``: bytes it reserves per buffer) on this core once the core is free; the
        process ends when every pipe is done."""
        return self.env.process(self._execute(program, op))

    def _execute(self, program, op: int):
        with self.lock.request() as granted:
            yield granted
            run = KernelRun(self.env, self, program, op)
            self.current = run
            started = self.env.now
            pipes = [self.env.process(self._pipe_loop(run, pipe, instructions)) for pipe, instructions in program.by_pipe.items() if instructions]
            yield self.env.all_of(pipes)
            self.current = None
            recorder = self.system.recorder
            for name, reserved in getattr(program, "buffer_bytes", {}).items():
                if reserved:
                    recorder.buffer_span(BufferSpan(self.die.index, self.name, name, self.buffers[name].capacity_bytes, reserved,
                                                    started, self.env.now, op))

    def _pipe_loop(self, run: KernelRun, pipe: Pipe, instructions):
        # The hot loop of the simulator: locals instead of attribute look-ups, int keys, the
        # recorder's columns appended to directly, and flag costs run ahead (see the module doc).
        env = self.env
        timeout = env.timeout
        recorder = self.system.recorder
        put_lane, put_label, put_start, put_end, put_bytes = (
            recorder.lane_col.append, recorder.label_col.append, recorder.start_col.append, recorder.end_col.append,
            recorder.bytes_col.append)
        put_flag_flow = recorder.flag_flows.append
        put_transfer_event, put_transfer_info = recorder.transfer_event.append, recorder.transfer_info.append
        events = recorder.start_col  # its length is the index of the event being recorded
        lane = pack(self.tracks[pipe], run.op)
        issued = run.progress[Pipe.SCALAR]
        done = run.progress[pipe]
        blocked = run.blocked
        pipe_id = int(pipe)
        may_run_ahead = pipe is not Pipe.SCALAR
        with_data = self.system.with_data
        ahead = 0  # ps of flag costs this pipe has run ahead of env.now
        for instruction in instructions:
            if instruction.s_dep > issued.count:
                if ahead:
                    yield timeout(ahead)
                    ahead = 0
                blocked[pipe_id] = "waiting for the scalar unit to issue it"
                yield issued.reached(instruction.s_dep)
                del blocked[pipe_id]
            step = instruction.step
            if step == FIXED:
                start = env._now + ahead
                busy = ahead + instruction.fixed_ps
                ahead = 0
                if busy:
                    yield timeout(busy)
                end = env._now
            elif step == TRANSFER:
                start = env._now + ahead
                event = instruction.start(self, run, ahead)
                ahead = 0
                outcome = yield event
                end = env._now
                if outcome.__class__ is tuple:  # (bottleneck index, ps the bytes started flowing)
                    put_transfer_event(len(events))
                    put_transfer_info((outcome[1] - start) << 32 | (outcome[0] + 2))
            elif step == SET_FLAG:
                start = env._now + ahead
                if may_run_ahead:
                    ahead += instruction.cost_ps
                    end = env._now + ahead
                else:
                    yield timeout(instruction.cost_ps)
                    end = env._now
                run.set_flag(instruction.key, end, len(events))
            elif step == WAIT_FLAG:
                if ahead:
                    yield timeout(ahead)
                    ahead = 0
                start = env._now
                raised = run.take_flag(instruction.key)
                if raised.__class__ is tuple:
                    visible, set_event = raised
                    if visible > start:
                        blocked[pipe_id] = instruction
                        yield timeout(visible - start)
                        del blocked[pipe_id]
                else:
                    blocked[pipe_id] = instruction
                    set_event = yield raised
                    del blocked[pipe_id]
                if may_run_ahead:
                    ahead = instruction.cost_ps
                    end = env._now + ahead
                else:
                    yield timeout(instruction.cost_ps)
                    end = env._now
                put_flag_flow(set_event << 32 | len(events))
            else:  # WAITING: needs the real time, may block on other pipes
                if ahead:
                    yield timeout(ahead)
                    ahead = 0
                start = env._now
                busy = instruction.start(self, run)
                if busy.__class__ is int:
                    if busy:
                        yield timeout(busy)
                else:
                    blocked[pipe_id] = instruction
                    yield busy
                    del blocked[pipe_id]
                end = env._now
            if with_data and instruction.effect is not None:
                instruction.effect(self, run)
            put_lane(lane)
            put_label(instruction.label_id)
            put_start(start)
            put_end(end)
            put_bytes(instruction.nbytes)
            done.count += 1
            if done.waiters:
                done.wake()
        if ahead:
            yield timeout(ahead)
