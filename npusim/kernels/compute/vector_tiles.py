"""The programs of PyPTO's vector tile ops: what one AIV core runs for one tile of a compute op.

Every tile op has the same frame (as a leaf function of the framework's that holds one op):
SCALAR address set-up, SCALAR -> MTE2 sync, an MTE2 copy of each input's box from GM into UB,
MTE2 -> VECTOR sync, the vector instructions, VECTOR -> MTE3 sync, an MTE3 store of the result box,
MTE3 -> SCALAR sync. The boxes are the valid part of the tile (a tile outside the valid region
moves nothing and computes nothing).

All buffers of one tile op share one element layout (:func:`tile_strides`): elements contiguous,
each row of the last dim padded so that it starts 32-byte aligned in every dtype the tile op uses,
so that an elementwise instruction (and a cast between dtypes) lines up element for element.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from npusim.isa import CoreProgram, GmAddress, LocalTensor, ScalarExpr
from npusim.kernels.shmem.tile_ops import ADDRESS_SCALAR_INSTRUCTIONS, UB_ALIGN_BYTES, GmView, move_box


def tile_strides(shape: Sequence[int], itemsizes: Sequence[int]) -> tuple[int, ...]:
    """Element strides of a tile in UB: the last dim contiguous, rows padded to a whole number of
    32-byte blocks of the narrowest dtype (so 32-byte aligned in all of them)."""
    block = UB_ALIGN_BYTES // min(itemsizes)
    strides = [1] * len(shape)
    if len(shape) > 1:
        strides[-2] = -(-shape[-1] // block) * block
        for dim in range(len(shape) - 3, -1, -1):
            strides[dim] = strides[dim + 1] * shape[dim + 1]
    return tuple(strides)


def tile_elements(shape: Sequence[int], strides: Sequence[int], itemsizes: Sequence[int]) -> int:
    """Elements a buffer of that layout holds (a 1-D tile padded to a whole 32-byte block)."""
    if not shape:
        return 1
    if len(shape) == 1:
        block = UB_ALIGN_BYTES // min(itemsizes)
        return -(-shape[0] // block) * block
    return strides[0] * shape[0]


@dataclass(frozen=True)
class Operand:
    """One input of a vector tile op: its GM view at the box's first element, its dtype, and the box
    it loads (the valid part of the tile; 1 on the dims it is broadcast along)."""

    view: GmView
    dtype: np.dtype
    box: tuple[int, ...]


class TileFrame:
    """The buffers and syncs of one vector tile op on one core (see the module docstring)."""

    def __init__(self, p: CoreProgram, shape: Sequence[int], dtypes: Sequence[np.dtype], name: str) -> None:
        self.p = p
        self.shape = tuple(shape)
        self.itemsizes = [np.dtype(d).itemsize for d in dtypes]
        self.strides = tile_strides(self.shape, self.itemsizes)
        self.name = name

    def alloc(self, dtype, shape: Sequence[int] | None = None) -> LocalTensor:
        shape = self.shape if shape is None else tuple(shape)
        strides = self.strides if shape == self.shape else tile_strides(shape, self.itemsizes)
        return self.p.alloc(tile_elements(shape, strides, self.itemsizes), dtype)

    def byte_strides(self, dtype, shape: Sequence[int] | None = None) -> tuple[int, ...]:
        strides = self.strides if shape is None or tuple(shape) == self.shape else tile_strides(shape, self.itemsizes)
        return tuple(s * np.dtype(dtype).itemsize for s in strides)

    def load_boxes(self, operands: Sequence[Operand], reader: str = "VECTOR") -> list[LocalTensor]:
        """Address set-up, then each operand's box (of its own shape, its rows 32-byte aligned) into a
        UB buffer of its own (MTE2); returns them, in order, once pipe ``reader`` may read them."""
        p = self.p
        p.scalar(ADDRESS_SCALAR_INSTRUCTIONS, name=f"{self.name} address")
        _sync(p, "SCALAR", "MTE2")
        loaded = []
        for operand in operands:
            buffer = self.alloc(operand.dtype, operand.box)
            move_box(p, buffer, operand.view, operand.box, self.byte_strides(operand.dtype, operand.box), to_gm=False, name=f"{self.name} MTE2")
            loaded.append(buffer)
        _sync(p, "MTE2", reader)
        return loaded

    def load(self, operands: Sequence[Operand]) -> list[LocalTensor]:
        """Each operand's box into its own UB buffer (:meth:`load_boxes`); returns them, in order,
        once VECTOR may read them, broadcast boxes expanded to the whole tile first."""
        p = self.p
        loaded = self.load_boxes(operands)
        buffers = []
        for operand, buffer in zip(operands, loaded):
            if operand.box != self.shape:
                full = self.alloc(operand.dtype)
                small = tile_strides(operand.box, self.itemsizes)
                src_strides = tuple(0 if b == 1 and s != 1 else st for b, s, st in zip(operand.box, self.shape, small))
                p.broadcast(full, buffer, self.shape, src_strides, self.strides, name=f"{self.name} broadcast")
                buffer = full
            buffers.append(buffer)
        return buffers

    def convert(self, buffer: LocalTensor, dtype, rounding: str = "rint", saturate: bool = True) -> LocalTensor:
        """``buffer`` in ``dtype`` (a cast on VECTOR, or the buffer itself when it already is)."""
        dtype = np.dtype(dtype)
        if buffer.dtype == dtype:
            return buffer
        out = self.p.alloc(buffer.count, dtype)
        self.p.cast(out, buffer, rounding, saturate=saturate, name=f"{self.name} cast")
        return out

    def store(self, buffer: LocalTensor, out: GmView, box: Sequence[int] | None = None, strides: Sequence[int] | None = None) -> None:
        """VECTOR -> MTE3 sync, the result box to GM (MTE3), MTE3 -> SCALAR sync."""
        p = self.p
        box = self.shape if box is None else tuple(box)
        byte_strides = self.byte_strides(buffer.dtype, box) if strides is None else tuple(s * buffer.dtype.itemsize for s in strides)
        _sync(p, "VECTOR", "MTE3")
        move_box(p, buffer, out, box, byte_strides, to_gm=True, name=f"{self.name} MTE3")
        _sync(p, "MTE3", "SCALAR")


def _sync(p: CoreProgram, src: str, dst: str, event: int = 0) -> None:
    p.set_flag(src, dst, event)
    p.wait_flag(src, dst, event)


def elementwise_tile(p: CoreProgram, operands: Sequence[Operand], out: GmView, out_dtype, shape: Sequence[int], kind: str,
                     compute_dtype, *, scalar=None, name: str, keep: GmView | None = None) -> None:
    """One tile of an elementwise op: load the operands, cast them to ``compute_dtype`` (fp32 where
    the framework's AutoCast pass upcasts fp16 / bf16), one vector instruction ``kind`` (with
    ``scalar`` for the scalar forms) written over the first input, the result cast to ``out_dtype``
    (round to nearest even), stored. ``keep``: where the result is also stored before that cast
    (the value in ``compute_dtype`` that a following upcast op reads)."""
    frame = TileFrame(p, shape, [o.dtype for o in operands] + [np.dtype(compute_dtype), np.dtype(out_dtype)], name)
    distinct = list(dict.fromkeys(operands))  # an operand given twice (add(x, x)) is loaded once
    loaded = frame.load(distinct)
    converted = [frame.convert(b, compute_dtype) for b in loaded]
    inputs = [converted[distinct.index(o)] for o in operands]
    result = inputs[0]  # in place, as a kernel reuses its first input's buffer
    p.vector(kind, result, *inputs, scalar=scalar, name=name)
    if keep is not None:
        frame.store(result, keep)
    # the result cast back into a loaded buffer of the output dtype that the cast up freed, if any
    spare = next((b for b, c in zip(loaded, converted) if c is not b and b.dtype == np.dtype(out_dtype) and b.count == result.count), None)
    if spare is not None and result.dtype != np.dtype(out_dtype):
        p.cast(spare, result, "rint", saturate=True, name=f"{name} cast")
        result = spare
    frame.store(frame.convert(result, out_dtype), out)


def cast_tile(p: CoreProgram, operand: Operand, out: GmView, out_dtype, rounding: str, saturate: bool, *, name: str) -> None:
    """One tile of ``pypto.cast``: load, one cast instruction with the rounding mode, store."""
    frame = TileFrame(p, operand.box, [operand.dtype, np.dtype(out_dtype)], name)
    (source,) = frame.load([operand])
    frame.store(frame.convert(source, out_dtype, rounding, saturate), out)


def fill_tile(p: CoreProgram, out: GmView, dtype, shape: Sequence[int], value, *, name: str) -> None:
    """One tile of ``pypto.full``: a UB buffer filled with ``value`` (VECTOR dup), stored."""
    frame = TileFrame(p, shape, [np.dtype(dtype)], name)
    p.scalar(ADDRESS_SCALAR_INSTRUCTIONS, name=f"{name} address")
    buffer = frame.alloc(dtype)
    p.dup(buffer, value, name=name)
    frame.store(buffer, out)


def reduce_tile(p: CoreProgram, operand: Operand, out: GmView, axis: int, kind: str, compute_dtype, out_dtype, *, name: str) -> None:
    """One tile of ``sum`` / ``amax`` / ``amin``: the operand's box spans the whole reduced axis; it
    is cast to ``compute_dtype``, reduced along ``axis`` by pairwise halving (one ``reduce`` group),
    cast to ``out_dtype`` and stored as the box with 1 on ``axis``."""
    box = operand.box
    kept = box[:axis] + (1,) + box[axis + 1:]
    frame = TileFrame(p, box, [operand.dtype, np.dtype(compute_dtype), np.dtype(out_dtype)], name)
    (source,) = frame.load([operand])
    source = frame.convert(source, compute_dtype)
    out_strides = tile_strides(kept, frame.itemsizes)
    result = p.alloc(tile_elements(kept, out_strides, frame.itemsizes), compute_dtype)
    order = [d for d in range(len(box)) if d != axis] + [axis]
    src_view = (tuple(box[d] for d in order), tuple(frame.strides[d] for d in order))
    p.reduce(kind, result, source, src_view, tuple(out_strides[d] for d in order[:-1]), name=name)
    frame.store(frame.convert(result, out_dtype), out, kept, out_strides)


def cumsum_tile(p: CoreProgram, operand: Operand, out: GmView, axis: int, compute_dtype, out_dtype, *, name: str) -> None:
    """One tile of ``cumsum``: the box spans the whole axis; cast to ``compute_dtype``, running sum
    along ``axis`` element after element, cast to ``out_dtype``, stored."""
    box = operand.box
    frame = TileFrame(p, box, [operand.dtype, np.dtype(compute_dtype), np.dtype(out_dtype)], name)
    (source,) = frame.load([operand])
    source = frame.convert(source, compute_dtype)
    result = frame.alloc(compute_dtype)
    order = [d for d in range(len(box)) if d != axis] + [axis]
    view = (tuple(box[d] for d in order), tuple(frame.strides[d] for d in order))
    p.scan(result, source, view, view[1], name=name)
    frame.store(frame.convert(result, out_dtype), out)


def transpose_tile(p: CoreProgram, operand: Operand, out: GmView, dim0: int, dim1: int, *, name: str) -> None:
    """One tile of ``transpose``: the input box, its dims ``dim0`` and ``dim1`` swapped (one vector
    transpose pass over each 2-D slice of the two dims), stored as the transposed box."""
    box = operand.box
    out_box = list(box)
    out_box[dim0], out_box[dim1] = box[dim1], box[dim0]
    frame = TileFrame(p, box, [operand.dtype], name)
    (source,) = frame.load([operand])
    out_strides = tile_strides(out_box, frame.itemsizes)
    result = p.alloc(tile_elements(out_box, out_strides, frame.itemsizes), operand.dtype)
    perm = list(range(len(box)))
    perm[dim0], perm[dim1] = dim1, dim0
    # the result's element (j) reads the source at the swapped index: a strided copy of the source
    p.broadcast(result, source, tuple(out_box), tuple(frame.strides[d] for d in perm), out_strides, name=name)
    frame.store(result, out, out_box, out_strides)


def one_hot_tile(p: CoreProgram, operand: Operand, out: GmView, classes: int, out_dtype, *, name: str) -> None:
    """One tile of ``one_hot``: the index box, compared against every class, stored as the box with
    the classes as its last dim."""
    out_box = operand.box + (classes,)
    frame = TileFrame(p, operand.box, [operand.dtype, np.dtype(out_dtype)], name)
    (indices,) = frame.load([operand])
    out_strides = tile_strides(out_box, frame.itemsizes)
    result = p.alloc(tile_elements(out_box, out_strides, frame.itemsizes), out_dtype)
    p.one_hot(result, indices, out_box, frame.strides, out_strides, name=name)
    frame.store(result, out, out_box, out_strides)


def gather_tile(p: CoreProgram, source: Operand, index: Operand, out: GmView, axis: int, *, name: str) -> None:
    """One tile of ``gather`` (the framework's TgatherElement, tileop/vector/gather.h): the input's
    box (whole along ``axis``) and the index box into UB (MTE2); then, for an int32 index, per row of
    the index box (its last dim) a VECTOR -> SCALAR sync, the scalar loop turning the row's indices
    into offsets, a SCALAR -> VECTOR sync and one vector gather of the row; for an int64 index the
    scalar unit copies element by element (one V -> S sync around the whole loop); the result box
    (the index box's shape) stored (MTE3)."""
    box = index.box
    frame = TileFrame(p, box, [source.dtype, index.dtype], name)
    src, idx = frame.load_boxes([source, index], "VECTOR")
    result = frame.alloc(source.dtype)
    src_strides = tile_strides(source.box, frame.itemsizes)
    limit = source.box[axis]
    if index.dtype.itemsize == 8:  # scalarFlag: dst[off] = src[newIdx], element by element on the scalar unit
        _sync(p, "VECTOR", "SCALAR")
        p.indexed_move(result, src, idx, box, (frame.strides, src_strides, frame.strides), axis, limit, pipe="SCALAR", name=name)
        _sync(p, "SCALAR", "VECTOR")
    else:
        last = len(box) - 1
        row = (1,) * last + (box[-1],)
        for position in np.ndindex(*box[:-1]):
            at = sum(c * s for c, s in zip(position, frame.strides))
            at_src = sum(c * s for d, (c, s) in enumerate(zip(position, src_strides)) if d != axis)
            _sync(p, "VECTOR", "SCALAR")
            p.index_offsets(box[-1], name=f"{name} offsets")
            _sync(p, "SCALAR", "VECTOR")
            p.indexed_move(result[at:], src[at_src:], idx[at:], row, (frame.strides, src_strides, frame.strides), axis, limit, name=name)
    frame.store(result, out)


def scatter_tile(p: CoreProgram, target: Operand, index: Operand | None, source: Operand | None, value, out: GmView, axis: int, reduce: str,
                 *, name: str) -> None:
    """One tile of ``scatter`` (the framework's Tscatter / TscatterElementS, tileop/vector/scatter.h,
    which on Atlas A2 / A3 run as the scalar unit's loop: no vscatter there): the input's box (whole
    along ``axis``), the index box and the source box (a tensor source) into UB (MTE2); a VECTOR ->
    SCALAR sync, the scalar loop writing (or adding / multiplying) each source element (or ``value``)
    where its index points, a SCALAR -> VECTOR sync; the box stored (MTE3). ``index`` None: the tile
    lies beyond the index's extent and is copied through."""
    box = target.box
    dtypes = [target.dtype] + [o.dtype for o in (index, source) if o is not None]
    frame = TileFrame(p, box, dtypes, name)
    loaded = frame.load_boxes([o for o in (target, index, source) if o is not None], "VECTOR")
    result = loaded[0]
    if index is not None:
        idx = loaded[1]
        src = loaded[2] if source is not None else None
        itemsizes = frame.itemsizes
        strides = (frame.strides, tile_strides(index.box, itemsizes), tile_strides(index.box, itemsizes))
        _sync(p, "VECTOR", "SCALAR")
        p.indexed_move(result, src, idx, index.box, strides, axis, box[axis], scatter=True, value=None if src is not None else value,
                       reduce=reduce, pipe="SCALAR", name=name)
        _sync(p, "SCALAR", "VECTOR")
    frame.store(result, out)


def index_outcast_tile(p: CoreProgram, source: Operand, index: Operand, out: GmView, row_bytes: int, assumed_rows: Sequence[int] | None, *,
                       name: str) -> None:
    """One tile of ``scatter_update`` (the framework's TILE_INDEX_OUTCAST, tileop/vector/index_outcast.h
    TIndexOutcastMode2, the PA_BSND cache mode): the source box (its rows, ``[..., d]``) and the
    index box into UB (MTE2), an MTE2 -> SCALAR sync, then per index element a scalar read of the
    index (``read_scalar``), a SCALAR -> MTE3 sync and one MTE3 store of the element's source row to
    row ``index`` of ``out`` (rows ``row_bytes`` apart): its GM address is the value read on the
    device. ``assumed_rows``: with no data (the values unknown), the rows written instead (the
    caller's stated assumption)."""
    frame = TileFrame(p, source.box, [source.dtype, index.dtype], name)
    src, idx = frame.load_boxes([source, index], "SCALAR")
    src_strides = frame.strides
    idx_strides = tile_strides(index.box, frame.itemsizes)
    rows = list(np.ndindex(*source.box[:-1]))  # the source's rows, one per index element, in the same order
    for k, position in enumerate(np.ndindex(*index.box)):
        at = sum(c * s for c, s in zip(position, idx_strides))
        row = p.read_scalar(idx, at, name=f"{name} index")
        _sync(p, "SCALAR", "MTE3")
        source_at = sum(c * s for c, s in zip(rows[k], src_strides))
        offset = row * row_bytes if assumed_rows is None else assumed_rows[k] * row_bytes
        p.copy(GmAddress(out.allocation, out.offset_bytes + offset), src[source_at : source_at + source.box[-1]], row_bytes,
               name=f"{name} MTE3")
    _sync(p, "MTE3", "SCALAR")


def index_select_tile(p: CoreProgram, source: GmView, dtype, index: Operand, out: GmView, box: Sequence[int], dim: int,
                      assumed: Sequence[int] | None, *, name: str) -> None:
    """One tile of ``index_select`` (the framework's Tgather, tileop/vector/gather.h): the result
    box ``box`` (input dims before ``dim``, the index's dims, input dims after it) filled by MTE2
    copies from GM whose addresses the index values give, then stored (MTE3). ``source``: the input
    at the tile's first element with ``dim`` at 0. The index box is loaded into UB (MTE2) and read by
    the scalar unit (``read_scalar``) once per element (the framework's scalar reads it from GM); per
    index element and outer position one copy of the input's slice after ``dim`` (its last two dims
    as strided bursts; when ``dim`` is the input's last dim, one element per copy, where the framework's
    scalar unit copies element by element from GM). ``assumed``: without data, the input row each
    index element is taken to select (the caller's stated assumption)."""
    box = tuple(box)
    m = len(index.box)
    frame = TileFrame(p, box, [np.dtype(dtype), index.dtype], name)
    (idx,) = frame.load_boxes([index], "SCALAR")
    idx_strides = tile_strides(index.box, frame.itemsizes)
    rows: list = []
    for k, position in enumerate(np.ndindex(*index.box)):
        register = p.read_scalar(idx, sum(c * s for c, s in zip(position, idx_strides)), name=f"{name} index")
        rows.append(register if assumed is None else assumed[k])
    _sync(p, "SCALAR", "MTE2")
    result = frame.alloc(dtype)
    item = np.dtype(dtype).itemsize
    in_strides = source.strides  # bytes, the input's dims
    inner = box[dim + m:]  # the input's dims after dim
    bursts, burst = (inner[-2] if len(inner) >= 2 else 1), (inner[-1] if inner else 1)
    loop = inner[:-2] if len(inner) >= 2 else ()
    src_gap = in_strides[-2] - burst * item if len(inner) >= 2 else 0
    dst_gap = (frame.strides[-2] - burst) * item if len(inner) >= 2 else 0
    for outer in np.ndindex(*box[:dim]):
        for k, position in enumerate(np.ndindex(*index.box)):
            for rest in np.ndindex(*loop):
                at = outer + position + rest
                ub = sum(c * s for c, s in zip(at, frame.strides))
                gm = sum(c * s for c, s in zip(outer, in_strides[:dim])) + sum(c * s for c, s in zip(rest, in_strides[dim + 1:]))
                address = GmAddress(source.allocation, source.offset_bytes + gm + rows[k] * in_strides[dim])
                p.copy(result[ub:], address, burst_count=bursts, burst_bytes=burst * item, src_gap=src_gap, dst_gap=dst_gap, name=f"{name} MTE2")
    _sync(p, "MTE2", "MTE3")
    move_box(p, result, out, box, frame.byte_strides(dtype), to_gm=True, name=f"{name} MTE3")
    _sync(p, "MTE3", "SCALAR")


def index_add_tile(p: CoreProgram, source: Operand, index: Operand, out: GmView, axis: int, limit: int, alpha, assumed: Sequence[int] | None, *,
                   name: str) -> None:
    """One tile of ``index_add_`` (the framework's TIndexAdd, tileop/vector/indexadd.h, "indexadd in
    GM"): the source box and its part of the index (1-D, ``source.box[axis]`` long) into UB (MTE2),
    an MTE2 -> SCALAR sync, then per row of the source box (its last dim): an MTE3 -> SCALAR sync,
    the scalar read of the row's index value (``read_scalar``, bounded by ``limit`` =
    ``input.shape[dim]``), with ``alpha`` (not None: the tile op multiplies, |alpha - 1| > 1e-6) a
    SCALAR -> VECTOR sync, one vector ``muls`` of the row into a row buffer (TMULS) and a VECTOR ->
    MTE3 sync, else a SCALAR -> MTE3 sync; then one MTE3 atomic-add store of the row to the input's
    row the index names (``out``: the input at the tile's first element with ``dim`` at 0). When
    ``axis`` is the last dim the framework's scalar unit handles each element (IndexAddLastAxisCompute:
    its multiply, a one-element row buffer, an atomic-add store of one element); npusim times each
    element's multiply as one scalar instruction [L] and computes the products with one vector muls
    of the box up front (the same products: one rounding to the dtype). int8 with ``alpha``: the
    framework multiplies each row on the scalar unit; npusim times it as the vector muls [L].
    ``assumed``: without data (the values unknown), the index value taken for each element of the
    index box (the caller's stated assumption)."""
    frame = TileFrame(p, source.box, [source.dtype, index.dtype], name)
    src, idx = frame.load_boxes([source, index], "SCALAR")
    item = source.dtype.itemsize
    box = source.box
    last = len(box) - 1
    rule = (f"pypto.{name}: index={{value}} (a value of the index on the device) is outside [0, {limit}) along dim {axis}: "
            f"index values must be >= 0 and < input.shape[dim]")
    if axis == last:
        if alpha is not None:
            _sync(p, "SCALAR", "VECTOR")
            p.vector("muls", src, src, scalar=alpha, name=f"{name} muls")
            _sync(p, "VECTOR", "SCALAR")
        for position in np.ndindex(*box):
            at = sum(c * s for c, s in zip(position, frame.strides))
            _sync(p, "MTE3", "SCALAR")
            register = p.read_scalar(idx, position[-1], name=f"{name} index", bound=(limit, rule))
            value = register if assumed is None else assumed[position[-1]]
            if alpha is not None:
                p.scalar(1, name=f"{name} muls")
            offset = sum(c * s for c, s in zip(position[:-1], out.strides[:-1])) + value * out.strides[-1]
            _sync(p, "SCALAR", "MTE3")
            p.copy(GmAddress(out.allocation, out.offset_bytes + offset), src[at:at + 1], item, atomic="add", name=f"{name} MTE3")
        _sync(p, "MTE3", "SCALAR")
        return
    row = box[-1]
    scaled = frame.alloc(source.dtype, (1, row)) if alpha is not None else None
    for position in np.ndindex(*box[:-1]):
        at = sum(c * s for c, s in zip(position, frame.strides))
        _sync(p, "MTE3", "SCALAR")
        register = p.read_scalar(idx, position[axis], name=f"{name} index", bound=(limit, rule))
        value = register if assumed is None else assumed[position[axis]]
        offset = sum(c * s for d, (c, s) in enumerate(zip(position, out.strides)) if d != axis) + value * out.strides[axis]
        stored = src[at:at + row]
        if scaled is not None:
            _sync(p, "SCALAR", "VECTOR")
            p.vector("muls", scaled, stored, scalar=alpha, count=row, name=f"{name} muls")
            _sync(p, "VECTOR", "MTE3")
            stored = scaled[0:row]
        else:
            _sync(p, "SCALAR", "MTE3")
        p.copy(GmAddress(out.allocation, out.offset_bytes + offset), stored, row * item, atomic="add", name=f"{name} MTE3")
    _sync(p, "MTE3", "SCALAR")


def index_put_tile(p: CoreProgram, values: Operand, indices: Sequence[Operand], out: GmView, limits: Sequence[int], accumulate: bool,
                   assumed: Sequence[Sequence[int]] | None, *, name: str) -> None:
    """One tile of ``index_put_`` (the framework's TIndexPut / DoIndexPut, tileop/vector/mte.h): the
    values box and each index tensor's chunk (1-D, ``values.box[0]`` long) into UB (MTE2), an MTE2 ->
    SCALAR sync, an MTE3 -> SCALAR sync; then per index element ``i`` a scalar read of each index
    tensor's value (``read_scalar``, bounded by ``limits``: the input's leading dims), a SCALAR ->
    MTE3 sync, one MTE3 store (an atomic-add store with ``accumulate``) of the values' slab
    ``values[i]`` to the input's place the indices name, and an MTE3 -> SCALAR sync. ``out``: the
    input at the tile's first element of its trailing dims, its leading (indexed) dims at 0. A slab
    of 3 dims (values 4-D, one index tensor) is stored as one copy per outer row, where the
    framework's TSTORE is one [L]. ``assumed``: without data (the values unknown), per index tensor
    the value taken for each element of its chunk (the caller's stated assumption)."""
    frame = TileFrame(p, values.box, [values.dtype] + [i.dtype for i in indices], name)
    loaded = frame.load_boxes([values] + list(indices), "SCALAR")
    src, idx = loaded[0], loaded[1:]
    item = values.dtype.itemsize
    k = len(indices)
    slab = values.box[1:]
    ub_strides = frame.strides
    gm_strides = out.strides[k:]  # bytes, the input's trailing dims (the values' dims after their first)
    atomic = "add" if accumulate else None
    rules = [f"pypto.{name}: indices[{j}] value={{value}} (a value of the index on the device) is outside [0, {limit}): index values of "
             f"indices[{j}] must be >= 0 and < input.shape[{j}]" for j, limit in enumerate(limits)]
    _sync(p, "MTE3", "SCALAR")
    for i in range(values.box[0]):
        offset: ScalarExpr | int = 0
        for j in range(k):
            register = p.read_scalar(idx[j], i, name=f"{name} index", bound=(limits[j], rules[j]))
            offset = offset + (register if assumed is None else assumed[j][i]) * out.strides[j]
        _sync(p, "SCALAR", "MTE3")
        at = i * ub_strides[0] if len(values.box) > 1 else i
        if not slab:
            p.copy(GmAddress(out.allocation, out.offset_bytes + offset), src[at:at + 1], item, atomic=atomic, name=f"{name} MTE3")
        else:
            rows, cols = (slab[-2] if len(slab) >= 2 else 1), slab[-1]
            ub_gap = (ub_strides[-2] - cols) * item if len(slab) >= 2 else 0
            gm_gap = gm_strides[-2] - cols * item if len(slab) >= 2 else 0
            for outer in np.ndindex(*slab[:-2]):
                ub_at = at + sum(c * s for c, s in zip(outer, ub_strides[1:]))
                gm_at = offset + sum(c * s for c, s in zip(outer, gm_strides))
                span = (rows - 1) * ub_strides[-2] + cols if len(slab) >= 2 else cols
                p.copy(GmAddress(out.allocation, out.offset_bytes + gm_at), src[ub_at:ub_at + span], burst_count=rows, burst_bytes=cols * item,
                       src_gap=ub_gap, dst_gap=gm_gap, atomic=atomic, name=f"{name} MTE3")
        _sync(p, "MTE3", "SCALAR")
