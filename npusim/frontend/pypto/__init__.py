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

import sys as _sys

from npusim.engine import compiled_first as _compiled_first

_compiled_first(__name__, __path__)

from npusim.frontend.pypto import converter, distributed, error, experimental, frontend, ranks, runtime
from npusim.frontend.pypto import indexing as _indexing  # noqa: F401 (registers the indexing ops)
from npusim.frontend.pypto import math_ops as _math_ops  # noqa: F401 (registers the math ops)
from npusim.frontend.pypto.compute import CastMode, PrecisionType, SaturationMode, full, set_cube_tile_shapes
from npusim.frontend.pypto.control import (
    CompStage,
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
from npusim.frontend.pypto.host_data import RunMode, function
from npusim.frontend.pypto.ops import get_cube_tile_shapes, get_vec_tile_shapes, set_vec_tile_shapes
from npusim.frontend.pypto.symbolic_scalar import SymInt
from npusim.frontend.pypto.tensors import ShmemTensor, Tensor
from npusim.kernels.shmem.dtypes import (
    DT_BF16,
    DT_BOOL,
    DT_DOUBLE,
    DT_FP4_E2M1,
    DT_FP8E4M3,
    DT_FP8E5M2,
    DT_FP8E8M0,
    DT_FP16,
    DT_FP32,
    DT_HF8,
    DT_INT4,
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
from npusim.runtime.ops import PYPTO_OPS
from npusim.runtime.ops import offered as _offered
from npusim.runtime.ops import ops_in as _ops_in
from npusim.runtime.symbolic import SymbolicScalar

tensor = Tensor
"""``pypto.tensor(shape, dtype, name)``: the framework's alias of ``pypto.Tensor``."""


def ceildiv(a, b):
    """``pypto.ceildiv(a, b)``: (a + b - 1) // b of ints or SymbolicScalars (the framework's _utils.py)."""
    return (a + b - 1) // b


def set_semantic_label(label: str) -> None:
    """``pypto.set_semantic_label(label)``: a label the framework attaches to the following ops
    (recorded as a hint, not modelled)."""
    from npusim.frontend.pypto.control import record_hint

    record_hint("set_semantic_label", {"label": label})


def set_verify_golden_data(in_out_tensors=None, goldens=None) -> None:
    """``pypto.set_verify_golden_data``: golden data for the framework's pass-level verification,
    which npusim does not run (its results are the simulated device's); accepted, recorded."""
    from npusim.frontend.pypto.control import record_hint

    record_hint("set_verify_golden_data", {"goldens": len(goldens or [])})


def set_matrix_size(size: list[int]) -> None:
    """``pypto.set_matrix_size(size)``: a hint of the framework's scope (recorded, not modelled)."""
    from npusim.frontend.pypto.control import record_hint

    record_hint("set_matrix_size", {"size": list(size)})


def zeros(*size, dtype: DataType | None = None) -> Tensor:
    """``pypto.zeros(*size, dtype=DT_FP32)``: ``pypto.full`` of 0 (creation.py)."""
    shape = list(size[0]) if len(size) == 1 and isinstance(size[0], (list, tuple)) else list(size)
    return full(shape, 0, dtype or DT_FP32)


def ones(*size, dtype: DataType | None = None) -> Tensor:
    """``pypto.ones(*size, dtype=DT_FP32)``: ``pypto.full`` of 1."""
    shape = list(size[0]) if len(size) == 1 and isinstance(size[0], (list, tuple)) else list(size)
    return full(shape, 1, dtype or DT_FP32)


def min(a, b) -> SymbolicScalar:  # noqa: A001 - PyPTO's name
    """``pypto.min(a, b)``: the smaller of two scalars (ints or SymbolicScalars; the framework's
    operation.py), e.g. a tail block's valid size ``pypto.min(n - i * block, block)``."""
    return (a if isinstance(a, SymbolicScalar) else SymbolicScalar(a)).min(b)


def max(a, b) -> SymbolicScalar:  # noqa: A001 - PyPTO's name
    """``pypto.max(a, b)``: the larger of two scalars (ints or SymbolicScalars)."""
    return (a if isinstance(a, SymbolicScalar) else SymbolicScalar(a)).max(b)


if "torch" in _sys.modules:  # a torch program: torch.npu is the simulated device, as torch_npu, which the framework's torch loads, gives it
    from npusim.frontend.torch_device import install as _install_torch_device

    _install_torch_device()
symbolic_scalar = SymbolicScalar
"""``pypto.symbolic_scalar(n)``: the framework's alias of ``pypto.SymbolicScalar``."""

__all__ = [
    "AtomicType", "DataType", "OpType", "ShmemTensor", "StatusType", "SymbolicScalar", "Tensor", "TileOpFormat", "DYN",
    "DYNAMIC", "RunMode", "STATIC", "cond", "frontend", "function", "is_loop_begin", "is_loop_end", "jit", "loop",
    "loop_unroll", "options", "ranks", "set_codegen_options", "set_debug_options", "set_host_options", "set_options",
    "set_pass_options", "set_runtime_options", "set_verify_options", "symbolic_scalar", "tensor", "min", "max", "runtime",
    "DT_BF16", "DT_BOOL", "DT_DOUBLE", "DT_FP16", "DT_FP32", "DT_INT8", "DT_INT16", "DT_INT32", "DT_INT64", "DT_INT4",
    "DT_FP8E4M3", "DT_FP8E5M2", "DT_FP8E8M0", "DT_FP4_E2M1", "DT_HF8", "DT_HF4", "DT_FP8", "DT_FP4_E2M1X2",
    "UnheldDataType", "DT_UINT8", "DT_UINT16", "DT_UINT32", "DT_UINT64", "converter", "distributed", "experimental",
    "from_torch", "set_vec_tile_shapes", "CastMode", "PrecisionType", "SaturationMode", "set_cube_tile_shapes",
    "get_cube_tile_shapes", "get_vec_tile_shapes", "set_matrix_size", "zeros", "ones", "SymInt", "ceildiv",
    "set_semantic_label", "set_verify_golden_data", "error", "CompStage",
] + sorted(_ops_in("pypto"))
"""The names above and the ops registered in the ``pypto`` namespace (:mod:`npusim.runtime.ops`)."""

NOT_YET = frozenset(["scaled_mm", "conv", "topk", "argsort", "sort32", "mrgsort", "prelu", "bitwise_left_shift", "bitwise_right_shift", "gathermask", "permute", "pad", "fillpad", "interleave", "deinterleave", "pack", "unpack", "quantize", "dequantize", "quant_mx", "uniform", "normal", "arange", "cumprod", "triu", "tril", "gcd", "ceil_div", "floor_div", "axpy_", "expand_exp_dif"])
"""Compute ops of the framework that npusim does not model yet (docs/pypto.md)."""


class UnheldDataType:
    """A data type of the framework's that no numpy type holds (DataType mirrors the others): the
    name exists, so tables of dtypes import; an op given it refuses it (it is not a pypto.DataType)."""

    def __init__(self, name: str, what: str) -> None:
        self.name = name
        self.what = what

    def __repr__(self) -> str:
        return f"DataType.{self.name} ({self.what}: npusim cannot hold it)"


DT_HF4 = UnheldDataType("DT_HF4", "hifloat4")
DT_FP8 = UnheldDataType("DT_FP8", "fp8")
DT_FP4_E2M1X2 = UnheldDataType("DT_FP4_E2M1X2", "two packed fp4 e2m1")


globals().update(_ops_in("pypto"))


def __getattr__(name: str):
    if name in PYPTO_OPS:  # an op registered since this module was imported
        return _offered("pypto", name)
    if name in NOT_YET:
        from npusim.errors import UsageError

        raise UsageError(f"pypto.{name} is not modelled by npusim yet; docs/pypto.md lists the supported ops")
    raise AttributeError(f"module 'npusim.pypto' has no attribute {name!r}")
