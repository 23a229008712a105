"""PyPTO's indexing ops (``python/pypto/op/indexing.py`` of hicann/pypto): ``gather``, ``scatter``,
``scatter_``, ``scatter_update``, ``index_select``, ``index_add_``, ``index_add`` and ``index_put_``, expanded as the
framework's ``indexing.cpp`` expands them into tile ops, each tile op's program that of the
framework's tile op (``tileop/vector/gather.h``, ``scatter.h``, ``indexadd.h``, ``mte.h``):

- ``gather`` (GatherElements, TiledGatherElementOperation): tiles of the result (the index's shape)
  by the vector tile shape; each loads its index box and the input's box, whole along ``dim``
  (MTE2), gathers in UB (TgatherElement: an int32 index per row of the box a scalar loop making the
  row's offsets and one vector gather; an int64 index a scalar loop copying element by element)
  and stores the result box (MTE3).
- ``scatter`` / ``scatter_`` (Scatter, InnerTiledScatter / InnerTiledScatterElementS): tiles whole
  along ``dim`` (the framework refuses a tile shape that splits it); each loads the input's box,
  the index box and the source box (MTE2), and the scalar unit writes each source element (or the
  scalar) where its index points (Tscatter / TscatterElementS, a scalar loop on Atlas A2 / A3,
  which have no vscatter: scatter.h), then stores the box (MTE3). The framework's tiles follow the
  index and write in place; npusim's result is a new tensor, so its tiles follow the input and a
  tile beyond the index's extent copies the input through. fp16 / bf16 with ``reduce`` run in fp32
  between two casts, as Scatter does.

- ``scatter_update`` and ``index_select`` copy rows between GM and UB at addresses the index values
  give (their docstrings; TIndexOutcastMode2 and Tgather).
- ``index_add_`` / ``index_add`` (IndexAdd_, TiledIndexAdd; TIndexAdd, tileop/vector/indexadd.h):
  per row of a source tile the scalar unit reads its index value and an MTE3 atomic-add store adds
  the row (times alpha, a vector muls) into the input's row (``_index_add``'s docstrings).
- ``index_put_`` (IndexPut_, TiledIndexPut; TIndexPut, tileop/vector/mte.h): per index element the
  scalar unit reads the k index values and one MTE3 store (atomic-add with accumulate) writes the
  values' slab where they point (its docstring).

gather and scatter read UB-local data: their time does not depend on the index values, so a run
without data (``--no-data``) times exactly what a run with data does; scatter_update and
index_select state what they assume without data. With data, a gather's or scatter's index value
outside ``[0, input.shape[dim])`` stops the run with an OpArgumentError when its tile op runs (the
values are the device's); a scatter_update / index_select row past the input, a WorkloadError at
the copy it addresses. Docs: docs/pypto.md.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence

import numpy as np

from npusim.frontend.pypto.compute import _elementwise, _grid, _input, _launch_tiles, _result, _tiles, cast, clone
from npusim.frontend.pypto.ops import _gm, pypto_op
from npusim.frontend.pypto.runtime import current_program
from npusim.frontend.pypto.tensors import Tensor
from npusim.kernels.compute import checks
from npusim.kernels.compute.checks import reject
from npusim.kernels.compute.modes import CastMode
from npusim.kernels.compute.vector_tiles import (
    Operand,
    gather_tile,
    index_add_tile,
    index_outcast_tile,
    index_put_tile,
    index_select_tile,
    scatter_tile,
)
from npusim.kernels.shmem.dtypes import DataType
from npusim.kernels.shmem.tile_ops import GmView
from npusim.kernels.shmem.tiling import MAX_TENSOR_DIMS, Region
from npusim.runtime.tasks import CoreTask

SCATTER_MODES = {None: "none", "add": "add", "multiply": "multiply"}
"""``reduce`` -> the scatter's mode (indexing.py get_scatter_mode: ScatterMode NONE, ADD, MULTIPLY)."""


def _out(device, offset: Sequence[int]) -> GmView:
    return GmView(device.allocation, device.offset_bytes, device.strides).shifted(offset)


def _written_into(program, node, x: Tensor, copy: Tensor, items: Sequence, build, reads, place) -> Tensor:
    """The result of tile ops writing into ``copy``, a copy of ``x`` (clone's tile ops), as the
    framework's in-place ops write into their input's GM: one tile op per item of ``items``
    (``build(p, item, device)``), after the tile ops that wrote what ``reads(item)`` lists
    (``(tensor, region)`` pairs) and those of the copy that wrote ``place(item)``, the region of
    the copy it may write (None: anywhere, so after every tile op of the copy). Tile ops of the
    same region write one after the other, in the order of ``items``."""
    device_of = copy.destination
    assert device_of is not None  # an op result: its tile ops store where it points
    writes = list(copy.writes)
    previous: dict[Region, CoreTask] = {}
    for number, item in enumerate(items):
        def run(p, item=item):
            build(p, item, device_of.device)

        task = CoreTask(node, number, run)
        for tensor, region in reads(item):
            task.depend_on(tensor.tasks_for(region))
        region = place(item)
        task.depend_on(copy.tasks_for(region))
        if region is not None:
            if region in previous:
                task.depend_on([previous[region]])
            previous[region] = task
        node.tasks.append(task)
        writes.append((task, region))
    return Tensor.make(program, "GM", x.sizes, x.dtype, device=device_of.device, valid_shape=x.valid_shape, writes=writes)


@pypto_op(unit="vector")
def gather(input: Tensor, dim: int, index: Tensor) -> Tensor:
    """``pypto.gather``: ``out[p] = input[p with p[dim] = index[p]]``, of the index's shape and the
    input's dtype (module docstring: tiles, tile program, timing)."""
    op = "gather"
    program = current_program(op)
    x = _input(op, "input", input, program)
    idx = _input(op, "index", index, program)
    checks.check_dtype(op, "input", x.dtype.name)
    checks.check_index_dtype(op, idx.dtype.name)
    axis = checks.check_dim(op, dim, len(x.sizes))
    checks.check_index_shape(op, idx.sizes, x.sizes, axis)
    shape = idx.sizes
    tile_shape = checks.check_vec_tile(op, program.tile_shape, len(shape))
    tiles = _tiles(op, program, shape, idx.valid_shape)
    source, indices = _gm(x), _gm(idx)

    def source_box(tile) -> tuple[tuple[int, ...], tuple[int, ...]]:
        """The input's box a tile loads: whole along dim, else the tile's rows of the input
        (TiledGatherElementOperation: min(input.shape - offset, tile))."""
        offset = tuple(0 if d == axis else o for d, o in enumerate(tile.offset))
        box = tuple(x.valid_shape[d] if d == axis else min(x.valid_shape[d] - o, t) for d, (o, t) in enumerate(zip(tile.offset, tile_shape)))
        return offset, box

    def build(p, tile, device):
        offset, box = source_box(tile)
        gather_tile(p, Operand(source.shifted(offset), x.dtype.numpy, box), Operand(indices.shifted(tile.offset), idx.dtype.numpy, tile.valid_shape),
                    _out(device, tile.offset), axis, name=op)

    def reads(tile):
        return [(idx, Region(tile.offset, tile.valid_shape)), (x, Region(*source_box(tile)))]

    tasks = _launch_tiles(op, program, tiles, build, reads, shape=shape, dtype=x.dtype, record={"dim": axis})
    return _result(program, shape, x.dtype, idx.valid_shape, tasks, tiles)


def _scatter(op: str, input: Tensor, dim: int, index: Tensor, src, reduce: str | None) -> Tensor:
    program = current_program(op)
    x = _input(op, "input", input, program)
    idx = _input(op, "index", index, program)
    checks.check_dtype(op, "input", x.dtype.name)
    checks.check_index_dtype(op, idx.dtype.name)
    if not isinstance(reduce, (str, type(None))) or reduce not in SCATTER_MODES:
        reject(op, "reduce", reduce, "must be None, 'add' or 'multiply' (scatter reduce only supports 'add', 'multiply')")
    mode = SCATTER_MODES[reduce]
    axis = checks.check_dim(op, dim, len(x.sizes))
    checks.check_index_shape(op, idx.sizes, x.sizes, axis)
    value = None
    source: Tensor | None = None
    if isinstance(src, Tensor):
        source = _input(op, "src", src, program)
        if source.dtype is not x.dtype:
            reject(op, "src.dtype", source.dtype.name, f"differs from input.dtype={x.dtype.name}; src takes the input's dtype")
        if len(source.sizes) != len(idx.sizes) or any(i > s for i, s in zip(idx.sizes, source.sizes)):
            reject(op, "src.shape", list(source.sizes), f"must have index's dims and index.shape[d] <= src.shape[d] in every dim "
                                                        f"(index.shape={list(idx.sizes)})")
    elif isinstance(src, (int, float)) and not isinstance(src, bool):
        if not np.isfinite(float(src)):
            reject(op, "src", src, "must be finite: a scalar src does not take INF / NAN (pypto-scatter_.md)")
        value = np.asarray(float(src)).astype(x.dtype.numpy)  # Element(input.dtype, float(src))
    else:
        reject(op, "src", src, "must be a pypto.Tensor, an int or a float")
    tile_shape = checks.check_vec_tile(op, program.tile_shape, len(x.sizes))
    need = max(x.sizes[axis], idx.sizes[axis])
    if tile_shape[axis] < need:
        reject(op, "tile_shape", list(tile_shape), f"splits dim {axis}: tile_shape[dim] must be >= max(input.shape[dim], index.shape[dim]) "
                                                   f"= {need} (the dim axis is not split, indexing.cpp InnerTiledScatter)")
    dtype = x.dtype
    wide = dtype.name in ("DT_FP16", "DT_BF16") and mode != "none"  # Scatter casts to fp32 around the reduction
    if wide:
        x = cast(x, DataType.DT_FP32)
        source = cast(source, DataType.DT_FP32) if source is not None else None
    shape = x.sizes
    tiles = _tiles(op, program, shape, x.valid_shape, whole=(axis,))
    target, indices = _gm(x), _gm(idx)
    from_src = _gm(source) if source is not None else None

    def index_box(tile) -> tuple[tuple[int, ...], tuple[int, ...]] | None:
        """The part of the index (and of src) a tile scatters: the tile's rows of it, whole along dim."""
        offset = tuple(0 if d == axis else o for d, o in enumerate(tile.offset))
        box = tuple(idx.valid_shape[d] if d == axis else min(idx.valid_shape[d] - o, b) for d, (o, b) in enumerate(zip(tile.offset, tile.valid_shape)))
        return (offset, box) if all(b > 0 for b in box) else None

    def build(p, tile, device):
        part = index_box(tile)
        index_operand = source_operand = None
        if part is not None:
            index_operand = Operand(indices.shifted(part[0]), idx.dtype.numpy, part[1])
            if from_src is not None and source is not None:
                source_operand = Operand(from_src.shifted(part[0]), source.dtype.numpy, part[1])
        scatter_tile(p, Operand(target.shifted(tile.offset), x.dtype.numpy, tile.valid_shape), index_operand, source_operand, value,
                     _out(device, tile.offset), axis, mode, name=op)

    def reads(tile):
        regions = [(x, Region(tile.offset, tile.valid_shape))]
        part = index_box(tile)
        if part is not None:
            regions.append((idx, Region(*part)))
            if source is not None:
                regions.append((source, Region(*part)))
        return regions

    record = {"dim": axis, "reduce": mode} if value is None else {"dim": axis, "reduce": mode, "value": value.item()}
    tasks = _launch_tiles(op, program, tiles, build, reads, shape=shape, dtype=x.dtype, record=record)
    result = _result(program, shape, x.dtype, x.valid_shape, tasks, tiles)
    return cast(result, dtype, CastMode.CAST_RINT) if wide else result


@pypto_op(unit="vector")
def scatter(input: Tensor, dim: int, index: Tensor, src, *, reduce: str | None = None) -> Tensor:
    """``pypto.scatter``: a copy of ``input`` with ``out[p with p[dim] = index[p]] = src[p]`` (``src``
    a tensor or a number), or with ``reduce='add'`` / ``'multiply'`` accumulated there in the order
    of ``p`` (module docstring)."""
    return _scatter("scatter", input, dim, index, src, reduce)


@pypto_op(unit="vector")
def scatter_(input: Tensor, dim: int, index: Tensor, src, *, reduce: str | None = None) -> Tensor:
    """``pypto.scatter_``: ``scatter`` in place: the result becomes ``input``'s value (``input.move``:
    a kernel argument gets it written into its GM) and ``input`` is returned."""
    result = _scatter("scatter_", input, dim, index, src, reduce)
    input.move(result)
    return input


@pypto_op(unit="vector")
def scatter_update(input: Tensor, dim: int, index: Tensor, src: Tensor) -> Tensor:
    """``pypto.scatter_update``: the KV-cache update of decode attention (ScatterUpdate, cache mode
    PA_BSND): ``input`` 2-D ``[blockNum * blockSize, d]`` or 4-D ``[blockNum, blockSize, 1, d]``,
    ``index`` ``[b, s]``, ``src`` ``[b * s, d]`` or ``[b, s, 1, d]``; row ``index[i, j]`` of input
    (its rows of ``d``) becomes ``src``'s row of ``(i, j)``. Expands as TiledScatterUpdateFor2Dims /
    For4Dims: one TILE_INDEX_OUTCAST per tile of ``src`` (the tile's index box ``[tileB, tileS]``),
    which loads its source rows and index box (MTE2) and stores each row by one MTE3 copy to the
    address the scalar unit reads from the index (``index_outcast_tile``). The framework writes
    ``input`` in place; npusim's result is a new tensor, a copy of ``input`` (``clone``'s tile ops)
    that the row stores then write into. Timing without data (``--no-data``: the index values are
    unknown): the k-th index element of the whole index (row-major) is taken to point to input row
    ``k mod rows``, distinct consecutive rows as a decode step's new tokens take; with data the
    rows are the device's values."""
    op = "scatter_update"
    program = current_program(op)
    x = _input(op, "input", input, program)
    idx = _input(op, "index", index, program)
    source = _input(op, "src", src, program)
    checks.check_dtype(op, "input", x.dtype.name)
    checks.check_index_dtype(op, idx.dtype.name)
    if dim != -2:
        reject(op, "dim", dim, "must be -2 (scatter_update only supports dim = -2, indexing.py)")
    rank = len(x.sizes)
    if rank not in (2, 4) or (rank == 4 and x.sizes[2] != 1):
        reject(op, "input.shape", list(x.sizes), "must be [blockNum * blockSize, d] or [blockNum, blockSize, 1, d]")
    if len(idx.sizes) != 2:
        reject(op, "index.shape", list(idx.sizes), "must be [b, s]")
    b, s = idx.sizes
    d = x.sizes[-1]
    want = (b * s, d) if rank == 2 else (b, s, 1, d)
    if source.dtype is not x.dtype:
        reject(op, "src.dtype", source.dtype.name, f"differs from input.dtype={x.dtype.name}")
    if source.sizes != want:
        reject(op, "src.shape", list(source.sizes), f"must be {list(want)} for index [b, s] = {[b, s]} and input {list(x.sizes)}")
    tile = checks.check_vec_tile(op, program.tile_shape, rank)
    if tile[-1] != d:
        reject(op, "tile_shape", list(tile), f"must not split d: its last dim must be d = {d} (pypto-scatter_update.md: 尾轴d不做切分)")
    if rank == 2:
        tile_bs = tile[0]
        if not ((tile_bs <= s and s % tile_bs == 0) or (tile_bs > s and tile_bs % s == 0)):
            reject(op, "tile_shape", list(tile), f"has tileBS={tile_bs}, which must divide s={s} or be a multiple of it "
                                                 "(indexing.cpp TiledScatterUpdateFor2Dims)")
        tile_b, tile_s = -(-tile_bs // s), min(tile_bs, s)
    else:
        tile_b, tile_s = tile[0], tile[1]
    rows = x.sizes[0] if rank == 2 else x.sizes[0] * x.sizes[1]
    copy = clone(x)
    with_data = program.launch.system.with_data
    index_view, source_view = _gm(idx), _gm(source)
    item = x.dtype.itemsize
    node = program.op(op, shape=list(x.sizes), index=[b, s], tiles=-(-b // tile_b) * -(-s // tile_s))
    boxes = [((b0, s0), (min(b - b0, tile_b), min(s - s0, tile_s))) for b0 in range(0, b, tile_b) for s0 in range(0, s, tile_s)]

    def source_box(at, box):
        if rank == 2:
            return (at[0] * s + at[1], 0), (box[0] * box[1], d)  # whole s, or one b: the rows are contiguous
        return (*at, 0, 0), (*box, 1, d)

    def build(p, part, device):
        at, box = part
        offset, shape = source_box(at, box)
        assumed = None if with_data else [((at[0] + i) * s + at[1] + j) % rows for i in range(box[0]) for j in range(box[1])]
        out = GmView(device.allocation, device.offset_bytes, device.strides)
        index_outcast_tile(p, Operand(source_view.shifted(offset), source.dtype.numpy, shape), Operand(index_view.shifted(at), idx.dtype.numpy, box),
                           out, d * item, assumed, name=op)

    def reads(part):
        at, box = part
        return [(idx, Region(at, box)), (source, Region(*source_box(at, box)))]

    # the rows a tile op writes are the device's index values: anywhere in the copy
    return _written_into(program, node, x, copy, boxes, build, reads, lambda part: None)


@pypto_op(unit="vector")
def index_select(input: Tensor, dim: int, index: Tensor) -> Tensor:
    """``pypto.index_select``: the slices of ``input`` along ``dim`` that ``index`` (1-D or 2-D)
    names; the result's shape is ``input.shape[:dim] + index.shape + input.shape[dim + 1:]``
    (Gather, TiledGatherOperation: tiles of the result by the vector tile shape; each tile op is
    Tgather, tileop/vector/gather.h: MTE2 loads from GM at the addresses the index values give, the
    result box stored by MTE3; ``index_select_tile``). Timing without data (``--no-data``: the index
    values unknown): the k-th index element (row-major over the whole index) is taken to select
    slice ``k mod input.shape[dim]``; with data the slices are the device's values."""
    op = "index_select"
    program = current_program(op)
    x = _input(op, "input", input, program)
    idx = _input(op, "index", index, program)
    checks.check_dtype(op, "input", x.dtype.name)
    checks.check_index_dtype(op, idx.dtype.name)
    axis = checks.check_dim(op, dim, len(x.sizes))
    if len(idx.sizes) > 2:
        reject(op, "index.shape", list(idx.sizes), "must have 1 or 2 dims (pypto-index_select.md)")
    m = len(idx.sizes)
    shape = tuple(x.sizes[:axis]) + tuple(idx.sizes) + tuple(x.sizes[axis + 1:])
    if len(shape) > MAX_TENSOR_DIMS:
        reject(op, "index.shape", list(idx.sizes), f"gives a result of {len(shape)} dims {list(shape)}; a tensor has up to {MAX_TENSOR_DIMS}")
    valid = tuple(x.valid_shape[:axis]) + tuple(idx.valid_shape) + tuple(x.valid_shape[axis + 1:])
    tiles = _tiles(op, program, shape, valid)
    source, indices = _gm(x), _gm(idx)
    with_data = program.launch.system.with_data

    def parts(tile) -> tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...], tuple[int, ...]]:
        """The index box and the input box (whole along dim) a tile reads: offsets and shapes."""
        at, box = tile.offset, tile.valid_shape
        index_part = (tuple(at[axis:axis + m]), tuple(box[axis:axis + m]))
        input_at = tuple(at[:axis]) + (0,) + tuple(at[axis + m:])
        input_box = tuple(box[:axis]) + (x.sizes[axis],) + tuple(box[axis + m:])
        return index_part[0], index_part[1], input_at, input_box

    def build(p, tile, device):
        index_at, index_box, input_at, _ = parts(tile)
        assumed = None if with_data else [  # the k-th index element selects slice k mod input.shape[dim]
            int(np.ravel_multi_index(tuple(a + c for a, c in zip(index_at, q)), idx.sizes)) % x.sizes[axis] for q in np.ndindex(*index_box)]
        index_select_tile(p, source.shifted(input_at), x.dtype.numpy, Operand(indices.shifted(index_at), idx.dtype.numpy, index_box),
                          _out(device, tile.offset), tile.valid_shape, axis, assumed, name=op)

    def reads(tile):
        index_at, index_box, input_at, input_box = parts(tile)
        return [(idx, Region(index_at, index_box)), (x, Region(input_at, input_box))]

    tasks = _launch_tiles(op, program, tiles, build, reads, shape=shape, dtype=x.dtype, record={"dim": axis})
    return _result(program, shape, x.dtype, valid, tasks, tiles)


ALPHA_LIMITS = {"DT_INT8": (-2**7, 2**7 - 1), "DT_INT16": (-2**15, 2**15 - 1), "DT_INT32": (-2**31, 2**31 - 1),
                "DT_FP16": (-65504.0, 65504.0), "DT_BF16": (-3.4028234663852886e38, 3.4028234663852886e38),
                "DT_FP32": (-3.4028234663852886e38, 3.4028234663852886e38)}
"""The alpha each input dtype takes (indexing.cpp CheckAlphaOverflow: "Value cannot be converted to
type ... without overflow"; FP16_MAX, FLT_MAX)."""
INDEX_PUT_ACCUMULATE = ("DT_BF16", "DT_FP16", "DT_FP32", "DT_INT8", "DT_INT16", "DT_INT32")
"""The dtypes index_put_ takes with accumulate=True (pypto-index_put_.md 约束说明 7)."""
ALPHA_EPSILON = 1e-6
"""The tile op multiplies by alpha only when |alpha - 1| > this (tileop_common.h TileOp::EPSILON)."""


def _alpha(op: str, alpha, dtype: DataType):
    """alpha as the tile op takes it: Element(input.dtype, alpha) (indexing.py), its float value
    (IndexAdd_: alpha.Cast<float>()) in the input's dtype; an int dtype truncates it."""
    if isinstance(alpha, bool) or not isinstance(alpha, (int, float)):
        reject(op, "alpha", alpha, "must be an int or a float")
    low, high = ALPHA_LIMITS[dtype.name]
    if not np.isfinite(float(alpha)) or not low <= float(alpha) <= high:
        reject(op, "alpha", alpha, f"cannot be converted to type {dtype.name} without overflow (indexing.cpp CheckAlphaOverflow)")
    as_float = np.float32(float(alpha))
    if np.issubdtype(dtype.numpy, np.integer):
        return np.asarray(int(as_float)).astype(dtype.numpy)
    return np.asarray(as_float).astype(dtype.numpy)


def _index_add(op: str, input: Tensor, dim: int, index: Tensor, source: Tensor, alpha) -> Tensor:
    program = current_program(op)
    x = _input(op, "input", input, program)
    idx = _input(op, "index", index, program)
    src = _input(op, "source", source, program)
    checks.check_dtype(op, "input", x.dtype.name)
    checks.check_index_dtype(op, idx.dtype.name)
    if len(idx.sizes) != 1:
        reject(op, "index.shape", list(idx.sizes), "must have 1 dim (pypto-index_add_.md: index Shape只支持1维)")
    if src.dtype is not x.dtype:
        reject(op, "source.dtype", src.dtype.name, f"differs from input.dtype={x.dtype.name}; source takes the input's dtype")
    axis = checks.check_dim(op, dim, len(x.sizes))
    if len(src.sizes) != len(x.sizes):
        reject(op, "source.shape", list(src.sizes), f"must have as many dims as input.shape={list(x.sizes)}")
    if src.sizes[axis] != idx.sizes[0]:
        reject(op, "source.shape", list(src.sizes), f"must have source.shape[dim] == index.shape[0] = {idx.sizes[0]} (dim {axis})")
    if any(s != n for d, (s, n) in enumerate(zip(src.sizes, x.sizes)) if d != axis):
        reject(op, "source.shape", list(src.sizes), f"must equal input.shape={list(x.sizes)} in every dim but dim ({axis})")
    value = _alpha(op, alpha, x.dtype)
    scale = value if abs(float(value) - 1) > ALPHA_EPSILON else None
    checks.check_vec_tile(op, program.tile_shape, len(src.sizes))
    tiles = [t for t in _tiles(op, program, src.sizes, src.valid_shape) if t.moves_data]
    limit = x.sizes[axis]
    # the framework adds into input's GM (inplaceIdx 0); npusim's result is a copy the tile ops add into
    # (clone's tile ops; input was checked here, up to 5 dims)
    copy = _elementwise("clone", [x], "copy", compute=x.dtype.numpy)
    with_data = program.launch.system.with_data
    source_view, index_view = _gm(src), _gm(idx)
    node = program.op(op, shape=list(x.sizes), index=list(idx.sizes), tiles=len(tiles), dim=axis, alpha=value.item())

    def place(tile) -> Region:
        """The part of input a tile adds into: whole along dim, the tile's box in the other dims."""
        return Region(tuple(0 if d == axis else o for d, o in enumerate(tile.offset)),
                      tuple(limit if d == axis else b for d, b in enumerate(tile.valid_shape)))

    def build(p, tile, device):
        out = _out(device, place(tile).offset)
        box = tile.valid_shape
        first = tile.offset[axis]
        assumed = None if with_data else [(first + i) % limit for i in range(box[axis])]  # the k-th index value taken as k mod input.shape[dim]
        index_add_tile(p, Operand(source_view.shifted(tile.offset), src.dtype.numpy, box),
                       Operand(index_view.shifted((first,)), idx.dtype.numpy, (box[axis],)), out, axis, limit, scale, assumed, name=op)

    def reads(tile):
        return [(src, Region(tile.offset, tile.valid_shape)), (idx, Region((tile.offset[axis],), (tile.valid_shape[axis],)))]

    # the tile ops of one input box add one after the other, in the index's order
    return _written_into(program, node, x, copy, tiles, build, reads, place)


@pypto_op(unit="vector")
def index_add_(input: Tensor, dim: int, index: Tensor, source: Tensor, *, alpha: int | float = 1) -> Tensor:
    """``pypto.index_add_``: ``input[..., index[i], ...] += alpha * source[..., i, ...]`` along
    ``dim``, in the order of ``i``, in place (``input.move``; returns ``input``). Expands as
    indexing.cpp IndexAdd_ / TiledIndexAdd: tiles of ``source`` by the vector tile shape (every dim,
    ``dim`` too: the index is cut with it), each one TIndexAdd (``index_add_tile``: the scalar unit
    reads each row's index and an MTE3 atomic-add store adds the row, times ``alpha`` by a vector
    muls, into GM). The framework adds into ``input``'s GM; npusim's result is a copy of ``input``
    (``clone``'s tile ops) that the tile ops add into; tile ops adding into the same part of it run
    one after the other, in the index's order. Timing without data (``--no-data``: the index values
    unknown): the k-th index value is taken to be ``k mod input.shape[dim]``; with data an index
    value outside ``[0, input.shape[dim])`` stops the run with an OpArgumentError when its tile op
    reads it."""
    result = _index_add("index_add_", input, dim, index, source, alpha)
    input.move(result)
    return input


@pypto_op(unit="vector")
def index_add(input: Tensor, dim: int, index: Tensor, source: Tensor, *, alpha: int | float = 1) -> Tensor:
    """``pypto.index_add``: as ``index_add_``, ``input`` taking the result and returned. The op page
    calls it the out-of-place version, but upstream's index_add (python/pypto/op/indexing.py) calls
    the same in-place IndexAdd_ on ``input`` itself (``input0 = input``); npusim follows the code."""
    result = _index_add("index_add", input, dim, index, source, alpha)
    input.move(result)
    return input


@contextlib.contextmanager
def _tiled_by(program, tile_shape: tuple[int, ...]) -> Iterator[None]:
    """The program's vector tile shape is ``tile_shape`` inside (index_put_'s copies of input, whose
    rank its tile shape, values' rank at most, may not reach), and what it was after."""
    saved = program.tile_shape
    program.tile_shape = tile_shape
    try:
        yield
    finally:
        program.tile_shape = saved


@pypto_op(unit="vector")
def index_put_(input: Tensor, indices: tuple, values: Tensor, accumulate: bool = False) -> None:
    """``pypto.index_put_``: ``input[indices[0][i], ..., indices[k-1][i], ...] = values[i, ...]`` (or
    ``+=`` with ``accumulate``), in place (``input.move``; returns None), in the order of ``i``: a
    later write to a place wins (the op page calls duplicates undefined). Expands as indexing.cpp
    IndexPut_ / TiledIndexPut: tiles of ``values`` by the vector tile shape (a shorter tile shape
    takes values' sizes for the dims it lacks, pypto-index_put_.md 约束说明 6; the indices cut with
    values' first dim), each one TIndexPut (``index_put_tile``: per index element the scalar unit reads
    the k index values and one MTE3 store, an atomic-add store with ``accumulate``, writes the values'
    slab to the place they name). The framework writes ``input``'s GM; npusim's result is a copy of
    ``input`` (``clone``'s tile ops) that the stores write into; tile ops writing the same part of it
    run one after the other, in the index's order. Timing without data (``--no-data``): the i-th
    value of ``indices[j]`` is taken to be ``i mod input.shape[j]``; with data a value outside
    ``[0, input.shape[j])`` stops the run with an OpArgumentError when its tile op reads it."""
    op = "index_put_"
    program = current_program(op)
    x = _input(op, "input", input, program)
    vals = _input(op, "values", values, program)
    checks.check_dtype(op, "input", x.dtype.name)
    if not isinstance(accumulate, (bool, np.bool_)):
        reject(op, "accumulate", accumulate, "must be a bool")
    if accumulate and x.dtype.name not in INDEX_PUT_ACCUMULATE:
        reject(op, "input.dtype", x.dtype.name, f"does not take accumulate=True; it takes {', '.join(INDEX_PUT_ACCUMULATE)} "
                                                "(pypto-index_put_.md 约束说明 7)")
    if vals.dtype is not x.dtype:
        reject(op, "values.dtype", vals.dtype.name, f"differs from input.dtype={x.dtype.name}; values take the input's dtype")
    if not isinstance(indices, (tuple, list)) or not 1 <= len(indices) <= 4:
        reject(op, "indices", indices, "must be a tuple of 1 to 4 index tensors (indicesSize in [1, 4], indexing.cpp)")
    idx = [_input(op, f"indices[{j}]", t, program) for j, t in enumerate(indices)]
    for j, t in enumerate(idx):
        if t.dtype.name not in checks.INDEX_DTYPES[op]:
            reject(op, f"indices[{j}].dtype", t.dtype.name, f"is not an index dtype of {op}; it takes {', '.join(checks.INDEX_DTYPES[op])}")
        if len(t.sizes) != 1:
            reject(op, f"indices[{j}].shape", list(t.sizes), "must have 1 dim (pypto-index_put_.md: 每个Tensor均为一维)")
        if t.sizes != idx[0].sizes:
            reject(op, f"indices[{j}].shape", list(t.sizes), f"differs from indices[0].shape={list(idx[0].sizes)}; the index tensors have one length "
                                                             "(no broadcast)")
    k, rank = len(idx), len(x.sizes)
    if rank + 1 != k + len(vals.sizes):
        reject(op, "values.shape", list(vals.sizes), f"must have input.dim + 1 - len(indices) = {rank + 1 - k} dims (input.shape={list(x.sizes)}, "
                                                     f"{k} index tensors: dimSelf + 1 == indicesSize + dimValues)")
    if vals.sizes[0] != idx[0].sizes[0]:
        reject(op, "values.shape", list(vals.sizes), f"must have values.shape[0] == the indices' length {idx[0].sizes[0]}")
    if tuple(vals.sizes[1:]) != tuple(x.sizes[k:]):
        reject(op, "values.shape", list(vals.sizes), f"must end in input's last {rank - k} sizes {list(x.sizes[k:])} (no broadcast)")
    given = program.tile_shape
    if not given or len(given) > len(vals.sizes):
        reject(op, "tile_shape", list(given or ()), f"must have 1 to values.dim = {len(vals.sizes)} dims (pypto-index_put_.md 约束说明 6)")
    tile_shape = tuple(given) + tuple(vals.sizes[len(given):])
    checks.check_vec_tile(op, tile_shape, len(vals.sizes))
    tiles = [t for t in _grid(vals.sizes, tile_shape, vals.valid_shape) if t.moves_data]
    limits = tuple(x.sizes[:k])
    # the framework writes input's GM (inplaceIdx 0); npusim's result is a copy of input (clone's tile ops),
    # tiled as values are: 1 along the indexed dims but the last (values' first tile size), values' tile after
    input_tile = (1,) * (k - 1) + tile_shape
    with _tiled_by(program, input_tile):
        copy = _elementwise("clone", [x], "copy", compute=x.dtype.numpy)
    with_data = program.launch.system.with_data
    values_view, index_views = _gm(vals), [_gm(t) for t in idx]
    node = program.op(op, shape=list(x.sizes), indices=k, length=idx[0].sizes[0], tiles=len(tiles), accumulate=bool(accumulate))

    def place(tile) -> Region:
        """The part of input a tile may write: whole along the indexed dims, the tile's trailing box."""
        return Region((0,) * k + tuple(tile.offset[1:]), limits + tuple(tile.valid_shape[1:]))

    def build(p, tile, device):
        first, length = tile.offset[0], tile.valid_shape[0]
        assumed = None if with_data else [[(first + i) % n for i in range(length)] for n in limits]
        index_operands = [Operand(v.shifted((first,)), t.dtype.numpy, (length,)) for v, t in zip(index_views, idx)]
        index_put_tile(p, Operand(values_view.shifted(tile.offset), vals.dtype.numpy, tile.valid_shape), index_operands,
                       _out(device, place(tile).offset), limits, bool(accumulate), assumed, name=op)

    def reads(tile):
        return [(vals, Region(tile.offset, tile.valid_shape))] + [(t, Region((tile.offset[0],), (tile.valid_shape[0],))) for t in idx]

    # the tile ops writing one part of input run one after the other, in the index's order
    result = _written_into(program, node, x, copy, tiles, build, reads, place)
    with _tiled_by(program, input_tile):  # a kernel argument gets the result written into its GM by tile ops of input's rank
        input.move(result)


__all__ = ["gather", "index_add", "index_add_", "index_put_", "index_select", "scatter", "scatter_", "scatter_update"]
