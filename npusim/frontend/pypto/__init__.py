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

Module contents: the data types (``pypto.DT_FP16`` ...), ``AtomicType``, ``OpType``,
``SymbolicScalar``, ``Tensor``, ``set_vec_tile_shapes``, ``view``, ``assemble``.
"""

from npusim.frontend.pypto import distributed, experimental
from npusim.kernels.shmem.dtypes import (
    DT_BF16,
    DT_BOOL,
    DT_DOUBLE,
    DT_FP16,
    DT_FP32,
    DT_INT8,
    DT_INT16,
    DT_INT32,
    DT_INT64,
    DT_UINT8,
    DT_UINT16,
    DT_UINT32,
    DT_UINT64,
    AtomicType,
    DataType,
    OpType,
)
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
from npusim.frontend.pypto.ops import assemble, set_vec_tile_shapes, view
from npusim.frontend.pypto.symbolic import SymbolicScalar
from npusim.frontend.pypto.tensors import ShmemTensor, Tensor

__all__ = [
    "AtomicType", "DataType", "OpType", "ShmemTensor", "SymbolicScalar", "Tensor",
    "DT_BF16", "DT_BOOL", "DT_DOUBLE", "DT_FP16", "DT_FP32", "DT_INT8", "DT_INT16", "DT_INT32", "DT_INT64",
    "DT_UINT8", "DT_UINT16", "DT_UINT32", "DT_UINT64",
    "assemble", "distributed", "experimental", "set_vec_tile_shapes", "view",
    "CastMode", "PrecisionType", "SaturationMode", "abs", "add", "amax", "amin", "cast", "concat", "cumsum", "div", "exp", "full",
    "matmul", "maximum", "minimum", "mul", "neg", "one_hot", "reshape", "rsqrt", "set_cube_tile_shapes", "sqrt", "sub", "sum",
    "transpose",
]
