"""``from npusim import pypto``: PyPTO's names for writing distributed (shmem) kernels on npusim,
with the tile compute ops (``add`` ... ``matmul``, ``docs/pypto.md``) that work on their data.

A kernel is a Python function that :func:`npusim.launch` runs once per PE (SPMD); inside, the ops
of ``pypto.distributed`` and ``pypto.experimental`` build the PE's dataflow graph of tile ops, which
the simulated AICPUs then schedule onto the AIV cores of the PE's die::

    from npusim import pypto

    def kernel(x, out, group, n):
        pypto.set_vec_tile_shapes(16, 4096)
        data = pypto.distributed.create_shmem_tensor(group, n, pypto.DT_FP16, [16 * n, 4096])
        ...
        tile = pypto.experimental.shmem_load(data, my_pe, [16, 4096], [0, 0], pred=[wait])
        out[0:, 0:] = tile

Kernels are written as the framework's are: ``@pypto.frontend.jit``, ``pypto.loop``, kernel-local
tensors (``pypto.tensor(shape, dtype)``), device-valued scalars (``t[i]``), several communication
groups (``docs/pypto.md``); ``npusim.pypto.ranks`` runs the framework's one-process-per-rank tests.

Module contents: the data types (``pypto.DT_FP16`` ...), ``AtomicType``, ``OpType``,
``TileOpFormat``, ``DYNAMIC`` / ``STATIC``, ``SymbolicScalar`` (``symbolic_scalar``), ``Tensor``
(``tensor``), ``frontend`` (``jit``), ``loop``, ``cond``, the compiler hints (``options``,
``set_pass_options`` ...), ``set_vec_tile_shapes``, ``view``, ``assemble`` and the compute ops.
"""

from npusim.frontend.pypto import converter, distributed, experimental, frontend, ranks
from npusim.frontend.pypto.compute import (
    CastMode,
    PrecisionType,
    SaturationMode,
    abs,
    add,
    amax,
    amin,
    cast,
    concat,
    cumsum,
    div,
    exp,
    full,
    matmul,
    maximum,
    minimum,
    mul,
    neg,
    one_hot,
    reshape,
    rsqrt,
    set_cube_tile_shapes,
    sqrt,
    sub,
    sum,
    transpose,
)
from npusim.frontend.pypto.control import (
    cond,
    is_loop_begin,
    is_loop_end,
    jit,
    loop,
    loop_unroll,
    options,
    set_codegen_options,
    set_debug_options,
    set_host_options,
    set_options,
    set_pass_options,
    set_runtime_options,
    set_verify_options,
)
from npusim.frontend.pypto.converter import from_torch
from npusim.frontend.pypto.ops import assemble, set_vec_tile_shapes, view
from npusim.frontend.pypto.symbolic import SymbolicScalar
from npusim.frontend.pypto.tensors import ShmemTensor, Tensor
from npusim.kernels.shmem.dtypes import (
    DT_BF16,
    DT_BOOL,
    DT_DOUBLE,
    DT_FP8E4M3,
    DT_FP8E5M2,
    DT_FP8E8M0,
    DT_FP16,
    DT_FP32,
    DT_HF8,
    DT_INT8,
    DT_INT16,
    DT_INT32,
    DT_INT64,
    DT_UINT8,
    DT_UINT16,
    DT_UINT32,
    DT_UINT64,
    DYN,
    DYNAMIC,
    STATIC,
    AtomicType,
    DataType,
    OpType,
    StatusType,
    TileOpFormat,
)

tensor = Tensor
"""``pypto.tensor(shape, dtype, name)``: the framework's alias of ``pypto.Tensor``."""
symbolic_scalar = SymbolicScalar
"""``pypto.symbolic_scalar(n)``: the framework's alias of ``pypto.SymbolicScalar``."""

__all__ = [
    "AtomicType", "DataType", "OpType", "ShmemTensor", "StatusType", "SymbolicScalar", "Tensor", "TileOpFormat",
    "DYN", "DYNAMIC", "STATIC", "cond", "frontend", "is_loop_begin", "is_loop_end", "jit", "loop", "loop_unroll", "options", "ranks",
    "set_codegen_options", "set_debug_options", "set_host_options", "set_options", "set_pass_options", "set_runtime_options",
    "set_verify_options", "symbolic_scalar", "tensor",
    "DT_BF16", "DT_BOOL", "DT_DOUBLE", "DT_FP16", "DT_FP32", "DT_FP8E4M3", "DT_FP8E5M2", "DT_FP8E8M0", "DT_HF8", "DT_INT8", "DT_INT16", "DT_INT32", "DT_INT64",
    "DT_UINT8", "DT_UINT16", "DT_UINT32", "DT_UINT64",
    "assemble", "converter", "distributed", "experimental", "from_torch", "set_vec_tile_shapes", "view",
    "CastMode", "PrecisionType", "SaturationMode", "abs", "add", "amax", "amin", "cast", "concat", "cumsum", "div", "exp", "full",
    "matmul", "maximum", "minimum", "mul", "neg", "one_hot", "reshape", "rsqrt", "set_cube_tile_shapes", "sqrt", "sub", "sum",
    "transpose",
]

NOT_YET = frozenset(["scaled_mm", "conv", "prod", "argmax", "argmin", "var", "topk", "argsort", "sort32", "mrgsort", "greater", "gt", "ge", "eq", "ne", "lt", "le", "where", "clip", "pow", "exp2", "expm1", "log", "log2", "log10", "log1p", "sin", "cos", "tan", "sinh", "cosh", "tanh", "asin", "acos", "atan", "atan2", "asinh", "acosh", "atanh", "erf", "erfc", "reciprocal", "relu", "lrelu", "prelu", "sign", "signbit", "round", "floor", "ceil", "trunc", "hypot", "fmod", "remainder", "bitwise_and", "bitwise_or", "bitwise_xor", "bitwise_not", "bitwise_left_shift", "bitwise_right_shift", "logical_not", "logical_and", "gather", "index_select", "index_add", "index_add_", "index_put_", "scatter", "scatter_", "scatter_update", "gathermask", "permute", "expand_clone", "pad", "fillpad", "interleave", "deinterleave", "pack", "unpack", "quantize", "dequantize", "quant_mx", "uniform", "normal", "arange", "zeros", "ones", "cumprod", "triu", "tril", "copysign", "isfinite", "isnan", "cbrt", "gcd", "ceil_div", "floor_div", "axpy_", "expand_exp_dif", "set_matrix_size"])
"""Compute ops of the framework that npusim does not model yet (docs/pypto.md)."""


def __getattr__(name: str):
    if name in NOT_YET:
        from npusim.errors import UsageError

        raise UsageError(f"pypto.{name} is not modelled by npusim yet; docs/pypto.md lists the supported ops")
    raise AttributeError(f"module 'npusim.pypto' has no attribute {name!r}")
