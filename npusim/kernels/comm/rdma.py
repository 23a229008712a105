"""RDMA writes a kernel hands to its die's AICPU (HCCL's ``BatchWrite`` of the MC2 ops on Atlas A2):
the AIV cores lay out, in a staging window of their own GM, what goes to each peer, and one core
asks the AICPU to write it; the AICPU notices the request, then posts one RDMA write per peer to
the RoCE NIC (``die.aicpu.rdma_post`` each, one after the other), and each write streams through
the die's queue pair to that peer (:class:`~npusim.hw.dma.RdmaQueuePair`: the NIC's rate, the
path latency once per write).

A write's last bytes are the flags its receiver polls (they land when the write completes; the
receiver's cores spin on them, :func:`~npusim.kernels.comm.aiv.wait_for`): the flags and counts are
control memory, so they land with data off too, and wake the cores polling them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import simpy

from npusim.errors import ConfigError
from npusim.hw.dma import GmBlock
from npusim.hw.memory import Allocation
from npusim.hw.topology import Direction


@dataclass(frozen=True)
class _Timed:
    """Bytes a write carries whose landing :func:`batch_write` applies itself (the control bytes):
    the queue pair only streams them."""

    nbytes: int

    def copy(self, _event: simpy.Event | None = None) -> None:
        """Nothing here: the control bytes land when the whole write has (:func:`batch_write`)."""


@dataclass(frozen=True)
class RdmaWrite:
    """One item of a batch: to die ``peer``, ``data`` blocks (bytes with data on) then ``control``
    blocks (counts and flags, real with data off too), in that order in one write."""

    peer: int
    data: tuple[GmBlock, ...]
    control: tuple[GmBlock, ...]

    @property
    def nbytes(self) -> int:
        return sum(b.nbytes for b in self.data) + sum(b.nbytes for b in self.control)


def land(block: GmBlock) -> None:
    """Apply a control block's bytes and wake the cores polling them."""
    dst, src = block.dst, block.src
    if dst.data is None or src.data is None:
        return
    dst.data[block.dst_offset : block.dst_offset + block.nbytes] = src.data[block.src_offset : block.src_offset + block.nbytes]
    _wake(dst, block.dst_offset, block.dst_offset + block.nbytes)


def _wake(allocation: Allocation, first: int, end: int) -> None:
    for start, last, look in list(allocation.watchers or ()):
        if start < end and first < last:
            look(None)


def batch_write(system, die: int, writes: Sequence[RdmaWrite], op: int, name: str = "BatchWrite"):
    """SimPy generator: the AICPU of die ``die`` takes the request (one poll interval: it spins on
    the request area), posts ``writes`` one after the other (``die.aicpu.rdma_post`` each, an event
    each on the lane ``aicpu hccl``), each write then streaming on its own; ends when the last
    write's bytes have all landed."""
    spec = system.spec.die.aicpu
    if spec.rdma_post is None:
        raise ConfigError(f"{name}: posting RDMA writes from the AICPU needs die.aicpu.rdma_post (its cost per write) in config "
                          f"{system.spec.name!r}; add it")
    hz = system.spec.die.clock.hz
    env, recorder = system.env, system.recorder
    post_ps, notice_ps = spec.rdma_post.to_ps(hz), spec.poll_interval.to_ps(hz)
    track = recorder.track(die, "aicpu", "hccl", (5, 0))
    post_id = recorder.name_id(f"{name}: post")
    yield env.timeout(notice_ps)
    streams = []
    for write in writes:
        start = env.now
        yield env.timeout(post_ps)
        recorder.record(track, post_id, start, env.now, 0, op, -1)
        streams.append(env.process(_stream(system, die, write, op, name)))
    if streams:
        yield env.all_of(streams)


def _stream(system, die: int, write: RdmaWrite, op: int, name: str):
    path = system.copy_path(die, write.peer, Direction.WRITE, rdma=True)
    blocks = [*write.data, *(_Timed(b.nbytes) for b in write.control)]
    name_id = system.recorder.name_id(f"{name} to die{write.peer}")
    yield from system.die(die).queue_pair(write.peer).run(blocks, path, name_id, op)
    for block in write.control:
        land(block)


__all__ = ["RdmaWrite", "batch_write", "land"]
