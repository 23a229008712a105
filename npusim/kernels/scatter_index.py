"""What scatter ops (``npu_quant_scatter_``, ``scatter_update``) share: the host's reading of
their indices.

Indices are data, not shapes: the device never checks them. :func:`check_indices` reads them on
the host to map each batch to the destination it writes (a :class:`Segment`), :func:`find_overlaps`
names the batches whose destinations collide (a multi-core race on hardware), and
:func:`value_check` is what both ops' ``check_values`` do with that. A problem is any object with
the merged views of a scatter (``input_view`` ``[d0, H, S, T]``, ``rows``, ``batches``, ``heads``,
``index_rank``, ``indices_shape``, ``indices_dtype``, ``axis``, ``empty``) and ``op_name``.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from npusim.errors import OpArgumentError, RaceError, UsageError
from npusim.kernels.op import OpOptions, ValueCheck


class UncheckedIndexWarning(RuntimeWarning):
    """An out-of-range write was dropped while emulating the unchecked hardware."""


class OverlappingWritesWarning(RuntimeWarning):
    """Batches write overlapping destinations: on hardware the result differs from run to run."""


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


class ScatterProblem(Protocol):
    """What the index checks read of a scatter op's problem (quant_scatter's, scatter_update's):
    input merged to ``[d0, H, S, T]`` (``input_view``), ``batches`` of ``rows`` rows each along
    ``axis``, ``bs = batches * H``, indices of ``index_rank`` 1 or 2."""

    @property
    def op_name(self) -> str: ...
    @property
    def empty(self) -> bool: ...
    @property
    def axis(self) -> int: ...
    @property
    def batches(self) -> int: ...
    @property
    def bs(self) -> int: ...
    @property
    def heads(self) -> int: ...
    @property
    def rows(self) -> int: ...
    @property
    def index_rank(self) -> int: ...
    @property
    def indices_dtype(self) -> np.dtype: ...
    @property
    def indices_shape(self) -> tuple[int, ...]: ...
    @property
    def input_view(self) -> tuple[int, int, int, int]: ...


def check_indices(
    problem: ScatterProblem, indices: np.ndarray, *, allow_out_of_range: bool = False
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
            f"{problem.op_name}: indices data of shape {indices.shape} and dtype {indices.dtype} does not match "
            f"the checked indices (shape {problem.indices_shape}, dtype {problem.indices_dtype})"
        )
    d0, heads, axis_len, row_elements = problem.input_view
    rows = problem.rows
    values = indices.astype(np.int64)[: problem.batches]  # the indices the batches use (any further ones are not read)
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
        raise OpArgumentError(
            f"{problem.op_name}: indices[{b}] = {values[b].tolist()}: " + rule
            + "the hardware does not check indices and would silently corrupt memory" + others
            + "; to emulate the unchecked writes that stay inside input, issue the op inside "
            + "`with torch_npu.options(out_of_range='unchecked'):`"
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
            f"{problem.op_name}: out-of-range indices of {len(dropped)} batches ({shown}) would write outside "
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


def describe_overlaps(segments: list[Segment], pairs: list[tuple[int, int]], op_name: str) -> str:
    """What :func:`find_overlaps` found, for a person: the first colliding pair in detail, then all pairs."""
    by_batch = {segment.batch: segment for segment in segments}
    a, b = (by_batch[batch] for batch in pairs[0])

    def rows(segment: Segment) -> str:
        return f"rows [{segment.offset}, {segment.offset + segment.rows}) of input batch {segment.dest_batch}"

    shown = ", ".join(f"({x}, {y})" for x, y in pairs[:8]) + (" ..." if len(pairs) > 8 else "")
    return (
        f"{op_name}: indices make batches {a.batch} and {b.batch} write overlapping destinations "
        f"(batch {a.batch}: {rows(a)}; batch {b.batch}: {rows(b)}); {len(pairs)} colliding pair(s): {shown}. "
        "On hardware different cores write them concurrently, so the result differs from run to run; "
        "give every batch its own rows"
    )


def value_check(problem: Any, indices: np.ndarray, options: OpOptions, *, stacklevel: int) -> ValueCheck:
    """Map each batch to its destination (refusing out-of-range indices unless unchecked, which
    drops the bs rows that would leave input) and report overlapping destinations: what a scatter
    op's ``check_values`` gives the launch path."""
    segments = check_indices(problem, indices, allow_out_of_range=options.out_of_range == "unchecked")
    kept = {segment.batch * problem.heads + h for segment in segments for h in segment.heads}
    skipped = frozenset(range(problem.bs)) - kept
    overlap = None
    pairs = find_overlaps(segments)
    if pairs:
        overlap = describe_overlaps(segments, pairs, problem.op_name)
        if options.overlap == "error":
            raise RaceError(overlap + " (torch_npu.options(overlap='error') is set)")
        warnings.warn(overlap, OverlappingWritesWarning, stacklevel=stacklevel)
    return ValueCheck(read={"indices": indices}, lowering={"skipped_rows": skipped}, warning=overlap)
