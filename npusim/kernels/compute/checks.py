"""The rules PyPTO's compute ops check before anything runs, with the framework's wording of each
rule (op docs under ``docs/zh/api/operation/`` of hicann/pypto; ``binary.cpp``, ``cube_operation_impl.cpp``).

Every failure is an :class:`~npusim.errors.OpArgumentError` naming the op, the argument, its value
and the rule.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NoReturn

from npusim.config.products import PRODUCTS, Product
from npusim.errors import OpArgumentError
from npusim.kernels.shmem.tiling import MAX_TENSOR_DIMS

MAX_DIMS = 4
"""The most dims of a compute op's tensors: the framework's MAX_TENSOR_DIM, which its ops check with
CheckTensorDimRange (framework/src/interface/operation/operation_common.h; vector/binary.h,
unary.h, reduction.cpp ...), unless OP_MAX_DIMS names the op. Views, assemble and the shmem ops take
tensors of up to MAX_TENSOR_DIMS (kernels.shmem.tiling)."""
OP_MAX_DIMS = {"transpose": MAX_TENSOR_DIMS, "gather": MAX_TENSOR_DIMS, "reshape": MAX_TENSOR_DIMS,
               "index_add": MAX_TENSOR_DIMS, "index_add_": MAX_TENSOR_DIMS}
"""Ops that take tensors of up to MAX_TENSOR_DIMS: the framework checks 1 to 5 dims
(CheckTensorDimRange(self, 1, 5, ...): vector/tensor_transformation.cpp TRANSPOSE,
vector/indexing.cpp GATHERELEMENTS and INDEXADD, CheckIndexAddParamsInvalid), or none
(operation_impl.cpp Reshape, which slicing a tensor with an int index uses to drop the dim)."""

# Tensor dtypes per op on Atlas A2 / A3 (the op pages' 约束说明, and binary.cpp ADD_A2A3_TYPES ...), by DataType name
FLOAT = ("DT_FP16", "DT_BF16", "DT_FP32")
ARITH = ("DT_INT32", "DT_INT16") + FLOAT
OP_DTYPES = {
    "add": ARITH, "sub": ARITH, "mul": ARITH, "div": ARITH, "maximum": ARITH, "minimum": ARITH,
    "exp": FLOAT, "sqrt": FLOAT, "rsqrt": FLOAT, "abs": ARITH, "neg": ARITH,
    "sum": ("DT_FP32", "DT_BF16", "DT_INT32", "DT_INT16"), "amax": ARITH, "amin": ARITH,
    "prod": ("DT_FP32", "DT_INT32", "DT_INT16"), "argmax": FLOAT, "argmin": FLOAT,  # reduction.cpp Prod / ArgMax / ArgMin
    "cumsum": ARITH, "transpose": ARITH + ("DT_INT8", "DT_UINT8"), "concat": ARITH + ("DT_INT8", "DT_UINT8", "DT_INT64"),
    "one_hot": ("DT_INT8", "DT_INT16", "DT_INT32", "DT_INT64"),
    "full": ARITH + ("DT_INT8", "DT_UINT8", "DT_UINT16", "DT_UINT32"),
    # indexing (pypto-gather.md 约束说明 5 and indexing.cpp GatherElements a2a3Types; pypto-scatter_.md and
    # indexing.cpp CheckScatterParamsInvalid; pypto-scatter_update.md; pypto-index_select.md 约束说明 4)
    "gather": ("DT_INT16", "DT_INT32", "DT_UINT16", "DT_UINT32", "DT_FP16", "DT_FP32", "DT_BF16"),
    "scatter": FLOAT + ("DT_INT8", "DT_UINT8", "DT_INT16", "DT_INT32"),
    "scatter_update": FLOAT + ("DT_INT32", "DT_INT16"),
    "index_select": FLOAT + ("DT_INT8", "DT_INT16", "DT_INT32", "DT_UINT8", "DT_UINT16", "DT_UINT32"),
}
OP_DTYPES["scatter_"] = OP_DTYPES["scatter"]
OP_DTYPES["index_add_"] = OP_DTYPES["index_add"] = FLOAT + ("DT_INT8", "DT_INT16", "DT_INT32")  # pypto-index_add_.md; CheckIndexAddParamsInvalid
OP_DTYPES["index_put_"] = ("DT_INT8", "DT_UINT8", "DT_INT16", "DT_UINT16", "DT_INT32", "DT_UINT32", "DT_INT64", "DT_UINT64") + FLOAT  # pypto-index_put_.md
INDEX_DTYPES = {"gather": ("DT_INT32", "DT_INT64"), "scatter": ("DT_INT32", "DT_INT64"), "scatter_": ("DT_INT32", "DT_INT64"),
                "scatter_update": ("DT_INT64", "DT_INT32", "DT_INT16"), "index_select": ("DT_INT32", "DT_INT64"),
                "index_add_": ("DT_INT32", "DT_INT64"), "index_add": ("DT_INT32", "DT_INT64"),
                "index_put_": ("DT_INT8", "DT_UINT8", "DT_INT16", "DT_UINT16", "DT_INT32", "DT_UINT32", "DT_INT64", "DT_UINT64")}
"""The index dtypes of the indexing ops (the op pages' index rows; indexing.cpp indexSupportedTypes)."""

# cast pairs of Atlas A2 / A3 (pypto-cast.md): (source, target) -> (modes the pair takes, default mode)
_ROUNDED = ("CAST_RINT", "CAST_ROUND", "CAST_FLOOR", "CAST_CEIL", "CAST_TRUNC")
_A2_A3_CASTS = {
    ("DT_FP32", "DT_FP16"): (_ROUNDED + ("CAST_ODD",), "CAST_RINT"),
    ("DT_FP32", "DT_FP32"): (_ROUNDED, "CAST_RINT"),
    ("DT_FP32", "DT_BF16"): (_ROUNDED, "CAST_RINT"),
    ("DT_FP32", "DT_INT64"): (_ROUNDED, "CAST_TRUNC"),
    ("DT_FP32", "DT_INT32"): (_ROUNDED, "CAST_TRUNC"),
    ("DT_FP32", "DT_INT16"): (_ROUNDED, "CAST_TRUNC"),
    ("DT_FP16", "DT_FP32"): ((), None),
    ("DT_FP16", "DT_INT32"): (_ROUNDED, "CAST_TRUNC"),
    ("DT_FP16", "DT_INT16"): (_ROUNDED, "CAST_TRUNC"),
    ("DT_FP16", "DT_INT8"): (_ROUNDED, "CAST_TRUNC"),
    ("DT_FP16", "DT_UINT8"): (_ROUNDED, "CAST_TRUNC"),
    ("DT_BF16", "DT_FP32"): ((), None),
    ("DT_BF16", "DT_INT32"): (_ROUNDED, "CAST_TRUNC"),
    ("DT_INT32", "DT_FP32"): (_ROUNDED, "CAST_RINT"),
    ("DT_INT32", "DT_INT64"): ((), None),
    ("DT_INT32", "DT_INT16"): ((), None),
    ("DT_INT16", "DT_FP32"): (_ROUNDED, "CAST_RINT"),
    ("DT_INT16", "DT_FP16"): (_ROUNDED, "CAST_RINT"),
    ("DT_INT64", "DT_FP32"): (_ROUNDED, "CAST_RINT"),
    ("DT_INT64", "DT_INT32"): ((), None),
    ("DT_UINT8", "DT_FP16"): ((), None),
    ("DT_INT8", "DT_FP16"): ((), None),
}

# cast pairs of the Ascend 950PR / 950DT (pypto-cast.md, its 950 table), those the simulator holds
# (no packed int4 / fp4, no deq int32 -> fp16): the A2/A3 conversions it lists, more integer ones,
# bf16 -> fp16, and the 8-bit floats (fp32 -> fp8 with any rounding; fp32 / fp16 -> hifloat8 with
# CAST_ROUND only, ROUND_A; every 8-bit float -> fp32 widening)
_950_CASTS = {
    **{pair: rule for pair, rule in _A2_A3_CASTS.items() if pair != ("DT_INT16", "DT_FP32")},
    ("DT_FP32", "DT_FP8E4M3"): (_ROUNDED, "CAST_RINT"),
    ("DT_FP32", "DT_FP8E5M2"): (_ROUNDED, "CAST_RINT"),
    ("DT_FP32", "DT_HF8"): (("CAST_ROUND",), "CAST_ROUND"),
    ("DT_FP16", "DT_HF8"): (("CAST_ROUND",), "CAST_ROUND"),
    ("DT_FP8E4M3", "DT_FP32"): ((), None),
    ("DT_FP8E5M2", "DT_FP32"): ((), None),
    ("DT_HF8", "DT_FP32"): ((), None),
    ("DT_BF16", "DT_FP16"): (_ROUNDED, "CAST_RINT"),
    ("DT_INT16", "DT_FP32"): ((), None),
    ("DT_INT8", "DT_INT16"): ((), None),
    ("DT_INT8", "DT_INT32"): ((), None),
    ("DT_INT16", "DT_INT32"): ((), None),
}
CAST_PAIRS = {"atlas_a2": _A2_A3_CASTS, "atlas_a3": _A2_A3_CASTS, "ascend_950": _950_CASTS}
"""Per product series: (source, target) -> (modes the pair takes, default mode)."""


# matmul (pypto-matmul.md table 3, Atlas A2 / A3): input dtype -> output dtypes
MATMUL_DTYPES = {"DT_FP16": ("DT_FP16", "DT_FP32"), "DT_BF16": ("DT_BF16", "DT_FP32"), "DT_FP32": ("DT_FP32",), "DT_INT8": ("DT_INT32",)}


def reject(op: str, arg: str, value, rule: str) -> NoReturn:
    raise OpArgumentError(f"pypto.{op}: {arg}={value!r} {rule}")


def check_dtype(op: str, arg: str, dtype_name: str) -> None:
    allowed = OP_DTYPES[op]
    if dtype_name not in allowed:
        reject(op, f"{arg}.dtype", dtype_name, f"is not supported on Atlas A2 / A3; {op} takes {', '.join(allowed)}")


def check_index_dtype(op: str, dtype_name: str) -> None:
    allowed = INDEX_DTYPES[op]
    if dtype_name not in allowed:
        reject(op, "index.dtype", dtype_name, f"is not an index dtype of {op}; it takes {', '.join(allowed)}")


def check_index_shape(op: str, index: Sequence[int], input: Sequence[int], axis: int, arg: str = "input") -> None:
    """index has input's rank and index.shape[d] <= input.shape[d] for every d != axis (pypto-gather.md
    约束说明 1, pypto-scatter_.md's index row; indexing.cpp GatherElements, CheckScatterParamsInvalid)."""
    if len(index) != len(input):
        reject(op, "index.shape", list(index), f"must have as many dims as {arg}.shape={list(input)}")
    for d, (i, n) in enumerate(zip(index, input)):
        if d != axis and i > n:
            reject(op, "index.shape", list(index), f"exceeds {arg}.shape={list(input)} in dim {d}: index.shape[d] <= {arg}.shape[d] "
                                                   f"for every d != dim ({axis})")


def check_rank(op: str, arg: str, shape: Sequence[int]) -> None:
    most = OP_MAX_DIMS.get(op, MAX_DIMS)
    if not 1 <= len(shape) <= most or any(s <= 0 for s in shape):
        wider = "" if most == MAX_TENSOR_DIMS else f" (the framework's limit for {op}; tensors and views may have {MAX_TENSOR_DIMS})"
        reject(op, f"{arg}.shape", list(shape), f"must have 1 to {most} dims, none empty{wider}")


def broadcast_shape(op: str, a: Sequence[int], b: Sequence[int]) -> tuple[int, ...]:
    """The shape two operands broadcast to (numpy's rule, as the framework: trailing dims equal or 1)."""
    rank = max(len(a), len(b))
    a, b = (1,) * (rank - len(a)) + tuple(a), (1,) * (rank - len(b)) + tuple(b)
    out = []
    for dim, (x, y) in enumerate(zip(a, b)):
        if x != y and 1 not in (x, y):
            reject(op, "other.shape", list(b), f"does not broadcast with input.shape={list(a)}: dim {dim} is {y}, not {x} or 1")
        out.append(max(x, y))
    return tuple(out)


def check_dim(op: str, dim, rank: int) -> int:
    """A dim argument as a non-negative axis: -rank <= dim < rank."""
    if not isinstance(dim, int) or isinstance(dim, bool) or not -rank <= dim < rank:
        reject(op, "dim", dim, f"must be an int with -{rank} <= dim < {rank}")
    return dim % rank


def check_cast(dtype_from: str, dtype_to: str, product: Product) -> None:
    pairs = CAST_PAIRS[product.series]
    if (dtype_from, dtype_to) not in pairs:
        elsewhere = [p.label for _, p in PRODUCTS if (dtype_from, dtype_to) in CAST_PAIRS.get(p.series, {})]
        where = f" (it is one on {', '.join(elsewhere)})" if elsewhere else ""
        listed = ", ".join(f"{a}->{b}" for a, b in pairs)
        reject("cast", "dtype", dtype_to, f"from {dtype_from} is not a conversion of {product.label}{where}; the pairs are {listed}")


def cast_mode(dtype_from: str, dtype_to: str, mode: str, product: Product) -> str | None:
    """The CastMode a cast runs with on ``product``: the one given if the pair takes it, else the
    pair's default (the framework falls back silently, pypto-cast.md 其他约束 5); None for a
    widening (no rounding)."""
    modes, default = CAST_PAIRS[product.series][(dtype_from, dtype_to)]
    return mode if mode in modes else default


def check_vec_tile(op: str, tile_shape: Sequence[int] | None, rank: int) -> tuple[int, ...]:
    """The tile shape of a ``rank``-dim tensor: dim i is tiled by ``tile_shape[i]``, so the tile
    shape needs at least ``rank`` dims and its leading ones are used (binary.cpp tiles dim ``cur``
    by ``vecTile[cur]``; operation_impl.cpp CheckFwkOpTileShape: tile dims >= tensor dims)."""
    fix = "call pypto.set_vec_tile_shapes(...) with one size per dim of the output before the op"
    if tile_shape is None:
        reject(op, "tile_shape", None, f"is not set; {fix}")
    if len(tile_shape) < rank:
        reject(op, "tile_shape", list(tile_shape), f"has {len(tile_shape)} dims; the output has {rank}: {fix}")
    return tuple(tile_shape[:rank])


def check_cube_tiles(m: Sequence, k: Sequence, n: Sequence) -> tuple[tuple[int, int], tuple[int, ...], tuple[int, int]]:
    """set_cube_tile_shapes' arguments: m = [mL0, mL1], k = [kL0, kL1] (or [kL0, kAL1, kBL1]),
    n = [nL0, nL1], each positive, L0 <= L1 and L1 % L0 == 0 (pypto-set_cube_tile_shapes.md)."""
    op = "set_cube_tile_shapes"
    for arg, value, sizes in (("m", m, (2,)), ("k", k, (2, 3)), ("n", n, (2,))):
        if not isinstance(value, (list, tuple)) or len(value) not in sizes or any(not isinstance(v, int) or isinstance(v, bool) or v <= 0 for v in value):
            reject(op, arg, value, f"must be a list of {' or '.join(map(str, sizes))} positive ints ([L0, L1])")
        for l1 in value[1:]:
            if l1 < value[0] or l1 % value[0]:
                reject(op, arg, value, f"breaks {arg}L0 <= {arg}L1 and {arg}L1 % {arg}L0 == 0")
    k = tuple(k) if len(k) == 3 else (k[0], k[1], k[1])
    return (m[0], m[1]), k, (n[0], n[1])
