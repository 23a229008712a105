"""Argument checks of ``torch_npu.npu_quant_scatter_`` and the host-side view of its indices.

What the real op accepts is the union of the aclnn wrapper's checks (``aclnnInplaceQuantScatter``:
dtypes, equal ranks, the empty-tensor exit) and the kernel tiling's checks (ranks 3..8, axis,
quant_axis, shapes, scales count, 32-byte last dim); see ``docs/quant_scatter.md`` for the sources.
Every refusal is an :class:`~npusim.errors.OpArgumentError` naming the op, the argument, its value
and the rule.

Indices are data, not shapes: the device never checks them. :func:`check_indices` reads them on the
host to map each batch to the destination it writes (a :class:`Segment`), and :func:`find_overlaps`
names the batches whose destinations collide (a multi-core race on hardware).
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass
from typing import Any

import ml_dtypes
import numpy as np

from npusim.config.products import PRODUCTS, Product
from npusim.errors import OpArgumentError, UsageError

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


class UncheckedIndexWarning(RuntimeWarning):
    """An out-of-range write was dropped while emulating the unchecked hardware."""


class OverlappingWritesWarning(RuntimeWarning):
    """Batches write overlapping destinations: on hardware the result differs from run to run."""


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


@dataclass(frozen=True)
class Segment:
    """Where one batch of updates lands in input.

    Batch ``batch`` writes, for every merged head ``h`` in ``heads``, ``rows`` rows of
    ``row_elements`` elements starting at row ``offset`` along the scatter axis of input batch
    ``dest_batch``. In the flat input this is the block of ``rows * row_elements`` elements at
    element ``block_start_rows()[i] * row_elements``. An in-range segment has ``heads == range(H)``;
    only the unchecked emulation keeps fewer heads (or offsets outside ``[0, S - rows]``).
    """

    batch: int
    dest_batch: int
    offset: int
    rows: int
    heads: range
    num_heads: int
    axis_len: int
    row_elements: int

    def block_start_rows(self) -> np.ndarray:
        """First flat row (unit: ``row_elements`` elements) of each written block, one per head."""
        head = np.arange(self.heads.start, self.heads.stop, dtype=np.int64)
        return (self.dest_batch * self.num_heads + head) * self.axis_len + self.offset


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


def _merged_view(shape: tuple[int, ...], axis: int) -> tuple[int, int, int, int]:
    """``shape`` merged to ``[dim0, prod(dims 1..axis-1), dim axis, prod(dims after axis)]``."""
    return (shape[0], math.prod(shape[1:axis]), shape[axis], math.prod(shape[axis + 1 :]))


def check_quant_scatter(
    input: Any,
    indices: Any,
    updates: Any,
    quant_scales: Any,
    quant_zero_points: Any | None = None,
    axis: int = -2,
    quant_axis: int = -1,
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
            "(never the first or the last dimension)",
        )
    if (quant_axis + ndim if quant_axis < 0 else quant_axis) != ndim - 1:
        raise _reject("quant_axis", quant_axis, f"quant_axis must be the last dimension: -1 or {ndim - 1}")

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


def check_indices(
    problem: QuantScatterProblem, indices: np.ndarray, *, allow_out_of_range: bool = False
) -> list[Segment]:
    """Map each batch to the :class:`Segment` it writes, refusing indices the hardware would misuse.

    A batch is in range when its destination batch is in ``[0, d0)`` and its rows
    ``[offset, offset + U)`` lie in ``[0, S)``. The device never checks this: an out-of-range index
    silently writes elsewhere. By default that is an error naming the batch and the index. With
    ``allow_out_of_range=True`` the unchecked address arithmetic is emulated: each (batch, head)
    block goes to the flat element ``((dest * H + h) * S + offset) * T`` as on hardware, kept when
    it lies wholly inside input (it may then overwrite other heads or batches) and dropped, with an
    :class:`UncheckedIndexWarning`, when any of it would fall outside input (hardware would corrupt
    unrelated device memory, which the simulator does not model). Segments come in batch order;
    a batch with no block kept has no segment.
    """
    if problem.empty:
        return []
    indices = np.asarray(indices)
    if indices.shape != problem.indices_shape or not np.issubdtype(indices.dtype, np.integer):
        raise UsageError(
            f"{OP_NAME}: indices data of shape {indices.shape} and dtype {indices.dtype} does not match "
            f"the checked indices (shape {problem.indices_shape}, dtype {problem.indices_dtype})"
        )
    d0, heads, axis_len, row_elements = problem.input_view
    rows = problem.rows
    values = indices.astype(np.int64)
    if problem.index_rank == 1:
        dest, offset = np.arange(problem.batches, dtype=np.int64), values
    else:
        dest, offset = values[:, 0], values[:, 1]
    in_range = (dest >= 0) & (dest < d0) & (offset >= 0) & (offset + rows <= axis_len)

    bad = np.flatnonzero(~in_range)
    if bad.size and not allow_out_of_range:
        b = int(bad[0])
        rule = (
            f"batch {b} would write rows [{offset[b]}, {offset[b] + rows}) of input batch {dest[b]}, "
            f"outside input (batch in [0, {d0}), offset in [0, {axis_len - rows}] along axis {problem.axis}); "
        )
        others = f" ({bad.size - 1} more batches are out of range)" if bad.size > 1 else ""
        raise _reject(
            f"indices[{b}]", values[b].tolist(),
            rule + "the hardware does not check indices and would silently corrupt memory" + others
            + "; pass allow_out_of_range=True to emulate the unchecked writes that stay inside input",
        )

    total_rows = d0 * heads * axis_len
    segments: list[Segment] = []
    dropped: list[int] = []
    for b in range(problem.batches):
        if in_range[b]:
            kept = range(heads)
        else:
            first_row = int(dest[b]) * heads * axis_len + int(offset[b])
            lo = max(0, -(first_row // axis_len))  # smallest h with first_row + h*S >= 0
            hi = min(heads, (total_rows - rows - first_row) // axis_len + 1)
            kept = range(lo, max(lo, hi))
            if len(kept) < heads:
                dropped.append(b)
            if not kept:
                continue
        segments.append(Segment(b, int(dest[b]), int(offset[b]), rows, kept, heads, axis_len, row_elements))
    if dropped:
        shown = ", ".join(map(str, dropped[:8])) + (" ..." if len(dropped) > 8 else "")
        warnings.warn(
            f"{OP_NAME}: out-of-range indices of {len(dropped)} batches ({shown}) would write outside "
            "input; those blocks are dropped (hardware would corrupt unrelated device memory)",
            UncheckedIndexWarning,
            stacklevel=2,
        )
    return segments


def find_overlaps(segments: list[Segment]) -> list[tuple[int, int]]:
    """Pairs ``(a, b)``, ``a < b``, of batches whose destination blocks overlap, sorted.

    On hardware such batches race (different cores write the same bytes), so the result differs
    from run to run. All blocks have the same length, so after sorting the block starts each block
    overlaps exactly the blocks that start less than one block later: O(n log n) in the blocks,
    plus the pairs found.
    """
    if not segments:
        return []
    rows = segments[0].rows
    starts = np.concatenate([s.block_start_rows() for s in segments])
    owner = np.repeat(np.array([s.batch for s in segments], dtype=np.int64), [len(s.heads) for s in segments])
    order = np.argsort(starts, kind="stable")
    starts, owner = starts[order], owner[order]
    position = np.arange(starts.size)
    later = np.searchsorted(starts, starts + rows, side="left") - position - 1
    total = int(later.sum())
    if total == 0:
        return []
    first = np.repeat(position, later)
    second = first + 1 + np.arange(total) - np.repeat(np.cumsum(later) - later, later)
    a, b = owner[first], owner[second]
    distinct = a != b
    pairs = np.unique(np.stack([np.minimum(a, b)[distinct], np.maximum(a, b)[distinct]], axis=1), axis=0)
    return [(int(x), int(y)) for x, y in pairs]


def describe_overlaps(segments: list[Segment], pairs: list[tuple[int, int]]) -> str:
    """What :func:`find_overlaps` found, for a person: the first colliding pair in detail, then all pairs."""
    by_batch = {segment.batch: segment for segment in segments}
    a, b = (by_batch[batch] for batch in pairs[0])

    def rows(segment: Segment) -> str:
        return f"rows [{segment.offset}, {segment.offset + segment.rows}) of input batch {segment.dest_batch}"

    shown = ", ".join(f"({x}, {y})" for x, y in pairs[:8]) + (" ..." if len(pairs) > 8 else "")
    return (
        f"{OP_NAME}: indices make batches {a.batch} and {b.batch} write overlapping destinations "
        f"(batch {a.batch}: {rows(a)}; batch {b.batch}: {rows(b)}); {len(pairs)} colliding pair(s): {shown}. "
        "On hardware different cores write them concurrently, so the result differs from run to run; "
        "give every batch its own rows"
    )
