"""torch_npu's MC2 ops, a matmul and a collective fused in one launch (``npu_mm_all_reduce_base``,
``npu_mm_reduce_scatter_base``, ``npu_all_gather_base_mm``): their checks, how they cut the rows
into tiles whose communication overlaps the next tile's matmul, and the cube kernel of one tile.

Sources: op-plugin's pages of the three ops (docs/context/torch_npu-npu_*.md) and ops-transformer's
MC2 host tiling (``mc2/matmul_all_reduce/op_host/op_tiling/all_reduce_formulaic_tiling.cpp``,
``mc2/common/op_host/op_tiling/hccl_formulaic_tiling.cpp``, ``hccl_performance.h``,
``mc2_tiling_utils``), read for their rules and constants.

**Tiling** (:func:`row_tiles`). The rows of the matmul (``m``; per rank for the reduce-scatter and
the all-gather) are cut into tiles aligned to ``BASE_BLOCK_M``; a tile is at least
``HCCL_MIN_TILE_BYTES`` of communication (``GetLinearThresholdLen``); fewer than two such tiles are
not cut (``NoCutTiling``). Otherwise one short tile of the minimum length and long tiles balanced
against it, as ``OneCalcOneCommBase`` does: when the matmul takes longer than the communication,
the short tile goes last and a long tile communicates in the time the short one computes
(``ShortAtEndCalcBoundBalancing``); else the short tile goes first and a long tile computes in the
time the short one communicates (``ShortAtFrontCommBoundBalancing``); at most ``MAX_TILES`` tiles.
HCCL estimates the two times from tables fitted on hardware (``FITTING_PARAMETER_MAP``); npusim
estimates them from the simulated machine (:class:`Estimates`: the cube's peak and the HBM for the
matmul, the path to a peer and the SDMA engines for the collective), so the cut follows the same
rules on its numbers; the estimates are rooflines, so the cut is only as balanced as they are close.

**The kernel of a tile** (:func:`matmul_kernel`): output blocks of ``BASE_BLOCK_M x BASE_BLOCK_N``
over k steps of ``BASE_BLOCK_K`` (MC2's base blocks), spread round robin over the die's cube cores,
each block the cube tile program of :mod:`npusim.kernels.compute.matmul` (the cube pipeline of
torch's matmul ops, when it lands, replaces it here: one function).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from npusim import isa
from npusim.config.schema import SystemSpec
from npusim.errors import OpArgumentError
from npusim.isa.target import CubeTarget
from npusim.kernels.compute.matmul import CubeTiles, MatmulTile, matmul_tile, pipeline_tiling
from npusim.kernels.cube.pipeline import BlockViews, GemmShape
from npusim.kernels.hccl.algorithm import ALL_GATHER, ALL_REDUCE, REDUCE_SCATTER
from npusim.kernels.shmem.tile_ops import GmView

BASE_BLOCK_M, BASE_BLOCK_N, BASE_BLOCK_K = 128, 256, 64
"""MC2's matmul base block (ops-transformer mc2_tiling_utils: BASE_BLOCK_M / N / K); tiles are
aligned to BASE_BLOCK_M rows (FormPartition: mAlignLen = BASE_BLOCK_M)."""
L1_K = 256
"""k of one L1 chunk of each operand (4 base k steps): two chunks of A and B fit L1 (double buffered)."""
HCCL_MIN_TILE_BYTES = 64 * 1024
"""The least communication of one tile (hccl_performance.h HCCL_MIN_TILE_LEN = 64 KB)."""
MAX_TILES = 64
"""The most communication turns of one op (mc2 tiling: maxTileCnt = 64)."""
BACK_TILE_RATIO = 1.0
"""How much of the short tile is left out when counting the long tiles (FormPartition backTileRatio;
its value, BACKTILE_ALIGN_RATIO, is not public: taken as the whole short tile) [L]."""
SERIES_RANKS = {"atlas_a2": (1, 2, 4, 8), "atlas_a3": (2, 4, 8, 16, 32)}
"""Ranks each op page allows per series (A2: 1, 2, 4, 8 for npu_mm_all_reduce_base, 2, 4, 8 for the
other two; A3: 2 to 32 for the reduce-scatter and the all-gather, no npu_mm_all_reduce_base)."""
DTYPES = ("float16", "bfloat16")
"""The dtypes of the non-quantised cases (table 1 of each page)."""


@dataclass(frozen=True)
class Mc2Problem:
    """A checked call: the op (``allreduce``, ``reducescatter``, ``allgather``), the matmul's ``m``
    (rows of x1 on this rank), ``n``, ``k``, the dtype, ``b_trans`` (x2 given as the transpose of an
    ``[n, k]`` matrix), the ranks."""

    op: str
    m: int
    n: int
    k: int
    dtype: np.dtype
    b_trans: bool
    ranks: int

    @property
    def rows_per_rank(self) -> int:
        """The rows each tile's collective carries per rank: the reduce-scatter's output rows."""
        return self.m // self.ranks if self.op == REDUCE_SCATTER else self.m


def check(api: str, op: str, series: str, x1_shape: Sequence[int], x2_shape: Sequence[int], dtype1, dtype2, ranks: int, *,
          x2_transposed: bool, reduce_op: str = "sum", comm_turn: int = 0, world_size: int | None = None,
          unsupported: Sequence[str] = ()) -> Mc2Problem:
    """The op page's rules (module docstring); ``unsupported``: arguments given that npusim does not
    model (quantisation, x3, a non-zero bias)."""
    def refuse(argument: str, value, rule: str) -> OpArgumentError:
        return OpArgumentError(f"{api}: {argument}={value!r}: {rule}")

    if unsupported:
        raise refuse(unsupported[0], "given", "is not modelled yet (npusim models the non-quantised case without bias or x3); drop it")
    if op == ALL_REDUCE and series == "atlas_a3":
        raise refuse("device", "Atlas A3", "npu_mm_all_reduce_base runs on Atlas A2 only (its op page); on A3 call the matmul and "
                     "torch.distributed.all_reduce")
    if reduce_op != "sum":
        raise refuse("reduce_op", reduce_op, "only 'sum' is supported")
    if comm_turn != 0:
        raise refuse("comm_turn", comm_turn, "only 0 is supported (the default cut)")
    allowed = SERIES_RANKS[series] if op == ALL_REDUCE or series == "atlas_a3" else (2, 4, 8)
    if ranks not in allowed:
        raise refuse("hcom", f"{ranks} ranks", f"the group must have {', '.join(map(str, allowed))} ranks on this product")
    if world_size is not None and world_size != ranks:
        raise refuse("world_size", world_size, f"must be the group's size, {ranks}")
    d1, d2 = np.dtype(dtype1), np.dtype(dtype2)
    if d1.name not in DTYPES:
        raise refuse("x1.dtype", d1.name, f"must be {' or '.join(DTYPES)} (the non-quantised case)")
    if d2 != d1:
        raise refuse("x2.dtype", d2.name, f"must be x1's dtype, {d1.name}")
    if len(x2_shape) != 2:
        raise refuse("x2.shape", list(x2_shape), "must be 2-D (k, n)")
    three = op == ALL_REDUCE and len(x1_shape) == 3
    if len(x1_shape) != 2 and not three:
        raise refuse("x1.shape", list(x1_shape), "must be 2-D (m, k)" + (" or 3-D (b, s, k)" if op == ALL_REDUCE else ""))
    k, n = x2_shape
    m = int(np.prod(x1_shape[:-1]))
    if x1_shape[-1] != k:
        raise refuse("x2.shape", list(x2_shape), f"its first dim must be x1's last, {x1_shape[-1]}")
    if min(m, k, n) < 1:
        raise refuse("x1.shape", list(x1_shape), "empty tensors are not supported")
    if op != ALL_REDUCE and not 256 <= k < 65535:
        raise refuse("x1.shape", list(x1_shape), f"k={k} must be in [256, 65535)")
    if op == REDUCE_SCATTER and m % ranks:
        raise refuse("x1.shape", list(x1_shape), f"m={m} must be a multiple of world_size ({ranks})")
    return Mc2Problem(op, m, n, k, d1, x2_transposed, ranks)


@dataclass(frozen=True)
class Estimates:
    """npusim's estimate of a tile's matmul and communication time (module docstring), in seconds:
    the matmul at the slower of the cube's peak over the die's cube cores and the HBM moving what its
    base blocks read (A once per column of blocks, B once per row of blocks) and write; the
    collective at what a rank sends, spread over its peers each at ``peer_rate`` (the path to a peer,
    bytes/s) and at most the SDMA engines' rate, plus the notifications and descriptors of its steps."""

    cube_flops: float
    hbm_rate: float
    peer_rate: float
    sdma_rate: float
    comm_fixed: float

    @classmethod
    def of(cls, spec: SystemSpec, cube_cores: int, peer_rate: float) -> Estimates:
        clock = spec.die.clock.hz
        cube = spec.die.cube
        assert cube is not None, "a die with cube cores has a cube unit (the loader checks)"
        flops = 2 * cube.m * cube.n * cube.k * cube_cores / (cube.per_block.to_ps(clock) * 1e-12)
        sdma = spec.die.sdma
        notify = spec.hccl.notify.to_ps(clock) * 1e-12 if spec.hccl is not None else 0.0
        return cls(flops, spec.die.hbm.bandwidth.bytes_per_second(clock), peer_rate, sdma.channels * sdma.rate.bytes_per_second(clock),
                   4 * notify + 2 * sdma.setup.to_ps(clock) * 1e-12)

    def matmul(self, problem: Mc2Problem, rows: int) -> float:
        m = rows * (1 if problem.op == ALL_REDUCE else problem.ranks)  # a tile's rows for every rank
        n, k, item = problem.n, problem.k, problem.dtype.itemsize
        moved = item * (m * k * -(-n // BASE_BLOCK_N) + k * n * -(-m // BASE_BLOCK_M) + m * n)
        return max(2 * m * n * k / self.cube_flops, moved / self.hbm_rate)

    def comm(self, problem: Mc2Problem, rows: int) -> float:
        p = problem.ranks
        row_bytes = (problem.k if problem.op == ALL_GATHER else problem.n) * problem.dtype.itemsize
        sent = rows * row_bytes * {ALL_REDUCE: 2 * (p - 1) / p, REDUCE_SCATTER: p - 1, ALL_GATHER: p - 1}[problem.op]
        return self.comm_fixed + sent / min((p - 1) * self.peer_rate, self.sdma_rate)


def row_tiles(problem: Mc2Problem, estimates: Estimates) -> list[tuple[int, int]]:
    """The tiles (first row, rows) of the rows each rank's collective carries (module docstring)."""
    total = problem.rows_per_rank
    if problem.ranks == 1:
        return [(0, total)]
    per_tile = {ALL_REDUCE: 1, REDUCE_SCATTER: problem.ranks, ALL_GATHER: problem.ranks - 1}[problem.op]
    row_bytes = (problem.k if problem.op == ALL_GATHER else problem.n) * problem.dtype.itemsize
    short = _align_up(max(BASE_BLOCK_M, -(-HCCL_MIN_TILE_BYTES // (row_bytes * per_tile))))
    if total < 2 * short:
        return [(0, total)]
    compute_bound = estimates.matmul(problem, total) >= estimates.comm(problem, total)
    if compute_bound:  # a long tile communicates while the short one computes
        target = estimates.matmul(problem, short)
        long = _inverse(lambda rows: estimates.comm(problem, rows), target, total)
    else:  # a long tile computes while the short one communicates
        target = estimates.comm(problem, short)
        long = _inverse(lambda rows: estimates.matmul(problem, rows), target, total)
    long = min(max(_align_up(long), short), total - short)
    count = max(1, int((total - short * BACK_TILE_RATIO) // long))
    if count + 1 > MAX_TILES:
        count = MAX_TILES - 1
        long = _align_up(-(-total // MAX_TILES))
    rest = total - count * long
    if rest <= 0:
        count, rest = count - 1, rest + long
    lengths = [long] * count + [rest] if compute_bound else [rest] + [long] * count
    tiles, start = [], 0
    for rows in lengths:
        if rows:
            tiles.append((start, rows))
            start += rows
    return tiles


def _align_up(rows: float) -> int:
    return int(-(-int(rows) // BASE_BLOCK_M) * BASE_BLOCK_M)


def _inverse(time_of, target: float, limit: int) -> int:
    """The most rows (up to ``limit``) whose ``time_of`` is at most ``target`` (time_of grows with rows)."""
    low, high = 1, limit
    while low < high:
        middle = (low + high + 1) // 2
        if time_of(middle) <= target:
            low = middle
        else:
            high = middle - 1
    return low


@dataclass(frozen=True)
class Gemm:
    """One product of a kernel: ``out[m, n] = a[m, k] @ b`` with ``b`` as ``[k, n]`` (or ``[n, k]``
    with ``b_trans``), each where it lies in GM."""

    a: GmView
    b: GmView
    out: GmView
    m: int
    n: int
    k: int


def matmul_kernel(name: str, die: int, gemms: Sequence[Gemm], dtype: np.dtype, *, b_trans: bool, cube_cores: int, system,
                  op_args: dict) -> isa.Kernel:
    """One launch of ``gemms`` on die ``die`` (module docstring)."""
    kernel = isa.Kernel(name, die, system=system, op_args=op_args)
    k = gemms[0].k
    tiles = CubeTiles(BASE_BLOCK_M, BASE_BLOCK_M, BASE_BLOCK_K, min(L1_K, _align16(k)), min(L1_K, _align16(k)), BASE_BLOCK_N,
                      BASE_BLOCK_N)
    tiling = pipeline_tiling(tiles, np.dtype(dtype).itemsize, CubeTarget.of(system))
    shape = GemmShape(np.dtype(dtype), np.dtype(dtype), False, b_trans, name=name)
    blocks = [(gemm, MatmulTile(mo, no, min(BASE_BLOCK_M, gemm.m - mo), min(BASE_BLOCK_N, gemm.n - no), gemm.k))
              for gemm in gemms for no in range(0, gemm.n, BASE_BLOCK_N) for mo in range(0, gemm.m, BASE_BLOCK_M)]
    for index, (gemm, block) in enumerate(blocks):
        program = kernel.cube_core(index % cube_cores)
        views = BlockViews(gemm.a.shifted((block.m_offset, 0)), gemm.b.shifted((block.n_offset, 0) if b_trans else (0, block.n_offset)),
                           gemm.out.shifted((block.m_offset, block.n_offset)))
        with program.reused_buffers():  # the tile program drains its pipes at its end (FIXP -> SCALAR)
            matmul_tile(program, tiling, shape, views, block)
    return kernel


def _align16(k: int) -> int:
    return -(-k // 16) * 16
