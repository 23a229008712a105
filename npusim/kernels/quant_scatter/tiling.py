"""Tiling of the ``QuantUpdateScatter`` kernel (TIK ``impl/dynamic/quant_update_scatter.py``) as data.

:func:`plan_quant_scatter` splits the work over vector cores, picks the kernel's tiling mode
(100..105) from what fits the unified buffer (UB), and lists per core the iterations the kernel runs:
what MTE2 loads, the vector instructions, the scalar index reads and what MTE3 writes. The plan is
plain frozen data (no SimPy); the simulator lowers it to ISA instructions. Units: sizes in bytes,
counts in elements, unless a name says otherwise. ``docs/quant_scatter.md`` derives every rule here.

The kernel has no double buffering: every iteration reuses the same UB buffers, so its MTE2 loads,
vector chain, scalar index reads and MTE3 writes follow one another along their data dependencies
and the next iteration's loads wait for this one's writes. Each load and write is one contiguous
transfer of whole blocks of the MTE granule. The hardware the tiling depends on (UB size and
alignment, the vector unit's repeat width and longest instruction, the granule) is the
:class:`~npusim.isa.target.VectorTarget` of the die, as the real host tiling asks the platform.
What a product's build of the kernel does differently (its output chain, its updates buffer) is a
:class:`KernelVariant`: :data:`A2_A3` here, the 310P's in :mod:`.tiling_inference`.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from npusim.errors import ResourceError, UsageError
from npusim.isa.target import VectorTarget
from npusim.kernels.quant_scatter.checks import FLOAT32, INT8, INT32, OP_NAME, QuantScatterProblem

TILING_ARG_COUNT = 36
"""The kernel's tiling arguments (int64): it copies them from GM into UB, then reads each into a scalar."""

TILING_ARGS_UB_BYTES = TILING_ARG_COUNT * 8

HOST_UB_MARGIN_BYTES = 4096
"""UB the host tiling keeps free. Assumed: the A2 host tiling of this op is not public; the sibling
op DynamicQuantUpdateScatter's A2 tiling keeps 4 KiB (``UB_SIZE_REV``)."""


class TilingMode(enum.IntEnum):
    """The kernel's tiling modes (its ``tiling_mode`` argument; its code says "large ele" for axis)."""

    WHOLE_CORE = 100
    """All of a core's bs rows fit the UB: one load, one vector chain, one write per bs row."""
    LARGE_BATCH = 101
    """One bs row per iteration; scales (and zero points) are reloaded and converted every iteration."""
    LARGE_AXIS_LITTLE_QUANT = 102
    """``bs < U``: the scatter axis is split over cores; chunks of whole rows, scales loaded once."""
    LARGE_AXIS_LARGE_QUANT = 103
    """``bs < U`` and a row does not fit: each last-dim row is chunked, scales chunks reloaded."""
    LARGE_BATCH_LITTLE_QUANT = 104
    """A bs row does not fit: it is processed in chunks of whole rows, scales loaded once per core."""
    LARGE_BATCH_LARGE_QUANT = 105
    """A row does not fit: each last-dim row of each bs row is chunked, scales chunks reloaded."""


_AXIS_SPLIT_MODES = (TilingMode.LARGE_AXIS_LITTLE_QUANT, TilingMode.LARGE_AXIS_LARGE_QUANT)
_LARGE_QUANT_MODES = (TilingMode.LARGE_AXIS_LARGE_QUANT, TilingMode.LARGE_BATCH_LARGE_QUANT)

_UPDATES_PAD_ELEMENTS = {100: 64, 101: 64, 102: 0, 103: 128, 104: 128, 105: 128}
"""Elements the kernel adds to each per-iteration updates-sized buffer, per mode."""

_QUANT_PAD_ELEMENTS = {100: 64, 101: 64, 102: 0, 103: 64, 104: 64, 105: 64}
"""Elements the kernel adds to each scales / zero-points buffer, per mode."""


def _chunk_limits(t: VectorTarget) -> tuple[int, int, int]:
    """``(most elements of one inner-loop chunk, longest last dim one per-row divide handles, the
    alignment of a row chunk)`` on ``t``. The chunk cap keeps one chunk's fp32 divide within one
    instruction, as the sibling op DynamicQuantUpdateScatter's A2 tiling does (``MAX_RPT_FLOAT_NUM``);
    the per-row divide issues its full repeats in one instruction plus a masked tail; row chunks of
    modes 103/105 are whole fp16 repeats."""
    fp32 = t.lanes(FLOAT32)
    return t.max_repeats * fp32, t.max_repeats * fp32 + fp32 - 1, t.lanes(np.float16)


@dataclass(frozen=True, slots=True)
class VectorIssue:
    """One vector instruction: ``repeats`` repeats of ``lanes`` active elements (the mask).

    ``repeats == 0`` happens: the per-row divide always issues its full-repeat instruction, with 0
    repeats when the row is shorter than 64 elements (assumed to cost an issue and do nothing).
    """

    lanes: int
    repeats: int


@dataclass(frozen=True, slots=True)
class VectorStep:
    """``times`` back-to-back occurrences of one vector operation on ``elements`` elements each.

    ``kind`` is ``"cast"``, ``"div"`` or ``"add"``; ``operands`` names the loaded tensors it reads
    (``"updates"``, ``"scales"``, ``"zero_points"``); ``issues`` are the instructions of one
    occurrence. ``rounding`` is ``"rint"`` (half to even) for the fp32 -> int16 cast; every cast to
    an integer saturates.

    A divide or add applies the last-dim vector of scales (zero points) to rows of ``last_dim``
    elements. Row-wise (``columns`` False): occurrence ``r`` covers row ``r`` (``elements`` long).
    Column-wise (``columns`` True): occurrence ``j`` covers the 64 columns ``[64 j, 64 j + 64)`` of
    every row, one 64-lane repeat per row (``elements`` = rows x 64), the scales block reread with a
    repeat stride of 0.
    """

    kind: str
    dtype_in: str
    dtype_out: str
    elements: int
    operands: tuple[str, ...]
    issues: tuple[VectorIssue, ...]
    times: int = 1
    rounding: str = ""
    columns: bool = False

    @property
    def instructions(self) -> int:
        return self.times * len(self.issues)

    @property
    def repeats(self) -> int:
        return self.times * sum(issue.repeats for issue in self.issues)


@dataclass(frozen=True, slots=True)
class BlockWrite:
    """One MTE3 write of ``nbytes`` int8 to the destination of bs row ``bs_row`` (``b * H + h``).

    It lands ``column`` elements into the ``U * T`` block that row's index selects, and takes the
    quantised updates from flat element ``bs_row * U * T + column``. ``index_reads`` scalar reads of
    the indices in UB (1 per index: 1-D one, 2-D two) come first and resolve the destination.
    """

    bs_row: int
    column: int
    nbytes: int
    index_reads: int


@dataclass(frozen=True, slots=True)
class Iteration:
    """One pass of the kernel's loop on one core.

    MTE2 loads ``indices_bytes`` (all indices; first iteration of a core only), ``updates_bytes``
    (elements ``[updates_offset, updates_offset + updates_elements)`` of the flat updates), and
    ``scales_bytes`` / ``zero_point_bytes`` (from element ``scales_offset`` of the flat vectors;
    0 when the core reuses what it loaded before). ``vector`` runs in order, each step after the
    loads of its ``operands``; then ``writes`` in order. Byte counts are payload: a transfer moves
    whole granules (``VectorTarget.blocks``).
    """

    updates_offset: int
    updates_elements: int
    indices_bytes: int
    updates_bytes: int
    scales_offset: int
    scales_bytes: int
    zero_point_bytes: int
    vector: tuple[VectorStep, ...]
    writes: tuple[BlockWrite, ...]

    @property
    def index_reads(self) -> int:
        return sum(write.index_reads for write in self.writes)

    @property
    def written_bytes(self) -> int:
        return sum(write.nbytes for write in self.writes)


@dataclass(frozen=True)
class CorePlan:
    """What one vector core does: ``units`` bs rows (or axis rows in modes 102/103), iterations in order."""

    core: int
    units: int
    iterations: tuple[Iteration, ...]


@dataclass(frozen=True)
class QuantScatterPlan:
    """The kernel's tiling for one problem on cores of ``ub_budget_bytes`` usable UB each.

    ``split`` is what cores share: ``"bs"`` rows (``B * H``), or ``"axis"`` rows (``U``, modes
    102/103, every core then visits every bs row). Core ``i < used_cores - 1`` takes
    ``each_core_units``, the last one ``last_core_units``. ``chunk_elements`` is the most update
    elements one iteration holds; ``ub_bytes`` what the kernel allocates per core, buffer by buffer
    in ``ub_layout``. ``double_buffer`` is True when the iterations alternate between two copies of
    the per-iteration buffers (the what-if; see :func:`plan_quant_scatter`). ``mode`` is None and
    ``cores`` empty for an empty problem (no kernel launch).
    """

    mode: TilingMode | None
    split: str
    vector_cores: int
    used_cores: int
    each_core_units: int
    last_core_units: int
    chunk_elements: int
    ub_bytes: int
    ub_budget_bytes: int
    double_buffer: bool
    cores: tuple[CorePlan, ...] = field(repr=False)
    ub_layout: UbLayout | None = field(default=None, repr=False)

    def all_iterations(self):
        """Every iteration of every core, core by core."""
        for core in self.cores:
            yield from core.iterations

    def total(self, attribute: str) -> int:
        """Sum of an :class:`Iteration` attribute (e.g. ``"updates_bytes"``) over the whole plan."""
        return sum(getattr(it, attribute) for it in self.all_iterations())


# ----------------------------------------------------------------------------------------- vector


def _chunked_issues(t: VectorTarget, elements: int, lanes: int) -> tuple[VectorIssue, ...]:
    """Instructions of a long operation: chunks of the longest instruction, the remaining full
    repeats, a masked tail."""
    full, tail = divmod(elements, lanes)
    issues = [VectorIssue(lanes, t.max_repeats)] * (full // t.max_repeats)
    if full % t.max_repeats:
        issues.append(VectorIssue(lanes, full % t.max_repeats))
    if tail:
        issues.append(VectorIssue(tail, 1))
    return tuple(issues)


def _row_issues(t: VectorTarget, elements: int) -> tuple[VectorIssue, ...]:
    """Instructions of the kernel's per-row fp32 divide / add: all full repeats in one instruction
    (issued even with 0 repeats), then a masked tail instruction."""
    lanes = t.lanes(FLOAT32)
    full, tail = divmod(elements, lanes)
    return (VectorIssue(lanes, full),) + ((VectorIssue(tail, 1),) if tail else ())


def _cast(t: VectorTarget, elements: int, dtype_in: str, dtype_out: str, operand: str, rounding: str = "") -> VectorStep:
    lanes = t.lanes(dtype_in, dtype_out)
    return VectorStep("cast", dtype_in, dtype_out, elements, (operand,), _chunked_issues(t, elements, lanes), 1, rounding)


def _per_row(t: VectorTarget, kind: str, operand: str, row_elements: int, rows: int) -> VectorStep:
    """``kind`` applied row by row: one instruction group per last-dim row."""
    return VectorStep(kind, "float32", "float32", row_elements, ("updates", operand), _row_issues(t, row_elements), rows)


def _per_column(t: VectorTarget, kind: str, operand: str, row_elements: int, rows: int) -> VectorStep:
    """``kind`` applied one fp32 repeat of columns (64) at a time over all rows (the scales block
    repeated with stride 0): one instruction group per block of columns, ``rows`` repeats chunked
    at the longest instruction."""
    lanes = t.lanes(FLOAT32)
    return VectorStep(
        kind, "float32", "float32", rows * lanes, ("updates", operand),
        _chunked_issues(t, rows * lanes, lanes), row_elements // lanes, columns=True,
    )


@dataclass(frozen=True)
class KernelVariant:
    """What a product's build of the kernel does differently (the TIK file branches on the chip):
    ``to_int8``, the conversions from the fp32 quotient to int8 as (dtype, rounding) steps, each
    integer step saturating; ``wide_updates``, whether the updates buffer is allocated to hold an
    int32 intermediate (4 bytes per element) rather than the updates alone."""

    to_int8: tuple[tuple[str, str], ...]
    wide_updates: bool = False


A2_A3 = KernelVariant((("int16", "rint"), ("float16", ""), ("int8", "")))
"""fp32 -> int16 (rint, saturating) -> fp16 -> int8 (saturating), the updates buffer as loaded."""


def _to_int8(t: VectorTarget, elements: int, variant: KernelVariant) -> tuple[VectorStep, ...]:
    """The output chain of ``variant`` on ``elements`` elements."""
    steps, dtype = [], "float32"
    for dtype_out, rounding in variant.to_int8:
        steps.append(_cast(t, elements, dtype, dtype_out, "updates", rounding=rounding))
        dtype = dtype_out
    return tuple(steps)


class _VectorChains:
    """The vector chains of one problem, built once per distinct size and shared by iterations."""

    def __init__(self, problem: QuantScatterProblem, target: VectorTarget, variant: KernelVariant):
        self.t = target
        self.variant = variant
        self.updates = problem.updates_dtype.name
        self.scales = problem.scales_dtype.name
        self.zero_points = None if problem.zero_points_dtype is None else problem.zero_points_dtype.name
        self.last_dim = problem.last_dim
        self.row_elements = problem.row_elements
        self._cache: dict[tuple, tuple[VectorStep, ...]] = {}

    def _cached(self, key: tuple, build: Callable[[], list[VectorStep]]) -> tuple[VectorStep, ...]:
        if key not in self._cache:
            self._cache[key] = tuple(build())
        return self._cache[key]

    def _to_fp32(self, elements: int, operand: str) -> list[VectorStep]:
        dtype = {"updates": self.updates, "scales": self.scales, "zero_points": self.zero_points}[operand]
        return [] if dtype == "float32" else [_cast(self.t, elements, dtype, "float32", operand)]

    def whole_rows(self, elements: int) -> tuple[VectorStep, ...]:
        """Modes 100/101: cast updates, load+cast scales, divide per row, zero points likewise, to int8."""

        def build():
            rows = elements // self.last_dim
            steps = self._to_fp32(elements, "updates") + self._to_fp32(self.last_dim, "scales")
            steps.append(_per_row(self.t, "div", "scales", self.last_dim, rows))
            if self.zero_points:
                steps += self._to_fp32(self.last_dim, "zero_points")
                steps.append(_per_row(self.t, "add", "zero_points", self.last_dim, rows))
            return steps + list(_to_int8(self.t, elements, self.variant))

        return self._cached(("whole", elements), build)

    def quant_vectors_once(self) -> tuple[VectorStep, ...]:
        """Modes 102/104, once per core: scales and zero points converted to fp32."""

        def build():
            steps = self._to_fp32(self.last_dim, "scales")
            if self.zero_points:
                steps += self._to_fp32(self.last_dim, "zero_points")
            return steps

        return self._cached(("once",), build)

    def little_quant_chunk(self, axis_rows: int) -> tuple[VectorStep, ...]:
        """Modes 102/104: a chunk of ``axis_rows`` rows of T. The kernel divides column-wise when the
        last dim is a multiple of one fp32 repeat (64) and has fewer such blocks than the chunk has
        rows, else per row."""

        def build():
            elements = axis_rows * self.row_elements
            rows = elements // self.last_dim
            lanes = self.t.lanes(FLOAT32)
            column_wise = self.last_dim % lanes == 0 and self.last_dim // lanes < axis_rows
            apply = _per_column if column_wise else _per_row
            steps = self._to_fp32(elements, "updates") + [apply(self.t, "div", "scales", self.last_dim, rows)]
            if self.zero_points:
                steps.append(apply(self.t, "add", "zero_points", self.last_dim, rows))
            return steps + list(_to_int8(self.t, elements, self.variant))

        return self._cached(("little", axis_rows), build)

    def large_quant_chunk(self, elements: int) -> tuple[VectorStep, ...]:
        """Modes 103/105: a chunk of one last-dim row with its own chunk of scales (and zero points)."""

        def build():
            steps = self._to_fp32(elements, "updates") + self._to_fp32(elements, "scales")
            if self.zero_points:
                steps += self._to_fp32(elements, "zero_points")
            steps.append(_per_row(self.t, "div", "scales", elements, 1))
            if self.zero_points:
                steps.append(_per_row(self.t, "add", "zero_points", elements, 1))
            return steps + list(_to_int8(self.t, elements, self.variant))

        return self._cached(("large", elements), build)


# --------------------------------------------------------------------------------------- UB budget


@dataclass(frozen=True)
class UbLayout:
    """The UB buffers one core of the kernel allocates, each aligned to ``alignment`` bytes (UB's).

    Once: all indices (``index_elements``, the count rounded up to 8) and the tiling arguments.
    Per iteration (:meth:`buffers`): the updates chunk in its dtype (reused for the int16 step), an
    fp32 copy (reused for the fp16 step) and the int8 result, each of ``data_elements``; the scales
    (+ an fp32 copy unless fp32) and the zero points (+ an fp32 copy), each of ``quant_elements``.
    The real kernel holds one set (``copies`` 1). Double buffered (``copies`` 2), the buffers that
    MTE2 fills or MTE3 drains are held twice (ping, pong); the others only the vector unit touches,
    one iteration after the other, and are held once. ``wide_updates``: the updates buffer also
    holds an int32 intermediate, so it takes 4 bytes per element (``KernelVariant.wide_updates``).
    """

    problem: QuantScatterProblem = field(repr=False)
    index_elements: int
    data_elements: int
    quant_elements: int
    copies: int
    alignment: int
    wide_updates: bool = False

    @classmethod
    def of(cls, problem: QuantScatterProblem, mode: TilingMode, chunk: int, copies: int, target: VectorTarget,
           variant: KernelVariant = A2_A3) -> UbLayout:
        """The layout of ``mode`` for ``chunk`` update elements per iteration (with the mode's padding)."""
        quant = (chunk if mode in _LARGE_QUANT_MODES else problem.last_dim) + _QUANT_PAD_ELEMENTS[mode]
        index_elements = -(-problem.index_count // 8) * 8
        return cls(problem, index_elements, chunk + _UPDATES_PAD_ELEMENTS[mode], quant, copies, target.ub_alignment,
                   variant.wide_updates)

    def _aligned(self, nbytes: int) -> int:
        return -(-nbytes // self.alignment) * self.alignment

    def buffers(self) -> list[tuple[str, int, np.dtype, bool]]:
        """``(name, elements, dtype, staged)`` of the per-iteration buffers; ``staged`` ones are
        filled by MTE2 or drained by MTE3 (held ``copies`` times), the others held once."""
        p, data, quant = self.problem, self.data_elements, self.quant_elements
        updates = data * max(1, INT32.itemsize // p.update_itemsize) if self.wide_updates else data
        buffers = [("updates", updates, p.updates_dtype, True), ("int8", data, INT8, True),
                   ("scales", quant, p.scales_dtype, True)]
        if p.has_zero_points:
            buffers.append(("zero_points", quant, p.zero_points_dtype, True))
        buffers.append(("fp32", data, FLOAT32, False))
        if p.scales_dtype != FLOAT32:
            buffers.append(("scales_fp32", quant, FLOAT32, False))
        if p.has_zero_points:
            buffers.append(("zero_points_fp32", quant, FLOAT32, False))
        return buffers

    @property
    def index_bytes(self) -> int:
        return self._aligned(self.index_elements * self.problem.index_itemsize)

    @property
    def fixed_bytes(self) -> int:
        """The indices and the tiling arguments, held once."""
        return self.index_bytes + self._aligned(TILING_ARGS_UB_BYTES)

    @property
    def total_bytes(self) -> int:
        return self.fixed_bytes + sum(self._aligned(n * dtype.itemsize) * (self.copies if staged else 1)
                                      for _, n, dtype, staged in self.buffers())


def _largest_chunk(fits: Callable[[int], bool], upper: int) -> int:
    """Largest chunk in ``[0, upper]`` for which ``fits`` holds (0 if none); ``fits`` is monotone."""
    lo, hi = 0, upper
    while lo < hi:
        mid = (lo + hi + 1) // 2
        lo, hi = (mid, hi) if fits(mid) else (lo, mid - 1)
    return lo


def _core_split(units: int, cores: int) -> tuple[int, int, int]:
    """``(each, used, last)``: ceil(units / cores) per core, on ceil(units / each) cores, the last the rest."""
    each = -(-units // cores)
    used = -(-units // each)
    return each, used, units - each * (used - 1)


# ------------------------------------------------------------------------------------------- plan


def plan_quant_scatter(
    problem: QuantScatterProblem, target: VectorTarget, *, vector_cores: int, double_buffer: bool = False,
    variant: KernelVariant = A2_A3,
) -> QuantScatterPlan:
    """The kernel's tiling of ``problem`` on ``vector_cores`` vector cores of ``target``, as the
    product's build ``variant`` of the kernel allocates and converts (A2/A3 unless given).

    Mode choice (derivation in ``docs/quant_scatter.md``): if one bs row (``U * T`` elements) fits
    the mode-100 buffers and its last dim fits one divide instruction, mode 100 when the whole
    per-core share fits, else 101. Otherwise the work is chunked: split over the scatter axis when
    ``bs < U`` (102/103), else over bs rows (104/105); "little quant" (102/104) when a chunk of at
    least one row of T fits with the whole scales vector, else "large quant" (103/105) chunks each
    last-dim row.

    ``double_buffer=True`` asks for the what-if with ping-pong buffers (the A2 kernel has none):
    when every core runs a single iteration there is nothing to overlap and the plan is the real
    one; when the real tiling's per-iteration buffers fit the UB twice it is kept as is; otherwise
    the tiling is chosen again with two copies of every per-iteration buffer budgeted (smaller
    chunks, possibly another mode).
    """
    if vector_cores < 1:
        raise UsageError(f"{OP_NAME}: vector_cores must be at least 1, not {vector_cores}")
    budget = target.ub_bytes - HOST_UB_MARGIN_BYTES
    if problem.empty:
        return QuantScatterPlan(None, "bs", vector_cores, 0, 0, 0, 0, 0, budget, False, ())
    fixed = UbLayout.of(problem, TilingMode.WHOLE_CORE, 0, 1, target, variant)
    if fixed.fixed_bytes > budget:
        raise ResourceError(
            f"{OP_NAME}: every core stages all {problem.index_count} indices in UB ({fixed.index_bytes} bytes), "
            f"which with the tiling arguments exceeds the {budget} usable bytes of UB; split the call"
        )
    mode, chunk = _choose_tiling(problem, target, vector_cores, budget, 1, variant)
    if not double_buffer or _max_iterations(problem, target, mode, chunk, vector_cores, variant) <= 1:
        return _plan(problem, target, mode, chunk, 1, vector_cores, budget, variant)
    if UbLayout.of(problem, mode, chunk, 2, target, variant).total_bytes <= budget:
        return _plan(problem, target, mode, chunk, 2, vector_cores, budget, variant)
    try:
        double_mode, double_chunk = _choose_tiling(problem, target, vector_cores, budget, 2, variant)
    except ResourceError:  # two copies of even the smallest chunk do not fit: the real kernel it is
        return _plan(problem, target, mode, chunk, 1, vector_cores, budget, variant)
    return _plan(problem, target, double_mode, double_chunk, 2, vector_cores, budget, variant)


def _choose_tiling(p: QuantScatterProblem, t: VectorTarget, vector_cores: int, budget: int, copies: int,
                   variant: KernelVariant) -> tuple[TilingMode, int]:
    """The mode and the update elements per iteration (chunk) that fit ``copies`` sets of buffers."""

    def fits(mode: TilingMode) -> Callable[[int], bool]:
        return lambda chunk: UbLayout.of(p, mode, chunk, copies, t, variant).total_bytes <= budget

    max_chunk, max_row_divide, row_chunk_align = _chunk_limits(t)
    block_elements = p.rows * p.row_elements
    each_bs = _core_split(p.bs, vector_cores)[0]
    if fits(TilingMode.WHOLE_CORE)(block_elements) and p.last_dim <= max_row_divide:
        if fits(TilingMode.WHOLE_CORE)(each_bs * block_elements):
            return TilingMode.WHOLE_CORE, each_bs * block_elements
        return TilingMode.LARGE_BATCH, block_elements
    split_axis = p.bs < p.rows
    little = TilingMode.LARGE_AXIS_LITTLE_QUANT if split_axis else TilingMode.LARGE_BATCH_LITTLE_QUANT
    large = TilingMode.LARGE_AXIS_LARGE_QUANT if split_axis else TilingMode.LARGE_BATCH_LARGE_QUANT
    little_rows = min(_largest_chunk(fits(little), budget), max_chunk) // p.row_elements
    if little_rows:
        return little, little_rows * p.row_elements
    chunk = min(_largest_chunk(fits(large), budget), max_chunk)
    chunk -= chunk % row_chunk_align
    if chunk == 0:
        raise ResourceError(
            f"{OP_NAME}: not even {row_chunk_align} elements of a row fit the {budget} usable "
            f"bytes of UB next to the {UbLayout.of(p, large, 0, 1, t, variant).index_bytes} bytes of indices; split the call"
        )
    return large, chunk


def _units(p: QuantScatterProblem, mode: TilingMode) -> int:
    """What the cores share: axis rows (``U``) in modes 102/103, bs rows otherwise."""
    return p.rows if mode in _AXIS_SPLIT_MODES else p.bs


def _max_iterations(p: QuantScatterProblem, t: VectorTarget, mode: TilingMode, chunk: int, vector_cores: int,
                    variant: KernelVariant) -> int:
    """Iterations of the busiest core (the first one, which takes ``each`` units)."""
    each = _core_split(_units(p, mode), vector_cores)[0]
    return len(_CoreIterations(p, t, mode, chunk, each, variant).core(0, each))


def _plan(p: QuantScatterProblem, t: VectorTarget, mode: TilingMode, chunk: int, copies: int, vector_cores: int,
          budget: int, variant: KernelVariant) -> QuantScatterPlan:
    each, used, last = _core_split(_units(p, mode), vector_cores)
    builder = _CoreIterations(p, t, mode, chunk, each, variant)
    cores = tuple(CorePlan(c, last if c == used - 1 else each, builder.core(c, last if c == used - 1 else each))
                  for c in range(used))
    layout = UbLayout.of(p, mode, chunk, copies, t, variant)
    return QuantScatterPlan(
        mode=mode,
        split="axis" if mode in _AXIS_SPLIT_MODES else "bs",
        vector_cores=vector_cores,
        used_cores=used,
        each_core_units=each,
        last_core_units=last,
        chunk_elements=chunk,
        ub_bytes=layout.total_bytes,
        ub_budget_bytes=budget,
        double_buffer=copies == 2,
        cores=cores,
        ub_layout=layout,
    )


class _CoreIterations:
    """Builds each core's iterations for one mode, following the kernel's loop nests."""

    def __init__(self, problem: QuantScatterProblem, target: VectorTarget, mode: TilingMode, chunk: int, each: int,
                 variant: KernelVariant):
        self.p = problem
        self.mode = mode
        self.chunk = chunk
        self.each = each
        self.chains = _VectorChains(problem, target, variant)
        self.reads = problem.index_rank  # scalar reads to resolve one destination
        self.block = problem.rows * problem.row_elements

    def core(self, core: int, units: int) -> tuple[Iteration, ...]:
        build = {
            TilingMode.WHOLE_CORE: self._whole_core,
            TilingMode.LARGE_BATCH: self._large_batch,
            TilingMode.LARGE_AXIS_LITTLE_QUANT: self._little_quant,
            TilingMode.LARGE_BATCH_LITTLE_QUANT: self._little_quant,
            TilingMode.LARGE_AXIS_LARGE_QUANT: self._large_quant,
            TilingMode.LARGE_BATCH_LARGE_QUANT: self._large_quant,
        }[self.mode]
        iterations = list(build(core, units))
        iterations[0] = dataclasses.replace(iterations[0], indices_bytes=self.p.index_count * self.p.index_itemsize)
        return tuple(iterations)

    def _iteration(self, offset, elements, vector, writes, scales_offset=0, quant_elements=0) -> Iteration:
        p = self.p
        return Iteration(
            updates_offset=offset,
            updates_elements=elements,
            indices_bytes=0,
            updates_bytes=elements * p.update_itemsize,
            scales_offset=scales_offset,
            scales_bytes=quant_elements * p.scale_itemsize,
            zero_point_bytes=quant_elements * p.zero_point_itemsize,
            vector=vector,
            writes=writes,
        )

    def _whole_core(self, core: int, units: int):
        first = core * self.each
        elements = units * self.block
        writes = tuple(BlockWrite(first + i, 0, self.block, self.reads) for i in range(units))
        yield self._iteration(first * self.block, elements, self.chains.whole_rows(elements), writes,
                              quant_elements=self.p.last_dim)

    def _large_batch(self, core: int, units: int):
        vector = self.chains.whole_rows(self.block)
        for bs_row in range(core * self.each, core * self.each + units):
            write = (BlockWrite(bs_row, 0, self.block, self.reads),)
            yield self._iteration(bs_row * self.block, self.block, vector, write, quant_elements=self.p.last_dim)

    def _bs_rows_and_columns(self, core: int, units: int):
        """(bs_row, first column, columns) of the span each core covers in each bs row it visits."""
        if self.mode in _AXIS_SPLIT_MODES:
            span = units * self.p.row_elements
            for bs_row in range(self.p.bs):
                yield bs_row, core * self.each * self.p.row_elements, span
        else:
            for bs_row in range(core * self.each, core * self.each + units):
                yield bs_row, 0, self.block

    def _little_quant(self, core: int, units: int):
        T = self.p.row_elements
        once = self.chains.quant_vectors_once()
        first = True
        for bs_row, start, span in self._bs_rows_and_columns(core, units):
            for column in range(start, start + span, self.chunk):
                elements = min(self.chunk, start + span - column)
                vector = self.chains.little_quant_chunk(elements // T)
                write = (BlockWrite(bs_row, column, elements, self.reads),)
                it = self._iteration(bs_row * self.block + column, elements, once + vector if first else vector,
                                     write, quant_elements=self.p.last_dim if first else 0)
                first = False
                yield it

    def _large_quant(self, core: int, units: int):
        L = self.p.last_dim
        for bs_row, start, span in self._bs_rows_and_columns(core, units):
            for row_start in range(start, start + span, L):
                for within in range(0, L, self.chunk):
                    elements = min(self.chunk, L - within)
                    column = row_start + within
                    write = (BlockWrite(bs_row, column, elements, self.reads if within == 0 else 0),)
                    yield self._iteration(bs_row * self.block + column, elements,
                                          self.chains.large_quant_chunk(elements), write,
                                          scales_offset=within, quant_elements=elements)
