"""torch_npu's MC2 ops on one rank: the matmul of each row tile on the current stream, the tile's
collective on the communicator's stream once that tile's matmul is done, so the collective of one
tile overlaps the matmul of the next (:mod:`npusim.kernels.hccl.mc2`: checks, tiling, kernels).
Called inside the op's host call (one launch for the whole op); the current stream waits for the
last collective, so what follows on it sees the result.

- ``matmul_all_reduce``: ``out = all_reduce(x1 @ x2)``, each tile's rows all-reduced in place.
- ``matmul_reduce_scatter``: ``out = reduce_scatter(x1 @ x2)`` (rank ``r`` gets rows ``r * m / p``
  onwards); tile ``t`` computes its rows for every rank into a scratch laid out rank after rank, then
  reduce-scatters it into ``out``'s rows of the tile.
- ``all_gather_matmul``: ``out = all_gather(x1) @ x2``: the rank's own rows first (no
  communication), tile ``t`` of every rank's rows gathered into a scratch, then multiplied into
  ``out`` (and copied into ``gathered``, torch_npu's second output, when asked).
"""

from __future__ import annotations

from npusim.errors import OpArgumentError
from npusim.frontend import aclnn
from npusim.frontend.hccl.runtime import Communicator, Request
from npusim.frontend.host import DeviceEvent
from npusim.frontend.session import current_session
from npusim.frontend.tensor import DeviceTensor, empty
from npusim.hw.stream import Stream
from npusim.kernels.hccl.algorithm import ALL_GATHER, ALL_REDUCE, REDUCE_SCATTER
from npusim.kernels.hccl.mc2 import Estimates, Gemm, Mc2Problem, check, matmul_kernel, row_tiles
from npusim.kernels.hccl.selection import series_of
from npusim.kernels.shmem.tile_ops import GmView

KERNEL_NAMES = {ALL_REDUCE: "MatmulAllReduce", REDUCE_SCATTER: "MatmulReduceScatter", ALL_GATHER: "AllGatherMatmul"}
"""The MC2 kernel of each op (the profiler's op types)."""


def matmul_all_reduce(communicator: Communicator, rank: int, x1: DeviceTensor, x2: DeviceTensor, out: DeviceTensor, stream: Stream, *,
                      api: str, unsupported=(), reduce_op: str = "sum", comm_turn: int = 0) -> None:
    """``out = all_reduce(x1 @ x2)`` (module docstring); ``stream``: the communicator's stream of this
    rank; ``unsupported``: arguments given that are not modelled (refused)."""
    problem, b_view, tiles = _prepare(ALL_REDUCE, communicator, x1, x2, api, unsupported, reduce_op=reduce_op, comm_turn=comm_turn)
    a = _rows(x1, problem.m, problem.k)
    result = out.view(problem.m, problem.n)
    plan = _Plan(communicator, rank, x1.device, problem, stream, api)
    for start, rows in tiles:
        plan.matmul([Gemm(_at(a, start), b_view, _at(_gm(result), start), rows, problem.n, problem.k)])
        piece = result[start:start + rows]
        plan.collective(Request(ALL_REDUCE, piece, piece, stream, reduce_op="sum"))
    plan.finish()


def matmul_reduce_scatter(communicator: Communicator, rank: int, x1: DeviceTensor, x2: DeviceTensor, out: DeviceTensor, stream: Stream, *,
                          api: str, world_size: int, unsupported=(), reduce_op: str = "sum", comm_turn: int = 0) -> None:
    """``out = reduce_scatter(x1 @ x2)`` (module docstring)."""
    problem, b_view, tiles = _prepare(REDUCE_SCATTER, communicator, x1, x2, api, unsupported, world_size, reduce_op=reduce_op,
                                      comm_turn=comm_turn)
    p, share = problem.ranks, problem.rows_per_rank
    a = _rows(x1, problem.m, problem.k)
    scratch = empty((problem.m, problem.n), problem.dtype, device=x1.device)  # tile after tile, each rank after rank
    plan = _Plan(communicator, rank, x1.device, problem, stream, api)
    for start, rows in tiles:
        plan.matmul([Gemm(_at(a, r * share + start), b_view, _at(_gm(scratch), p * start + r * rows), rows, problem.n, problem.k)
                     for r in range(p)])
        plan.collective(Request(REDUCE_SCATTER, scratch[p * start:p * (start + rows)], out[start:start + rows], stream, reduce_op="sum"))
    plan.finish()


def all_gather_matmul(communicator: Communicator, rank: int, x1: DeviceTensor, x2: DeviceTensor, out: DeviceTensor,
                      gathered: DeviceTensor | None, stream: Stream, *, api: str, world_size: int, unsupported=(),
                      comm_turn: int = 0) -> None:
    """``out = all_gather(x1) @ x2``, ``gathered = all_gather(x1)`` when given (module docstring)."""
    problem, b_view, tiles = _prepare(ALL_GATHER, communicator, x1, x2, api, unsupported, world_size, comm_turn=comm_turn)
    p, m, k, n = problem.ranks, problem.m, problem.k, problem.n
    session = current_session()
    result = _gm(out)
    scratch = empty((m * p, k), problem.dtype, device=x1.device)
    plan = _Plan(communicator, rank, x1.device, problem, stream, api)
    plan.matmul([Gemm(_rows(x1, m, k), b_view, _at(result, rank * m), m, n, k)], wait=False)  # its own rows need no communication
    for start, rows in tiles:
        block = scratch[p * start:p * (start + rows)]
        plan.collective(Request(ALL_GATHER, x1[start:start + rows], block, stream))
        if gathered is not None:
            with _current(session, x1.device, stream):
                for r in range(p):
                    aclnn.copy(gathered[r * m + start:r * m + start + rows], block[r * rows:(r + 1) * rows], "Copy",
                               f"{api}: gather_out of rank {r}'s rows")
        plan.matmul([Gemm(_at(_gm(scratch), p * start + r * rows), b_view, _at(result, r * m + start), rows, n, k)
                     for r in range(p) if r != rank], wait=True)
    plan.finish()


class _Plan:
    """Queues an MC2 op's pieces on the compute stream (the current one) and the communicator's,
    which first waits for what the compute stream had before the op (its inputs)."""

    def __init__(self, communicator: Communicator, rank: int, die: int, problem: Mc2Problem, stream: Stream, api: str) -> None:
        self.session = current_session()
        self.communicator, self.rank, self.die, self.problem, self.stream, self.api = communicator, rank, die, problem, stream, api
        self.ready: DeviceEvent | None = None  # the last collective queued, for a matmul that reads its result
        self._follow()

    def _follow(self) -> None:
        """The communicator's stream waits for everything queued on the compute stream so far."""
        point = DeviceEvent(self.session)
        point.record(self.session.stream(self.die))
        point.wait_on(self.stream)

    def matmul(self, gemms: list[Gemm], *, wait: bool = False) -> None:
        """The kernel of ``gemms`` on the compute stream (after the last collective with ``wait``)."""
        if not gemms:
            return
        if wait and self.ready is not None:
            self.ready.wait_on(self.session.stream(self.die))
        system = self.communicator.system
        problem = self.problem
        name = KERNEL_NAMES[problem.op]
        cores = system.spec.die.cores[_cube_kind(system)].count
        aclnn.enqueue(lambda: [matmul_kernel(name, self.die, gemms, problem.dtype, b_trans=problem.b_trans, cube_cores=cores,
                                             system=system, op_args={"api": self.api, "ranks": problem.ranks})], system, self.die)

    def collective(self, request: Request) -> None:
        """A tile's collective on the communicator's stream, after the tile's matmul (an all-gather
        reads no matmul result: it follows only the op's start)."""
        session = self.session
        if self.problem.op != ALL_GATHER:
            self._follow()
        call = aclnn.current_host_call()
        if call is not None:
            request.gate = call.launch(session, self.die).gate
        self.communicator.call(self.rank, request)
        self.ready = DeviceEvent(session)
        self.ready.record(self.stream)

    def finish(self) -> None:
        """The compute stream waits for everything queued on the communicator's stream (what follows
        reads the result)."""
        done = DeviceEvent(self.session)
        done.record(self.stream)
        done.wait_on(self.session.stream(self.die))


def _prepare(op: str, communicator: Communicator, x1: DeviceTensor, x2: DeviceTensor, api: str, unsupported,
             world_size: int | None = None, *, reduce_op: str = "sum", comm_turn: int = 0) -> tuple[Mc2Problem, GmView, list[tuple[int, int]]]:
    system = communicator.system
    series = series_of(system.spec)
    b_trans = _transposed(x2)
    if not x1.is_contiguous():
        raise OpArgumentError(f"{api}: x1 must be contiguous (the op page: x1 may not be a transposed tensor); call .contiguous() first")
    if not b_trans and not x2.is_contiguous():
        raise OpArgumentError(f"{api}: x2 must be contiguous or the transpose of a contiguous [n, k] tensor")
    if x1.device != x2.device:
        raise OpArgumentError(f"{api}: x1 is on npu:{x1.device} but x2 on npu:{x2.device}; put both on the rank's device")
    problem = check(api, op, series, x1.shape, x2.shape, x1.dtype, x2.dtype, communicator.size, x2_transposed=b_trans,
                    world_size=world_size, unsupported=tuple(unsupported), reduce_op=reduce_op, comm_turn=comm_turn)
    cores = system.spec.die.cores[_cube_kind(system)].count
    shape = system.spec.shape
    node = shape.node_of(x1.device) * shape.dies_per_node
    peer = node + (x1.device - node + 1) % shape.dies_per_node  # a die of the same server: the estimate's peer path
    path = communicator.path(x1.device, peer)[1]
    peer_rate = min(resource.capacity for resource in path.resources) * 1e12  # bytes/ps -> bytes/s
    tiles = row_tiles(problem, Estimates.of(system.spec, cores, peer_rate))
    item = problem.dtype.itemsize
    b_view = GmView(x2.allocation, x2.offset_bytes, (problem.k * item, item) if b_trans else (problem.n * item, item))
    return problem, b_view, tiles


def _transposed(x2: DeviceTensor) -> bool:
    """x2 is the transpose of a contiguous [n, k] tensor (``x2.t()``)."""
    if x2.ndim != 2:
        return False
    k, n = x2.shape
    item = x2.dtype.itemsize
    return tuple(x2.strides) == (item, k * item) and k > 1 and not x2.is_contiguous()


def _cube_kind(system) -> str:
    from npusim.config.products import PRODUCTS

    return PRODUCTS.get(system.spec.product).cube_cores


def _gm(tensor: DeviceTensor) -> GmView:
    return GmView(tensor.allocation, tensor.offset_bytes, tuple(tensor.strides))


def _rows(x1: DeviceTensor, m: int, k: int) -> GmView:
    item = x1.dtype.itemsize
    return GmView(x1.allocation, x1.offset_bytes, (k * item, item))


def _at(view: GmView, row: int) -> GmView:
    return view.shifted((row, 0))


class _current:
    """Queue on ``stream`` as the current stream of ``die`` inside the block."""

    def __init__(self, session, die: int, stream: Stream) -> None:
        self.session, self.die, self.stream = session, die, stream

    def __enter__(self) -> None:
        self.before = self.session.current_streams.get(self.die)
        self.session.current_streams[self.die] = self.stream

    def __exit__(self, *exc) -> None:
        if self.before is None:
            self.session.current_streams.pop(self.die, None)
        else:
            self.session.current_streams[self.die] = self.before
