"""``npusim.hccl``: HCCL's collectives called for every rank at once, on npusim device tensors (the
way HCCL's own C API is driven from one process per device, here from one script)::

    with npusim.session("a2"):
        world = npusim.hccl.communicator()                      # one rank per die
        xs = [npusim.tensor(x[r], device=r) for r in range(8)]
        world.all_reduce(xs, op="sum")                           # every rank's part queued
        xs[0].numpy()                                            # runs the simulation

Each list gives one tensor per rank, in rank order. The parts are queued on each rank's current
stream (or ``streams``); the simulation runs when a value is read or the session synchronises.
torch programs call the same collectives through ``torch.distributed`` (docs/collectives.md).
"""

from __future__ import annotations

from collections.abc import Sequence

from npusim.errors import OpArgumentError, UsageError
from npusim.frontend.hccl.runtime import Communicator, Request, Run
from npusim.frontend.session import current_session
from npusim.frontend.tensor import DeviceTensor, empty
from npusim.hw.stream import Stream
from npusim.kernels.hccl.algorithm import ALL_GATHER, ALL_REDUCE, ALL_TO_ALL, BROADCAST, REDUCE, REDUCE_SCATTER, SCATTER
from npusim.kernels.hccl.plan import SEND


def communicator(dies: Sequence[int] | None = None, name: str = "world") -> Group:
    """A communicator of the running session: rank ``r`` on die ``dies[r]`` (default: every die)."""
    session = current_session()
    chosen = list(range(session.system.die_count)) if dies is None else list(dies)
    if not chosen:
        raise UsageError("npusim.hccl.communicator: dies is empty; give at least one die")
    return Group(Communicator(session, len(chosen), name, chosen))


class Group:
    """The collectives of one communicator, each called for all its ranks (lists in rank order)."""

    def __init__(self, communicator: Communicator) -> None:
        self.communicator = communicator

    @property
    def size(self) -> int:
        return self.communicator.size

    def _per_rank(self, what: str, values: Sequence[DeviceTensor]) -> list[DeviceTensor]:
        listed = list(values)
        if len(listed) != self.size:
            raise OpArgumentError(f"npusim.hccl: {what} has {len(listed)} tensors; give one per rank ({self.size})")
        return listed

    def _streams(self, streams: Sequence[Stream] | None) -> list[Stream]:
        comm = self.communicator
        if streams is None:
            return [comm.session.stream(comm.die_of(rank)) for rank in range(comm.size)]
        return list(streams)

    def _call(self, op: str, inputs, outputs, streams, **kwargs) -> Run:
        streams = self._streams(streams)
        run = None
        for rank in range(self.size):
            run = self.communicator.call(rank, Request(op, inputs[rank], outputs[rank], streams[rank], **{
                k: (v[rank] if isinstance(v, list) else v) for k, v in kwargs.items()}))
        assert run is not None
        return run

    def all_reduce(self, tensors: Sequence[DeviceTensor], op: str = "sum", *, streams: Sequence[Stream] | None = None) -> Run:
        """Reduce every rank's tensor into every rank's, in place."""
        each = self._per_rank("tensors", tensors)
        return self._call(ALL_REDUCE, each, each, streams, reduce_op=op)

    def all_gather(self, outputs: Sequence[DeviceTensor], inputs: Sequence[DeviceTensor], *,
                   streams: Sequence[Stream] | None = None) -> Run:
        """Every rank's output gets the inputs of all ranks, in rank order."""
        return self._call(ALL_GATHER, self._per_rank("inputs", inputs), self._per_rank("outputs", outputs), streams)

    def reduce_scatter(self, outputs: Sequence[DeviceTensor], inputs: Sequence[DeviceTensor], op: str = "sum", *,
                       streams: Sequence[Stream] | None = None) -> Run:
        """Rank ``r``'s output gets the ``r``-th part of the reduced inputs."""
        return self._call(REDUCE_SCATTER, self._per_rank("inputs", inputs), self._per_rank("outputs", outputs), streams, reduce_op=op)

    def broadcast(self, tensors: Sequence[DeviceTensor], root: int = 0, *, streams: Sequence[Stream] | None = None) -> Run:
        """Every rank's tensor gets the root's."""
        each = self._per_rank("tensors", tensors)
        return self._call(BROADCAST, each, each, streams, root=self.communicator._rank(root, "root"))

    def reduce(self, tensors: Sequence[DeviceTensor], root: int = 0, op: str = "sum", *, streams: Sequence[Stream] | None = None) -> Run:
        """The root's tensor gets the reduction of every rank's."""
        each = self._per_rank("tensors", tensors)
        return self._call(REDUCE, each, each, streams, root=self.communicator._rank(root, "root"), reduce_op=op)

    def scatter(self, outputs: Sequence[DeviceTensor], source: DeviceTensor, root: int = 0, *,
                streams: Sequence[Stream] | None = None) -> Run:
        """Rank ``r``'s output gets the ``r``-th part of the root's ``source``."""
        root = self.communicator._rank(root, "root")
        inputs: list[DeviceTensor | None] = [source if r == root else None for r in range(self.size)]
        return self._call(SCATTER, inputs, self._per_rank("outputs", outputs), streams, root=root)

    def all_to_all(self, outputs: Sequence[DeviceTensor], inputs: Sequence[DeviceTensor], counts: Sequence[Sequence[int]] | None = None, *,
                   streams: Sequence[Stream] | None = None) -> Run:
        """Rank ``i`` sends ``counts[i][j]`` elements (its input's ``j``-th piece) to rank ``j``, which
        keeps the pieces in rank order; ``counts=None``: equal pieces."""
        sources, targets = self._per_rank("inputs", inputs), self._per_rank("outputs", outputs)
        p = self.size
        if counts is None:
            counts = [[sources[i].size // p] * p for i in range(p)]
        rows = [tuple(int(c) for c in row) for row in counts]
        columns = [tuple(rows[i][j] for i in range(p)) for j in range(p)]
        return self._call(ALL_TO_ALL, sources, targets, streams, send_counts=rows, recv_counts=columns)

    def send(self, tensor: DeviceTensor, src: int, into: DeviceTensor, dst: int, *, streams: Sequence[Stream] | None = None) -> Run:
        """Rank ``src`` sends ``tensor`` to rank ``dst``, which receives it into ``into``."""
        comm = self.communicator
        src, dst = comm._rank(src, "src"), comm._rank(dst, "dst")
        all_streams = self._streams(streams)
        comm.call(src, Request(SEND, tensor, None, all_streams[src], root=src, peer=dst))
        return comm.call(dst, Request(SEND, None, into, all_streams[dst], root=src, peer=dst))

    def barrier(self, *, streams: Sequence[Stream] | None = None) -> Run:
        """Every rank waits for all: an all-reduce of one fp32 (HCCL's barrier)."""
        tokens = [empty((1,), "float32", device=self.communicator.die_of(rank)) for rank in range(self.size)]
        return self.all_reduce(tokens, "sum", streams=streams)
