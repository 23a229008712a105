"""``torch.distributed`` with the ``hccl`` backend on the simulated ranks (docs/collectives.md).

A torch program runs its ranks with ``torch.multiprocessing.spawn(fn, args, nprocs)``, which inside a
session runs them as ranks of the session (:mod:`npusim.frontend.spmd`: one simulated device and host
thread each), and calls ``dist.init_process_group("hccl", rank=rank, world_size=n)`` in each. Nothing
else of the program changes. Made of torch's own extension points:

- ``hccl`` is registered with ``torch.distributed.Backend.register_backend`` (the extended API, which
  hands the creator the group's name and its global ranks) for the ``npu`` device; its creator gives
  an :class:`HcclProcessGroup`, a Python ``ProcessGroup`` whose methods are the collectives c10d calls
  (``allreduce``, ``all_gather_single``, ``reduce_scatter_single``, ``all_to_all_single``, ``send`` ...);
  every rank's group of one name shares one :class:`~npusim.frontend.hccl.runtime.Communicator`;
- c10d keeps its groups in one process-wide state (``distributed_c10d._world``); while ranks run, that
  state is each rank's own (a view that dispatches on the running rank), as separate processes have it;
- ``init_process_group`` gets an in-process store shared by the ranks (a ``HashStore``) unless the
  program gives its own: TCP rendezvous would wait for the other ranks, which run one at a time.

As torch_npu runs them (``ProcessGroupHCCL.cpp``): each group has its own stream per device, which
first waits for the current stream's work before a collective (``syncStreams``); a collective is one
eager host call (``host.op_launch``, ``HcclAllReduce`` on the host lane); its work's ``wait()`` makes
the current stream wait for the collective (the host does not block, except for ``barrier``, whose
wait blocks the host as torch's does); ``async_op=False`` is ``wait()`` at once. ReduceOp.AVG is a
sum then a division on the device; point-to-point sends are matched by order per pair of ranks, and
a rank's consecutive sends and receives run side by side (torch's batch_isend_irecv)."""

from __future__ import annotations

import contextlib
import threading
from typing import Any

import torch
import torch.distributed as dist
import torch.distributed.distributed_c10d as c10d
import torch.multiprocessing

from npusim.errors import OpArgumentError, UsageError
from npusim.frontend import aclnn
from npusim.frontend.hccl.runtime import Communicator, Request
from npusim.frontend.host import DeviceEvent
from npusim.frontend.session import Session, current_session
from npusim.frontend.spmd import current_rank, spawn
from npusim.frontend.torch_device.npu_module import current_device
from npusim.frontend.torch_device.tensors import device_tensor, new_tensor
from npusim.hw.stream import Stream
from npusim.kernels.hccl.algorithm import ALL_GATHER, ALL_REDUCE, ALL_TO_ALL, BROADCAST, REDUCE, REDUCE_SCATTER, SCATTER
from npusim.kernels.hccl.plan import SEND

BACKEND = "hccl"
_REDUCE_OPS = {dist.ReduceOp.SUM: "sum", dist.ReduceOp.PRODUCT: "prod", dist.ReduceOp.MIN: "min", dist.ReduceOp.MAX: "max",
               dist.ReduceOp.AVG: "avg"}


def _reduce_op(op, api: str) -> str:
    kind = op.op if isinstance(op, dist.ReduceOp) else op  # type: ignore[attr-defined]  # a ReduceOp holds its kind in .op (not in torch's stubs)
    name = _REDUCE_OPS.get(kind)
    if name is None:
        raise OpArgumentError(f"{api}: ReduceOp.{getattr(kind, 'name', kind)} is not supported with HCCL (torch_npu refuses BAND, BOR, "
                              "BXOR and PREMUL_SUM); use SUM, PRODUCT, MIN, MAX or AVG")
    return name


# -- each rank's own c10d state ---------------------------------------------------------------------


class _RankState(c10d._World):
    """One rank's c10d state: the fields torch keeps in module globals, held here per rank."""

    def __init__(self) -> None:
        super().__init__()
        self._maps: dict[str, dict] = {name: {} for name in ("pg_map", "pg_names", "pg_group_ranks", "pg_backend_config", "tags_to_pg",
                                                             "pg_to_tag")}
        self._count = 0

    pg_map = property(lambda self: self._maps["pg_map"])
    pg_names = property(lambda self: self._maps["pg_names"])
    pg_group_ranks = property(lambda self: self._maps["pg_group_ranks"])
    pg_backend_config = property(lambda self: self._maps["pg_backend_config"])
    tags_to_pg = property(lambda self: self._maps["tags_to_pg"])
    pg_to_tag = property(lambda self: self._maps["pg_to_tag"])

    @property
    def group_count(self) -> int:
        return self._count

    @group_count.setter
    def group_count(self, value: int) -> None:
        self._count = value


class _PerRankWorld:
    """``distributed_c10d._world`` while ranks run: every attribute is the running rank's (outside a
    rank, the process's own state)."""

    def __init__(self, outside: Any) -> None:
        object.__setattr__(self, "_outside", outside)

    def _state(self) -> Any:
        rank = current_rank()
        if rank is None:
            return object.__getattribute__(self, "_outside")
        state = rank.state.get("c10d")
        if state is None:
            state = rank.state["c10d"] = _RankState()
        return state

    def __getattr__(self, name: str) -> Any:
        return getattr(self._state(), name)

    def __setattr__(self, name: str, value: Any) -> None:
        setattr(self._state(), name, value)


def _rank_name(name: str) -> str:
    """A group's name in torch's process-wide registry of names (C++): made the running rank's own."""
    rank = current_rank()
    return name if rank is None else f"{name}@npusim-rank{rank.index}-world{id(rank.world)}"


_REGISTRY = ("_register_process_group", "_unregister_process_group", "_resolve_process_group")
_installed: list[Any] = []
_lock = threading.Lock()


@contextlib.contextmanager
def _rank_worlds():
    """c10d's state and its registry of group names per rank while the block runs (nested: the
    outermost installs it)."""
    with _lock:
        first = not _installed
        if first:
            _installed.append((c10d._world, {name: getattr(c10d, name) for name in _REGISTRY}))
            c10d._world = _PerRankWorld(c10d._world)
            for name, original in _installed[0][1].items():
                setattr(c10d, name, _per_rank_name(original))
    try:
        yield
    finally:
        if first:
            with _lock:
                world, registry = _installed.pop()
                c10d._world = world
                for name, original in registry.items():
                    setattr(c10d, name, original)


def _per_rank_name(function):
    def call(name, *args):
        return function(_rank_name(name), *args)

    return call


# -- launching ranks and initialising -------------------------------------------------------------

_original_spawn = torch.multiprocessing.spawn
_original_init = dist.init_process_group


def _spawn(fn, args=(), nprocs=1, join=True, daemon=False, start_method="spawn"):
    """``torch.multiprocessing.spawn``: inside a session, the ranks of the session (module docstring);
    outside one, torch's own."""
    from npusim.frontend.session import innermost_session

    if innermost_session() is None:
        return _original_spawn(fn, args=args, nprocs=nprocs, join=join, daemon=daemon, start_method=start_method)
    if not join:
        raise UsageError("torch.multiprocessing.spawn(join=False): npusim's ranks run to their end inside spawn; call it with "
                         "join=True (the default)")
    with _rank_worlds():
        spawn(fn, args, nprocs)
    return None


_stores: dict[int, Any] = {}


def _init_process_group(backend=None, init_method=None, timeout=None, world_size=-1, rank=-1, store=None, group_name="",
                        pg_options=None, device_id=None, **kwargs):
    """``dist.init_process_group``: in a rank, the hccl backend with the ranks' shared in-process store
    and, when not given, the rank and world size of the running program."""
    me = current_rank()
    if me is None:
        return _original_init(backend, init_method, timeout, world_size, rank, store, group_name, pg_options, device_id, **kwargs)
    name = str(backend).lower() if backend is not None else BACKEND
    if name != BACKEND:
        raise UsageError(f"init_process_group(backend={backend!r}): npusim simulates HCCL; use backend='hccl' (torch_npu's backend "
                         "of the npu device)")
    size = len(me.world.ranks)
    if world_size not in (-1, size):
        raise UsageError(f"init_process_group(world_size={world_size}): the program runs {size} ranks (spawn's nprocs); pass "
                         f"world_size={size}")
    if rank not in (-1, me.index):
        raise UsageError(f"init_process_group(rank={rank}) is called from rank {me.index}; pass each rank its own index "
                         "(spawn calls fn(rank, ...))")
    if store is None:
        store = _stores.get(id(me.world))
        if store is None:
            store = _stores[id(me.world)] = dist.HashStore()
    return _original_init(BACKEND, None, timeout, size, me.index, store, group_name, pg_options, device_id, **kwargs)


# -- the process group ----------------------------------------------------------------------------


class _Shared:
    """What the ranks' groups of one name share: the communicator, each rank's HCCL stream, each
    global rank's group, and the communicator's name as HCCL gives it (``get_hccl_comm_name``)."""

    def __init__(self, session: Session, size: int, name: str) -> None:
        self.communicator = Communicator(session, size, name)
        self.streams: dict[int, Stream] = {}
        self.members: dict[int, HcclProcessGroup] = {}
        self.comm_name = f"npusim_hccl_{self.communicator.index}_{name.replace(' ', '_')}"


_shared: dict[tuple[int, str], _Shared] = {}


def group_of_comm_name(name: str, api: str) -> HcclProcessGroup:
    """The running rank's group of the communicator HCCL names ``name`` (an MC2 op's ``hcom``)."""
    rank = current_rank()
    if rank is None:
        raise UsageError(f"{api}: hcom={name!r}: MC2 ops run inside the ranks of a torch program (torch.multiprocessing.spawn) "
                         "with a process group of the hccl backend")
    for (world, _), shared in _shared.items():
        if world == id(rank.world) and shared.comm_name == name:
            group = shared.members.get(rank.index)
            if group is None:
                raise OpArgumentError(f"{api}: hcom={name!r} is a group rank {rank.index} is not a member of")
            return group
    raise OpArgumentError(f"{api}: hcom={name!r} names no communicator of this program; pass "
                          "pg._get_backend(torch.device('npu')).get_hccl_comm_name(rank) of a group of the hccl backend")


def _create(options, backend_options=None) -> HcclProcessGroup:
    """The creator ``register_backend`` calls in each rank for each group."""
    rank = current_rank()
    if rank is None:
        raise UsageError("the hccl backend of npusim runs inside spawned ranks: start the program's ranks with "
                         "torch.multiprocessing.spawn(fn, nprocs=N) inside an npusim session (npusim run)")
    name = str(options.group_id)
    key = (id(rank.world), name)
    shared = _shared.get(key)
    if shared is None:
        shared = _shared[key] = _Shared(rank.world.session, options.group_size, "world" if name == "0" else f"group {name}")
    group = HcclProcessGroup(options.group_rank, options.group_size, shared, list(options.global_ranks_in_group))
    shared.members[rank.index] = group
    return group


class HcclWork(dist.Work):
    """A rank's part of a collective: ``wait()`` makes the current stream wait for it (``barrier``'s
    blocks the host until it is done); ``is_completed()`` whether the simulation has reached its end."""

    def __init__(self, session: Session, finished, blocking: bool = False, result: list | None = None) -> None:
        super().__init__()
        self._event = DeviceEvent(session)
        self._event.recorded = finished
        self._blocking = blocking
        self._result = result or []

    def wait(self, timeout=None) -> bool:
        if self._blocking:
            self._event.synchronize()
        else:
            self._event.wait_on(self._event.session.stream(current_device()))
        return True

    def is_completed(self) -> bool:
        return self._event.query()

    def is_success(self) -> bool:
        return self._event.query()

    def exception(self):
        return None

    def synchronize(self) -> None:
        self._event.synchronize()

    def result(self) -> list:
        return self._result

    def source_rank(self) -> int:
        return -1


class HcclProcessGroup(dist.ProcessGroup):
    """One rank's view of a group (module docstring)."""

    def __init__(self, rank: int, size: int, shared: _Shared, global_ranks: list[int]) -> None:
        super().__init__(rank, size)  # type: ignore[call-arg]  # a Python process group's constructor: (rank, size)
        self._rank = rank
        self._size = size
        self._shared = shared
        self._global_ranks = global_ranks

    def getBackendName(self) -> str:
        return BACKEND

    def _get_backend(self, device=None) -> HcclProcessGroup:  # type: ignore[override]  # torch's takes a device and returns a Backend
        """The group itself: a Python process group is its own backend (torch_npu's programs ask for
        ``pg._get_backend(torch.device("npu"))`` to reach get_hccl_comm_name)."""
        return self

    def get_hccl_comm_name(self, rank: int = 0, init_comm: bool = True) -> str:
        """The communicator's name (torch_npu's ProcessGroupHCCL API; MC2 ops take it as ``hcom``)."""
        return self._shared.comm_name

    def rank(self) -> int:
        return self._rank

    def hccl_stream(self, die: int) -> Stream:
        """This group's HCCL stream on ``die``."""
        return self._stream(die)

    @property
    def communicator(self) -> Communicator:
        return self._shared.communicator

    # -- plumbing --------------------------------------------------------------------------------

    def _stream(self, die: int) -> Stream:
        """This group's HCCL stream on ``die`` (made on first use)."""
        shared = self._shared
        stream = shared.streams.get(self._rank)
        if stream is None:
            session = current_session()
            stream = shared.streams[self._rank] = session.new_stream(die)
            stream.name = f"hccl {shared.communicator.name}"
        return stream

    def _issue(self, api: str, request_of, tensor: torch.Tensor, *, blocking: bool = False, result: list | None = None,
               then=None) -> HcclWork:
        """Queue this rank's part of a collective on the group's stream, after the current stream's
        work, as one eager host call; ``then(stream)`` queues what follows on the HCCL stream (copies
        out of a staging tensor)."""
        session = current_session()
        die = tensor.device.index
        stream = self._stream(die)
        ready = DeviceEvent(session)
        ready.record(session.stream(die))
        with aclnn.host_call(api):
            gate = _gate(session, die)
            ready.wait_on(stream)
            run = self.communicator.call(self._rank, request_of(stream, gate))
            if then is not None:
                with _on_stream(session, die, stream):
                    then()
        return HcclWork(session, run.finished[self._rank], blocking, result)

    # -- the collectives -------------------------------------------------------------------------

    def allreduce(self, tensors, opts=None) -> HcclWork:  # type: ignore[override]  # c10d calls a Python group's collectives as (tensors, opts)
        tensor = _one(tensors, "all_reduce")
        op = _reduce_op(opts.reduceOp if opts is not None else dist.ReduceOp.SUM, "all_reduce")
        t = device_tensor(tensor, "all_reduce", "tensor")
        return self._issue("HcclAllReduce", lambda s, g: Request(ALL_REDUCE, t, t, s, reduce_op=op, gate=g), tensor, result=[tensor])

    def broadcast(self, tensors, opts=None) -> HcclWork:  # type: ignore[override]  # c10d calls a Python group's collectives as (tensors, opts)
        tensor = _one(tensors, "broadcast")
        root = opts.rootRank if opts is not None else 0
        t = device_tensor(tensor, "broadcast", "tensor")
        return self._issue("HcclBroadcast", lambda s, g: Request(BROADCAST, t, t, s, root=root, gate=g), tensor, result=[tensor])

    def reduce(self, tensors, opts=None) -> HcclWork:  # type: ignore[override]  # c10d calls a Python group's collectives as (tensors, opts)
        tensor = _one(tensors, "reduce")
        op = _reduce_op(opts.reduceOp if opts is not None else dist.ReduceOp.SUM, "reduce")
        root = opts.rootRank if opts is not None else 0
        t = device_tensor(tensor, "reduce", "tensor")
        return self._issue("HcclReduce", lambda s, g: Request(REDUCE, t, t, s, reduce_op=op, root=root, gate=g), tensor, result=[tensor])

    def all_gather_single(self, output, input, opts=None) -> HcclWork:
        _same_dtype(output, input, "all_gather_into_tensor")
        if output.numel() != input.numel() * self._size:
            raise OpArgumentError(f"all_gather_into_tensor: output has {output.numel()} elements, input {input.numel()}; the output "
                                  f"must hold the input of each of the {self._size} ranks ({input.numel() * self._size})")
        i, o = device_tensor(input, "all_gather_into_tensor", "input"), device_tensor(output, "all_gather_into_tensor", "output")
        return self._issue("HcclAllGather", lambda s, g: Request(ALL_GATHER, i, o, s, gate=g), input, result=[output])

    _allgather_base = all_gather_single

    def allgather(self, output_lists, inputs, opts=None) -> HcclWork:
        outputs, input = output_lists[0], _one(inputs, "all_gather")
        if len(outputs) != self._size:
            raise OpArgumentError(f"all_gather: tensor_list has {len(outputs)} tensors; give one per rank of the group ({self._size})")
        flat = new_tensor([self._size * input.numel()], input.dtype, input.device.index)
        i, o = device_tensor(input, "all_gather", "tensor"), device_tensor(flat, "all_gather", "the gathered tensor")

        def copy_out():
            n = input.numel()
            for r, out in enumerate(outputs):
                out.copy_(flat[r * n:(r + 1) * n].view(out.shape))

        return self._issue("HcclAllGather", lambda s, g: Request(ALL_GATHER, i, o, s, gate=g), input, result=list(outputs), then=copy_out)

    def reduce_scatter_single(self, output, input, opts=None) -> HcclWork:
        _same_dtype(output, input, "reduce_scatter_tensor")
        if input.numel() != output.numel() * self._size:
            raise OpArgumentError(f"reduce_scatter_tensor: input has {input.numel()} elements, output {output.numel()}; the input "
                                  f"must hold {self._size} outputs' worth ({output.numel() * self._size})")
        op = _reduce_op(opts.reduceOp if opts is not None else dist.ReduceOp.SUM, "reduce_scatter_tensor")
        i, o = device_tensor(input, "reduce_scatter_tensor", "input"), device_tensor(output, "reduce_scatter_tensor", "output")
        return self._issue("HcclReduceScatter", lambda s, g: Request(REDUCE_SCATTER, i, o, s, reduce_op=op, gate=g), input,
                           result=[output])

    _reduce_scatter_base = reduce_scatter_single  # type: ignore[assignment]  # torch's older name of the same call

    def reduce_scatter(self, outputs, input_lists, opts=None) -> HcclWork:  # type: ignore[override]  # c10d calls a Python group's collectives as (tensors, opts)
        output, inputs = _one(outputs, "reduce_scatter"), input_lists[0]
        if len(inputs) != self._size:
            raise OpArgumentError(f"reduce_scatter: input_list has {len(inputs)} tensors; give one per rank of the group ({self._size})")
        flat = torch.cat([t.reshape(-1) for t in inputs]) if inputs else output
        return self.reduce_scatter_single(output, flat, opts)

    def all_to_all_single(self, output, input, output_split_sizes, input_split_sizes, opts=None) -> HcclWork:
        _same_dtype(output, input, "all_to_all_single")
        row_in = input[0].numel() if input.dim() and input.shape[0] else 0
        row_out = output[0].numel() if output.dim() and output.shape[0] else 0
        send = _splits(input, input_split_sizes, self._size, "input_split_sizes")
        recv = _splits(output, output_split_sizes, self._size, "output_split_sizes")
        i, o = device_tensor(input, "all_to_all_single", "input"), device_tensor(output, "all_to_all_single", "output")
        return self._issue("HcclAlltoAllV", lambda s, g: Request(ALL_TO_ALL, i, o, s, send_counts=tuple(c * row_in for c in send),
                                                                  recv_counts=tuple(c * row_out for c in recv), gate=g),
                           input, result=[output])

    alltoall_base = all_to_all_single  # type: ignore[assignment]  # torch's older name of the same call

    def alltoall(self, outputs, inputs, opts=None) -> HcclWork:
        if len(outputs) != self._size or len(inputs) != self._size:
            raise OpArgumentError(f"all_to_all: give one input and one output tensor per rank of the group ({self._size})")
        flat_in = torch.cat([t.reshape(-1) for t in inputs])
        flat_out = new_tensor([sum(t.numel() for t in outputs)], outputs[0].dtype, outputs[0].device.index)
        i, o = device_tensor(flat_in, "all_to_all", "inputs"), device_tensor(flat_out, "all_to_all", "outputs")

        def copy_out():
            start = 0
            for out in outputs:
                out.copy_(flat_out[start:start + out.numel()].view(out.shape))
                start += out.numel()

        return self._issue("HcclAlltoAllV", lambda s, g: Request(ALL_TO_ALL, i, o, s, send_counts=tuple(t.numel() for t in inputs),
                                                                  recv_counts=tuple(t.numel() for t in outputs), gate=g),
                           flat_in, result=list(outputs), then=copy_out)

    def scatter(self, outputs, input_lists, opts=None) -> HcclWork:  # type: ignore[override]  # c10d calls a Python group's collectives as (tensors, opts)
        output = _one(outputs, "scatter")
        root = opts.rootRank if opts is not None else 0
        o = device_tensor(output, "scatter", "tensor")
        i = None
        if self._rank == root:
            flat = torch.cat([t.reshape(-1) for t in input_lists[0]])
            i = device_tensor(flat, "scatter", "scatter_list")
        return self._issue("HcclScatter", lambda s, g: Request(SCATTER, i, o, s, root=root, gate=g), output, result=[output])

    def send(self, tensors, dst: int, tag: int = 0) -> HcclWork:
        tensor = _one(tensors, "send")
        t = device_tensor(tensor, "send", "tensor")
        return self._issue("HcclSend", lambda s, g: Request(SEND, t, None, s, root=self._rank, peer=dst, gate=g), tensor)

    def recv(self, tensors, src: int, tag: int = 0) -> HcclWork:
        tensor = _one(tensors, "recv")
        t = device_tensor(tensor, "recv", "tensor")
        return self._issue("HcclRecv", lambda s, g: Request(SEND, None, t, s, root=src, peer=self._rank, gate=g), tensor, result=[tensor])

    def recv_anysource(self, tensors, tag: int = 0) -> HcclWork:
        raise UsageError("recv without src (any source): HCCL has no receive from any rank; name the sender (dist.recv(t, src=...))")

    def gather(self, outputs, inputs, opts=None) -> HcclWork:  # type: ignore[override]  # c10d calls a Python group's collectives as (tensors, opts)
        raise UsageError("gather: HCCL has no gather (torch_npu refuses it); use all_gather, or a reduce of a zero-padded tensor")

    def barrier(self, opts=None) -> HcclWork:
        token = new_tensor([1], torch.float32, current_device())
        t = device_tensor(token, "barrier", "token")
        return self._issue("HcclBarrier", lambda s, g: Request(ALL_REDUCE, t, t, s, reduce_op="sum", gate=g), token, blocking=True)


def _gate(session: Session, die: int):
    """The gate of the current host call for a stream of ``die`` (the host's launch)."""
    call = aclnn.current_host_call()
    if call is None:
        return None
    launch = call.launch(session, die)
    return launch.gate


@contextlib.contextmanager
def _on_stream(session: Session, die: int, stream: Stream):
    before = session.current_streams.get(die)
    session.current_streams[die] = stream
    try:
        yield
    finally:
        if before is None:
            session.current_streams.pop(die, None)
        else:
            session.current_streams[die] = before


def _one(tensors, api: str) -> torch.Tensor:
    if len(tensors) != 1:
        raise OpArgumentError(f"{api}: one tensor per call on npusim's hccl backend (one device per rank), got {len(tensors)}")
    return tensors[0]


def _same_dtype(a: torch.Tensor, b: torch.Tensor, api: str) -> None:
    if a.dtype != b.dtype:
        raise OpArgumentError(f"{api}: the output is {a.dtype} but the input {b.dtype}; HCCL moves one dtype")


def _splits(tensor: torch.Tensor, sizes, ranks: int, what: str) -> list[int]:
    """Split sizes along dim 0 (equal ones when not given), checked as torch_npu checks them."""
    rows = tensor.shape[0] if tensor.dim() else tensor.numel()
    if not sizes:
        if rows % ranks:
            raise OpArgumentError(f"all_to_all_single: dim 0 of the tensor ({rows}) does not divide equally across the {ranks} ranks; "
                                  f"pass {what}")
        return [rows // ranks] * ranks
    sizes = [int(s) for s in sizes]
    if len(sizes) != ranks or any(s < 0 for s in sizes):
        raise OpArgumentError(f"all_to_all_single: {what}={sizes} must give {ranks} sizes (one per rank), none negative")
    if sum(sizes) != rows:
        raise OpArgumentError(f"all_to_all_single: {what}={sizes} add up to {sum(sizes)}, but dim 0 of the tensor is {rows}")
    return sizes


def install() -> None:
    """Register the hccl backend and the spawn / init wrappers (idempotent)."""
    if BACKEND.upper() in getattr(dist.Backend, "_plugins", {}):
        return
    dist.Backend.register_backend(BACKEND, _create, extended_api=True, devices=["npu"])
    torch.multiprocessing.spawn = _spawn
    dist.init_process_group = _init_process_group  # type: ignore[assignment]  # the same call, with the ranks' shared store
    c10d.init_process_group = _init_process_group  # type: ignore[assignment]
