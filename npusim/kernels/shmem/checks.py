"""Argument checks of PyPTO's shmem ops, as plain functions over shapes, dtypes and ints.

Each check raises :class:`~npusim.errors.OpArgumentError` naming the op, the argument, its value and
the rule; a caller resolves SymbolicScalar arguments to ints (per PE) before checking them. The rules
are those of the framework (``shmem_operation_impl.cpp``: ValidateGroup / ValidateDim /
ValidateDataType / ValidateShape / ValidateTiling / ValidateOpType, ``View``'s valid-shape check) and of
its API pages (removed by commit 65fffedce; ``0 <= pe < n_pes``, offsets below the dim sizes, the view
inside the tensor), which the framework itself does not all enforce; ``docs/shmem.md`` says which.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, NoReturn, TypeGuard

import numpy as np

from npusim.errors import OpArgumentError
from npusim.kernels.shmem.dtypes import AtomicType, DataType, OpType

SHMEM_DATA_DIMS = (2, 3, 4)
"""Dims a shmem data tensor, a put/store source and a pred tensor may have."""
SHMEM_DTYPES = (DataType.DT_INT32, DataType.DT_FP16, DataType.DT_FP32, DataType.DT_BF16)
"""Element types of shmem data and of put/get/load/store sources."""
ADD_INTO_FP32_DTYPES = (DataType.DT_FP16, DataType.DT_BF16)
"""Sources that shmem_put with ADD may accumulate into an FP32 shmem tensor (cast in UB first)."""
MAX_GROUP_NAME_CHARS = 127
"""A group name has 1..127 characters (the framework checks ``1 <= len < 128``)."""
INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1
"""Range of signal values, cmp values and put/store element counts."""


def _shown(value: object) -> str:
    if isinstance(value, tuple):
        value = list(value)
    return repr(value)


def _reject(op: str, arg: str, value: object, rule: str) -> NoReturn:
    raise OpArgumentError(f"{op}: {arg}={_shown(value)} {rule}")


def is_int(value: object) -> TypeGuard[int | np.integer[Any]]:
    """A Python or numpy int, not a bool (a plain int, by far the most common, is recognised first)."""
    return type(value) is int or isinstance(value, (int, np.integer)) and not isinstance(value, bool)


def check_group_name(op: str, group_name: object) -> None:
    """A communication group's name: a string of 1..127 characters."""
    if not isinstance(group_name, str) or not 1 <= len(group_name) <= MAX_GROUP_NAME_CHARS:
        _reject(op, "group_name", group_name, f"must be a string of 1 to {MAX_GROUP_NAME_CHARS} characters")


def check_n_pes(op: str, n_pes: object) -> None:
    """The number of PEs of a group: a positive int."""
    if not is_int(n_pes) or n_pes < 1:
        _reject(op, "n_pes", n_pes, "must be a positive int (the number of PEs in the group)")


def check_pe(op: str, arg: str, pe: object, n_pes: int, *, allow_all: bool = False) -> None:
    """A PE of the group: ``0 <= pe < n_pes``; with ``allow_all`` (shmem_signal's target_pe) also -1."""
    if is_int(pe) and (0 <= pe < n_pes or (allow_all and pe == -1)):
        return
    rule = f"is not a PE of the group: it must satisfy 0 <= {arg} < n_pes={n_pes}"
    _reject(op, arg, pe, rule + (", or be -1 to signal every PE" if allow_all else ""))


def check_data_shape(op: str, arg: str, shape: object) -> None:
    """A shmem data tensor's (or a put/store source's) shape: 2..4 dims, each a positive int."""
    if not isinstance(shape, Sequence) or not all(is_int(s) for s in shape):
        _reject(op, arg, shape, "must be a list of ints")
    if len(shape) not in SHMEM_DATA_DIMS:
        _reject(op, arg, shape, f"has {len(shape)} dims; it must have 2 to 4")
    if any(s <= 0 for s in shape):
        _reject(op, arg, shape, "has a dim that is not positive; every dim must be > 0")


def check_element_count(op: str, arg: str, shape: Sequence[int]) -> None:
    """A put/store source holds at most INT32_MAX elements."""
    count = math.prod(map(int, shape))  # Python ints: no overflow
    if count > INT32_MAX:
        _reject(op, arg, shape, f"has {count} elements, more than INT32_MAX={INT32_MAX}")


def check_dtype(op: str, arg: str, dtype: object) -> None:
    """Element type of shmem data or of a put/get/load/store source: INT32, FP16, FP32 or BF16."""
    if dtype not in SHMEM_DTYPES:
        allowed = ", ".join(d.name for d in SHMEM_DTYPES)
        _reject(op, arg, dtype, f"is not supported; the dtype must be one of {allowed}")


def check_put_dtypes(
    op: str, src_dtype: DataType, dst_dtype: DataType, put_op: AtomicType, *, from_ub: bool = False
) -> None:
    """The shmem tensor has the source's dtype; except that shmem_put with ADD may accumulate an
    FP16/BF16 source into an FP32 tensor. A UB source (``from_ub``, shmem_store) is stored as is, so
    its dtype must match."""
    if dst_dtype == src_dtype:
        return
    adds_into_fp32 = put_op is AtomicType.ADD and src_dtype in ADD_INTO_FP32_DTYPES and dst_dtype is DataType.DT_FP32
    if adds_into_fp32 and not from_ub:
        return
    rule = f"does not match the source's {src_dtype.name}; the shmem tensor must have the source's dtype"
    if not from_ub:
        rule += " (or be DT_FP32 under put_op=AtomicType.ADD from a DT_FP16/DT_BF16 source)"
    _reject(op, "dst.dtype", dst_dtype, rule)


def check_view(
    op: str,
    tensor_shape: Sequence[int],
    shape: Sequence[int],
    offsets: Sequence[int],
    valid_shape: Sequence[int] | None = None,
    *,
    shape_arg: str = "shape",
    what: str = "shmem tensor",
    valid_bounds: bool = False,
) -> None:
    """A view of a shmem tensor (or of another ``what``): as many dims and offsets as the tensor, each
    offset below its dim, the view inside the tensor, and ``0 <= valid_shape <= shape`` per dim.
    With ``valid_bounds`` and a ``valid_shape``, only the valid part must lie inside the tensor (a
    GM tensor's view may run past its end: ``pypto.view``'s tail blocks)."""
    dims = len(tensor_shape)
    if len(shape) != dims:
        _reject(op, shape_arg, shape, f"has {len(shape)} dims; the {what} {_shown(tensor_shape)} has {dims}")
    for size in shape:
        if not is_int(size) or size <= 0:
            _reject(op, shape_arg, shape, "must be positive ints")
    if len(offsets) != dims:
        rule = f"has {len(offsets)} values; the {what} {_shown(tensor_shape)} has {dims} dims"
        _reject(op, "offsets", offsets, rule)
    if valid_shape is not None:
        if len(valid_shape) != dims:
            _reject(op, "valid_shape", valid_shape, f"has {len(valid_shape)} dims; the view {_shown(shape)} has {dims}")
        for i, (valid, size) in enumerate(zip(valid_shape, shape)):
            if not is_int(valid) or not 0 <= valid <= size:
                rule = f"has valid_shape[{i}]={valid}; it must satisfy 0 <= valid <= {size}, the view's dim {i}"
                _reject(op, "valid_shape", valid_shape, rule)
    bounded = valid_shape if valid_bounds and valid_shape is not None else shape
    for i, (offset, size, dim) in enumerate(zip(offsets, bounded, tensor_shape)):
        if not is_int(offset) or not 0 <= offset < dim:
            rule = f"has offsets[{i}]={offset}; it must satisfy 0 <= offset < {dim}, the size of dim {i}"
            _reject(op, "offsets", offsets, rule)
        if offset + size > dim:
            part = "the valid part of the view" if bounded is not shape else "the view"
            _reject(
                op, "offsets", offsets,
                f"puts {part} {_shown(bounded)} outside the {what} {_shown(tensor_shape)} in dim {i} "
                f"({offset} + {size} > {dim})",
            )


def check_tile_shape(op: str, tile_shape: Sequence[int] | None, data_dims: int) -> None:
    """The vector tile shape is set, positive, and has as many dims as the data it tiles."""
    fix = "call pypto.set_vec_tile_shapes(...) before the op"
    if tile_shape is None or len(tile_shape) == 0:
        _reject(op, "tile_shape", tile_shape, f"is not set; {fix}")
    if any(not is_int(t) or t <= 0 for t in tile_shape):
        _reject(op, "tile_shape", tile_shape, f"must be positive ints; {fix}")
    if len(tile_shape) != data_dims:
        rule = f"has {len(tile_shape)} dims; it must have {data_dims}, as the data it tiles; {fix}"
        _reject(op, "tile_shape", tile_shape, rule)


def check_preds(op: str, pred_shapes: Sequence[Sequence[int]] | None) -> None:
    """``pred`` is None or lists at least one tensor; each has 2..4 dims and is not empty."""
    if pred_shapes is None:
        return
    if len(pred_shapes) == 0:
        _reject(op, "pred", [], "lists no tensor; pass None or at least one tensor")
    for i, shape in enumerate(pred_shapes):
        if len(shape) not in SHMEM_DATA_DIMS:
            _reject(op, f"pred[{i}].shape", shape, f"has {len(shape)} dims; a pred tensor must have 2 to 4")
        if any(s <= 0 for s in shape):
            _reject(op, f"pred[{i}].shape", shape, "is empty; a pred tensor must have every dim > 0")


def check_cmp(op: str, cmp: object) -> None:
    """shmem_wait_until compares only for equality."""
    if cmp is not OpType.EQ:
        _reject(op, "cmp", cmp, "is not supported; only OpType.EQ is")


def check_atomic(op: str, arg: str, value: object) -> None:
    """put_op / sig_op: AtomicType.SET or AtomicType.ADD."""
    if not isinstance(value, AtomicType):
        _reject(op, arg, value, "must be AtomicType.SET or AtomicType.ADD")


def check_int32(op: str, arg: str, value: object) -> None:
    """A signal value or cmp value: an int that fits int32."""
    if not is_int(value) or not INT32_MIN <= value <= INT32_MAX:
        _reject(op, arg, value, f"must be an int in [{INT32_MIN}, {INT32_MAX}] (signals are int32)")


def check_signal_view(op: str, tensor_shape: Sequence[int], view_shape: Sequence[int]) -> None:
    """A signal or wait view divides the shmem tensor evenly in every dim (the slot numbering needs it)."""
    for i, (dim, size) in enumerate(zip(tensor_shape, view_shape)):
        if dim % size:
            _reject(
                op, "shape", view_shape,
                f"does not divide the shmem tensor {_shown(tensor_shape)}: dim {i} is {dim}, not a multiple of {size}",
            )
