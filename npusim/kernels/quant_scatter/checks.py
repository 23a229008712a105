"""Argument checks of ``torch_npu.npu_quant_scatter_`` and the host-side view of its indices.

What the real op accepts is the union of the aclnn wrapper's checks (``aclnnInplaceQuantScatter``:
dtypes, equal ranks, the empty-tensor exit) and the kernel tiling's checks (ranks 3..8, axis,
quant_axis, shapes, scales count, 32-byte last dim); see ``docs/quant_scatter.md`` for the sources.
Every refusal is an :class:`~npusim.errors.OpArgumentError` naming the op, the argument, its value
and the rule.

The host's reading of the indices (destinations, out-of-range indices, overlaps) is shared with
``scatter_update``: :mod:`npusim.kernels.scatter_index`.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass
from typing import Any, ClassVar

import ml_dtypes
import numpy as np

from npusim.config.products import PRODUCTS, Product
from npusim.errors import OpArgumentError, UsageError
from npusim.kernels.scatter_index import (  # noqa: F401  (re-exported: the op's own names)
    OverlappingWritesWarning,
    Segment,
    UncheckedIndexWarning,
    check_indices,
    describe_overlaps,
    find_overlaps,
)

OP_NAME = "npu_quant_scatter_"

INT8 = np.dtype(np.int8)
INT32 = np.dtype(np.int32)
INT64 = np.dtype(np.int64)
FLOAT16 = np.dtype(np.float16)
FLOAT32 = np.dtype(np.float32)
BFLOAT16 = np.dtype(ml_dtypes.bfloat16)

OUTPUT_BLOCK_BYTES = 32
"""The kernel writes whole 32-byte blocks, so the last dim must hold a multiple of 32 bytes."""

MIN_RANK, MAX_RANK = 3, 8
"""The ranks ``input`` (and so ``updates``) may have (the op page: 3~8 dims)."""
SCALES_MIN_RANK, SCALES_MAX_RANK = 1, 8
"""The ranks ``quant_scales`` and ``quant_zero_points`` may have (aclnnInplaceQuantScatter's page, CANN 8.0.0: 1-8 dims)."""

DEFAULT_AXIS, DEFAULT_QUANT_AXIS = 0, 1
"""The defaults of the op's documented signature (the npu_quant_scatter_ page, ../shared/seeds/;
op-plugin's schema ``int axis=0, int quant_axis=1``). The op's own checks refuse both on every
product it runs on (``axis`` is never the first dim, ``quant_axis`` must be the last), so a call
that leaves them out fails as on the device: the page's examples pass ``axis=-2, quant_axis=-1``."""

_A2_A3_ROWS = (
    (BFLOAT16, BFLOAT16, BFLOAT16),
    (FLOAT16, FLOAT32, INT32),
)
_INFERENCE_ROWS = ((FLOAT16, FLOAT32, INT32),)

SERIES_DTYPE_ROWS: dict[str, tuple[tuple[np.dtype, np.dtype, np.dtype], ...]] = {
    "atlas_a2": _A2_A3_ROWS,
    "atlas_a3": _A2_A3_ROWS,
    "atlas_inference": _INFERENCE_ROWS,
}
"""Allowed (updates, quant_scales, quant_zero_points) dtypes per product series (the op page's
table, ../shared/seeds/); zero points may be absent."""


@dataclass(frozen=True)
class QuantScatterProblem:
    """One accepted call, in the kernel's terms.

    Shapes are merged around the scatter axis: input is viewed as ``[d0, H, S, T]`` and updates as
    ``[B, H, U, T]`` with ``H`` the product of the dims between the first one and ``axis``, ``S`` /
    ``U`` the axis sizes and ``T`` the product of the dims after ``axis``. Sizes are in elements,
    element sizes in bytes. ``empty`` marks a call the op accepts and does nothing for (an empty
    input, indices, updates or scales); its view fields are zero when its axis is not valid.
    """

    product: str
    input_shape: tuple[int, ...]
    indices_shape: tuple[int, ...]
    updates_shape: tuple[int, ...]
    axis: int
    input_view: tuple[int, int, int, int]
    updates_view: tuple[int, int, int, int]
    last_dim: int
    index_rank: int
    input_dtype: np.dtype
    indices_dtype: np.dtype
    updates_dtype: np.dtype
    scales_dtype: np.dtype
    zero_points_dtype: np.dtype | None
    empty: bool = False
    op_name: ClassVar[str] = OP_NAME

    @property
    def batches(self) -> int:
        """B: batches of updates, one index (or index pair) each."""
        return self.updates_view[0]

    @property
    def heads(self) -> int:
        """H: merged dims between dim 0 and the scatter axis."""
        return self.input_view[1]

    @property
    def axis_len(self) -> int:
        """S: size of input along the scatter axis."""
        return self.input_view[2]

    @property
    def rows(self) -> int:
        """U: size of updates along the scatter axis (rows written per batch and head)."""
        return self.updates_view[2]

    @property
    def row_elements(self) -> int:
        """T: merged dims after the scatter axis (elements of one row)."""
        return self.input_view[3]

    @property
    def bs(self) -> int:
        """Rows of work the kernel splits over cores: ``B * H`` blocks of ``U * T`` elements."""
        return self.batches * self.heads

    @property
    def block_bytes(self) -> int:
        """Bytes of int8 one (batch, head) writes: one contiguous block of ``U * T``."""
        return self.rows * self.row_elements * self.input_dtype.itemsize

    @property
    def quant_rows_per_block(self) -> int:
        """Last-dim rows (of ``last_dim`` elements, one scales vector each) in one block."""
        return self.rows * self.row_elements // self.last_dim

    @property
    def index_count(self) -> int:
        """Elements of the indices tensor."""
        return math.prod(self.indices_shape)

    @property
    def index_itemsize(self) -> int:
        return self.indices_dtype.itemsize

    @property
    def update_itemsize(self) -> int:
        return self.updates_dtype.itemsize

    @property
    def scale_itemsize(self) -> int:
        return self.scales_dtype.itemsize

    @property
    def zero_point_itemsize(self) -> int:
        """Bytes of one zero point, 0 when there are none."""
        return 0 if self.zero_points_dtype is None else self.zero_points_dtype.itemsize

    @property
    def has_zero_points(self) -> bool:
        return self.zero_points_dtype is not None


def _reject(argument: str, value: Any, rule: str) -> OpArgumentError:
    return OpArgumentError(f"{OP_NAME}: {argument} = {value}: {rule}")


def _dtype_name(dtype: np.dtype | None) -> str:
    return "None" if dtype is None else dtype.name


def _check_dtypes(product: Product, input_dtype, indices_dtype, updates_dtype, scales_dtype, zp_dtype) -> None:
    if input_dtype != INT8:
        raise _reject("input.dtype", input_dtype.name, "input must be int8")
    if indices_dtype not in (INT32, INT64):
        raise _reject("indices.dtype", indices_dtype.name, "indices must be int32 or int64")
    rows = SERIES_DTYPE_ROWS[product.series]
    where = f"on {product.label}"
    for argument, dtype, column in (
        ("updates.dtype", updates_dtype, 0),
        ("quant_scales.dtype", scales_dtype, 1),
        ("quant_zero_points.dtype", zp_dtype, 2),
    ):
        allowed = sorted({row[column].name for row in rows})
        if dtype is not None and dtype not in {row[column] for row in rows}:
            anywhere = any(dtype == row[column] for r in SERIES_DTYPE_ROWS.values() for row in r)
            rule = "not supported " + where if anywhere else "not a supported dtype"
            raise _reject(argument, dtype.name, f"{rule}; allowed: {', '.join(allowed)}")
    if not any(updates_dtype == u and scales_dtype == s and zp_dtype in (z, None) for u, s, z in rows):
        combos = "; ".join(f"({u.name}, {s.name}, {z.name} or None)" for u, s, z in rows)
        raise _reject(
            "(updates, quant_scales, quant_zero_points) dtypes",
            f"({updates_dtype.name}, {scales_dtype.name}, {_dtype_name(zp_dtype)})",
            f"not an allowed combination {where}; allowed: {combos}",
        )


ROUND_MODES = ("rint", "round", "hybrid")
"""The round modes of the op's schema (aclnnInplaceQuantScatterV2's roundMode)."""
ASCEND_950_DST_TYPES = ("float8_e4m3fn", "float8_e5m2", "hifloat8")


class IgnoredArgumentWarning(RuntimeWarning):
    """An argument the real op accepts and ignores on this product (the result is as without it)."""


def check_output_mode(dst_type: str | None, round_mode: str | None) -> None:
    """``dst_type`` (a dtype name or None) and ``round_mode`` of the current schema. On Atlas A2/A3
    op-plugin calls aclnnInplaceQuantScatter, which writes int8 rounded half to even whatever they
    say (only the Ascend 950 kernel, aclnnInplaceQuantScatterV2, reads them): an Ascend 950 output
    dtype or round mode is accepted and ignored, as on the device, with an IgnoredArgumentWarning
    saying what is written instead; a value no product takes is refused."""
    if round_mode is not None and round_mode not in ROUND_MODES:
        raise _reject("round_mode", repr(round_mode), f"not a round mode; one of {', '.join(map(repr, ROUND_MODES))}")
    if dst_type not in (None, "int8") and dst_type not in ASCEND_950_DST_TYPES:
        raise _reject("dst_type", dst_type, "not a dtype the op writes: int8 on Atlas A2/A3 (int8, float8_e4m3fn, float8_e5m2, "
                      "hifloat8 on Ascend 950)")
    ignored = [f"dst_type={dst_type}"] if dst_type not in (None, "int8") else []
    ignored += [f"round_mode={round_mode!r}"] if round_mode not in (None, "rint") else []
    if ignored:
        warnings.warn(f"{OP_NAME}: {' and '.join(ignored)} select the Ascend 950 kernel's outputs (aclnnInplaceQuantScatterV2); "
                      "on Atlas A2/A3 the op ignores them and writes int8 rounded half to even, as npusim does",
                      IgnoredArgumentWarning, stacklevel=6)


_DEFAULTS_REFUSED = (f"; {DEFAULT_AXIS} / {DEFAULT_QUANT_AXIS} are the defaults of the documented signature, which the op refuses: pass "
                     "axis=-2, quant_axis=-1 as the op page's examples do")


def _merged_view(shape: tuple[int, ...], axis: int) -> tuple[int, int, int, int]:
    """``shape`` merged to ``[dim0, prod(dims 1..axis-1), dim axis, prod(dims after axis)]``."""
    return (shape[0], math.prod(shape[1:axis]), shape[axis], math.prod(shape[axis + 1 :]))


def check_quant_scatter(
    input: Any,
    indices: Any,
    updates: Any,
    quant_scales: Any,
    quant_zero_points: Any | None = None,
    axis: int = DEFAULT_AXIS,
    quant_axis: int = DEFAULT_QUANT_AXIS,
    reduce: str = "update",
    *,
    product: str,
) -> QuantScatterProblem:
    """Check a call as the real op does and return it as a :class:`QuantScatterProblem`.

    Tensors are any objects with ``.shape``, ``.dtype`` and ``.ndim``. ``product`` names a registered
    product (``"ascend910b"`` ...); the dtypes it allows are those of its series.
    """
    if product not in PRODUCTS:
        raise UsageError(f"{OP_NAME}: {PRODUCTS.unknown(product)}")
    series = PRODUCTS.get(product).series
    if series not in SERIES_DTYPE_ROWS:
        raise UsageError(f"{OP_NAME}: the op does not exist on {PRODUCTS.get(product).label}: its page lists "
                         f"{', '.join(SERIES_DTYPE_ROWS)}")
    if reduce != "update":
        raise _reject("reduce", repr(reduce), "only 'update' is supported")

    shapes = {
        name: tuple(int(d) for d in t.shape)
        for name, t in (("input", input), ("indices", indices), ("updates", updates), ("quant_scales", quant_scales))
    }
    zp_dtype = None if quant_zero_points is None else np.dtype(quant_zero_points.dtype)
    dtypes = dict(
        input_dtype=np.dtype(input.dtype),
        indices_dtype=np.dtype(indices.dtype),
        updates_dtype=np.dtype(updates.dtype),
        scales_dtype=np.dtype(quant_scales.dtype),
        zero_points_dtype=zp_dtype,
    )
    _check_dtypes(PRODUCTS.get(product), *dtypes.values())

    in_shape, up_shape, idx_shape = shapes["input"], shapes["updates"], shapes["indices"]
    ndim = len(in_shape)
    if len(up_shape) != ndim:
        raise _reject("updates.shape", up_shape, f"updates must have the rank of input ({ndim}, input.shape = {in_shape})")

    norm_axis = axis + ndim if axis < 0 else axis
    axis_ok = 1 <= norm_axis <= ndim - 2

    def problem(empty: bool) -> QuantScatterProblem:
        zero = (0, 0, 0, 0)
        return QuantScatterProblem(
            product=product,
            input_shape=in_shape,
            indices_shape=idx_shape,
            updates_shape=up_shape,
            axis=norm_axis,
            input_view=_merged_view(in_shape, norm_axis) if axis_ok else zero,
            updates_view=_merged_view(up_shape, norm_axis) if axis_ok else zero,
            last_dim=up_shape[-1] if ndim else 0,
            index_rank=len(idx_shape),
            empty=empty,
            **dtypes,
        )

    if any(math.prod(s) == 0 for s in shapes.values()):
        return problem(empty=True)

    if not MIN_RANK <= ndim <= MAX_RANK:
        raise _reject("input.shape", in_shape, f"input must have rank {MIN_RANK}..{MAX_RANK}, not {ndim}")
    if not axis_ok:
        raise _reject(
            "axis", axis,
            f"axis must be in [1, {ndim - 2}] or [{1 - ndim}, -2] for rank-{ndim} input "
            "(never the first or the last dimension)" + _DEFAULTS_REFUSED * (axis == DEFAULT_AXIS),
        )
    if (quant_axis + ndim if quant_axis < 0 else quant_axis) != ndim - 1:
        raise _reject("quant_axis", quant_axis, f"quant_axis must be the last dimension: -1 or {ndim - 1}"
                      + _DEFAULTS_REFUSED * (quant_axis == DEFAULT_QUANT_AXIS))
    for name, tensor in (("quant_scales", quant_scales), ("quant_zero_points", quant_zero_points)):
        if tensor is not None and not SCALES_MIN_RANK <= len(tensor.shape) <= SCALES_MAX_RANK:
            raise _reject(f"{name}.shape", tuple(tensor.shape), f"{name} must have rank {SCALES_MIN_RANK}..{SCALES_MAX_RANK}, "
                          f"not {len(tensor.shape)}")

    last_dim = up_shape[-1]
    for name, tensor in (("quant_scales", quant_scales), ("quant_zero_points", quant_zero_points)):
        if tensor is not None and math.prod(tensor.shape) != last_dim:
            raise _reject(
                f"{name}.shape", tuple(tensor.shape),
                f"{name} must have as many elements as the last dim of updates ({last_dim}), "
                f"not {math.prod(tensor.shape)}",
            )

    if len(idx_shape) not in (1, 2):
        raise _reject("indices.shape", idx_shape, "indices must be 1-D [B] or 2-D [B, 2]")
    if len(idx_shape) == 2 and idx_shape[1] != 2:
        raise _reject("indices.shape", idx_shape, "2-D indices must have shape [B, 2] (batch, offset)")
    if up_shape[0] != idx_shape[0]:
        raise _reject(
            "updates.shape", up_shape,
            f"updates.shape[0] ({up_shape[0]}) must equal indices.shape[0] ({idx_shape[0]})",
        )
    if up_shape[0] > in_shape[0]:
        raise _reject(
            "updates.shape", up_shape,
            f"updates.shape[0] ({up_shape[0]}) must not exceed input.shape[0] ({in_shape[0]})",
        )
    if up_shape[norm_axis] > in_shape[norm_axis]:
        raise _reject(
            "updates.shape", up_shape,
            f"updates.shape[{norm_axis}] ({up_shape[norm_axis]}) along axis must not exceed "
            f"input.shape[{norm_axis}] ({in_shape[norm_axis]})",
        )
    for dim in range(1, ndim):
        if dim != norm_axis and up_shape[dim] != in_shape[dim]:
            raise _reject(
                "updates.shape", up_shape,
                f"updates.shape[{dim}] ({up_shape[dim]}) must equal input.shape[{dim}] ({in_shape[dim]}) "
                f"(input.shape = {in_shape}; only dim 0 and the axis may differ)",
            )
    row_bytes = in_shape[-1] * INT8.itemsize
    if row_bytes % OUTPUT_BLOCK_BYTES:
        raise _reject(
            "input.shape", in_shape,
            f"the last dim ({in_shape[-1]} int8 = {row_bytes} bytes) must be a multiple of "
            f"{OUTPUT_BLOCK_BYTES} bytes: the kernel writes whole {OUTPUT_BLOCK_BYTES}-byte blocks",
        )
    return problem(empty=False)


