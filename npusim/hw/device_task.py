"""The device-task protocol: what the AICPU schedulers (:mod:`npusim.hw.aicpu`) ask of the tasks of
a device task, and nothing more. A framework's runtime implements it (the PyPTO runtime's tasks,
:mod:`npusim.runtime.tasks`); the hardware model calls only these names, so it never reaches up
into the runtime that made the tasks.

Every task is a :class:`DeviceTask`; it says which kind it is with two class attributes: a
:class:`CoreWork` (``on_core``) runs a program on one AI core, an :class:`AicpuWait` (neither) is
polled by a scheduler thread, a :class:`ControlWork` (``on_control``) is run by the control AICPU.
Event indices are the recorder's (-1: none, or not recorded yet); times are integer picoseconds.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol, runtime_checkable

import simpy


@runtime_checkable
class DeviceTask(Protocol):
    """One task of a device task: how many of its predecessors have not finished (``pending``, the
    scheduler counts it down), its predecessors by id (``deps``) and its ``successors``; the ids its
    trace events carry (``trace_op``, ``tile``); which kind it is (``on_core``, ``on_control``).
    When the scheduler has handled its completion it sets ``done`` and ``completed`` (that event's
    index)."""

    on_core: bool
    on_control: bool
    trace_op: int
    tile: int
    pending: int
    done: bool
    completed: int

    @property
    def deps(self) -> Mapping[int, DeviceTask]: ...

    @property
    def successors(self) -> Sequence[DeviceTask]: ...


@runtime_checkable
class CoreWork(DeviceTask, Protocol):
    """A task that runs a program on one core of ``core_kind`` (``on_core`` True). ``start(core)``
    launches it on core number ``core`` of that kind and returns the event that fires when its
    program has run; by then ``first_event`` and ``last_event`` are the events of its program's first
    instruction and of the one that ended last."""

    core_kind: str
    first_event: int
    last_event: int

    def start(self, core: int) -> simpy.Event: ...


@runtime_checkable
class AicpuWait(DeviceTask, Protocol):
    """A task a scheduler thread polls (``on_core`` and ``on_control`` False). ``matches()`` reads
    its slot now; ``satisfied()`` is called when it matched (e.g. to clear the slot), ``polled(event)``
    with the poll pass that saw it match, once recorded. Whatever changes what ``matches()`` says
    calls :meth:`npusim.hw.aicpu.AicpuScheduler.may_match` with the task right after the change."""

    def matches(self) -> bool: ...

    def satisfied(self) -> None: ...

    def polled(self, event: int) -> None: ...


@runtime_checkable
class ControlWork(DeviceTask, Protocol):
    """A task the control AICPU runs in turn (``on_control`` True): ``executed(event)`` once it has
    (its ``read`` event)."""

    def executed(self, event: int) -> None: ...
