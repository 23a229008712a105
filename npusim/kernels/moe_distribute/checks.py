"""The rules of torch_npu's MoE distribute ops, from their op pages, as the real op refuses a call.

Sources (Ascend/op-plugin, ``docs/zh/custom_APIs/torch_npu/``, read at 517f2e7d): the pages of
``npu_moe_distribute_dispatch_v2``, ``npu_moe_distribute_combine_v2``, ``npu_moe_distribute_dispatch``
and ``npu_moe_distribute_combine``; the TP domain of 2 on A3 from the same pages before d31559aa
("删除dispatch&combine算子文档tp2相关描述", which later marked TP as reserved); output shapes from
op-plugin's ``MoeDistributeDispatchV2KernelOpApi.cpp`` (what torch_npu allocates: ``A``, ``max(bs * k,
A * 128)`` assist entries, ``expand_scales`` of ``A``) and hicann/ops-transformer's
``moe_distribute_dispatch_v2_infershape.cpp`` (``A`` of a shared-expert rank). Every error names
the argument, its value and the rule (an :class:`~npusim.errors.OpArgumentError`).

``comm_alg`` is normalised: on A3 ``""`` is ``"fullmesh_v1"``; on A2 ``""`` is ``"fullmesh"`` (the
page: "hierarchy" only with HCCL_INTRA_PCIE_ENABLE=1 and HCCL_INTRA_ROCE_ENABLE=0, which npusim does
not read). The v1 ops have no ``comm_alg``: A3 runs ``fullmesh_v1``, A2 ``fullmesh``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import ml_dtypes
import numpy as np

from npusim.errors import OpArgumentError

A2, A3 = "atlas_a2", "atlas_a3"
SERIES = frozenset({A2, A3})
BF16, F16, F32, I8, I32, I64, BOOL = (np.dtype(ml_dtypes.bfloat16), np.dtype(np.float16), np.dtype(np.float32), np.dtype(np.int8),
                                      np.dtype(np.int32), np.dtype(np.int64), np.dtype(np.bool_))
MAX_INT32 = 2**31 - 1
MB = 2**20
ASSIST_PER_ROW = 128
"""assist_info_for_combine holds A * 128 int32 (op page; op-plugin allocates max(bs * k, A * 128))."""
TRIPLE = 3
"""Each received row's assist entries: source rank, token, top-k index (ops-transformer EXPAND_IDX_INFO)."""
COMM_ALGS = {A2: ("", "fullmesh", "hierarchy"), A3: ("", "fullmesh_v1", "fullmesh_v2", "hierarchy")}
COMBINE_COMM_ALGS = {A2: ("", "fullmesh", "hierarchy"), A3: ("", "hierarchy")}
A2_FULLMESH_EP = (2, 3, 4, 5, 6, 7, 8, 16, 32, 64, 128, 256)
A2_HIERARCHY_EP = (16, 32, 64)
V1_EP = {A2: (16, 32, 64), A3: (8, 16, 32, 64, 128, 144, 256, 288)}
RANKS_PER_SERVER_A2 = 8
"""An A2 server's NPUs (the pages' server_num counts servers of 8 cards)."""


def align(value: int, to: int) -> int:
    return -(-value // to) * to


def reject(api: str, argument: str, value: Any, rule: str) -> OpArgumentError:
    return OpArgumentError(f"torch_npu.{api}: {argument} = {value}: {rule}")


@dataclass(frozen=True)
class MoeShape:
    """What a dispatch and its combine share: the expert layout of the group and the sizes.

    ``local_experts``: experts of a MoE rank (``moe_expert_num / (ep_world_size - shared_expert_rank_num)``);
    ``max_bs``: tokens any rank sends at most (``global_bs / ep_world_size``, or BS);
    ``rows``: A, the rows a rank receives at most, per TP rank."""

    series: str
    comm_alg: str
    bs: int
    h: int
    k: int
    ep_world_size: int
    ep_rank_id: int
    moe_expert_num: int
    tp_world_size: int
    tp_rank_id: int
    group_ep: str
    group_tp: str
    expert_shard_type: int
    shared_expert_num: int
    shared_expert_rank_num: int
    global_bs: int
    zero_expert_num: int
    copy_expert_num: int
    const_expert_num: int

    @property
    def moe_ranks(self) -> int:
        return self.ep_world_size - self.shared_expert_rank_num

    @property
    def local_experts(self) -> int:
        return self.moe_expert_num // self.moe_ranks

    @property
    def is_shared_rank(self) -> bool:
        return self.ep_rank_id < self.shared_expert_rank_num

    @property
    def shared_experts(self) -> int:
        """Shared experts tokens go to (0 without shared-expert ranks)."""
        return self.shared_expert_num if self.shared_expert_rank_num else 0

    @property
    def ranks_per_shared_expert(self) -> int:
        return self.shared_expert_rank_num // self.shared_expert_num if self.shared_experts else 0

    @property
    def global_bs_real(self) -> int:
        return self.global_bs or self.bs * self.ep_world_size

    @property
    def max_bs(self) -> int:
        return self.global_bs_real // self.ep_world_size

    @property
    def rank_local_experts(self) -> int:
        """Experts hosted by this rank (1 on a shared-expert rank)."""
        return 1 if self.is_shared_rank else self.local_experts

    @property
    def rows(self) -> int:
        """A: rows this rank may receive (op-plugin's formula; a shared rank: max_bs x the groups it serves)."""
        if self.is_shared_rank:
            per = self.ranks_per_shared_expert
            return self.max_bs * (-(-self.ep_world_size // per))
        return self.global_bs_real * min(self.local_experts, self.k)

    @property
    def tp(self) -> int:
        """The TP domain's size: 2, or 1 without one."""
        return 2 if self.tp_world_size == 2 else 1

    @property
    def total_experts(self) -> int:
        return self.moe_expert_num + self.zero_expert_num + self.copy_expert_num + self.const_expert_num

    def rank_of_expert(self, expert: int) -> int:
        return self.shared_expert_rank_num + expert // self.local_experts


@dataclass(frozen=True)
class DispatchProblem:
    """An accepted dispatch call: the shape, the dtypes, what is sent and the outputs' shapes."""

    api: str
    version: int
    shape: MoeShape
    x_dtype: np.dtype
    quant_mode: int
    smooth_scales: bool
    mask_dims: int
    expert_scales: bool
    expert_token_nums_type: int
    performance_info: bool
    empty: bool = False

    @property
    def out_dtype(self) -> np.dtype:
        return I8 if self.quant_mode == 2 else self.x_dtype

    @property
    def expand_rows(self) -> int:
        return self.shape.rows * self.shape.tp

    @property
    def assist_entries(self) -> int:
        s = self.shape
        return s.bs * s.k if self.version == 1 else max(s.bs * s.k, s.rows * ASSIST_PER_ROW)

    @property
    def ep_recv_entries(self) -> int:
        s = self.shape
        if s.series == A2:
            return s.moe_expert_num + 2 * s.global_bs_real * s.k * max(1, s.ep_world_size // RANKS_PER_SERVER_A2)
        return s.ep_world_size * s.rank_local_experts * s.tp

    def output_shapes(self) -> dict[str, tuple[tuple[int, ...], np.dtype]]:
        """Each output's shape and dtype, in the op's return order."""
        s = self.shape
        return {"expand_x": ((self.expand_rows, s.h), self.out_dtype),
                "dynamic_scales": ((self.expand_rows,), F32),
                ("expand_idx" if self.version == 1 else "assist_info_for_combine"): ((self.assist_entries,), I32),
                "expert_token_nums": ((s.rank_local_experts,), I64),
                "ep_recv_counts": ((self.ep_recv_entries,), I32),
                "tp_recv_counts": ((s.tp_world_size,), I32),
                "expand_scales": ((s.rows,), F32)}


@dataclass(frozen=True)
class CombineProblem:
    """An accepted combine call."""

    api: str
    version: int
    shape: MoeShape
    dtype: np.dtype
    expand_rows: int
    mask_dims: int
    shared_expert_x: bool
    ori_x: bool
    comm_quant_mode: int
    expand_scales: bool
    empty: bool = False


# -- shared rules ------------------------------------------------------------------------------


def _int(api: str, name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise reject(api, name, repr(value), "must be an int")
    return int(value)


def _dims(api: str, name: str, tensor: Any, dims: tuple[int, ...]) -> tuple[int, ...]:
    shape = tuple(int(d) for d in tensor.shape)
    if len(shape) not in dims:
        raise reject(api, f"{name}.shape", shape, f"{name} must be {' or '.join(f'{d}-D' for d in dims)}")
    return shape


def _dtype(api: str, name: str, tensor: Any, allowed: tuple[np.dtype, ...], series: str) -> np.dtype:
    dtype = np.dtype(tensor.dtype)
    if dtype not in allowed:
        raise reject(api, f"{name}.dtype", dtype.name, f"supported on {_label(series)}: " + ", ".join(d.name for d in allowed))
    return dtype


def _label(series: str) -> str:
    return {A2: "Atlas A2", A3: "Atlas A3"}.get(series, series)


def _in(api: str, name: str, value: int, low: int, high: int, why: str) -> None:
    if not low <= value <= high:
        raise reject(api, name, value, f"must be in [{low}, {high}] {why}")


def check_shape(api: str, version: int, series: str, combine: bool, args: dict, bs: int, h: int, k: int) -> MoeShape:
    """The group attributes of a call (``args``: the call's attributes by name), with their rules."""
    if series not in SERIES:
        raise reject(api, "product", series, "the MoE distribute ops run on Atlas A2 and A3 only")
    group_ep = args["group_ep"]
    if not isinstance(group_ep, str) or not 1 <= len(group_ep) < 128:
        raise reject(api, "group_ep", repr(group_ep), "the EP domain's name must be a string of 1 to 127 characters")
    ep = _int(api, "ep_world_size", args["ep_world_size"])
    rank = _int(api, "ep_rank_id", args["ep_rank_id"])
    moe = _int(api, "moe_expert_num", args["moe_expert_num"])
    tp_world = _int(api, "tp_world_size", args.get("tp_world_size", 0))
    tp_rank = _int(api, "tp_rank_id", args.get("tp_rank_id", 0))
    group_tp = args.get("group_tp", "")
    shard = _int(api, "expert_shard_type", args.get("expert_shard_type", 0))
    shared_num = _int(api, "shared_expert_num", args.get("shared_expert_num", 1))
    shared_ranks = _int(api, "shared_expert_rank_num", args.get("shared_expert_rank_num", 0))
    global_bs = _int(api, "global_bs", args.get("global_bs", 0))
    zero = _int(api, "zero_expert_num", args.get("zero_expert_num", 0))
    copy = _int(api, "copy_expert_num", args.get("copy_expert_num", 0))
    const = _int(api, "const_expert_num", args.get("const_expert_num", 0))
    alg = args.get("comm_alg", "")
    if not isinstance(alg, str):
        raise reject(api, "comm_alg", repr(alg), "must be a string")
    if version == 1:
        alg = ""
    algs = (COMBINE_COMM_ALGS if combine else COMM_ALGS)[series]
    if alg not in algs:
        raise reject(api, "comm_alg", repr(alg), f"on {_label(series)} comm_alg is one of {', '.join(map(repr, algs))}")
    comm_alg = alg or ("fullmesh_v1" if series == A3 else "fullmesh")
    hierarchy = comm_alg == "hierarchy"

    # ep_world_size
    if version == 1:
        if ep not in V1_EP[series]:
            raise reject(api, "ep_world_size", ep, f"on {_label(series)} it is one of {', '.join(map(str, V1_EP[series]))}")
    elif series == A2:
        allowed = A2_HIERARCHY_EP if hierarchy else A2_FULLMESH_EP
        if ep not in allowed:
            raise reject(api, "ep_world_size", ep, f"on Atlas A2 with comm_alg {comm_alg!r} it is one of {', '.join(map(str, allowed))}")
    else:
        _in(api, "ep_world_size", ep, 2, 768, "on Atlas A3")
        if hierarchy and (not 16 <= ep <= 256 or ep % 16):
            raise reject(api, "ep_world_size", ep, "with comm_alg 'hierarchy' on Atlas A3 it is a multiple of 16 in [16, 256]")
    if not 0 <= rank < ep:
        raise reject(api, "ep_rank_id", rank, f"must be in [0, ep_world_size) = [0, {ep})")

    # shared experts
    if series == A2 and shared_ranks != 0:
        raise reject(api, "shared_expert_rank_num", shared_ranks, "Atlas A2 has no shared-expert ranks: pass 0")
    if not 0 <= shared_ranks < ep:
        raise reject(api, "shared_expert_rank_num", shared_ranks, f"must be in [0, ep_world_size) = [0, {ep})")
    if series == A3:
        if shard != 0:
            raise reject(api, "expert_shard_type", shard, "only 0 (shared-expert ranks before the MoE ranks) is supported")
        if version == 1:
            if shared_num != 1:
                raise reject(api, "shared_expert_num", shared_num, "the first op pair supports 1 only")
            if shared_ranks and ep % shared_ranks:
                raise reject(api, "shared_expert_rank_num", shared_ranks, f"ep_world_size ({ep}) must be a multiple of it")
        else:
            _in(api, "shared_expert_num", shared_num, 0, 4, "(0: no shared expert)")
            if shared_ranks and (shared_num == 0 or shared_ranks % shared_num):
                raise reject(api, "shared_expert_rank_num", shared_ranks,
                             f"must be a multiple of shared_expert_num ({shared_num}) when not 0")
    elif shard != 0:
        raise reject(api, "expert_shard_type", shard, "not supported on Atlas A2: pass 0")

    # moe_expert_num
    if version == 1:
        _in(api, "moe_expert_num", moe, 1, 512, "")
    elif series == A3 and hierarchy:
        _in(api, "moe_expert_num", moe, 1, 512, "with comm_alg 'hierarchy' on Atlas A3")
    else:
        _in(api, "moe_expert_num", moe, 1, 1024, "")
    moe_ranks = ep - shared_ranks
    if moe % moe_ranks:
        raise reject(api, "moe_expert_num", moe, f"must be a multiple of ep_world_size - shared_expert_rank_num = {moe_ranks}")
    local = moe // moe_ranks
    if version == 1 and series == A2 and local > 24:
        raise reject(api, "moe_expert_num", moe, f"on Atlas A2 moe_expert_num / ep_world_size may be at most 24 (it is {local})")
    if series == A3 and version == 2 and not 0 < local * ep <= 2048:
        raise reject(api, "moe_expert_num", moe, f"local_expert_num x ep_world_size = {local} x {ep} = {local * ep} must be at most 2048 "
                     "on Atlas A3")

    # special experts
    for name, value in (("zero_expert_num", zero), ("copy_expert_num", copy), ("const_expert_num", const)):
        if not 0 <= value < MAX_INT32:
            raise reject(api, name, value, "must be in [0, 2^31 - 1)")
        if value and (series == A2 and (hierarchy or name == "const_expert_num") or series == A3 and hierarchy):
            raise reject(api, name, value, f"not supported with comm_alg {comm_alg!r} on {_label(series)}: pass 0")
    if moe + zero + copy + const >= MAX_INT32:
        raise reject(api, "moe_expert_num + zero + copy + const expert numbers", moe + zero + copy + const, "must stay below 2^31 - 1")

    # TP domain (A3; the pages before d31559aa)
    if tp_world not in (0, 1, 2) or tp_world == 2 and series != A3:
        raise reject(api, "tp_world_size", tp_world, "0 or 1 (no TP domain), or 2 on Atlas A3")
    if tp_world == 2:
        if tp_rank not in (0, 1):
            raise reject(api, "tp_rank_id", tp_rank, "must be 0 or 1 in a TP domain of 2")
        if not isinstance(group_tp, str) or not 1 <= len(group_tp) < 128 or group_tp == group_ep:
            raise reject(api, "group_tp", repr(group_tp), "a TP domain of 2 needs its own name (1 to 127 characters, not group_ep)")
        if local > 1:
            raise reject(api, "tp_world_size", tp_world, f"a TP domain is supported with one expert per rank only (local_expert_num is {local})")
        if comm_alg in ("fullmesh_v2", "hierarchy"):
            raise reject(api, "comm_alg", repr(comm_alg), "the 'fullmesh_v2' and 'hierarchy' templates run with tp_world_size 1 only")
    elif tp_rank != 0:
        raise reject(api, "tp_rank_id", tp_rank, "must be 0 without a TP domain")
    if hierarchy and series == A3 and shared_ranks:
        raise reject(api, "shared_expert_rank_num", shared_ranks, "comm_alg 'hierarchy' supports no shared experts on Atlas A3: pass 0")

    # BS, H, K
    if version == 1:
        bs_max, h_rule, k_max = {A2: (256, (1, 7168, 32), 16), A3: (512, (7168, 7168, 1), 8)}[series]
    elif series == A2:
        bs_max, k_max = (512 if hierarchy else 256), 16
        h_rule = (1, 10240, 32) if hierarchy else (1, 7168, 32)
    else:
        bs_max = 512 if comm_alg == "fullmesh_v1" else 256
        h_rule, k_max = (1024, 8192, 1), (12 if comm_alg == "fullmesh_v2" else 16)
    if not 0 < bs <= bs_max:
        raise reject(api, "BS (x.shape[0])", bs, f"must be in (0, {bs_max}] on {_label(series)} with comm_alg {comm_alg!r}")
    low, high, multiple = h_rule
    if not low <= h <= high or h % multiple:
        rule = f"must be in [{low}, {high}]" + (f" and a multiple of {multiple}" if multiple > 1 else "")
        raise reject(api, "H (x.shape[1])", h, rule + f" on {_label(series)} with comm_alg {comm_alg!r}")
    if not 0 < k <= k_max:
        raise reject(api, "K (expert_ids.shape[1])", k, f"must be in (0, {k_max}] on {_label(series)} with comm_alg {comm_alg!r}")
    if k > moe + zero + copy + const:
        raise reject(api, "K (expert_ids.shape[1])", k, f"must be at most moe_expert_num + zero + copy + const experts ({moe + zero + copy + const})")

    # global_bs
    if global_bs < 0 or global_bs and (global_bs % ep or global_bs // ep < bs):
        raise reject(api, "global_bs", global_bs, f"0, or max_bs x ep_world_size with max_bs >= BS ({bs}) the largest BS of any rank")
    return MoeShape(series, comm_alg, bs, h, k, ep, rank, moe, tp_world, tp_rank, group_ep, group_tp if tp_world == 2 else "", shard,
                    shared_num, shared_ranks, global_bs, zero, copy, const)


def _mask(api: str, shape: MoeShape, mask: Any, version: int) -> int:
    """The x_active_mask's dims (0: none)."""
    if mask is None:
        return 0
    if version == 1:
        raise reject(api, "x_active_mask", "a tensor", "reserved in the first op pair (not used): pass None")
    if shape.series == A2 and shape.comm_alg == "hierarchy":
        raise reject(api, "x_active_mask", "a tensor", "not supported with comm_alg 'hierarchy' on Atlas A2: pass None")
    dims = _dims(api, "x_active_mask", mask, (1, 2))
    if np.dtype(mask.dtype) != BOOL:
        raise reject(api, "x_active_mask.dtype", np.dtype(mask.dtype).name, "must be bool")
    want = (shape.bs,) if len(dims) == 1 else (shape.bs, shape.k)
    if dims != want:
        raise reject(api, "x_active_mask.shape", dims, f"must be (BS,) = {want[:1]} or (BS, K) = {(shape.bs, shape.k)}")
    if len(dims) == 2 and shape.series == A3 and shape.comm_alg == "hierarchy":
        raise reject(api, "x_active_mask.shape", dims, "a 2-D mask is not supported with comm_alg 'hierarchy': pass a 1-D mask")
    return len(dims)


def window_bytes_needed(shape: MoeShape, x_itemsize: int, version: int) -> int:
    """The HCCL buffer a rank needs (the pages' formulas, in bytes, ``/`` whole division)."""
    s = shape
    local, bs = s.rank_local_experts if not s.is_shared_rank else s.local_experts, s.max_bs
    if s.series == A2:
        if s.comm_alg == "hierarchy":
            return (s.moe_expert_num + s.ep_world_size // 4) * align(bs * (s.h * x_itemsize + 4 * align(s.k, 8) * 4), 512) + 8 * MB
        row = s.h * 4 + 32 if x_itemsize == 4 else s.h * 2
        return 2 * (s.bs * s.ep_world_size * min(local, s.k) * row + 2 * MB)
    if version == 1:  # 1024^2 x (HCCL_BUFFSIZE - 2) / 2 >= BS x 2 x (H + 128) x (ep x local + K + 1), HCCL_BUFFSIZE >= 2 (MB)
        return 2 * (s.bs * 2 * (s.h + 128) * (s.ep_world_size * s.local_experts + s.k + 1)) + 2 * MB
    if s.comm_alg == "hierarchy":
        return s.moe_expert_num * s.bs * (s.h * x_itemsize + 4 * align(s.k, 8) * 4) + 4 * MB + 400 * MB
    first = align(align(2 * s.h, 32) + 64, 512)
    if s.comm_alg == "fullmesh_v2":
        first = -(-(align(2 * s.h, 32) + 64) // 480) * 512
    return 2 * (s.local_experts * bs * s.ep_world_size * first + (s.k + s.shared_experts) * bs * align(2 * s.h, 512))


def check_window(api: str, shape: MoeShape, x_itemsize: int, version: int, buffer_bytes: int) -> None:
    """The configured HCCL buffer must hold what the call needs (the page's formula)."""
    need = window_bytes_needed(shape, x_itemsize, version)
    if buffer_bytes < need:
        raise OpArgumentError(
            f"torch_npu.{api}: rank {shape.ep_rank_id} of group {shape.group_ep!r}: the HCCL buffer of {buffer_bytes / MB:g} MB "
            f"(hccl.buffer, HCCL_BUFFSIZE) is too small: with BS={shape.bs} (max_bs={shape.max_bs}), H={shape.h}, K={shape.k}, "
            f"ep_world_size={shape.ep_world_size}, local_expert_num={shape.local_experts} and comm_alg {shape.comm_alg!r} the op page "
            f"requires at least {math.ceil(need / MB)} MB; raise it (--set hccl.buffer='{math.ceil(need / MB)} MiB') or send fewer tokens"
        )


# -- dispatch -------------------------------------------------------------------------------------


def check_dispatch(api: str, version: int, series: str, args: dict, buffer_bytes: int) -> DispatchProblem:
    """Check a dispatch call (``args``: tensors and attributes by name)."""
    x, ids = args["x"], args["expert_ids"]
    xs = _dims(api, "x", x, (2,))
    idss = _dims(api, "expert_ids", ids, (2,))
    bs, h = xs
    if idss[0] != bs:
        raise reject(api, "expert_ids.shape", idss, f"must be (BS, K) with BS = x.shape[0] = {bs}")
    shape = check_shape(api, version, series, False, args, bs, h, idss[1])
    int4 = series == A2 and version == 2 and shape.comm_alg == "fullmesh"
    x_dtype = _dtype(api, "x", x, (BF16, F16, I32) if int4 else (BF16, F16), series)
    _dtype(api, "expert_ids", ids, (I32,), series)
    quant = _int(api, "quant_mode", args.get("quant_mode", 0))
    if quant not in (0, 2):
        raise reject(api, "quant_mode", quant, "0 (no quantisation) or 2 (dynamic per-token int8)")
    if x_dtype == I32 and quant:
        raise reject(api, "quant_mode", quant, "with int32 x (packed int4) only 0 is supported")
    scales = args.get("scales")
    smooth = scales is not None
    if scales is not None:
        if x_dtype == I32:
            if _dims(api, "scales", scales, (1,)) != (bs,):
                raise reject(api, "scales.shape", tuple(scales.shape), f"with int32 x scales is (BS,) = ({bs},)")
        else:
            if not quant:
                raise reject(api, "scales", "a tensor", "smooth scales apply to quant_mode 2 only: pass None with quant_mode 0")
            rows = shape.moe_expert_num + (shape.shared_expert_num if shape.shared_expert_rank_num else 0)
            if _dims(api, "scales", scales, (2,)) != (rows, h):
                raise reject(api, "scales.shape", tuple(scales.shape), f"must be (shared_expert_num + moe_expert_num, H) = ({rows}, {h}) "
                             "with shared experts, (moe_expert_num, H) without")
        _dtype(api, "scales", scales, (F32,), series)
    elif x_dtype == I32:
        raise reject(api, "scales", None, "with int32 x (packed int4) scales (BS,) float32 must be given")
    mask_dims = _mask(api, shape, args.get("x_active_mask"), version)
    expert_scales = args.get("expert_scales")
    if expert_scales is None and series == A3 and shape.comm_alg == "hierarchy" and version == 2:
        raise reject(api, "expert_scales", None, "required with comm_alg 'hierarchy' on Atlas A3 (BS, K) float32: the weights travel "
                     "with the tokens for the combine's sums inside each server")
    if expert_scales is not None:
        if series == A3 and shape.comm_alg != "hierarchy":
            raise reject(api, "expert_scales", "a tensor", f"not supported with comm_alg {shape.comm_alg!r} on Atlas A3: pass None")
        if _dims(api, "expert_scales", expert_scales, (2,)) != (bs, shape.k):
            raise reject(api, "expert_scales.shape", tuple(expert_scales.shape), f"must be (BS, K) = ({bs}, {shape.k})")
        _dtype(api, "expert_scales", expert_scales, (F32,), series)
    if args.get("elastic_info") is not None:
        raise reject(api, "elastic_info", "a tensor", "reserved: pass None")
    performance = args.get("performance_info")
    if performance is not None:
        if series == A3 and shape.comm_alg == "hierarchy":
            raise reject(api, "performance_info", "a tensor", "not supported with comm_alg 'hierarchy': pass None")
        if _dims(api, "performance_info", performance, (1,)) != (shape.ep_world_size,):
            raise reject(api, "performance_info.shape", tuple(performance.shape), f"must be (ep_world_size,) = ({shape.ep_world_size},)")
        _dtype(api, "performance_info", performance, (I64,), series)
    tokens_type = _int(api, "expert_token_nums_type", args.get("expert_token_nums_type", 1))
    if tokens_type not in (0, 1):
        raise reject(api, "expert_token_nums_type", tokens_type, "0 (prefix sums) or 1 (counts)")
    check_window(api, shape, x_dtype.itemsize, version, buffer_bytes)
    return DispatchProblem(api, version, shape, x_dtype, quant, smooth, mask_dims, expert_scales is not None, tokens_type,
                           performance is not None)


# -- combine --------------------------------------------------------------------------------------


def check_combine(api: str, version: int, series: str, args: dict, buffer_bytes: int) -> CombineProblem:
    """Check a combine call."""
    expand_x, ids = args["expand_x"], args["expert_ids"]
    es = _dims(api, "expand_x", expand_x, (2,))
    idss = _dims(api, "expert_ids", ids, (2,))
    bs, k = idss
    shape = check_shape(api, version, series, True, args, bs, es[1], k)
    dtype = _dtype(api, "expand_x", expand_x, (BF16, F16), series)
    _dtype(api, "expert_ids", ids, (I32,), series)
    need = shape.rows * shape.tp
    if es[0] < need:
        raise reject(api, "expand_x.shape", es, f"must have at least A = {need} rows (what the dispatch returns)")
    assist_name = "expand_idx" if version == 1 else "assist_info_for_combine"
    assist = args[assist_name]
    entries = _dims(api, assist_name, assist, (1,))[0]
    want = bs * k if version == 1 else shape.rows * ASSIST_PER_ROW
    if entries < want:
        raise reject(api, f"{assist_name}.shape", (entries,), f"must have at least {want} entries ({'BS x K' if version == 1 else 'A x 128'})")
    _dtype(api, assist_name, assist, (I32,), series)
    counts = args["ep_send_counts"]
    n = _dims(api, "ep_send_counts", counts, (1,))[0]
    want = (shape.moe_expert_num + 2 * shape.global_bs_real * k * max(1, shape.ep_world_size // RANKS_PER_SERVER_A2) if series == A2
            else shape.ep_world_size * shape.rank_local_experts * shape.tp)
    if n < want:
        raise reject(api, "ep_send_counts.shape", (n,), f"must have at least {want} entries (the dispatch's ep_recv_counts)")
    _dtype(api, "ep_send_counts", counts, (I32,), series)
    scales = args["expert_scales"]
    if _dims(api, "expert_scales", scales, (2,)) != (bs, k):
        raise reject(api, "expert_scales.shape", tuple(scales.shape), f"must be (BS, K) = ({bs}, {k})")
    _dtype(api, "expert_scales", scales, (F32,), series)
    tp_counts = args.get("tp_send_counts")
    if shape.tp == 2:
        if tp_counts is None or _dims(api, "tp_send_counts", tp_counts, (1,)) != (2,):
            raise reject(api, "tp_send_counts", tp_counts if tp_counts is None else tuple(tp_counts.shape),
                         "a TP domain of 2 needs the dispatch's tp_recv_counts (2,) int32")
        _dtype(api, "tp_send_counts", tp_counts, (I32,), series)
    mask_dims = _mask(api, shape, args.get("x_active_mask"), version)
    expand_scales = args.get("expand_scales")
    if series == A2 and expand_scales is None:
        raise reject(api, "expand_scales", None, "required on Atlas A2: pass the dispatch's expand_scales")
    if series == A3 and shape.comm_alg == "hierarchy" and expand_scales is None:
        raise reject(api, "expand_scales", None, "required with comm_alg 'hierarchy' on Atlas A3 (the weights each server's sums "
                     "use): pass the dispatch's expand_scales")
    if expand_scales is not None:
        if series == A3 and shape.comm_alg != "hierarchy":
            raise reject(api, "expand_scales", "a tensor", "supported with comm_alg 'hierarchy' only on Atlas A3: pass None")
        if _dims(api, "expand_scales", expand_scales, (1,))[0] < shape.rows:
            raise reject(api, "expand_scales.shape", tuple(expand_scales.shape), f"must be (A,) with A >= {shape.rows}")
        _dtype(api, "expand_scales", expand_scales, (F32,), series)
    shared_x = args.get("shared_expert_x")
    if shared_x is not None:
        if series == A2 or version == 1:
            raise reject(api, "shared_expert_x", "a tensor", "not supported here: pass None")
        sx = _dims(api, "shared_expert_x", shared_x, (2, 3))
        if (math.prod(sx[:-1]), sx[-1]) != (bs, shape.h):
            raise reject(api, "shared_expert_x.shape", sx, f"must be (BS, H) = ({bs}, {shape.h}) or 3-D with dims 0 x 1 = BS")
        if np.dtype(shared_x.dtype) != dtype:
            raise reject(api, "shared_expert_x.dtype", np.dtype(shared_x.dtype).name, f"must be expand_x's ({dtype.name})")
    ori_x = args.get("ori_x")
    if ori_x is not None:
        if _dims(api, "ori_x", ori_x, (2,)) != (bs, shape.h):
            raise reject(api, "ori_x.shape", tuple(ori_x.shape), f"must be (BS, H) = ({bs}, {shape.h})")
        if np.dtype(ori_x.dtype) != dtype:
            raise reject(api, "ori_x.dtype", np.dtype(ori_x.dtype).name, f"must be expand_x's ({dtype.name})")
    elif shape.copy_expert_num or shape.const_expert_num:
        raise reject(api, "ori_x", None, "copy and constant experts need ori_x, the tokens before the FFN (BS, H)")
    for name in ("const_expert_alpha_1", "const_expert_alpha_2", "const_expert_v"):
        tensor = args.get(name)
        if shape.const_expert_num:
            if tensor is None or _dims(api, name, tensor, (2,)) != (shape.const_expert_num, shape.h):
                raise reject(api, name, None if tensor is None else tuple(tensor.shape),
                             f"constant experts need it as (const_expert_num, H) = ({shape.const_expert_num}, {shape.h})")
            if np.dtype(tensor.dtype) != dtype:
                raise reject(api, f"{name}.dtype", np.dtype(tensor.dtype).name, f"must be expand_x's ({dtype.name})")
    for name in ("elastic_info", "activation_scale", "weight_scale", "group_list"):
        if args.get(name) is not None:
            raise reject(api, name, "a tensor", "reserved: pass None")
    if args.get("performance_info") is not None:
        raise reject(api, "performance_info", "a tensor", "not modelled by npusim for the combine: pass None")
    quant = _int(api, "comm_quant_mode", args.get("comm_quant_mode", 0))
    if quant not in (0, 2):
        raise reject(api, "comm_quant_mode", quant, "0 (no quantisation) or 2 (int8 communication)")
    if quant == 2:
        if series == A2 and shape.comm_alg != "hierarchy":
            raise reject(api, "comm_quant_mode", quant, "2 needs comm_alg 'hierarchy' on Atlas A2")
        if shape.tp == 2:
            raise reject(api, "comm_quant_mode", quant, "int8 communication is not supported with a TP domain of 2")
        raise reject(api, "comm_quant_mode", quant, "int8 communication in the combine is not modelled by npusim yet: pass 0")
    check_window(api, shape, dtype.itemsize, version, buffer_bytes)
    return CombineProblem(api, version, shape, dtype, es[0], mask_dims, shared_x is not None, ori_x is not None, quant,
                          expand_scales is not None)
