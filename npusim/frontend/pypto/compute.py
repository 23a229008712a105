"""PyPTO's tile compute ops as the simulator builds them: checks, tiling, tile ops, dependencies.

Each op is called inside a kernel function (``npusim.launch``), on GM tensors: kernel arguments,
views of them, ``shmem_get`` results and the results of other compute ops. It runs the framework's
checks before anything runs (an :class:`~npusim.errors.OpArgumentError` naming op, argument, value
and rule), expands into tile ops by the current vector tile shape (``set_vec_tile_shapes``) or, for
``matmul``, by the cube tile shapes (``set_cube_tile_shapes``), and makes each tile op depend on the
tile ops that wrote the parts of its inputs it reads. Vector tile ops run on AIV cores, matmul tile
ops on AIC cores, as the AICPU schedulers hand them out. Every result is a new GM tensor on the PE's
die (a workspace of the launch), written tile by tile (``docs/pypto.md``: expansion, numerics, timing).
"""

from __future__ import annotations

import builtins
import math
from collections.abc import Callable, Sequence

import numpy as np

from npusim import isa
from npusim.config.products import PRODUCTS
from npusim.errors import ResourceError
from npusim.frontend.pypto.ops import LAST_TILES, _cube_tuple, _gm, pypto_op
from npusim.frontend.pypto.runtime import current_program
from npusim.frontend.pypto.tensors import Destination, Tensor
from npusim.frontend.tensor import DeviceTensor, empty
from npusim.isa.target import CubeTarget
from npusim.kernels.compute import checks
from npusim.kernels.compute.checks import reject
from npusim.kernels.compute.matmul import CubeTiles, capacity_needs, matmul_tile, matmul_tiles, pipeline_tiling
from npusim.kernels.compute.modes import CastMode, PrecisionType, SaturationMode
from npusim.kernels.compute.vector_tiles import (
    Operand,
    cast_tile,
    cumsum_tile,
    elementwise_tile,
    fill_tile,
    one_hot_tile,
    reduce_tile,
    transpose_tile,
)
from npusim.kernels.cube.pipeline import BlockViews, GemmShape
from npusim.kernels.shmem.dtypes import DataType
from npusim.kernels.shmem.tile_ops import ADDRESS_SCALAR_INSTRUCTIONS, GmView
from npusim.kernels.shmem.tiling import Region, Tile, tile_grid
from npusim.runtime.ops import PYPTO_OPS
from npusim.runtime.program import PeProgram
from npusim.runtime.symbolic import SymbolicScalar, value_of
from npusim.runtime.tasks import ControlRead, CoreTask
from npusim.runtime.templates import ProgramPiece

FP32 = np.dtype(np.float32)
UPCAST_FP16 = ("add", "sub", "mul")
"""fp16 ops the framework computes in fp32 on Atlas A2 / A3 (AutoCast, opcode.h UNSUPPORT_FP16_OPS);
bf16 ops are all computed in fp32 there (UNSUPPORT_BF16_OPS)."""


# -- arguments ---------------------------------------------------------------------------------------


def _input(op: str, arg: str, value, program: PeProgram, *, read: bool = True) -> Tensor:
    if not isinstance(value, Tensor):
        reject(op, arg, value, "must be a pypto.Tensor")
    if value.program is not program:
        reject(op, arg, value, f"belongs to PE {value.pe}'s program, not to PE {program.pe}'s; each PE uses its own tensors")
    if value.location == "token":
        reject(op, arg, value, "is an op's token (a pred), not data")
    value = value.in_gm(op)  # a shmem_load result: its tile ops store a GM copy the op reads
    checks.check_rank(op, arg, value.sizes)
    return value.as_read() if read else value


def compute_dtype(op: str, dtype: np.dtype) -> np.dtype:
    """The dtype the chip computes ``op`` in for inputs of ``dtype`` (Atlas A2 / A3)."""
    if dtype == DataType.DT_BF16.numpy or (dtype == DataType.DT_FP16.numpy and op in UPCAST_FP16):
        return FP32
    return dtype


def _tiles(op: str, program: PeProgram, shape: Sequence[int], valid: Sequence[int], whole: Sequence[int] = ()) -> list[Tile]:
    """The tiles of an output (or input) of ``shape`` by the vector tile shape, row-major; dims in
    ``whole`` are not split (one tile spans them)."""
    tile_shape = list(checks.check_vec_tile(op, program.tile_shape, len(shape)))
    for dim in whole:
        tile_shape[dim] = shape[dim]
    return _grid(shape, tile_shape, valid)


def _grid(shape: Sequence[int], tile_shape: Sequence[int], valid: Sequence[int]) -> list[Tile]:
    tiles = []
    grid = tile_grid(shape, tile_shape)
    for index in range(math.prod(grid)):
        position, rest = [], index
        for n in reversed(grid):
            position.append(rest % n)
            rest //= n
        offset = tuple(i * t for i, t in zip(reversed(position), tile_shape))
        box = tuple(min(s - o, t) for s, o, t in zip(shape, offset, tile_shape))
        inside = tuple(min(max(v - o, 0), b) for v, o, b in zip(valid, offset, box))
        tiles.append(Tile(index, offset, box, inside))
    return tiles


def _view(tensor: Tensor, rank: int) -> GmView:
    """The GM view of ``tensor``, with stride-0 leading dims up to ``rank`` (numpy's broadcast)."""
    view = _gm(tensor)
    return GmView(view.allocation, view.offset_bytes, (0,) * (rank - len(tensor.sizes)) + tuple(view.strides))


def _result(program: PeProgram, shape: Sequence[int], dtype: DataType, valid: Sequence[int], tasks, tiles) -> Tensor:
    result = Tensor.make(program, "GM", shape, dtype, device=tasks[1].device, valid_shape=valid,
                         writes=[(task, Region(t.offset, t.shape)) for task, t in zip(tasks[0], tiles)])
    result.destination = tasks[1]
    return result


def _empty_program(p) -> None:
    """A tile outside the valid region: only its address set-up."""
    p.scalar(ADDRESS_SCALAR_INSTRUCTIONS, name="idle tile")


def _launch_tiles(op: str, program: PeProgram, tiles: Sequence[Tile], build: Callable, reads: Callable, *,
                  shape: Sequence[int], dtype: DataType, record: dict | None = None, piece: Callable | None = None):
    """One tile op per tile: ``build(p, tile)`` appends its program, ``reads(tile)`` lists the
    (tensor, region) it reads; ``piece(tile, device)``, if given, makes a tile's program a
    :class:`ProgramPiece` instead (reused for the tiles of the same shape; given the
    :class:`Destination`, read when the tile op runs). The first tile's program
    is built once now, so that a tile that does not fit the core's buffers fails before anything
    runs. The tile ops run on the unit the op ``op`` is registered with (:mod:`npusim.runtime.ops`).
    Returns (tasks, result device tensor)."""
    unit = PYPTO_OPS.get(op).unit
    destination = Destination(empty(tuple(shape), dtype.numpy, device=program.die))  # an assemble may point it elsewhere before the tile ops run
    node = program.op(op, shape=list(shape), tiles=len(tiles), **(record or {}))
    _dry_build(op, program, tiles[0], build, program.launch.core_kinds[unit], destination.device)
    for tile in tiles:
        def run(p, tile=tile):
            if all(v > 0 for v in tile.valid_shape):
                build(p, tile, destination.device)
            else:
                _empty_program(p)

        task = CoreTask(node, tile.index, piece(tile, destination) if piece is not None else run, unit)
        for tensor, region in reads(tile):
            task.depend_on(tensor.tasks_for(region))
        node.tasks.append(task)
    return node.tasks, destination


def _dry_build(op: str, program: PeProgram, tile: Tile, build: Callable, core_kind: str, device) -> None:
    if not all(v > 0 for v in tile.valid_shape):
        return
    kernel = isa.Kernel(op, die=program.die, system=program.launch.system)
    p = kernel.core(core_kind, 0)
    try:
        build(p, tile, device)
    except ResourceError as error:
        raise ResourceError(f"pypto.{op}: a tile of shape {list(tile.shape)} does not fit one {core_kind.upper()} core: {error}") from None


def _box_of(operand: Tensor, out_shape: Sequence[int], tile: Tile) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """The offset and box an operand (broadcast to ``out_shape``) reads for ``tile`` (its valid part)."""
    shape = (1,) * (len(out_shape) - len(operand.sizes)) + tuple(operand.sizes)
    offset = tuple(0 if s == 1 and o != 1 else t for s, o, t in zip(shape, out_shape, tile.offset))
    box = tuple(1 if s == 1 and o != 1 else v for s, o, v in zip(shape, out_shape, tile.valid_shape))
    return offset, box


def _region(operand: Tensor, offset, box) -> Region:
    drop = len(offset) - len(operand.sizes)
    return Region(tuple(offset[drop:]), tuple(box[drop:]))


# -- elementwise -------------------------------------------------------------------------------------


def _elementwise(op: str, tensors: Sequence[Tensor], kind: str, *, scalar=None, out_dtype: DataType | None = None,
                 compute: np.dtype | None = None, record: dict | None = None, out_shape: Sequence[int] | None = None,
                 out_valid: Sequence[int] | None = None) -> Tensor:
    program = tensors[0].program
    shape = tuple(tensors[0].sizes)
    for other in tensors[1:]:
        shape = checks.broadcast_shape(op, shape, other.sizes)
    if out_shape is not None:  # broadcast to this shape (expand_clone)
        shape = checks.broadcast_shape(op, shape, tuple(out_shape))
    valid = list(out_valid) if out_valid is not None else list(shape)  # an operand limits the valid part of the dims it is not broadcast along
    for tensor in tensors:
        lead = len(shape) - len(tensor.sizes)
        for dim, (size, v) in enumerate(zip(tensor.sizes, tensor.valid_shape), lead):
            if size == shape[dim]:
                valid[dim] = min(valid[dim], v)
    valid_shape = tuple(valid)
    dtype = tensors[0].dtype
    out_dtype = out_dtype or dtype
    compute = np.dtype(compute if compute is not None else compute_dtype(op, dtype.numpy))
    tiles = _tiles(op, program, shape, valid_shape)
    read = [_exact_value(t, compute) for t in tensors]  # fp32 values an upcast producer keeps (AutoCast's cast chains removed)
    views = [_view(t, len(shape)) if exact is None else _exact_view(exact, len(shape)) for t, exact in zip(tensors, read)]
    dtypes = [t.dtype.numpy if exact is None else exact.dtype for t, exact in zip(tensors, read)]
    upcast = out_dtype.numpy != compute and compute == FP32 and out_dtype.name in ("DT_FP16", "DT_BF16")
    placed: list[Destination] = []  # the result's destination, once made

    def build(p, tile, device):
        operands = []
        for tensor, view, operand_dtype in zip(tensors, views, dtypes):
            offset, box = _box_of(tensor, shape, tile)
            operands.append(Operand(view.shifted(offset), operand_dtype, box))
        out = GmView(device.allocation, device.offset_bytes, device.strides).shifted(tile.offset)
        exact = placed[0].exact if placed else None
        keep = None if exact is None else GmView(exact.allocation, exact.offset_bytes, exact.strides).shifted(tile.offset)
        elementwise_tile(p, operands, out, out_dtype.numpy, tile.valid_shape, kind, compute, scalar=scalar, name=op, keep=keep)

    def reads(tile):
        return [(t, _region(t, *_box_of(t, shape, tile))) for t in tensors]

    tasks = _launch_tiles(op, program, tiles, build, reads, shape=shape, dtype=out_dtype, record=record)
    placed.append(tasks[1])
    result = _result(program, shape, out_dtype, valid_shape, tasks, tiles)
    if upcast:
        result.autocast = tasks[1]
    return result


def _exact_value(tensor: Tensor, compute: np.dtype) -> DeviceTensor | None:
    """For an op that computes ``tensor`` (fp16 / bf16) in fp32: the fp32 value of it that its
    producer computed before casting it down, kept in GM beside it (None: read it as it is). The
    framework's AutoCast pass puts a cast to fp32 around each such op and then removes the cast
    pairs between two of them (auto_cast.cpp RemoveRedundantCastChain): a chain of fp16 / bf16 ops
    rounds once, at its end. Only an op result whose tile ops are not yet linked can still keep it."""
    destination = tensor.autocast
    if compute != FP32 or destination is None or any(task.bit >= 0 for task, _ in tensor.writes):
        return None
    if destination.exact is None:
        destination.exact = empty(tuple(tensor.sizes), np.float32, device=tensor.program.die)
    return destination.exact


def _exact_view(exact: DeviceTensor, rank: int) -> GmView:
    return GmView(exact.allocation, exact.offset_bytes, (0,) * (rank - len(exact.shape)) + tuple(exact.strides))


def _scalar_value(op: str, tensor: Tensor, value):
    """A scalar operand: int or float (an int for an integer tensor, as the framework requires)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        reject(op, "other", value, "must be a pypto.Tensor, an int or a float")
    if np.issubdtype(tensor.dtype.numpy, np.integer) and isinstance(value, float):
        reject(op, "other", value, f"is a float, but input is {tensor.dtype.name}: an integer tensor takes only int scalars")
    return value


def _binary(op: str, input, other, kind: str, scalar_kind: str | None, *, negate: bool = False) -> Tensor:
    program = current_program(op)
    x = _input(op, "input", input, program)
    checks.check_dtype(op, "input", x.dtype.name)
    if isinstance(other, Tensor):
        y = _input(op, "other", other, program)
        if y.dtype is not x.dtype:
            reject(op, "other.dtype", y.dtype.name, f"differs from input.dtype={x.dtype.name}; both tensors need the same dtype")
        return _elementwise(op, [x, y], kind)
    value = _scalar_value(op, x, other)
    if scalar_kind is None:  # no vector instruction with a scalar operand: the scalar is duplicated into a tile first
        constant = full(list(x.sizes), int(value) if np.issubdtype(x.dtype.numpy, np.integer) else float(value), x.dtype)
        return _elementwise(op, [x, constant], kind)
    return _elementwise(op, [x], scalar_kind, scalar=-value if negate else value, record={"scalar": value})


@pypto_op()
def add(input: Tensor, other) -> Tensor:
    """``pypto.add``: input + other (a tensor, broadcast as numpy, or an int / float)."""
    return _binary("add", input, other, "add", "adds")


@pypto_op()
def sub(input: Tensor, other) -> Tensor:
    """``pypto.sub``: input - other."""
    return _binary("sub", input, other, "sub", "adds", negate=True)


@pypto_op()
def mul(input: Tensor, other) -> Tensor:
    """``pypto.mul``: input * other."""
    return _binary("mul", input, other, "mul", "muls")


@pypto_op()
def div(input: Tensor, other, precision_type: PrecisionType = PrecisionType.HIGH_PRECISION) -> Tensor:
    """``pypto.div``: input / other, IEEE division; int16 / int32 inputs are divided in fp32 and give
    fp32 (binary.cpp). ``precision_type`` is accepted; Atlas A2 / A3 run the instruction either way."""
    op = "div"
    if not isinstance(precision_type, PrecisionType):
        reject(op, "precision_type", precision_type, "must be a pypto.PrecisionType")
    program = current_program(op)
    x = _input(op, "input", input, program)
    if np.issubdtype(x.dtype.numpy, np.integer):
        checks.check_dtype(op, "input", x.dtype.name)
        x = cast(x, DataType.DT_FP32)
        other = cast(other, DataType.DT_FP32) if isinstance(other, Tensor) else float(_scalar_value(op, input, other))
    return _binary(op, x, other, "div", None)


def divide_scalar_by(value, input: Tensor) -> Tensor:
    """``value / input`` (a Python number over a tensor): ``value`` filled into a tensor of the
    input's shape, divided by the input."""
    x = _input("div", "other", input, current_program("div"))
    value = _scalar_value("div", x, value)
    fill = int(value) if np.issubdtype(x.dtype.numpy, np.integer) else float(value)
    return div(full(list(x.sizes), fill, x.dtype, valid_shape=list(x.valid_shape)), x)


@pypto_op()
def maximum(input, other) -> Tensor:
    """``pypto.maximum``: the larger of each pair (a tensor and a tensor or a scalar)."""
    if not isinstance(input, Tensor):
        input, other = other, input
    return _binary("maximum", input, other, "max", "maxs")


@pypto_op()
def minimum(input, other) -> Tensor:
    """``pypto.minimum``: the smaller of each pair."""
    if not isinstance(input, Tensor):
        input, other = other, input
    return _binary("minimum", input, other, "min", "mins")


def _unary(op: str, input, kind: str, precision_type=None) -> Tensor:
    if precision_type is not None and not isinstance(precision_type, PrecisionType):
        reject(op, "precision_type", precision_type, "must be a pypto.PrecisionType")
    program = current_program(op)
    x = _input(op, "input", input, program)
    checks.check_dtype(op, "input", x.dtype.name)
    return _elementwise(op, [x], kind)


@pypto_op()
def exp(input: Tensor, precision_type: PrecisionType = PrecisionType.INTRINSIC) -> Tensor:
    """``pypto.exp``: e ** input (not bit-exact: see docs/pypto.md)."""
    return _unary("exp", input, "exp", precision_type)


@pypto_op()
def sqrt(input: Tensor, precision_type: PrecisionType = PrecisionType.INTRINSIC) -> Tensor:
    """``pypto.sqrt``: the square root (correctly rounded)."""
    return _unary("sqrt", input, "sqrt", precision_type)


@pypto_op()
def rsqrt(input: Tensor, precision_type: PrecisionType = PrecisionType.INTRINSIC) -> Tensor:
    """``pypto.rsqrt``: 1 / sqrt(input) (not bit-exact: see docs/pypto.md)."""
    return _unary("rsqrt", input, "rsqrt", precision_type)


@pypto_op()
def abs(input: Tensor) -> Tensor:  # noqa: A001 - PyPTO's name
    """``pypto.abs``: the absolute value."""
    return _unary("abs", input, "abs")


@pypto_op()
def neg(input: Tensor) -> Tensor:
    """``pypto.neg``: -input."""
    return _unary("neg", input, "neg")


# -- cast --------------------------------------------------------------------------------------------


@pypto_op()
def cast(input: Tensor, dtype: DataType, mode: CastMode = CastMode.CAST_NONE, satmode: SaturationMode = SaturationMode.OFF) -> Tensor:
    """``pypto.cast``: input converted to ``dtype`` with the CastMode (a mode the pair does not take,
    or CAST_NONE, falls back to the pair's default, as the framework). Float -> integer saturates;
    an integer narrowing saturates with ``satmode=ON`` and wraps with OFF."""
    op = "cast"
    program = current_program(op)
    x = _input(op, "input", input, program)
    if not isinstance(dtype, DataType):
        reject(op, "dtype", dtype, "must be a pypto.DataType (pypto.DT_FP16 ...)")
    if not isinstance(mode, CastMode):
        reject(op, "mode", mode, "must be a pypto.CastMode")
    if not isinstance(satmode, SaturationMode):
        reject(op, "satmode", satmode, "must be a pypto.SaturationMode")
    product = PRODUCTS.get(program.launch.system.spec.product)
    checks.check_cast(x.dtype.name, dtype.name, product)
    chosen = checks.cast_mode(x.dtype.name, dtype.name, mode.name, product)
    rounding = CastMode[chosen].rounding if chosen is not None else "rint"
    saturate = not (np.issubdtype(x.dtype.numpy, np.integer) and satmode is SaturationMode.OFF)
    shape, valid = tuple(x.sizes), x.valid_shape
    tiles = _tiles(op, program, shape, valid)
    view = _gm(x)

    def build(p, tile, device):
        out = GmView(device.allocation, device.offset_bytes, device.strides).shifted(tile.offset)
        cast_tile(p, Operand(view.shifted(tile.offset), x.dtype.numpy, tile.valid_shape), out, dtype.numpy, rounding, saturate, name=op)

    tasks = _launch_tiles(op, program, tiles, build, lambda tile: [(x, Region(tile.offset, tile.valid_shape))], shape=shape, dtype=dtype,
                          record={"dtype": dtype.name, "mode": chosen or "none"})
    return _result(program, shape, dtype, valid, tasks, tiles)


# -- reductions and scans ----------------------------------------------------------------------------


def _along(op: str, input, dim: int, out_dtype_of: Callable[[DataType], DataType], kind: str, keepdim: bool | None) -> Tensor:
    program = current_program(op)
    x = _input(op, "input", input, program)
    checks.check_dtype(op, "input", x.dtype.name)
    axis = checks.check_dim(op, dim, len(x.sizes))
    if keepdim is not None and not isinstance(keepdim, bool):
        reject(op, "keepdim", keepdim, "must be True or False")
    out_dtype = out_dtype_of(x.dtype)
    compute = compute_dtype(op, x.dtype.numpy)
    if kind == "cumsum":  # math.cpp TensorCumOperation: fp16 / bf16 run in fp32, integers in int32
        compute = np.dtype(np.int32) if np.issubdtype(x.dtype.numpy, np.integer) else FP32
    if kind in ("reduce_argmax", "reduce_argmin"):  # ArgMax / ArgMin cast fp16 to fp32 first; the index is exact in fp32
        compute = FP32
    in_shape = tuple(x.sizes)
    if kind == "cumsum":
        out_shape, out_valid = in_shape, x.valid_shape
    else:
        kept = in_shape[:axis] + (1,) + in_shape[axis + 1:]
        out_shape = kept if keepdim else in_shape[:axis] + in_shape[axis + 1:]
        valid_kept = x.valid_shape[:axis] + (1,) + x.valid_shape[axis + 1:]
        out_valid = valid_kept if keepdim else x.valid_shape[:axis] + x.valid_shape[axis + 1:]
    tiles = _tiles(op, program, in_shape, x.valid_shape, whole=(axis,))
    view = _gm(x)

    def build(p, tile, device):
        operand = Operand(view.shifted(tile.offset), x.dtype.numpy, tile.valid_shape)
        strides = tuple(device.strides)
        if kind == "cumsum":
            out = GmView(device.allocation, device.offset_bytes, strides).shifted(tile.offset)
            cumsum_tile(p, operand, out, axis, compute, out_dtype.numpy, name=op)
            return
        if not keepdim:  # the dropped axis as a size-1 dim of the stored box
            strides = strides[:axis] + (0,) + strides[axis:]
        out = GmView(device.allocation, device.offset_bytes, strides).shifted(tile.offset[:axis] + (0,) + tile.offset[axis + 1:])
        reduce_tile(p, operand, out, axis, kind, compute, out_dtype.numpy, name=op)

    tasks = _launch_tiles(op, program, tiles, build, lambda tile: [(x, Region(tile.offset, tile.valid_shape))], shape=out_shape,
                          dtype=out_dtype, record={"dim": axis})
    out_tiles = [Tile(t.index, t.offset if kind == "cumsum" else _drop(t.offset, axis, keepdim), t.shape if kind == "cumsum" else _drop(t.shape, axis, keepdim, 1),
                      t.valid_shape) for t in tiles]
    return _result(program, out_shape, out_dtype, out_valid, tasks, out_tiles)


def _drop(values: tuple, axis: int, keepdim: bool, kept_value: int = 0) -> tuple:
    return values[:axis] + (kept_value,) + values[axis + 1:] if keepdim else values[:axis] + values[axis + 1:]


@pypto_op()
def sum(input: Tensor, dim: int, keepdim: bool = False) -> Tensor:  # noqa: A001 - PyPTO's name
    """``pypto.sum``: the sum along ``dim`` (bf16 summed in fp32; order: docs/pypto.md)."""
    return _along("sum", input, dim, lambda d: d, "reduce_sum", keepdim)


@pypto_op()
def amax(input: Tensor, dim: int, keepdim: bool = False) -> Tensor:
    """``pypto.amax``: the largest element along ``dim``."""
    return _along("amax", input, dim, lambda d: d, "reduce_max", keepdim)


@pypto_op()
def amin(input: Tensor, dim: int, keepdim: bool = False) -> Tensor:
    """``pypto.amin``: the smallest element along ``dim``."""
    return _along("amin", input, dim, lambda d: d, "reduce_min", keepdim)


@pypto_op()
def prod(input: Tensor, dim: int, keepdim: bool = False) -> Tensor:
    """``pypto.prod``: the product along ``dim`` (fp32 / int32 / int16 in their dtype, ints wrapping;
    the same pairwise halving order as ``sum``: not bit-exact against a sequential product)."""
    return _along("prod", input, dim, lambda d: d, "reduce_prod", keepdim)


@pypto_op()
def argmax(input: Tensor, dim: int = -1, keepdim: bool = False) -> Tensor:
    """``pypto.argmax``: the index (DT_INT32) of the first largest element along ``dim`` (fp16 / bf16
    compared in fp32, reduction.cpp ArgMax; a NaN counts as the largest)."""
    return _along("argmax", input, dim, lambda d: DataType.DT_INT32, "reduce_argmax", keepdim)


@pypto_op()
def argmin(input: Tensor, dim: int = -1, keepdim: bool = False) -> Tensor:
    """``pypto.argmin``: the index (DT_INT32) of the first smallest element along ``dim``."""
    return _along("argmin", input, dim, lambda d: DataType.DT_INT32, "reduce_argmin", keepdim)


@pypto_op()
def cumsum(input: Tensor, dim: int) -> Tensor:
    """``pypto.cumsum``: the running sum along ``dim``, element after element: fp16 / bf16 in fp32,
    int16 / int32 in int32 (wrapping) giving int64 (math.cpp TensorCumOperation). The tile does not
    split ``dim``."""
    return _along("cumsum", input, dim, lambda d: DataType.DT_INT64 if np.issubdtype(d.numpy, np.integer) else d, "cumsum", None)


# -- creation, views and data movement ---------------------------------------------------------------


@pypto_op()
def full(size: list[int], fill_value, dtype: DataType, *, valid_shape: list[int] | None = None) -> Tensor:
    """``pypto.full``: a tensor of ``size`` filled with ``fill_value`` (an int for an integer dtype;
    an int or a float for a float dtype)."""
    op = "full"
    program = current_program(op)
    fill_value = value_of(program, fill_value)
    if not isinstance(dtype, DataType):
        reject(op, "dtype", dtype, "must be a pypto.DataType")
    checks.check_dtype(op, "dtype", dtype.name)
    if not isinstance(size, (list, tuple)) or any(not isinstance(s, int) or isinstance(s, bool) for s in size):
        reject(op, "size", size, "must be a list of ints")
    checks.check_rank(op, "size", size)
    if isinstance(fill_value, bool) or not isinstance(fill_value, (int, float)):
        reject(op, "fill_value", fill_value, "must be an int or a float")
    if np.issubdtype(dtype.numpy, np.integer) and isinstance(fill_value, float):
        reject(op, "fill_value", fill_value, f"is a float, but dtype={dtype.name} is an integer type: give an int")
    if np.issubdtype(dtype.numpy, np.unsignedinteger) and fill_value < 0:
        reject(op, "fill_value", fill_value, f"is negative, which the unsigned dtype={dtype.name} cannot hold (creation.py)")
    if not np.issubdtype(dtype.numpy, np.integer):
        fill_value = float(fill_value)  # an int for a float dtype is its value (the framework's Element(dtype, value))
    shape = tuple(size)
    valid = _ints_or_reject(op, "valid_shape", valid_shape, len(shape), program) if valid_shape is not None else shape
    if any(v > s for v, s in zip(valid, shape)):
        reject(op, "valid_shape", list(valid), f"must lie in size {list(shape)}")
    tiles = _tiles(op, program, shape, valid)

    def build(p, tile, device):
        out = GmView(device.allocation, device.offset_bytes, device.strides).shifted(tile.offset)
        fill_tile(p, out, dtype.numpy, tile.valid_shape, fill_value, name=op)

    tasks = _launch_tiles(op, program, tiles, build, lambda tile: [], shape=shape, dtype=dtype, record={"value": fill_value})
    return _result(program, shape, dtype, valid, tasks, tiles)


@pypto_op()
def one_hot(input: Tensor, num_classes: int) -> Tensor:
    """``pypto.one_hot``: int64 ``input.shape + [num_classes]``, 1 where the class is the index.
    The tile shape tiles the output; its last dim must equal ``num_classes``."""
    op = "one_hot"
    program = current_program(op)
    x = _input(op, "input", input, program)
    checks.check_dtype(op, "input", x.dtype.name)
    if not isinstance(num_classes, int) or isinstance(num_classes, bool) or num_classes <= 0:
        reject(op, "num_classes", num_classes, "must be a positive int")
    if len(x.sizes) > 3:
        reject(op, "input.shape", list(x.shape), "must have 1 to 3 dims")
    shape = tuple(x.sizes) + (num_classes,)
    tile_shape = checks.check_vec_tile(op, program.tile_shape, len(shape))
    if tile_shape[-1] != num_classes:
        reject(op, "tile_shape", list(tile_shape), f"must have num_classes={num_classes} as its last dim (the classes are not split)")
    valid = tuple(x.valid_shape) + (num_classes,)
    tiles = _grid(shape, tile_shape, valid)
    view, out_dtype = _gm(x), DataType.DT_INT64

    def build(p, tile, device):
        out = GmView(device.allocation, device.offset_bytes, device.strides).shifted(tile.offset)
        one_hot_tile(p, Operand(view.shifted(tile.offset[:-1]), x.dtype.numpy, tile.valid_shape[:-1]), out, num_classes, out_dtype.numpy, name=op)

    tasks = _launch_tiles(op, program, tiles, build, lambda tile: [(x, Region(tile.offset[:-1], tile.valid_shape[:-1]))],
                          shape=shape, dtype=out_dtype, record={"num_classes": num_classes})
    return _result(program, shape, out_dtype, valid, tasks, tiles)


@pypto_op()
def reshape(input: Tensor, shape: list[int], *, valid_shape: list | None = None, inplace: bool = False) -> Tensor:
    """``pypto.reshape``: the same elements with another shape (one dim may be -1). A contiguous GM
    tensor is viewed in place (no data moves), and so is any view when only dims of size 1 come or
    go; its readers wait for every writer of the input."""
    op = "reshape"
    program = current_program(op)
    x = _input(op, "input", input, program, read=False)  # read below, but for a view of an op result not yet placed
    if not isinstance(shape, (list, tuple)) or any(not isinstance(s, int) or isinstance(s, bool) for s in shape) or list(shape).count(-1) > 1:
        reject(op, "shape", shape, "must be a list of ints, at most one of them -1")
    known = math.prod(s for s in shape if s != -1)
    new = tuple(math.prod(x.sizes) // known if s == -1 and known else s for s in shape)
    if math.prod(new) != math.prod(x.sizes) or any(s <= 0 for s in new):
        reject(op, "shape", list(shape), f"does not hold the {math.prod(x.sizes)} elements of input {list(x.sizes)}")
    if valid_shape is not None:
        valid_shape = _ints_or_reject(op, "valid_shape", valid_shape, len(new), program)
    if [d for d in x.sizes if d != 1] == [d for d in new if d != 1]:
        return _unit_dims_view(program, x, new, valid_shape)
    x = x.as_read()
    if valid_shape is not None and (tuple(x.valid_shape) != tuple(x.sizes) or tuple(x.gm().shape) != tuple(x.sizes)):
        return _reshape_valid_part(program, x, new, valid_shape)
    if not x.gm().is_contiguous():
        reject(op, "input", x, "is not contiguous in GM (a strided view): reshape of a view is not modelled")
    valid = valid_shape if valid_shape is not None else (new if x.valid_shape == x.sizes else None)
    if valid is None:
        reject(op, "valid_shape", None, f"must be given: input has the valid shape {list(x.valid_shape)}, which a reshape does not carry over")
    return Tensor.make(program, "GM", new, x.dtype, device=x.gm().view(*new), valid_shape=valid,
                  writes=[(task, None) for task in x.tasks_for(None)])


def _ints_or_reject(op: str, name: str, values, rank: int, program: PeProgram) -> tuple[int, ...]:
    values = [value_of(program, v) for v in values] if isinstance(values, (list, tuple)) else values
    if not isinstance(values, list) or len(values) != rank or any(not isinstance(v, int) or isinstance(v, bool) or v < 0 for v in values):
        reject(op, name, values, f"must be {rank} non-negative ints")
    return tuple(values)


def view_strides(shape: Sequence[int], strides: Sequence[int], new: Sequence[int]) -> tuple[int, ...] | None:
    """The strides of ``new`` viewing the elements of a strided ``shape`` in row-major order without
    moving them (torch's computeStride), or None when no strides do."""
    if math.prod(shape) == 0 or not shape:
        return tuple(0 for _ in new) if math.prod(shape) == math.prod(new) else None
    out = [0] * len(new)
    view_d, base = len(new) - 1, strides[-1]
    tensor_numel = view_numel = 1
    for d in reversed(range(len(shape))):
        tensor_numel *= shape[d]
        if d == 0 or (shape[d - 1] != 1 and strides[d - 1] != tensor_numel * base):
            while view_d >= 0 and (view_numel < tensor_numel or new[view_d] == 1):
                out[view_d] = view_numel * base
                view_numel *= new[view_d]
                view_d -= 1
            if view_numel != tensor_numel:
                return None
            if d > 0:
                base, tensor_numel, view_numel = strides[d - 1], 1, 1
    return tuple(out) if view_d == -1 else None


def _as_shape(device: DeviceTensor, shape: Sequence[int]) -> DeviceTensor | None:
    strides = view_strides(device.shape, device.strides, shape)
    return None if strides is None else DeviceTensor(device.system, device.allocation, device.offset_bytes, tuple(shape), strides, device.dtype)


def _reshape_valid_part(program: PeProgram, x: Tensor, new: tuple[int, ...], valid: tuple[int, ...]) -> Tensor:
    """``reshape`` of a partly valid input (a tail block, a view past the tensor's end) with a
    ``valid_shape``: the framework's reshape copy. The input's valid elements, in row-major order,
    become the result's valid part ``valid`` in a new GM tensor of ``new``: one copy GM -> UB -> GM
    per tile of the vector tile shape, over whichever of the two valid shapes both sides can be
    viewed as (the one of the vector tile shape's rank first)."""
    op = "reshape"
    if math.prod(valid) != math.prod(x.valid_shape) or any(v > s for v, s in zip(valid, new)):
        reject(op, "valid_shape", list(valid), f"must lie in the shape {list(new)} and hold the input's {math.prod(x.valid_shape)} "
               f"valid elements (its valid shape {list(x.valid_shape)})")
    source = x.gm()[tuple(slice(0, v) for v in x.valid_shape)]
    target = empty(new, x.dtype.numpy, device=program.die)
    placed = target[tuple(slice(0, v) for v in valid)]
    options = [(tuple(x.valid_shape), source, _as_shape(placed, x.valid_shape)), (valid, _as_shape(source, valid), placed)]
    options.sort(key=lambda option: len(option[0]) != len(program.tile_shape or ()))
    usable = [option for option in options if option[1] is not None and option[2] is not None]
    if not usable:
        reject(op, "valid_shape", list(valid), f"the valid part {list(x.valid_shape)} of the input and the result's {list(valid)} "
               "are not views of one shape in GM (a reshape copy of this layout is not modelled)")
    shape, read, write = usable[0]
    if math.prod(shape) == 0:
        return Tensor.make(program, "GM", new, x.dtype, device=target, valid_shape=valid, writes=[])
    given = Tensor.make(program, "GM", shape, x.dtype, device=read, valid_shape=shape, writes=[(task, None) for task in x.tasks_for(None)])
    into = Tensor.make(program, "GM", shape, x.dtype, device=write, valid_shape=shape, writes=[])
    copy_into(given, [0] * len(shape), into, op=op)
    return Tensor.make(program, "GM", new, x.dtype, device=target, valid_shape=valid, writes=[(task, None) for task, _ in into.writes])


def _unit_dims_view(program: PeProgram, x: Tensor, new: tuple[int, ...], valid_shape) -> Tensor:
    """A reshape that only adds or drops dims of size 1: the same view with those dims (any strides).
    Of an op result not yet placed (``x[i, :, :] = op(...)`` assembles such a view), an ``assemble``
    of the view still folds into the producer's store (:meth:`Tensor.fold_into`)."""
    unplaced = (x.destination is not None and not x.destination.pinned and not x._read and not any(task.bit >= 0 for task, _ in x.writes))
    gm = x.destination.device if unplaced and x.destination is not None else x.as_read().gm()
    kept = [(stride, valid) for size, stride, valid in zip(x.sizes, gm.strides, x.valid_shape) if size != 1]
    unit_valid = min([v for size, v in zip(x.sizes, x.valid_shape) if size == 1], default=1)
    strides, valid, rest = [], [], iter(kept)
    for size in new:
        stride, v = next(rest) if size != 1 else (x.dtype.itemsize, unit_valid)
        strides.append(stride)
        valid.append(v)
    valid_shape = tuple(valid_shape) if valid_shape is not None else valid
    if not unplaced and new[-1] != 1 and strides[-1] != x.dtype.itemsize:
        # the last dim of size 1 dropped (x[..., i]): the view left would be strided in its last dim,
        # which DMA bursts cannot read; the framework's reshape of a view copies (ReshapeNeedCopy)
        return _reshape_valid_part(program, x.as_read(), new, valid_shape)
    device = DeviceTensor(gm.system, gm.allocation, gm.offset_bytes, new, tuple(strides), x.dtype.numpy)
    if not unplaced:
        return Tensor.make(program, "GM", new, x.dtype, device=device, valid_shape=valid_shape, writes=[(task, None) for task in x.tasks_for(None)])
    kept_dims = [dim for dim, size in enumerate(x.sizes) if size != 1]

    def region(written: Region | None) -> Region | None:
        if written is None:
            return None
        parts = iter([(written.offset[dim], written.shape[dim]) for dim in kept_dims])
        placed = [next(parts) if size != 1 else (0, 1) for size in new]
        return Region(tuple(o for o, _ in placed), tuple(s for _, s in placed))

    result = Tensor.make(program, "GM", new, x.dtype, device=device, valid_shape=valid_shape, writes=[(task, region(r)) for task, r in x.writes])
    result._unit_of = (x.destination, x.sizes)
    return result


@pypto_op()
def unsqueeze(input: Tensor, dim: int) -> Tensor:
    """``pypto.unsqueeze``: a dim of size 1 inserted at ``dim`` (-rank-1 <= dim <= rank): a view."""
    x = _input("unsqueeze", "input", input, current_program("unsqueeze"))
    rank = len(x.shape)
    if not isinstance(dim, int) or isinstance(dim, bool) or not -rank - 1 <= dim <= rank:
        reject("unsqueeze", "dim", dim, f"must be an int with -{rank + 1} <= dim <= {rank}")
    at = dim % (rank + 1)
    return reshape(x, [*x.shape[:at], 1, *x.shape[at:]], valid_shape=[*x.valid_shape[:at], 1, *x.valid_shape[at:]])


@pypto_op()
def expand_clone(input: Tensor, shape: list[int], *, valid_shape: list | None = None) -> Tensor:
    """``pypto.expand_clone``: ``input`` broadcast along its dims of size 1 to ``shape`` (same rank),
    a new GM tensor (one copy per tile of the vector tile shape, the broadcast dims read once)."""
    op = "expand_clone"
    program = current_program(op)
    x = _input(op, "input", input, program)
    target = _ints_or_reject(op, "shape", list(shape) if isinstance(shape, tuple) else shape, len(x.sizes), program)
    for dim, (size, want) in enumerate(zip(x.sizes, target)):
        if size != want and size != 1:
            reject(op, "shape", list(target), f"differs from input {list(x.sizes)} in dim {dim}, which is not of size 1 (only dims of size 1 broadcast)")
    valid = _ints_or_reject(op, "valid_shape", valid_shape, len(target), program) if valid_shape else None  # [] is none (tensor.expand_clone)
    return _elementwise(op, [x], "copy", compute=x.dtype.numpy, out_shape=target, out_valid=valid)


@pypto_op()
def clone(input: Tensor) -> Tensor:
    """``pypto.clone``: a copy of the input in a new GM tensor (one copy per tile)."""
    op = "clone"
    program = current_program(op)
    x = _input(op, "input", input, program)
    return _elementwise(op, [x], "copy", compute=x.dtype.numpy)


# dims transpose supports on 4-D tensors (pypto-transpose.md 约束说明 3); 2-D and 3-D take any pair
TRANSPOSE_4D = {(0, 2), (1, 3), (2, 3), (1, 2)}
TRANSPOSE_5D = (3, 4)  # the only pair on 5-D tensors (tensor_transformation.cpp CheckTransposeAxisCombination)


@pypto_op()
def transpose(input: Tensor, dim0: int, dim1: int) -> Tensor:
    """``pypto.transpose``: ``dim0`` and ``dim1`` swapped. The tile shape tiles the input; each tile
    is written transposed."""
    op = "transpose"
    program = current_program(op)
    x = _input(op, "input", input, program)
    checks.check_dtype(op, "input", x.dtype.name)
    rank = len(x.sizes)
    a, b = sorted((checks.check_dim(op, dim0, rank), checks.check_dim(op, dim1, rank)))
    if a == b or (x.sizes[a] == 1 and x.sizes[b] == 1):
        return x
    if rank == 4 and (a, b) not in TRANSPOSE_4D:
        reject(op, "dim0, dim1", (dim0, dim1), f"swap dims {a} and {b} of a 4-D tensor, which the framework does not support; it supports {sorted(TRANSPOSE_4D)}")
    if rank == 5 and (a, b) != TRANSPOSE_5D:
        reject(op, "dim0, dim1", (dim0, dim1), f"swap dims {a} and {b} of a 5-D tensor, which the framework does not support; it supports {TRANSPOSE_5D}")
    shape = list(x.sizes)
    shape[a], shape[b] = shape[b], shape[a]
    valid = list(x.valid_shape)
    valid[a], valid[b] = valid[b], valid[a]
    tiles = _tiles(op, program, x.sizes, x.valid_shape)
    view = _gm(x)

    def swap(values):
        values = list(values)
        values[a], values[b] = values[b], values[a]
        return tuple(values)

    def build(p, tile, device):
        out = GmView(device.allocation, device.offset_bytes, device.strides).shifted(swap(tile.offset))
        transpose_tile(p, Operand(view.shifted(tile.offset), x.dtype.numpy, tile.valid_shape), out, a, b, name=op)

    tasks = _launch_tiles(op, program, tiles, build, lambda tile: [(x, Region(tile.offset, tile.valid_shape))], shape=shape, dtype=x.dtype,
                          record={"dims": [a, b]})
    out_tiles = [Tile(t.index, swap(t.offset), swap(t.shape), swap(t.valid_shape)) for t in tiles]
    return _result(program, shape, x.dtype, valid, tasks, out_tiles)


@pypto_op()
def concat(tensors: list[Tensor], dim: int = 0) -> Tensor:
    """``pypto.concat``: the tensors joined along ``dim``: each input's tiles (``dim`` not split)
    copied GM -> UB -> GM into their place in the result."""
    op = "concat"
    program = current_program(op)
    if not isinstance(tensors, (list, tuple)) or not 2 <= len(tensors) <= 128:
        reject(op, "tensors", tensors, "must be a list of 2 to 128 tensors")
    inputs = [_input(op, f"tensors[{i}]", t, program) for i, t in enumerate(tensors)]
    first = inputs[0]
    checks.check_dtype(op, "tensors[0]", first.dtype.name)
    axis = checks.check_dim(op, dim, len(first.sizes))
    for i, t in enumerate(inputs[1:], 1):
        if t.dtype is not first.dtype or len(t.sizes) != len(first.sizes) or any(
                s != f for d, (s, f) in enumerate(zip(t.sizes, first.sizes)) if d != axis):
            reject(op, f"tensors[{i}]", t, f"must have the dtype {first.dtype.name} and the shape {list(first.shape)} except in dim {axis}")
        if t.valid_shape[axis] != t.sizes[axis]:
            reject(op, f"tensors[{i}].valid_shape", list(t.valid_shape), f"must equal the shape in dim {axis}")
    shape = list(first.sizes)
    shape[axis] = builtins.sum(t.sizes[axis] for t in inputs)
    device = empty(tuple(shape), first.dtype.numpy, device=program.die)
    node = program.op(op, shape=shape, dim=axis, inputs=len(inputs))
    out_view = GmView(device.allocation, device.offset_bytes, device.strides)
    writes, at = [], 0
    for t in inputs:
        tiles = _tiles(op, program, t.sizes, t.valid_shape, whole=(axis,))
        view = _gm(t)
        for tile in tiles:
            place = tuple(o + (at if d == axis else 0) for d, o in enumerate(tile.offset))

            def build(p, tile=tile, view=view, place=place, dtype=t.dtype.numpy):
                if all(v > 0 for v in tile.valid_shape):
                    elementwise_tile(p, [Operand(view.shifted(tile.offset), dtype, tile.valid_shape)], out_view.shifted(place), dtype,
                                     tile.valid_shape, "copy", dtype, name=op)
                else:
                    _empty_program(p)

            task = CoreTask(node, len(node.tasks), build)
            task.depend_on(t.tasks_for(Region(tile.offset, tile.valid_shape)))
            node.tasks.append(task)
            writes.append((task, Region(place, tile.shape)))
        at += t.sizes[axis]
    return Tensor.make(program, "GM", shape, first.dtype, device=device, writes=writes)


# -- GM assembly and single elements ----------------------------------------------------------------


def copy_into(input: Tensor, offsets: Sequence[int], out: Tensor, *, op: str = "assemble") -> None:
    """``assemble`` of a GM tensor (checked by ``ops.assemble``): per tile of ``input`` (the vector
    tile shape), one copy of its valid part GM -> UB -> GM (MTE2, MTE3) to ``out`` at ``offsets``.
    Each copy waits for the writers of what it reads and for the earlier writers of where it writes."""
    program = input.program
    tiles = _tiles(op, program, input.sizes, input.valid_shape)
    source, destination, dtype = _gm(input), _gm(out), input.dtype.numpy
    node = program.op(op, shape=list(input.sizes), offsets=list(offsets), tiles=len(tiles))

    def build(p, tile, _device=None):
        at = tuple(o + t for o, t in zip(offsets, tile.offset))
        elementwise_tile(p, [Operand(source.shifted(tile.offset), dtype, tile.valid_shape)], destination.shifted(at), dtype,
                         tile.valid_shape, "copy", dtype, name=op)

    _dry_build(op, program, tiles[0], build, program.launch.core_kinds["vector"], None)
    for tile in tiles:
        def run(p, tile=tile):
            if tile.moves_data:
                build(p, tile)
            else:
                _empty_program(p)

        task = CoreTask(node, tile.index, run)
        written = Region(tuple(o + a + t for o, a, t in zip(out.origin, offsets, tile.offset)), tile.valid_shape)
        task.depend_on(input.tasks_for(Region(tile.offset, tile.valid_shape)))
        out.writes.write(task, written)
        node.tasks.append(task)


def read_element(tensor: Tensor, index: Sequence) -> SymbolicScalar:
    """``tensor[i, j]`` in a kernel (the framework's GetTensorData, int32 tensors only): a
    SymbolicScalar whose value the control-flow AICPU reads once the writers of that element are
    done; the tile ops built after it wait for the read."""
    op = "GetTensorData"
    program = tensor.program
    what = f"{tensor!r}[{', '.join(map(repr, index))}]"
    if tensor.location == "token":
        reject(op, "tensor", tensor, "is an op's token (a pred), not data")
    if tensor.dtype is not DataType.DT_INT32:
        reject(op, "tensor.dtype", tensor.dtype.name, "must be DT_INT32: only int32 elements can be read on the device (tensor.cpp GetTensorData)")
    x = tensor.in_gm(op)
    at = [value_of(program, i) for i in index]
    for dim, (i, size) in enumerate(zip(at, x.sizes)):
        if not isinstance(i, int) or not 0 <= i < size:
            reject(op, "index", at, f"is outside {what} of shape {list(x.shape)} in dim {dim}")
    node = program.op(op, index=at)
    read = ControlRead(node, x.device, at, f"{tensor!r}[{', '.join(map(str, at))}]", x.tasks_for(Region(tuple(at), (1,) * len(at))))
    node.tasks.append(read)
    return SymbolicScalar.read(read)


def write_element(tensor: Tensor, index: Sequence, value) -> None:
    """``tensor[i, j] = value`` in a kernel (the framework's SetTensorData, int32 tensors only): a
    ``full`` of one element with the value, assembled at the index."""
    op = "SetTensorData"
    program = tensor.program
    if tensor.dtype is not DataType.DT_INT32:
        reject(op, "tensor.dtype", tensor.dtype.name, "must be DT_INT32: only int32 elements can be set (tensor.cpp SetTensorData)")
    number = value_of(program, value)
    if not isinstance(number, int) or isinstance(number, bool):
        reject(op, "value", value, "must be an int or a SymbolicScalar")
    from npusim.frontend.pypto.ops import assemble

    assemble(full([1] * len(tensor.sizes), number, DataType.DT_INT32), list(index), tensor)


# -- matmul ------------------------------------------------------------------------------------------


def set_cube_tile_shapes(m: list[int], k: list[int], n: list[int], enable_split_k: bool = False) -> None:
    """The cube tile shapes the following matmuls of this PE are tiled by: ``m = [mL0, mL1]``,
    ``k = [kL0, kL1]`` (or ``[kL0, kAL1, kBL1]``), ``n = [nL0, nL1]``. ``enable_split_k`` (the
    multi-core split of k) is not modelled: True is refused."""
    program = current_program("set_cube_tile_shapes")
    (m0, m1), (k0, ka, kb), (n0, n1) = checks.check_cube_tiles(m, k, n)
    if enable_split_k is not False:
        reject("set_cube_tile_shapes", "enable_split_k", enable_split_k, "is not modelled yet (the multi-core split of k); pass False")
    program.cube_tiles = CubeTiles(m0, m1, k0, ka, kb, n0, n1)
    LAST_TILES.cube = _cube_tuple(program.cube_tiles)


@pypto_op(unit="cube")
def matmul(input: Tensor, mat2: Tensor, out_dtype: DataType, *, a_trans: bool = False, b_trans: bool = False, c_matrix_nz: bool = False,
           extend_params: dict | None = None) -> Tensor:
    """``pypto.matmul``: ``input @ mat2`` (``input`` is ``[K, M]`` with ``a_trans``, ``mat2`` is
    ``[N, K]`` with ``b_trans``) on the AIC cores, accumulated in fp32 (int32 for int8) in the cube's
    block order and converted to ``out_dtype`` by FIXP; ND matrices, or batches of them (3-D / 4-D:
    the leading dims broadcast as numpy's), each batch's tiles after the last's. A bias
    (``extend_params={'bias_tensor': b}``, ``[1, N]`` or ``[N]`` fp32) is added to the fp32 product
    before the conversion, as the framework adds it in L0C: npusim adds it with a vector op on the
    fp32 result and casts after (the same values; the time of a vector add and a cast instead of
    the fixpipe's)."""
    op = "matmul"
    program = current_program(op)
    a = _input(op, "input", input, program)
    b = _input(op, "mat2", mat2, program)
    for arg, value in (("a_trans", a_trans), ("b_trans", b_trans), ("c_matrix_nz", c_matrix_nz)):
        if not isinstance(value, bool):
            reject(op, arg, value, "must be True or False")
    if c_matrix_nz:
        reject(op, "c_matrix_nz", c_matrix_nz, "must be False: the framework supports only an ND output")
    bias = None
    if extend_params is not None:
        if not isinstance(extend_params, dict) or set(extend_params) - {"bias_tensor"}:
            reject(op, "extend_params", extend_params, "is modelled with a bias_tensor only (dequantisation scales and relu are not "
                                                       "modelled yet)")
        bias = _input(op, "extend_params['bias_tensor']", extend_params["bias_tensor"], program)
        if not _is_float_type(a.dtype) or bias.dtype.name not in ("DT_FP32", a.dtype.name):
            reject(op, "extend_params['bias_tensor'].dtype", bias.dtype.name, f"must be DT_FP32 or input's {a.dtype.name} (a float matmul)")
        product = matmul(a, b, DataType.DT_FP32, a_trans=a_trans, b_trans=b_trans)
        saved, cube = program.tile_shape, program.cube_tiles
        assert isinstance(cube, CubeTiles)  # the matmul above checked it is set
        rows = max(1, min(cube.m0, BIAS_TILE_ELEMENTS // cube.n0))  # rows of a cube output tile that fit the vector add's UB
        program.tile_shape = (1,) * (len(product.sizes) - 2) + (rows, cube.n0)
        try:
            total = add(product, bias if bias.dtype is DataType.DT_FP32 else cast(bias, DataType.DT_FP32))
            return total if out_dtype is DataType.DT_FP32 else cast(total, out_dtype)
        finally:
            program.tile_shape = saved
    if len(a.sizes) < 2 or len(b.sizes) < 2:
        reject(op, "input.shape", [list(a.shape), list(b.shape)], "must be matrices ([M, K] / [K, N]) or batches of them")
    batch = checks.broadcast_shape(op, tuple(a.sizes[:-2]), tuple(b.sizes[:-2]))  # the batch dims broadcast as numpy's
    if a.dtype is not b.dtype or a.dtype.name not in checks.MATMUL_DTYPES:
        reject(op, "mat2.dtype", b.dtype.name, f"with input.dtype={a.dtype.name} is not a pair of the framework's; pairs: "
                                               + ", ".join(f"{d} x {d}" for d in checks.MATMUL_DTYPES))
    if not isinstance(out_dtype, DataType) or out_dtype.name not in checks.MATMUL_DTYPES[a.dtype.name]:
        reject(op, "out_dtype", out_dtype, f"is not an output of {a.dtype.name} inputs; those are {', '.join(checks.MATMUL_DTYPES[a.dtype.name])}")
    m_size, k = (a.sizes[-1], a.sizes[-2]) if a_trans else a.sizes[-2:]
    k2, n_size = (b.sizes[-1], b.sizes[-2]) if b_trans else b.sizes[-2:]
    if k != k2:
        reject(op, "mat2.shape", list(b.sizes), f"has k={k2}, input has k={k} (shapes {list(a.sizes)} x {list(b.sizes)}, a_trans={a_trans}, b_trans={b_trans})")
    for arg, tensor in (("input", a), ("mat2", b)):
        if tensor.sizes[-1] > 65535:
            reject(op, f"{arg}.shape", list(tensor.shape), "has an inner axis over 65535, the ND limit")
        if tensor.valid_shape[:-2] != tensor.sizes[:-2]:
            reject(op, f"{arg}.valid_shape", list(tensor.valid_shape), "must equal the shape in the batch dims (only the matrix dims "
                                                                       "of a matmul operand may be partly valid)")
    # a partly valid operand (a tail block of a view): the product of the valid parts, as the framework's
    # valid shapes give it; the rest of the result is not written (its valid shape says so)
    m, k_a = (a.valid_shape[-1], a.valid_shape[-2]) if a_trans else a.valid_shape[-2:]
    k_b, n = (b.valid_shape[-1], b.valid_shape[-2]) if b_trans else b.valid_shape[-2:]
    if k_a != k_b:
        reject(op, "mat2.valid_shape", list(b.valid_shape), f"has {k_b} valid elements of k, input {list(a.valid_shape)} has {k_a}: "
                                                            "the valid parts of k must be the same")
    k = k_a
    if not (m and n and k):
        reject(op, "valid_shape", [list(a.valid_shape), list(b.valid_shape)], "leaves no valid element in m, n or k: nothing to multiply")
    tiles = program.cube_tiles
    if tiles is None:
        reject(op, "cube_tile_shapes", None, "are not set; call pypto.set_cube_tile_shapes(m, k, n) before the matmul")
    item = a.dtype.itemsize
    if tiles.k0 % 16 or tiles.n0 % 16 or (tiles.k0 * item) % 32 or (tiles.n0 * item) % 32 or (a_trans and (tiles.m0 * item) % 32):
        reject(op, "cube_tile_shapes", _tile_text(tiles), f"break the alignment rule: kL0 and nL0 multiples of 16 elements and of 32 bytes "
                                                          f"({a.dtype.name}){', mL0 of 32 bytes (a_trans)' if a_trans else ''}")
    launch = program.launch
    cube_buffers = launch.system.timing.kinds[launch.core_kinds["cube"]].buffers
    limits = {name: cube_buffers[name].capacity_bytes for name in ("L0A", "L0B", "L0C", "L1")}
    for buffer, need in capacity_needs(tiles, item).items():
        if need > limits[buffer]:
            raise ResourceError(f"pypto.matmul: cube_tile_shapes {_tile_text(tiles)} need {need} bytes of {buffer} for {a.dtype.name} inputs, "
                                f"more than its {limits[buffer]} bytes (pypto-set_cube_tile_shapes.md 空间约束); set smaller tiles")
    out_tiles = matmul_tiles(m, n, k, tiles)
    a_view, b_view = _gm(a), _gm(b)
    batches = list(np.ndindex(*batch)) if batch else [()]
    ones = (1,) * len(batch)
    tile_objects = [Tile(i, (*index, t.m_offset, t.n_offset), (*ones, t.m, t.n), (*ones, t.m, t.n))
                    for i, (index, t) in enumerate((index, t) for index in batches for t in out_tiles)]
    tiling = pipeline_tiling(tiles, item, CubeTarget.of(launch.system))
    shape_of = GemmShape(a.dtype.numpy, out_dtype.numpy, a_trans, b_trans, name=op)

    def matrix(view: GmView, index: tuple[int, ...]) -> GmView:
        """Matrix ``index`` of a batch (the last two dims)."""
        shifted = view.shifted(index + (0, 0)) if index else view
        return GmView(shifted.allocation, shifted.offset_bytes, tuple(view.strides[-2:]))

    def operand_index(tensor: Tensor, index: tuple[int, ...]) -> tuple[int, ...]:
        """The batch of ``tensor`` that output batch ``index`` takes (0 along its broadcast dims)."""
        lead = tensor.sizes[:-2]
        own = index[len(index) - len(lead):] if lead else ()
        return tuple(i if size != 1 else 0 for i, size in zip(own, lead))

    def piece(tile, destination) -> ProgramPiece:
        """The tile op's program as a reusable piece: built once per tile shape (and strides), replayed
        on the others' addresses; its output is where ``destination`` points when the tile op runs."""
        index, t = tile.offset[:-2], out_tiles[tile.index % len(out_tiles)]

        def gm():
            device = destination.device
            out = GmView(device.allocation, device.offset_bytes, device.strides)
            a_at = matrix(a_view, operand_index(a, index)).shifted((0, t.m_offset) if a_trans else (t.m_offset, 0))
            b_at = matrix(b_view, operand_index(b, index)).shifted((t.n_offset, 0) if b_trans else (0, t.n_offset))
            return a_at, b_at, matrix(out, index).shifted((t.m_offset, t.n_offset))

        def build(p, _loaded, a_at, b_at, c_at):
            matmul_tile(p, tiling, shape_of, BlockViews(a_at, b_at, c_at), t)
            return None, ()

        return ProgramPiece((op, t.m, t.n, shape_of, tiling), gm, build)

    def build(p, tile, device):
        made = piece(tile, Destination(device))
        made.build(p, None, *made.gm())

    def reads(tile):
        index, t = tile.offset[:-2], out_tiles[tile.index % len(out_tiles)]
        a_index, b_index = operand_index(a, index), operand_index(b, index)
        a_ones, b_ones = (1,) * len(a_index), (1,) * len(b_index)
        a_region = Region((*a_index, 0, t.m_offset), (*a_ones, k, t.m)) if a_trans else Region((*a_index, t.m_offset, 0), (*a_ones, t.m, k))
        b_region = Region((*b_index, t.n_offset, 0), (*b_ones, t.n, k)) if b_trans else Region((*b_index, 0, t.n_offset), (*b_ones, k, t.n))
        return [(a, a_region), (b, b_region)]

    shape = (*batch, m_size, n_size)
    tasks = _launch_tiles(op, program, tile_objects, build, reads, shape=shape, dtype=out_dtype,
                          record={"a_trans": a_trans, "b_trans": b_trans, "cube_tiles": _tile_text(tiles)}, piece=piece)
    return _result(program, shape, out_dtype, (*batch, m, n), tasks, tile_objects)


BIAS_TILE_ELEMENTS = 8192
"""Elements of one tile of a matmul's bias add (32 KiB of fp32 per buffer, three buffers in UB)."""


def _is_float_type(dtype: DataType) -> bool:
    return dtype.name in checks.FLOAT


def _tile_text(tiles: CubeTiles) -> str:
    k = [tiles.k0, tiles.k_a] if tiles.k_a == tiles.k_b else [tiles.k0, tiles.k_a, tiles.k_b]
    return f"m={[tiles.m0, tiles.m1]} k={k} n={[tiles.n0, tiles.n1]}"


__all__ = [
    "CastMode", "PrecisionType", "SaturationMode", "abs", "add", "amax", "amin", "cast", "concat", "cumsum", "div", "exp", "full",
    "matmul", "maximum", "minimum", "mul", "neg", "one_hot", "reshape", "rsqrt", "set_cube_tile_shapes", "sqrt", "sub", "sum",
    "transpose", "unsqueeze", "clone", "prod", "argmax", "argmin",
]
