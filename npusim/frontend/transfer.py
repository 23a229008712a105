"""Bulk device-to-device transfers, as Huawei's transfer library HIXL issues them.

``npusim.transfer(op, local, remote, protocol=...)`` mirrors ``hixl::Hixl::TransferSync(remote_engine,
op, op_descs)``: ``op`` is HIXL's ``TransferOp`` (``"write"`` pushes the local blocks into the peer's
GM, ``"read"`` pulls the peer's blocks into local GM) and each (local, remote) pair of tensors is one
``TransferOpDesc`` (local address, remote address, length). The initiator is the die of the local
blocks. Like HIXL, the blocks are moved by engines of the die, not by AI-core code:

- ``protocol="hccs"``: over the scale-up fabric (HCCS on A2, the UB fabric on A3) by the initiator's
  SDMA, one channel per transfer, one block after the other (HIXL calls HCCL's ``HcclBatchPut`` /
  ``HcclBatchGet`` on one stream). HCCL picks the link by topology, so between dies that no
  load/store fabric joins (two A2 servers) the transfer goes through the NICs as with ``"rdma"``
  (HIXL's A2 two-server "HCCS" rows measure the RDMA rate);
- ``protocol="rdma"``: through the RoCE NICs, by the initiator's queue pair to the peer, the blocks
  streamed back to back (HIXL's benchmark asks for it with ``HCCL_INTRA_ROCE_ENABLE=1``).

The transfer is queued on the initiator's stream (or ``stream``) and returns at once, like
``TransferAsync``; ``npusim.synchronize()`` (or reading a tensor) waits for it, as ``TransferSync``
does. See :mod:`npusim.hw.dma` for the timing of each engine.
"""

from __future__ import annotations

from collections.abc import Sequence

import simpy

from npusim.errors import OpArgumentError
from npusim.frontend.session import active_system, session_of
from npusim.frontend.tensor import DeviceTensor
from npusim.hw.dma import GmBlock
from npusim.hw.topology import Direction
from npusim.units import format_bytes

OPS = ("write", "read")
PROTOCOLS = ("hccs", "rdma")


def transfer(op: str, local: DeviceTensor | Sequence[DeviceTensor], remote: DeviceTensor | Sequence[DeviceTensor], *,
             protocol: str = "hccs", stream=None) -> simpy.Process:
    """Move whole blocks between the GM of the local die and the GM of one peer die.

    ``local`` and ``remote`` are a contiguous device tensor each, or equally long sequences of them
    (one block per pair, same size in bytes); every local block is on one die (the initiator), every
    remote block on one other die. Returns the SimPy process of the transfer."""
    system = active_system()
    kind = _choice("op", op, OPS)
    protocol = _choice("protocol", protocol, PROTOCOLS)
    locals_, remotes = _blocks("local", local), _blocks("remote", remote)
    if len(locals_) != len(remotes):
        raise OpArgumentError(
            f"npusim.transfer: local has {len(locals_)} blocks but remote has {len(remotes)}; "
            "each local block pairs with one remote block (one HIXL TransferOpDesc): give as many of each"
        )
    for side, tensors in (("local", locals_), ("remote", remotes)):
        for i, tensor in enumerate(tensors):
            if tensor.system is not system:
                raise OpArgumentError(f"npusim.transfer: {side}[{i}] belongs to another session; create it inside the active session")
            if not tensor.is_contiguous():
                raise OpArgumentError(
                    f"npusim.transfer: {side}[{i}] {tensor!r} is not contiguous; a block is one contiguous byte range "
                    "(HIXL TransferOpDesc: address and length): pass contiguous tensors or split the view into rows"
                )
        dies = sorted({tensor.device for tensor in tensors})
        if len(dies) != 1:
            raise OpArgumentError(
                f"npusim.transfer: the {side} blocks are on dies {dies}; all {side} blocks of one transfer must be on one die "
                "(one HIXL engine talks to one remote engine): issue one transfer per die"
            )
    initiator, peer = locals_[0].device, remotes[0].device
    if initiator == peer:
        raise OpArgumentError(
            f"npusim.transfer: local and remote blocks are both on die {initiator}; a transfer moves data between two dies"
        )
    for i, (a, b) in enumerate(zip(locals_, remotes)):
        if a.nbytes != b.nbytes:
            raise OpArgumentError(
                f"npusim.transfer: block {i} has {format_bytes(a.nbytes)} locally but {format_bytes(b.nbytes)} remotely; "
                "a block moves one length (TransferOpDesc.len): give tensors of the same size in bytes"
            )

    if stream is not None and getattr(stream, "die", None) != initiator:
        raise OpArgumentError(
            f"npusim.transfer: the stream given belongs to die {getattr(stream, 'die', None)!r}, not to the initiator die "
            f"{initiator}; a transfer runs on a stream of the die of its local blocks"
        )
    writes = kind == "write"
    direction = Direction.WRITE if writes else Direction.READ
    src_die, dst_die = (initiator, peer) if writes else (peer, initiator)
    rdma = protocol == "rdma" or not system.topology.joins(src_die, dst_die)
    if rdma and not system.topology.rdma_route(src_die, dst_die, direction).resources:
        raise OpArgumentError(
            f"npusim.transfer: dies {initiator} and {peer} share one NIC of the scale-out network (fabrics.scale_out), so RDMA has "
            "no path between them; use protocol='hccs'"
        )
    path = system.copy_path(src_die, dst_die, direction, rdma=rdma)
    pairs = zip(locals_, remotes) if writes else zip(remotes, locals_)
    blocks = [GmBlock(src.allocation, src.offset_bytes, dst.allocation, dst.offset_bytes, src.nbytes) for src, dst in pairs]

    recorder = system.recorder
    op_id = recorder.op("transfer", initiator, op=kind, protocol=protocol, peer=peer, blocks=len(blocks), bytes=sum(b.nbytes for b in blocks))
    name_id = recorder.name_id(f"{kind} {'to' if writes else 'from'} die{peer}")
    die = system.die(initiator)
    engine = die.queue_pair(peer) if rdma else die.sdma
    process = (stream or system.stream(initiator)).submit(lambda: engine.run(blocks, path, name_id, op_id))
    session = session_of(system)
    if session is not None:
        session.track(process)
    return process


def _choice(name: str, value, allowed: tuple[str, ...]) -> str:
    if isinstance(value, str) and value.lower() in allowed:
        return value.lower()
    raise OpArgumentError(f"npusim.transfer: {name}={value!r} is not supported; {name} is one of {', '.join(repr(a) for a in allowed)}")


def _blocks(side: str, value) -> list[DeviceTensor]:
    tensors = [value] if isinstance(value, DeviceTensor) else list(value) if isinstance(value, (list, tuple)) else None
    if tensors is None or not all(isinstance(t, DeviceTensor) for t in tensors):
        raise OpArgumentError(f"npusim.transfer: {side} must be a device tensor or a list of them, got {type(value).__name__}")
    if not tensors:
        raise OpArgumentError(f"npusim.transfer: {side} is an empty list; give at least one block")
    return tensors
