"""PyPTO's ops as the simulator builds them: checks, tiling, tile ops and their dependencies.

Each function is called inside a kernel function that ``npusim.launch`` runs once per PE. It
resolves its SymbolicScalar arguments on that PE, runs the framework's checks (an
:class:`~npusim.errors.OpArgumentError` naming op, argument, value and rule, and the PE), expands
into tile ops by the current vector tile shape, and makes each tile op depend on its part of the
pred (the framework's even split when it applies, else the whole pred). Signatures follow PyPTO
(``docs/shmem.md``); ``pypto.distributed`` and ``pypto.experimental`` re-export them.
"""

from __future__ import annotations

import functools
import math
import operator
import weakref
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, ParamSpec, SupportsIndex, TypeAlias, TypeVar, cast

import numpy as np

from npusim.errors import OpArgumentError, ResourceError, UsageError
from npusim.frontend.pypto.runtime import building_pe, current_program
from npusim.frontend.pypto.tensors import Destination, ShmemTensor, Tensor
from npusim.frontend.session import Session, current_session
from npusim.frontend.tensor import DeviceTensor, empty
from npusim.isa.instructions import on_recorded
from npusim.isa.target import VectorTarget
from npusim.kernels.shmem.checks import (
    check_atomic,
    check_cmp,
    check_data_shape,
    check_dtype,
    check_element_count,
    check_group_name,
    check_int32,
    check_n_pes,
    check_pe,
    check_preds,
    check_put_dtypes,
    check_view,
    is_int,
)
from npusim.kernels.shmem.dtypes import AtomicType, DataType, OpType
from npusim.kernels.shmem.layout import SignalGrid, signal_clear_bytes
from npusim.kernels.shmem.races import READ, WRITE
from npusim.kernels.shmem.tile_ops import (
    CLEAR_SIGNAL_STORE_BYTES,
    GmView,
    clear_tile,
    copy_tile,
    load_tile,
    signal_tile,
    store_tile,
    ub_tile_bytes,
)
from npusim.kernels.shmem.tiling import MAX_TENSOR_DIMS, Region, Tile, expand_tiles, split_pred, tile_grid
from npusim.runtime.ops import PYPTO_OPS, PyptoOp
from npusim.runtime.program import PeProgram, building_program
from npusim.runtime.shmem import RemoteWrite
from npusim.runtime.symbolic import SymbolicScalar, value_of
from npusim.runtime.tasks import AccessSpec, CoreTask, OpNode, Task, WaitTask
from npusim.runtime.templates import ProgramPiece

if TYPE_CHECKING:
    from npusim.isa import CoreProgram, GmAddress
    from npusim.isa.instructions import Instruction
    from npusim.kernels.compute.matmul import CubeTiles
    from npusim.kernels.shmem.tile_ops import UbTile
    from npusim.runtime.shmem import ShmemArea

P = ParamSpec("P")
R = TypeVar("R")


# The forms an op's arguments come in, as it takes them before its own checks: a Python program
# passes tuples for lists and numpy ints (numpy bools) for ints (flags), and the checks take them
# (or refuse anything else with an error naming the op, the argument and the rule). The annotations
# say so because, compiled (mypyc), a parameter's declared type is checked as the call enters: an
# ``int`` or ``list[int]`` there would refuse a numpy int or a tuple with a bare TypeError before the
# op's checks ran. Past its checks an op works with Python ints (:func:`_ints`, :func:`_pe_arg`).
Int: TypeAlias = SupportsIndex
"""An int argument: a Python or numpy int."""
PeArg: TypeAlias = "SupportsIndex | SymbolicScalar"
"""A PE (a rank in the group): an int, or a SymbolicScalar the op evaluates on the PE building it."""
Dims: TypeAlias = "Sequence[SupportsIndex | SymbolicScalar]"
"""A shape or offsets: a list or tuple of ints or SymbolicScalars."""
Flag: TypeAlias = "bool | np.bool_"
"""A flag: True or False (a numpy bool too)."""
GroupName: TypeAlias = "str | np.str_"
"""A communication group's name (a numpy str too)."""


def pypto_op(name: str | None = None, *, unit: str = "vector",
             namespaces: tuple[str, ...] = ("pypto",)) -> Callable[[Callable[P, R]], Callable[P, R]]:
    """Register the decorated API function as the PyPTO op ``name`` (its own name by default) of
    ``namespaces``, its tile ops running on ``unit`` (:mod:`npusim.runtime.ops`), with the PE named
    in its argument errors: the namespaces of ``npusim.pypto`` then offer it."""

    def register(function: Callable[P, R]) -> Callable[P, R]:
        return register_op(name or function.__name__, _on_pe(function), unit=unit, namespaces=namespaces)

    return register


def register_op(name: str, api: Callable[P, R], *, unit: str = "vector", namespaces: tuple[str, ...] = ("pypto",)) -> Callable[P, R]:
    """Register ``api`` (an op function already made, with :func:`_on_pe`) as the PyPTO op ``name``; returns it."""
    PYPTO_OPS.register(name)(PyptoOp(name, namespaces, unit, api))
    return api


def _on_pe(function: Callable[P, R]) -> Callable[P, R]:
    """Name the PE in the argument errors of an op (an SPMD program fails on one PE at a time)."""

    @functools.wraps(function)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return function(*args, **kwargs)
        except OpArgumentError as error:
            pe = building_pe()
            if pe is None or "[PE " in str(error):
                raise
            raise OpArgumentError(f"{error} [PE {pe}]") from None

    return wrapper


# -- arguments ---------------------------------------------------------------------------------------


def _pe_arg(op: str, arg: str, value: object, program: PeProgram, n_pes: int) -> int:
    """A PE argument (:data:`PeArg`, a rank in the group) as its checked value on ``program``'s PE, a Python int."""
    value = value_of(program, value)
    check_pe(op, arg, value, n_pes)
    assert is_int(value)  # check_pe has refused anything else
    return int(value)


def _ints(op: str, arg: str, values: object, program: PeProgram) -> list[Any]:
    """A :data:`Dims` argument as its values on ``program``'s PE: its SymbolicScalars evaluated, its
    (numpy) ints as Python ints, anything else as it is for the op's checks to refuse."""
    if not isinstance(values, (list, tuple)):
        raise OpArgumentError(f"{op}: {arg}={values!r} must be a list of ints or SymbolicScalars")
    resolved = [value_of(program, value) for value in values]
    return [int(value) if is_int(value) else value for value in resolved]


def _shmem(op: str, arg: str, value: object, program: PeProgram, *, data: bool = False) -> ShmemTensor:
    if not isinstance(value, ShmemTensor):
        raise OpArgumentError(f"{op}: {arg}={value!r} must be a ShmemTensor (from create_shmem_tensor / create_shmem_signal)")
    if value.area.launch is not program.launch:
        raise UsageError(f"{op}: {arg} was created by another npusim.launch; shmem tensors live for one launch")
    if data and value.dtype is None:
        raise OpArgumentError(f"{op}: {arg}={value!r} is a signal tensor (create_shmem_signal); it holds no data to move")
    return value


def _group(op: str, group_name: object, n_pes: object) -> tuple[str, int]:
    """A group's checked name and PE count."""
    check_group_name(op, group_name)
    check_n_pes(op, n_pes)
    assert isinstance(group_name, str) and is_int(n_pes)  # the checks have refused anything else
    return str(group_name), int(n_pes)


def _tensor(op: str, arg: str, value: object, program: PeProgram, location: str | None = None) -> Tensor:
    if not isinstance(value, Tensor):
        raise OpArgumentError(f"{op}: {arg}={value!r} must be a pypto.Tensor")
    if value.program is not program:
        raise UsageError(f"{op}: {arg} belongs to PE {value.pe}'s program, not to PE {program.pe}'s; each PE uses its own tensors")
    if location is not None and value.location != location:
        kinds = {"GM": "a tensor in GM (a kernel argument, a view of one, a shmem_get result)", "UB": "a shmem_load result (a UB tile)"}
        raise OpArgumentError(f"{op}: {arg}={value!r} must be {kinds[location]}")
    return value


def _view(op: str, src: ShmemTensor, shape: object, offsets: object, valid_shape: object, program: PeProgram) -> ShmemTensor:
    """The view an op works on: ``shmem_view(src, shape, offsets, valid_shape)`` when both
    ``shape`` and ``offsets`` are given (as the framework, which ignores either one alone)."""
    if shape is None or offsets is None:
        return src
    shape = _ints(op, "shape", shape, program)
    offsets = _ints(op, "offsets", offsets, program)
    valid = _ints(op, "valid_shape", valid_shape, program) if valid_shape is not None else None
    check_view(op, src.shape, shape, offsets, valid)
    return ShmemTensor(src.program, src.area, [a + b for a, b in zip(src.offsets, offsets)], shape, valid)


def _pred(op: str, pred: object, program: PeProgram) -> Tensor:
    """The pred as one tensor: a fresh ``[1, 1]`` token for None, the tensor itself for one, and a
    ``[1, 1]`` token after all of them for several (the framework's Nop)."""
    if pred is None:
        return Tensor.token(program, (1, 1), [])
    if not isinstance(pred, (list, tuple)):
        raise OpArgumentError(f"{op}: pred={pred!r} must be a list of tensors (or None)")
    tensors = [_tensor(op, f"pred[{i}]", t, program) for i, t in enumerate(pred)]
    check_preds(op, [t.sizes for t in tensors])
    if len(tensors) == 1:
        return tensors[0]
    return Tensor.token(program, (1, 1), [(task, None) for t in tensors for task in t.tasks_for(None)])


def _tiles(op: str, program: PeProgram, shape: Sequence[int], valid_shape: Sequence[int] | None = None) -> list[Tile]:
    return expand_tiles(shape, program.tile_shape, valid_shape, op=op)


def _depend(tasks: Sequence[Task], shape: Sequence[int], program: PeProgram, pred: Tensor) -> list[Region] | None:
    """Each tile op waits for its piece of ``pred`` (or for all of it); returns the pieces."""
    assert program.tile_shape is not None  # the op's tiles were made with it (expand_tiles refuses None)
    pieces = split_pred(pred.sizes, tile_grid(shape, program.tile_shape))
    for i, task in enumerate(tasks):
        task.depend_on(pred.tasks_for(pieces[i] if pieces is not None else None))
    return pieces


def _pred_token(program: PeProgram, tasks: Sequence[Task], pred: Tensor, pieces: Sequence[Region] | None) -> Tensor:
    """The token of a signal or wait: the pred's shape, each tile op owning its piece."""
    writes = [(task, pieces[i] if pieces is not None else None) for i, task in enumerate(tasks)]
    return Tensor.token(program, pred.sizes, writes)


def _box_token(program: PeProgram, tasks: Sequence[Task], shape: Sequence[int], tiles: Sequence[Tile]) -> Tensor:
    return Tensor.token(program, shape, [(task, Region(t.offset, t.shape)) for task, t in zip(tasks, tiles)])


def _gm(tensor: Tensor) -> GmView:
    device = tensor.gm()
    if device.shape and device.strides[-1] != device.dtype.itemsize and device.shape[-1] > 1:
        raise UsageError(f"{tensor!r}: its last dim is not contiguous in GM (strides {list(device.strides)}); DMA bursts need it to be")
    return GmView(device.allocation, device.offset_bytes, device.strides)


def _place(out: Tensor, offsets: Sequence[int], shape: Sequence[int]) -> DeviceTensor:
    """The device tensor of ``shape`` at ``offsets`` of ``out`` (its parts past out's end are never stored to)."""
    device = out.gm()
    start = device.offset_bytes + sum(o * s for o, s in zip(offsets, device.strides))
    return DeviceTensor(device.system, device.allocation, start, tuple(shape), device.strides, device.dtype)


def _shift(offsets: Sequence[int], more: Sequence[int]) -> tuple[int, ...]:
    return tuple(map(operator.add, offsets, more))


def _last_store_lands(write: RemoteWrite, stores: Sequence[Instruction], _gm: tuple[Any, ...]) -> None:
    """The hook of a piece that writes ``write``: its last store's event is when the write lands."""
    if stores:
        on_recorded(stores[-1], write.landed)


# -- tile shapes, views and assignment --------------------------------------------------------------


def set_vec_tile_shapes(*shape: Int | Sequence[Int]) -> None:
    """The vector tile shape that the following ops of this PE are tiled by (1 to MAX_TENSOR_DIMS dims). Called on
    the host (outside a kernel) it is the framework's scope default: the tile shape kernels built
    afterwards start with."""
    given: Sequence[object] = shape[0] if len(shape) == 1 and isinstance(shape[0], (list, tuple)) else shape
    tile_shape = tuple(int(s) for s in given if is_int(s) and s > 0)
    if len(tile_shape) != len(given) or not 1 <= len(tile_shape) <= MAX_TENSOR_DIMS:
        raise OpArgumentError(f"set_vec_tile_shapes: shape={list(given)} must be 1 to {MAX_TENSOR_DIMS} positive ints")
    program = building_program()
    if program is None:
        HOST_TILE_SHAPES[current_session()] = tile_shape
    else:
        program.tile_shape = tile_shape
    LAST_TILES.vec = list(tile_shape)


HOST_TILE_SHAPES: weakref.WeakKeyDictionary[Session, tuple[int, ...]] = weakref.WeakKeyDictionary()
"""Per session, the vector tile shape set on the host, which every PE program built afterwards starts with."""


class LastTiles:
    """The tile shapes set last by any kernel (what the framework's scope answers on the host): the
    vector tile shape and the cube's ``(m, k, n, enable_split_k)``, None before any."""

    def __init__(self) -> None:
        self.vec: list[int] | None = None
        self.cube: tuple[list[int], list[int], list[int], bool] | None = None


LAST_TILES = LastTiles()


def get_vec_tile_shapes() -> list[int] | None:
    """``pypto.get_vec_tile_shapes()``: the vector tile shape of the PE being built; on the host, the
    one a kernel set last (None before any)."""
    program = building_program()
    if program is not None:
        return list(program.tile_shape) if program.tile_shape is not None else []
    return LAST_TILES.vec


def get_cube_tile_shapes() -> tuple[list[int], list[int], list[int], bool] | None:
    """``pypto.get_cube_tile_shapes()``: ``(m, k, n, enable_split_k)`` as set on the PE being built (on
    the host, as a kernel set them last)."""
    program = building_program()
    tiles = program.cube_tiles if program is not None else None
    if tiles is None:
        return LAST_TILES.cube
    return _cube_tuple(tiles)


def _cube_tuple(tiles: CubeTiles) -> tuple[list[int], list[int], list[int], bool]:
    k = [tiles.k0, tiles.k_a] if tiles.k_a == tiles.k_b else [tiles.k0, tiles.k_a, tiles.k_b]
    return ([tiles.m0, tiles.m1], k, [tiles.n0, tiles.n1], False)


@pypto_op(unit="none")
def view(input: Tensor, shape: Dims | None = None, offsets: Dims | None = None, *,
         valid_shape: Dims | None = None, dtype: DataType | None = None) -> Tensor:
    """``pypto.view``: the part ``shape`` at ``offsets`` of a GM tensor (sharing its memory). The view
    may run past the tensor's end as long as its valid part does not (a tail block:
    ``view(x, [8, n], [8, 0])`` of a 13-row ``x`` has 5 valid rows); without ``valid_shape`` the
    valid part is what the tensor's valid part leaves of the view, per dim
    ``min(max(valid - offset, 0), size)``, as the framework infers it (logical_tensor.cpp
    GetViewValidShape). A given ``valid_shape`` may exceed the view's shape up to the tensor's (the
    framework's rule); the view's valid part is then all of that dim."""
    op = "view"
    program = current_program(op)
    input = _tensor(op, "input", input, program)
    input = input.in_gm(op)
    if dtype is not None and dtype is not input.dtype:
        raise OpArgumentError(f"{op}: dtype={dtype!r} differs from the input's {input.dtype.name}; views that reinterpret memory are not modelled")
    dims: list[Any] = list(input.shape) if shape is None else _ints(op, "shape", shape, program)
    at: list[Any] = [0] * len(input.shape) if offsets is None else _ints(op, "offsets", offsets, program)
    if valid_shape is not None:
        valid = _ints(op, "valid_shape", valid_shape, program)
        if len(valid) == len(input.sizes) == len(dims):
            for dim, (v, size) in enumerate(zip(valid, input.sizes)):
                if isinstance(v, int) and not 0 <= v <= size:
                    raise OpArgumentError(f"{op}: valid_shape={valid} has valid_shape[{dim}]={v}; it cannot exceed the tensor's "
                                          f"shape {list(input.shape)} in dim {dim} (operation_impl.cpp CheckViewValidShapesConstraint)")
            valid = [min(v, s) if isinstance(v, int) else v for v, s in zip(valid, dims)]  # the part of the view it covers
    elif len(dims) == len(input.sizes) and len(at) == len(input.sizes) and all(isinstance(o, int) for o in at):
        valid = [min(max(v - o, 0), s) for v, o, s in zip(input.valid_shape, at, dims)]
    else:
        valid = None  # check_view names what is wrong
    check_view(op, input.sizes, dims, at, valid, what="tensor", valid_bounds=True)
    device = cast(DeviceTensor, input.device)[tuple(slice(o, o + s) for o, s in zip(at, dims))]  # clipped to the tensor
    return Tensor.make(program, "GM", dims, input.dtype, device=device, valid_shape=valid, writes=input.writes,
                  origin=_shift(input.origin, at))


@pypto_op()
def assemble(input: Tensor, offsets: Dims, out: Tensor) -> None:
    """``pypto.assemble``: write the valid part of ``input`` into the GM tensor ``out`` at
    ``offsets``. A shmem_load result (a UB tile): each tile is stored (MTE3) by the tile op that
    loaded it, on the same core. A GM tensor (a compute or shmem_get result, a view, a kernel-local
    tensor): one copy GM -> UB -> GM per tile of the vector tile shape (``compute.copy_into``)."""
    op = "assemble"
    program = current_program(op)
    out = _tensor(op, "out", out, program, "GM")
    input = _tensor(op, "input", input, program)
    if input.location == "token":
        raise OpArgumentError(f"{op}: input={input!r} is an op's token (a pred), not data; `local[:] = token` makes a "
                              "kernel-local tensor the token")
    if input.dtype is not out.dtype:
        raise OpArgumentError(f"{op}: input.dtype={input.dtype.name} differs from out.dtype={out.dtype.name}; assemble does not convert")
    offsets = _ints(op, "offsets", offsets, program)
    if len(offsets) != len(out.sizes) or len(input.sizes) != len(out.sizes):
        raise OpArgumentError(f"{op}: offsets={offsets} and input {list(input.shape)} must have the {len(out.shape)} dims of out {list(out.shape)}")
    for dim, (offset, valid, size) in enumerate(zip(offsets, input.valid_shape, out.sizes)):
        if not isinstance(offset, int) or not 0 <= offset < size or offset + valid > size:
            raise OpArgumentError(
                f"{op}: offsets={offsets} puts the valid part {list(input.valid_shape)} of the input outside out "
                f"{list(out.sizes)} in dim {dim} (0 <= {offset} and {offset} + {valid} <= {size} must hold)"
            )
    if input.location == "GM":
        if input.fold_into(_place(out, offsets, input.sizes)):
            for task, region in input.writes:
                assert region is not None  # each tile op of an op result writes a region of it
                out.writes.write(task, Region(_shift(_shift(out.origin, offsets), region.offset), region.shape))
            return
        from npusim.frontend.pypto.compute import copy_into

        copy_into(input, offsets, out)
        return
    node = program.op(op, shape=list(input.sizes), offsets=offsets)
    node.tasks = [task for task, _ in input.writes]
    destination = _gm(out)
    for task, tile in zip(cast("list[CoreTask]", node.tasks), input.tiles):  # a UB tile tensor's writes: its shmem_load's tile ops
        at = _shift(offsets, tile.offset)

        def consume(p: CoreProgram, ub: UbTile, dst: GmView, tile: Tile = tile) -> tuple[None, tuple[()]]:
            if tile.moves_data:
                store_tile(p, ub, dst, tile.valid_shape, name=op)
            return None, ()

        def gm(at: tuple[int, ...] = at) -> tuple[GmView]:
            return (destination.shifted(at),)

        task.consumers.append(ProgramPiece((op, tile.valid_shape), gm, consume, source=node.source))
        out.writes.append((task, Region(_shift(out.origin, at), tile.valid_shape)))


# -- distributed ops ---------------------------------------------------------------------------------


@pypto_op(unit="none", namespaces=("distributed",))
def create_shmem_tensor(group_name: GroupName, n_pes: Int, dtype: DataType, shape: Sequence[Int]) -> ShmemTensor:
    """A symmetric tensor: every PE of the group has one of ``shape`` in its data window."""
    op = "create_shmem_tensor"
    program = current_program(f"distributed.{op}")
    name, pes = _group(op, group_name, n_pes)
    check_data_shape(op, "shape", shape)
    area = program.launch.create(program, op, name, pes, dtype, [operator.index(s) for s in shape])
    return ShmemTensor(program, area, [0] * len(area.tensor_shape), area.tensor_shape)


@pypto_op(unit="none", namespaces=("distributed",))
def create_shmem_signal(group_name: GroupName, n_pes: Int) -> ShmemTensor:
    """A signal-only tensor (for barriers): signal slots, no data."""
    op = "create_shmem_signal"
    program = current_program(f"distributed.{op}")
    area = program.launch.create(program, op, *_group(op, group_name, n_pes), None, None)
    return ShmemTensor(program, area, [0] * len(area.tensor_shape), area.tensor_shape)


@pypto_op(unit="none", namespaces=("distributed",))
def shmem_view(src: ShmemTensor, shape: Dims, offsets: Dims, *, valid_shape: Dims | None = None) -> ShmemTensor:
    """A view of a shmem tensor (and of its signal slots)."""
    op = "shmem_view"
    program = current_program(f"distributed.{op}")
    src = _shmem(op, "src", src, program)
    if shape is None or offsets is None:
        raise OpArgumentError(f"{op}: shape={shape!r} and offsets={offsets!r} must both be lists")
    return _view(op, src, shape, offsets, valid_shape, program)


def my_symbolic_pe(group_name: GroupName) -> SymbolicScalar:
    """This PE's rank in the group, as a SymbolicScalar."""
    check_group_name("my_symbolic_pe", group_name)
    return SymbolicScalar.pe(str(group_name))  # a numpy str as a str


@pypto_op(namespaces=("distributed",))
def shmem_put(src: Tensor, offsets: Dims, dst: ShmemTensor, dst_pe: PeArg, *,
              put_op: AtomicType = AtomicType.SET, pred: Sequence[Tensor] | None = None) -> Tensor:
    """Local GM ``src`` -> ``dst`` on ``dst_pe`` at ``offsets``, staged through UB; ADD accumulates."""
    op = "shmem_put"
    program = current_program(f"distributed.{op}")
    launch = program.launch
    src = _tensor(op, "src", src, program, "GM")
    dst = _shmem(op, "dst", dst, program, data=True)
    assert dst.dtype is not None  # _shmem(data=True) has refused a signal tensor
    check_data_shape(op, "src.shape", src.sizes)
    check_dtype(op, "src.dtype", src.dtype)
    check_element_count(op, "src.shape", src.sizes)
    check_atomic(op, "put_op", put_op)
    check_put_dtypes(op, src.dtype, dst.dtype, put_op)
    dst_pe = _pe_arg(op, "dst_pe", dst_pe, program, dst.n_pes)
    offsets = _ints(op, "offsets", offsets, program)
    check_view(op, dst.shape, src.sizes, offsets, shape_arg="src.shape")
    pred_tensor = _pred(op, pred, program)
    tiles = _tiles(op, program, src.sizes, src.valid_shape)
    node = program.op(op, dst_pe=dst_pe, shape=list(src.sizes), offsets=offsets, put_op=put_op.name, tiles=len(tiles))
    at = _shift(dst.offsets, offsets)
    area, source = dst.area, _gm(src)
    assert area.dtype is not None  # dst's dtype
    atomic = "add" if put_op is AtomicType.ADD else None
    staging = launch.spec.staging_buffer.bytes
    for index, tile in enumerate(tiles):
        write = RemoteWrite(area, dst_pe, _shift(at, tile.offset), tuple(tile.valid_shape))

        def gm(tile: Tile = tile, write: RemoteWrite = write) -> tuple[GmView, GmView]:
            return source.shifted(tile.offset), area.data_view(dst_pe).shifted(write.offset)

        def build(p: CoreProgram, _carried: None, src_at: GmView, dst_at: GmView, tile: Tile = tile) -> tuple[None, list[Instruction]]:
            return None, copy_tile(p, src_at, dst_at, tile.shape, tile.valid_shape, src.dtype.numpy, cast(DataType, area.dtype).numpy,
                                   local_dtype=src.dtype.numpy, staging_bytes=staging, atomic=atomic, name=op)

        piece = ProgramPiece((op, tile.shape, tile.valid_shape, src.dtype.numpy, area.dtype.numpy, staging, atomic), gm, build,
                             functools.partial(_last_store_lands, write))
        task = CoreTask(node, index, piece)
        if tile.moves_data:
            def accesses(write: RemoteWrite = write) -> list[AccessSpec]:
                return [AccessSpec(WRITE, area, dst_pe, area.data_view(dst_pe).shifted(write.offset), write.shape)]

            task.accesses.append(accesses)
            task.writes.append(write)
        task.depend_on(src.tasks_for(Region(tile.offset, tile.valid_shape)))  # the source is an input of the op
        node.tasks.append(task)
    _depend(node.tasks, src.sizes, program, pred_tensor)
    return _box_token(program, node.tasks, src.sizes, tiles)


def _remote_read(op: str, qualified: str, src: object, src_pe: object, shape: object, offsets: object, valid_shape: object,
                 pred: object) -> tuple[PeProgram, ShmemTensor, int, Tensor, list[Tile]]:
    """The checked arguments of an op that reads a view of ``src`` on ``src_pe`` (shmem_get,
    shmem_load): (program, view, src_pe as an int, preds, tiles)."""
    program = current_program(qualified)
    src = _shmem(op, "src", src, program, data=True)
    check_dtype(op, "src.dtype", src.dtype)
    src_pe = _pe_arg(op, "src_pe", src_pe, program, src.n_pes)
    src = _view(op, src, shape, offsets, valid_shape, program)
    pred = _pred(op, pred, program)
    return program, src, src_pe, pred, _tiles(op, program, src.shape, src.valid_shape)


def _remote_read_task(node: OpNode, index: int, build: ProgramPiece, tile: Tile, area: ShmemArea, src_pe: int, at: tuple[int, ...]) -> CoreTask:
    """The tile op ``index`` of a remote read (shmem_get, shmem_load): it reads the tile's valid
    region at ``at`` of ``src_pe``'s data area (what the race detector checks)."""
    task = CoreTask(node, index, build)
    if tile.moves_data:
        task.accesses.append(lambda: [AccessSpec(READ, area, src_pe, area.data_view(src_pe).shifted(at), tile.valid_shape)])
    return task


@pypto_op(namespaces=("distributed",))
def shmem_get(src: ShmemTensor, src_pe: PeArg, shape: Dims | None = None, offsets: Dims | None = None, *,
              valid_shape: Dims | None = None, pred: Sequence[Tensor] | None = None) -> Tensor:
    """``src`` on ``src_pe`` -> a new local GM tensor of the view's shape, staged through UB."""
    op = "shmem_get"
    program, src, src_pe, pred_tensor, tiles = _remote_read(op, f"distributed.{op}", src, src_pe, shape, offsets, valid_shape, pred)
    assert src.dtype is not None  # _remote_read has refused a signal tensor
    launch = program.launch
    node = program.op(op, src_pe=src_pe, shape=list(src.shape), offsets=list(src.offsets), tiles=len(tiles))
    destination = Destination(empty(src.shape, src.dtype.numpy, device=program.die))
    area, dtype = src.area, src.dtype.numpy
    staging = launch.spec.staging_buffer.bytes
    for index, tile in enumerate(tiles):
        at = _shift(src.offsets, tile.offset)

        def gm(tile: Tile = tile, at: tuple[int, ...] = at) -> tuple[GmView, GmView]:
            target = destination.device  # the result may have been folded into another tensor since
            return area.data_view(src_pe).shifted(at), GmView(target.allocation, target.offset_bytes, target.strides).shifted(tile.offset)

        def build(p: CoreProgram, _carried: None, src_at: GmView, dst_at: GmView, tile: Tile = tile) -> tuple[None, tuple[()]]:
            copy_tile(p, src_at, dst_at, tile.shape, tile.valid_shape, dtype, dtype, local_dtype=dtype, staging_bytes=staging, name=op)
            return None, ()

        piece = ProgramPiece((op, tile.shape, tile.valid_shape, dtype, staging), gm, build)
        node.tasks.append(_remote_read_task(node, index, piece, tile, area, src_pe, at))
    _depend(node.tasks, src.shape, program, pred_tensor)
    writes = [(task, Region(t.offset, t.shape)) for task, t in zip(node.tasks, tiles)]
    result = Tensor.make(program, "GM", src.shape, src.dtype, device=destination.device, valid_shape=src.valid_shape, writes=writes)
    result.destination = destination
    return result


def _signal(op: str, program: PeProgram, view: ShmemTensor, src_pe: int, value: int, targets: list[int], sig_op: AtomicType,
            pred: Tensor, **record: Any) -> OpNode:
    """The tile ops of a signal: per tile, ``value`` into the slot (owner ``src_pe``) on each target."""
    launch = program.launch
    tiles = _tiles(op, program, view.shape)
    assert program.tile_shape is not None  # _tiles has refused None
    grid = SignalGrid.of(op, view.tensor_shape, view.shape, program.tile_shape)
    launch.registry.record_signal_tiles(view.area.allocation, grid.total_tiles, op=op)
    view.area.allocation.signal_used = True
    node = program.op(op, src_pe=src_pe, targets=targets, value=value, sig_op=sig_op.name, tiles=len(tiles), **record)
    area, atomic = view.area, "add" if sig_op is AtomicType.ADD else None
    def build(p: CoreProgram, _carried: None, *addresses: GmAddress) -> tuple[None, list[Instruction]]:
        return None, signal_tile(p, addresses, value, atomic=atomic, name=op)

    for index, tile in enumerate(tiles):
        at = _shift(view.offsets, tile.offset)
        slot = grid.slot_byte_offset(src_pe, at)
        task = CoreTask(node, index, None)

        def landed(stores: Sequence[Instruction], addresses: tuple[Any, ...], task: CoreTask = task, at: tuple[int, ...] = at,
                   shape: tuple[int, ...] = tile.shape) -> None:
            for store, address, target in zip(stores, addresses, targets):
                key = (address.allocation.die, address.allocation.address + address.offset)

                def on_landed(event: int, key: tuple[int, int] = key, target: int = target) -> None:
                    task.signal_landed(key, target, area, at, shape, event)

                on_recorded(store, on_landed)

        def gm(slot: int = slot) -> tuple[GmAddress, ...]:
            return tuple(area.signal_address(target, slot) for target in targets)

        task.build = ProgramPiece((op, len(targets), value, atomic), gm, build, landed)
        node.tasks.append(task)
    return node


def _wait(op: str, program: PeProgram, view: ShmemTensor, src_pe: int, cmp_value: int, clear: bool, pred: Tensor, **record: Any) -> OpNode:
    """The tile ops of a wait: per tile, an AICPU poll of this PE's slot (owner ``src_pe``)."""
    tiles = _tiles(op, program, view.shape)
    assert program.tile_shape is not None  # _tiles has refused None
    grid = SignalGrid.of(op, view.tensor_shape, view.shape, program.tile_shape)
    view.area.allocation.signal_used = True
    node = program.op(op, src_pe=src_pe, cmp_value=cmp_value, clear_signal=clear, tiles=len(tiles), **record)
    for index, tile in enumerate(tiles):
        at = _shift(view.offsets, tile.offset)
        node.tasks.append(WaitTask(node, index, view.area, src_pe, at, grid.slot_byte_offset(src_pe, at), cmp_value, clear))
    return node


@pypto_op(namespaces=("distributed",))
def shmem_signal(src: ShmemTensor, src_pe: PeArg, signal: Int, shape: Dims | None = None, offsets: Dims | None = None, *,
                 target_pe: PeArg, sig_op: AtomicType = AtomicType.SET, pred: Sequence[Tensor] | None = None) -> Tensor:
    """Write (SET) or atomically add (ADD) the int32 ``signal`` into the slots of the region's tiles
    (owner ``src_pe``) on ``target_pe``; the int ``-1`` signals every PE."""
    op = "shmem_signal"
    program = current_program(f"distributed.{op}")
    src = _shmem(op, "src", src, program)
    src_pe = _pe_arg(op, "src_pe", src_pe, program, src.n_pes)
    if is_int(target_pe) and target_pe == -1:  # an int -1, not a SymbolicScalar that evaluates to it
        targets = list(range(src.n_pes))
    else:
        targets = [_pe_arg(op, "target_pe", target_pe, program, src.n_pes)]
    check_int32(op, "signal", signal)
    check_atomic(op, "sig_op", sig_op)
    view = _view(op, src, shape, offsets, None, program)
    pred_tensor = _pred(op, pred, program)
    node = _signal(op, program, view, src_pe, int(signal), targets, sig_op, pred_tensor)
    pieces = _depend(node.tasks, view.shape, program, pred_tensor)
    return _pred_token(program, node.tasks, pred_tensor, pieces)


@pypto_op(unit="aicpu", namespaces=("distributed",))
def shmem_wait_until(src: ShmemTensor, src_pe: PeArg, cmp_value: Int = 0, shape: Dims | None = None, offsets: Dims | None = None, *,
                     cmp: OpType = OpType.EQ, clear_signal: Flag = False, pred: Sequence[Tensor] | None = None) -> Tensor:
    """Wait (on an AICPU) until this PE's slots of the region's tiles (owner ``src_pe``) equal
    ``cmp_value``; ``clear_signal`` then resets them to 0."""
    op = "shmem_wait_until"
    program = current_program(f"distributed.{op}")
    src = _shmem(op, "src", src, program)
    src_pe = _pe_arg(op, "src_pe", src_pe, program, src.n_pes)
    check_int32(op, "cmp_value", cmp_value)
    check_cmp(op, cmp)
    if not isinstance(clear_signal, (bool, np.bool_)):
        raise OpArgumentError(f"{op}: clear_signal={clear_signal!r} must be True or False")
    view = _view(op, src, shape, offsets, None, program)
    pred_tensor = _pred(op, pred, program)
    node = _wait(op, program, view, src_pe, int(cmp_value), bool(clear_signal), pred_tensor)
    pieces = _depend(node.tasks, view.shape, program, pred_tensor)
    return _pred_token(program, node.tasks, pred_tensor, pieces)


@pypto_op(namespaces=("distributed",))
def shmem_barrier_all(src: ShmemTensor, pred: Sequence[Tensor] | None = None) -> Tensor:
    """Barrier over the group: every PE adds 1 to slot row 0 of every PE, then waits for ``n_pes``
    on its own and clears it (both with ``pred``); returns the wait's token."""
    op = "shmem_barrier_all"
    program = current_program(f"distributed.{op}")
    src = _shmem(op, "src", src, program)
    pred_tensor = _pred(op, pred, program)
    signal = _signal(op, program, src, 0, 1, list(range(src.n_pes)), AtomicType.ADD, pred_tensor, part="signal")
    _depend(signal.tasks, src.shape, program, pred_tensor)
    wait = _wait(op, program, src, 0, src.n_pes, True, pred_tensor, part="wait")
    pieces = _depend(wait.tasks, src.shape, program, pred_tensor)
    return _pred_token(program, wait.tasks, pred_tensor, pieces)


@pypto_op(namespaces=("distributed",))
def shmem_clear_data(src: ShmemTensor, shape: Dims | None = None, offsets: Dims | None = None, *,
                     pred: Sequence[Tensor] | None = None) -> Tensor:
    """Zero this PE's data of the view: one tile op storing a UB buffer of zeros over the
    ``prod(view shape)`` elements that follow the view's first element (contiguously, as the framework)."""
    op = "shmem_clear_data"
    program = current_program(f"distributed.{op}")
    launch = program.launch
    src = _shmem(op, "src", src, program, data=True)
    view = _view(op, src, shape, offsets, None, program)
    assert view.dtype is not None  # _shmem(data=True) has refused a signal tensor
    rank = src.area.rank_of(program)
    pred_tensor = _pred(op, pred, program)
    node = program.op(op, shape=list(view.shape), offsets=list(view.offsets), tiles=1)
    area, itemsize = view.area, view.dtype.itemsize
    count = math.prod(view.shape)
    staging = launch.spec.staging_buffer.bytes

    def start() -> GmView:
        first = area.data_view(rank).shifted(view.offsets)
        return GmView(first.allocation, first.offset_bytes, (itemsize,))

    def build(p: CoreProgram) -> None:
        first = start()
        clear_tile(p, first.allocation, first.offset_bytes, count * itemsize, staging, name=op)

    task = CoreTask(node, 0, build)
    task.accesses.append(lambda: [AccessSpec(WRITE, area, rank, start(), (count,))])
    node.tasks.append(task)
    task.depend_on(pred_tensor.tasks_for(None))
    return Tensor.token(program, (1, 1), [(task, None)])


@pypto_op(namespaces=("distributed",))
def shmem_clear_signal(src: ShmemTensor, *, pred: Sequence[Tensor] | None = None) -> Tensor:
    """Zero this PE's signal area of ``src``, in whole 512-byte stores over ``n_pes * max_tiles``
    int32 words (as the framework's ShmemClearFlag: see ``signal_clear_bytes``)."""
    op = "shmem_clear_signal"
    program = current_program(f"distributed.{op}")
    launch = program.launch
    src = _shmem(op, "src", src, program)
    pred_tensor = _pred(op, pred, program)
    node = program.op(op, tiles=1)
    area = src.area
    rank = area.rank_of(program)
    area.allocation.signal_used = True

    def build(p: CoreProgram) -> None:
        start = area.signal_address(rank, 0)
        assert isinstance(start.offset, int)  # a signal slot's address is a plain byte offset
        size = signal_clear_bytes(area.allocation.n_pes, area.allocation.signal_max_tiles)
        first = start.allocation.address + start.offset
        for store in clear_tile(p, start.allocation, start.offset, size, CLEAR_SIGNAL_STORE_BYTES, control=True, name=op):
            on_recorded(store, lambda _event: launch.forget_slots(start.allocation.die, first, first + size))  # right after its effect

    task = CoreTask(node, 0, build)
    node.tasks.append(task)
    task.depend_on(pred_tensor.tasks_for(None))
    return Tensor.token(program, (1, 1), [(task, None)])


# -- experimental ops --------------------------------------------------------------------------------


@pypto_op(namespaces=("distributed", "experimental"))
def shmem_load(src: ShmemTensor, src_pe: PeArg, shape: Dims | None = None, offsets: Dims | None = None, *,
               pred: Sequence[Tensor] | None = None, valid_shape: Dims | None = None) -> Tensor:
    """Remote GM -> this core's UB: per tile one MTE2 copy of the valid region from ``src_pe``'s
    HBM; returns the UB tile tensor (view shape, ``src`` dtype)."""
    op = "shmem_load"
    program, src, src_pe, pred_tensor, tiles = _remote_read(op, f"experimental.{op}", src, src_pe, shape, offsets, valid_shape, pred)
    assert src.dtype is not None  # _remote_read has refused a signal tensor
    launch = program.launch
    dtype = src.dtype.numpy
    ub_bytes = VectorTarget.of(launch.system).ub_bytes
    need = ub_tile_bytes(tiles[0].shape, dtype.itemsize)
    if need > ub_bytes:
        raise ResourceError(
            f"{op}: a tile of {list(tiles[0].shape)} {src.dtype.name} needs {need} bytes of UB, more than the {ub_bytes} "
            "bytes of an AIV core; set a smaller tile shape with pypto.set_vec_tile_shapes(...)"
        )
    node = program.op(op, src_pe=src_pe, shape=list(src.shape), offsets=list(src.offsets), tiles=len(tiles))
    area = src.area
    for index, tile in enumerate(tiles):
        at = _shift(src.offsets, tile.offset)

        def build(p: CoreProgram, _carried: None, src_at: GmView, tile: Tile = tile) -> tuple[UbTile, tuple[()]]:
            return load_tile(p, src_at, tile.shape, tile.valid_shape, dtype, name=op), ()

        def gm(at: tuple[int, ...] = at) -> tuple[GmView]:
            return (area.data_view(src_pe).shifted(at),)

        piece = ProgramPiece((op, tile.shape, tile.valid_shape, dtype), gm, build)
        node.tasks.append(_remote_read_task(node, index, piece, tile, area, src_pe, at))
    _depend(node.tasks, src.shape, program, pred_tensor)
    writes = [(task, Region(t.offset, t.shape)) for task, t in zip(node.tasks, tiles)]
    result = Tensor.make(program, "UB", src.shape, src.dtype, valid_shape=src.valid_shape, writes=writes)
    result.tiles = tiles
    result.tile_shape = program.tile_shape
    return result


@pypto_op(namespaces=("experimental",))
def shmem_store(src: Tensor, offsets: Dims, dst: ShmemTensor, dst_pe: PeArg, *,
                put_op: AtomicType = AtomicType.SET, pred: Sequence[Tensor] | None = None) -> Tensor:
    """A UB tile (a shmem_load result) -> ``dst`` on ``dst_pe`` at ``offsets``: one MTE3 store per
    tile (atomic add for ADD), run by the tile op that loaded the tile, on its core."""
    op = "shmem_store"
    program = current_program(f"experimental.{op}")
    if not (isinstance(src, Tensor) and src.location == "UB"):
        raise OpArgumentError(f"{op}: src={src!r} must be a UB tile tensor (a shmem_load result); a GM tensor goes with shmem_put")
    src = _tensor(op, "src", src, program, "UB")
    assert src.tile_shape is not None  # a UB tile tensor has the tile shape it was loaded with
    dst = _shmem(op, "dst", dst, program, data=True)
    assert dst.dtype is not None  # _shmem(data=True) has refused a signal tensor
    check_atomic(op, "put_op", put_op)
    check_put_dtypes(op, src.dtype, dst.dtype, put_op, from_ub=True)
    check_element_count(op, "src.shape", src.sizes)
    dst_pe = _pe_arg(op, "dst_pe", dst_pe, program, dst.n_pes)
    offsets = _ints(op, "offsets", offsets, program)
    check_view(op, dst.shape, src.sizes, offsets, shape_arg="src.shape")
    if program.tile_shape != src.tile_shape:
        raise OpArgumentError(
            f"{op}: tile_shape={list(program.tile_shape or ())} differs from {list(src.tile_shape)}, the tile shape src was "
            "loaded with; a UB tile is stored tile by tile as it was loaded: set the same vec tile shape"
        )
    pred_tensor: Tensor | None = None
    if pred is not None:
        _pred(op, pred, program)  # checks the preds as given
        others = [t for t in pred if t is not src]  # the framework drops src itself: the store runs with its load
        pred_tensor = _pred(op, others, program) if others else None
    node = program.op(op, dst_pe=dst_pe, shape=list(src.sizes), offsets=offsets, put_op=put_op.name, tiles=len(src.tiles))
    node.tasks = [task for task, _ in src.writes]
    area, at = dst.area, _shift(dst.offsets, offsets)
    atomic = "add" if put_op is AtomicType.ADD else None
    for task, tile in zip(cast("list[CoreTask]", node.tasks), src.tiles):  # a UB tile tensor's writes: its shmem_load's tile ops
        write = RemoteWrite(area, dst_pe, _shift(at, tile.offset), tuple(tile.valid_shape))

        def consume(p: CoreProgram, ub: UbTile, dst: GmView, tile: Tile = tile) -> tuple[None, Sequence[Instruction]]:
            return None, store_tile(p, ub, dst, tile.valid_shape, atomic=atomic, name=op) if tile.moves_data else ()

        def gm(write: RemoteWrite = write) -> tuple[GmView]:
            return (area.data_view(dst_pe).shifted(write.offset),)

        task.consumers.append(ProgramPiece((op, tile.valid_shape, atomic), gm, consume, functools.partial(_last_store_lands, write), source=node.source))
        if tile.moves_data:
            def accesses(write: RemoteWrite = write) -> list[AccessSpec]:
                return [AccessSpec(WRITE, area, dst_pe, area.data_view(dst_pe).shifted(write.offset), write.shape, node)]

            task.accesses.append(accesses)
            task.writes.append(write)
    if pred_tensor is not None:
        _depend(node.tasks, src.sizes, program, pred_tensor)
    return _box_token(program, node.tasks, src.sizes, src.tiles)
