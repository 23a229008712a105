"""PyPTO's indexing ops (npusim/frontend/pypto/indexing.py): results bit-exact against the numpy
reference written from the op pages (``reference.gather`` / ``scatter`` / ``index_add`` / ``index_put``), with hypothesis
over shapes, dims (negative ones too), dtypes, alpha and tile shapes; the upstream example's and st cases; the
refusals; the pipes their tile ops run on and how their time grows with the index count; runs
without data."""

import ml_dtypes
import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import npusim
from npusim import pypto
from npusim.errors import OpArgumentError, WorkloadError

from . import reference
from .compute_helpers import run, same_bits
from .test_compute_timing import matmul_events as events_of

BF16 = np.dtype(ml_dtypes.bfloat16)
FAST = settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
GATHER_DTYPES = [np.float16, BF16, np.float32, np.int32, np.int16, np.uint16, np.uint32]
SCATTER_DTYPES = [np.float16, BF16, np.float32, np.int32, np.int16, np.int8, np.uint8]


def _values(rng, shape, dtype):
    dtype = np.dtype(dtype)
    if np.issubdtype(dtype, np.integer):
        info = np.iinfo(dtype)
        return rng.integers(max(info.min, -1000), min(info.max, 1000), size=shape, endpoint=True).astype(dtype)
    return (rng.standard_normal(shape) * 4).astype(dtype)


@st.composite
def indexing_cases(draw, max_rank=3):
    """An input shape, a dim (maybe negative), an index shape no larger than the input off dim, a tile shape."""
    rank = draw(st.integers(1, max_rank))
    shape = tuple(draw(st.integers(1, 9)) for _ in range(rank))
    dim = draw(st.integers(-rank, rank - 1))
    axis = dim % rank
    index_shape = tuple(draw(st.integers(1, 9)) if d == axis else draw(st.integers(1, s)) for d, s in enumerate(shape))
    tile = tuple(draw(st.integers(1, max(index_shape[d], shape[d]))) for d in range(rank))
    return shape, dim, index_shape, tile


# -- gather ------------------------------------------------------------------------------------------


@FAST
@given(indexing_cases(), st.sampled_from(GATHER_DTYPES), st.sampled_from([np.int32, np.int64]), st.integers(0, 2**31))
def test_gather_equals_the_reference(case, dtype, index_dtype, seed):
    shape, dim, index_shape, tile = case
    rng = np.random.default_rng(seed)
    x = _values(rng, shape, dtype)
    index = rng.integers(0, shape[dim], size=index_shape).astype(index_dtype)
    got, _ = run(lambda a, i: pypto.gather(a, dim, i), x, index, tile=tile)
    assert same_bits(got, reference.gather(x, dim % len(shape), index))


# the cases of hicann/pypto examples/01_beginner/transform/transform_ops.py (test_gather_basic,
# test_gather_different_dimensions, test_gather_negative_indexing): input, index, dim, expected
UPSTREAM_GATHER = [
    ([[0, 1, 2, 3, 4], [5, 6, 7, 8, 9], [10, 11, 12, 13, 14]], [[0, 1, 2, 0], [1, 2, 0, 1], [2, 2, 1, 0]], 0,
     [[0, 6, 12, 3], [5, 11, 2, 8], [10, 11, 7, 3]]),
    ([[[10, 20, 30, 40], [50, 60, 70, 80], [90, 100, 110, 120]], [[1, 2, 3, 4], [5, 6, 7, 8], [9, 10, 11, 12]]],
     [[[0, 3], [2, 1], [3, 3]], [[1, 2], [0, 3], [2, 0]]], 2, [[[10, 40], [70, 60], [120, 120]], [[2, 3], [5, 8], [11, 9]]]),
    ([[0, 1, 2, 3, 4], [5, 6, 7, 8, 9], [10, 11, 12, 13, 14]], [[0, 1, 2, 0], [1, 2, 0, 1], [2, 2, 1, 0]], -1,
     [[0, 1, 2, 0], [6, 7, 5, 6], [12, 12, 11, 10]]),
]


@pytest.mark.parametrize("x, index, dim, expected", UPSTREAM_GATHER, ids=["basic", "dim2", "dim-1"])
def test_the_upstream_example_gathers(x, index, dim, expected):
    x, index = np.array(x, np.int32), np.array(index, np.int32)
    got, _ = run(lambda a, i: pypto.gather(a, dim, i), x, index, tile=[8] * x.ndim)
    np.testing.assert_array_equal(got, np.array(expected, np.int32))
    method, _ = run(lambda a, i: a.gather(dim, i), x, index, tile=[8] * x.ndim)  # Tensor.gather (tensor.py)
    np.testing.assert_array_equal(method, np.array(expected, np.int32))


# -- scatter -----------------------------------------------------------------------------------------


@FAST
@given(indexing_cases(), st.sampled_from(SCATTER_DTYPES), st.sampled_from([np.int32, np.int64]), st.sampled_from([None, "add", "multiply"]),
       st.booleans(), st.integers(0, 2**31))
def test_scatter_equals_the_reference(case, dtype, index_dtype, reduce, tensor_src, seed):
    shape, dim, index_shape, tile = case
    axis = dim % len(shape)
    tile = tuple(max(shape[axis], index_shape[axis]) if d == axis else t for d, t in enumerate(tile))  # dim is not split
    rng = np.random.default_rng(seed)
    x = _values(rng, shape, dtype)
    index = rng.integers(0, shape[axis], size=index_shape).astype(index_dtype)
    if tensor_src:
        src = _values(rng, tuple(i + 1 for i in index_shape), dtype)  # index.shape[d] <= src.shape[d]
        got, _ = run(lambda a, i, s: pypto.scatter(a, dim, i, s, reduce=reduce), x, index, src, tile=tile)
    else:
        src = 3 if np.issubdtype(dtype, np.integer) else 0.75
        got, _ = run(lambda a, i: pypto.scatter(a, dim, i, src, reduce=reduce), x, index, tile=tile)
    assert same_bits(got, reference.scatter(x, axis, index, src, reduce))


def test_the_upstream_example_scatters():
    """hicann/pypto examples/01_beginner/transform/transform_ops.py test_scatter and test_scatter_update
    (which calls pypto.scatter): an fp32 [3, 5] input, an int64 index of its shape, a scalar src, dim 0 and -2."""
    rng = np.random.default_rng(7)
    for dim, src in ((0, 0.5), (-2, 2.0)):
        x = rng.random((3, 5), dtype=np.float32)
        y = rng.integers(0, 3, size=(3, 5)).astype(np.int64)
        got, _ = run(lambda a, i, dim=dim, src=src: pypto.scatter(a, dim, i, src), x, y, tile=(8, 8))
        assert same_bits(got, reference.scatter(x, dim % 2, y, src))


@pytest.mark.parametrize("dim, index_rows, in_place", [(0, 2, True), (1, 3, False)])
def test_scatter_of_views_past_the_end_of_their_tensors_reads_their_valid_part(dim, index_rows, in_place):
    """hicann/pypto python/tests/st/operation/vector/test_scatter_onboard.py (test_scatter__onboard,
    test_scatter_onboard): a [4, s] fp32 input and an int64 index of index_rows rows, each viewed as
    [4, s] with the valid shape of its tensor, a scalar src 2.0, tiles [4, 16]: the index's tile
    loads only its valid rows (before, it loaded a whole view's rows past the index tensor's end)."""
    s = 5 if dim == 0 else 4
    rng = np.random.default_rng(index_rows)
    x = torch.from_numpy(rng.random((4, s), dtype=np.float32))
    index = torch.from_numpy(rng.integers(0, (4, s)[dim], size=(index_rows, s)).astype(np.int64))
    out = torch.zeros(4, s)
    with npusim.session("a2"):
        pypto.runtime._device_init()
        a = pypto.tensor([4, s], pypto.DT_FP32, "x")
        i = pypto.tensor([index_rows, s], pypto.DT_INT64, "index")
        c = pypto.tensor([4, s], pypto.DT_FP32, "out")
        with pypto.function("MAIN", a, i, c):
            view = pypto.view(a, [4, s], [0, 0], valid_shape=[4, s])
            index_view = pypto.view(i, [4, s], [0, 0], valid_shape=[index_rows, s])
            pypto.set_vec_tile_shapes(4, 16)
            result = pypto.tensor([4, s], pypto.DT_FP32, "tmp")
            if in_place:
                pypto.scatter_(view, dim, index_view, 2.0)
                result.move(view)
            else:
                result.move(pypto.scatter(view, dim, index_view, 2.0))
            pypto.assemble(result, [0, 0], c)
        pypto.runtime._device_run_once_data_from_host(pypto.from_torch(x, "x"), pypto.from_torch(index, "index"), pypto.from_torch(out, "out"))
        pypto.runtime._device_fini()
    assert same_bits(out.numpy(), reference.scatter(x.numpy(), dim, index.numpy(), 2.0))


def test_scatter_in_place_writes_the_input_and_returns_it():
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    index = np.array([[2, 0, 1, 2]], np.int32)
    held = {}

    def build(a, i):
        held["result"] = pypto.scatter_(a, 0, i, -1.0)
        held["input"] = a
        return pypto.clone(a)

    got, _ = run(build, x, index, tile=(4, 4))
    assert held["result"] is held["input"]
    assert same_bits(got, reference.scatter(x, 0, index, -1.0))
    method, _ = run(lambda a, i: a.scatter(0, i, 5.0, reduce="add"), x, index, tile=(4, 4))  # Tensor.scatter
    assert same_bits(method, reference.scatter(x, 0, index, 5.0, "add"))


def test_a_scatter_tile_beyond_the_index_copies_the_input_through():
    x = np.arange(8 * 6, dtype=np.float32).reshape(8, 6)
    index = np.array([[1, 0], [0, 1]], np.int32)  # rows 0..1 of 6 columns: the tiles of columns 2.. scatter nothing
    got, _ = run(lambda a, i: pypto.scatter(a, 0, i, 9.0), x, index, tile=(8, 2))
    assert same_bits(got, reference.scatter(x, 0, index, 9.0))


# -- refusals ----------------------------------------------------------------------------------------

F32 = np.zeros((4, 8), np.float32)
I32 = np.zeros((4, 8), np.int32)


@pytest.mark.parametrize("build,arrays,match", [
    (lambda x, i: pypto.gather(x, 0, i), (np.zeros((4, 8), np.int8), I32), r"pypto.gather: input.dtype='DT_INT8' is not supported .* gather takes"),
    (lambda x, i: pypto.gather(x, 0, i), (F32, np.zeros((4, 8), np.int16)), r"pypto.gather: index.dtype='DT_INT16' is not an index dtype .* DT_INT32, DT_INT64"),
    (lambda x, i: pypto.gather(x, 2, i), (F32, I32), r"pypto.gather: dim=2 must be an int with -2 <= dim < 2"),
    (lambda x, i: pypto.gather(x, -3, i), (F32, I32), r"pypto.gather: dim=-3 must be an int"),
    (lambda x, i: pypto.gather(x, 0, i), (F32, np.zeros((4, 9), np.int32)), r"pypto.gather: index.shape=\[4, 9\] exceeds input.shape=\[4, 8\] in dim 1"),
    (lambda x, i: pypto.gather(x, 0, i), (F32, np.zeros((4,), np.int32)), r"pypto.gather: index.shape=\[4\] must have as many dims as input"),
    (lambda x, i: pypto.scatter(x, 0, i, 1.0, reduce="max"), (F32, I32), r"pypto.scatter: reduce='max' must be None, 'add' or 'multiply'"),
    (lambda x, i: pypto.scatter(x, 0, i, "1"), (F32, I32), r"pypto.scatter: src='1' must be a pypto.Tensor, an int or a float"),
    (lambda x, i: pypto.scatter(x, 0, i, float("inf")), (F32, I32), r"pypto.scatter: src=inf must be finite"),
    (lambda x, i: pypto.scatter(x, 0, i, 1.0), (np.zeros((4, 8), np.uint16), I32), r"pypto.scatter: input.dtype='DT_UINT16' is not supported"),
    (lambda x, i: pypto.scatter(x, 1, i, x), (F32, np.zeros((5, 8), np.int32)), r"pypto.scatter: index.shape=\[5, 8\] exceeds input.shape"),
    (lambda x, i, s: pypto.scatter(x, 0, i, s), (F32, I32, np.zeros((4, 8), np.float16)), r"pypto.scatter: src.dtype='DT_FP16' differs from input.dtype=DT_FP32"),
    (lambda x, i, s: pypto.scatter(x, 0, i, s), (F32, I32, np.zeros((4, 7), np.float32)), r"pypto.scatter: src.shape=\[4, 7\] must have index's dims"),
    (lambda x, i: pypto.scatter_(x, 0, i, 1.0), (np.zeros((16, 8), np.float32), np.zeros((16, 8), np.int32)),
     r"pypto.scatter_: tile_shape=\[4, 8\] splits dim 0: tile_shape\[dim\] must be >= max\(input.shape\[dim\], index.shape\[dim\]\) = 16"),
])
def test_bad_arguments_name_op_argument_and_rule(build, arrays, match):
    with pytest.raises(OpArgumentError, match=match):
        run(build, *arrays, tile=(4, 8))


@pytest.mark.parametrize("build", [lambda x, i: pypto.gather(x, 1, i), lambda x, i: pypto.scatter(x, 1, i, 1.0)])
def test_an_index_value_out_of_range_stops_a_run_with_data(build):
    index = np.zeros((4, 8), np.int32)
    index[2, 5] = 8
    with pytest.raises(OpArgumentError, match=r"pypto.(gather|scatter): index=8 \(a value of the index on the device\) is outside \[0, 8\) along dim 1"):
        run(build, F32, index, tile=(4, 8))


# -- timing ------------------------------------------------------------------------------------------


def _op_events(session, name):
    return [(label, track, end - start) for label, track, start, end in events_of(session) if label.startswith(name)]


def _pipe_time(events, pipe, label=None):
    return sum(d for name, track, d in events if track.endswith(pipe) and (label is None or name == label))


def test_gather_loads_on_mte2_gathers_on_vector_after_a_scalar_loop_and_stores_on_mte3():
    x = np.zeros((16, 64), np.float32)
    times = {}
    for rows in (4, 8, 16):
        index = np.zeros((rows, 64), np.int32)
        _, session = run(lambda a, i: pypto.gather(a, 0, i), x, index, tile=(16, 64), data=False)
        events = _op_events(session, "gather")
        pipes = {track.rsplit(" ", 1)[-1] for _, track, _ in events}
        assert {"MTE2", "VECTOR", "SCALAR", "MTE3"} <= pipes
        assert sum(1 for name, track, _ in events if name == "gather" and track.endswith("VECTOR")) == rows  # one vgather per index row
        times[rows] = (_pipe_time(events, "VECTOR", "gather"), _pipe_time(events, "SCALAR", "gather offsets"))
    # one gather instruction and one offsets loop per index row of 64 elements: both linear in the rows
    assert times[8][0] == 2 * times[4][0] and times[16][0] == 4 * times[4][0]
    assert times[8][1] == 2 * times[4][1] and times[16][1] == 4 * times[4][1]


def test_an_int64_gather_and_a_scatter_run_their_loop_on_the_scalar_unit_linear_in_the_index_count():
    x = np.zeros((16, 64), np.float32)
    for build, label in ((lambda a, i: pypto.gather(a, 0, i), "gather"), (lambda a, i: pypto.scatter(a, 0, i, 1.0), "scatter")):
        times = {}
        for rows in (4, 8):
            index = np.zeros((rows, 64), np.int64)
            _, session = run(build, x, index, tile=(16, 64), data=False)
            events = _op_events(session, label)
            assert not [e for e in events if e[0] == label and e[1].endswith("VECTOR")]  # no vector gather / vscatter on A2
            assert {"MTE2", "MTE3"} <= {track.rsplit(" ", 1)[-1] for _, track, _ in events}
            times[rows] = _pipe_time(events, "SCALAR", label)
        assert times[8] == 2 * times[4] > 0


def test_a_run_without_data_times_what_a_run_with_data_does():
    rng = np.random.default_rng(3)
    x = rng.standard_normal((8, 32)).astype(np.float16)
    index = rng.integers(0, 8, size=(8, 32)).astype(np.int32)
    for build in (lambda a, i: pypto.gather(a, 0, i), lambda a, i: pypto.scatter(a, 0, i, a, reduce="add")):
        _, with_data = run(build, x, index, tile=(8, 32))
        values, without = run(build, x, index, tile=(8, 32), data=False)
        assert values is None
        assert sorted(events_of(with_data)) == sorted(events_of(without))


# -- scatter_update ----------------------------------------------------------------------------------

# the examples of pypto.scatter_update's docstring (hicann/pypto python/pypto/op/indexing.py): dim2 and dim4
SCATTER_UPDATE_DOC = [
    (np.zeros((8, 3), np.int32), [[1, 2], [4, 5]], np.arange(1, 13, dtype=np.int32).reshape(4, 3), (2, 3)),
    (np.zeros((2, 6, 1, 3), np.int32), [[1, 8], [4, 10]], np.arange(1, 13, dtype=np.int32).reshape(2, 2, 1, 3), (1, 2, 1, 3)),
]


@pytest.mark.parametrize("x, index, src, tile", SCATTER_UPDATE_DOC, ids=["dim2", "dim4"])
def test_the_docstring_examples_of_scatter_update(x, index, src, tile):
    index = np.array(index, np.int64)
    got, _ = run(lambda a, i, s: pypto.scatter_update(a, -2, i, s), x, index, src, tile=tile)
    np.testing.assert_array_equal(got, reference.scatter_update(x, index, src))
    method, _ = run(lambda a, i, s: a.scatter_update(-2, i, s), x, index, src, tile=tile)  # Tensor.scatter_update
    np.testing.assert_array_equal(method, got)


@FAST
@given(st.integers(1, 4), st.integers(1, 6), st.integers(1, 3), st.integers(1, 40), st.booleans(),
       st.sampled_from([np.float16, BF16, np.float32, np.int32, np.int16]), st.sampled_from([np.int64, np.int32, np.int16]), st.integers(0, 2**31))
def test_scatter_update_equals_the_reference(b, s, tile_factor, d, four_dims, dtype, index_dtype, seed):
    rng = np.random.default_rng(seed)
    block_num, block_size = b + 1, s + 2
    index = rng.permutation(block_num * block_size)[: b * s].reshape(b, s).astype(index_dtype)  # distinct slots, as a KV cache's
    if four_dims:
        x, src = _values(rng, (block_num, block_size, 1, d), dtype), _values(rng, (b, s, 1, d), dtype)
        tile = (min(b, tile_factor), s, 1, d)
    else:
        x, src = _values(rng, (block_num * block_size, d), dtype), _values(rng, (b * s, d), dtype)
        tile = (s * tile_factor, d)  # a multiple of s
    got, _ = run(lambda a, i, u: pypto.scatter_update(a, -2, i, u), x, index, src, tile=tile)
    assert same_bits(got, reference.scatter_update(x, index, src))


@pytest.mark.parametrize("build,arrays,tile,match", [
    (lambda x, i, s: pypto.scatter_update(x, 0, i, s), (F32, np.zeros((2, 2), np.int64), np.zeros((4, 8), np.float32)), (4, 8),
     r"pypto.scatter_update: dim=0 must be -2"),
    (lambda x, i, s: pypto.scatter_update(x, -2, i, s), (F32, np.zeros((2, 2), np.int64), np.zeros((3, 8), np.float32)), (4, 8),
     r"pypto.scatter_update: src.shape=\[3, 8\] must be \[4, 8\]"),
    (lambda x, i, s: pypto.scatter_update(x, -2, i, s), (F32, np.zeros((2, 2), np.int8), np.zeros((4, 8), np.float32)), (4, 8),
     r"pypto.scatter_update: index.dtype='DT_INT8' is not an index dtype of scatter_update; it takes DT_INT64, DT_INT32, DT_INT16"),
    (lambda x, i, s: pypto.scatter_update(x, -2, i, s), (F32, np.zeros((2, 2), np.int64), np.zeros((4, 8), np.float32)), (4, 4),
     r"pypto.scatter_update: tile_shape=\[4, 4\] must not split d"),
    (lambda x, i, s: pypto.scatter_update(x, -2, i, s), (np.zeros((12, 8), np.float32), np.zeros((2, 3), np.int64), np.zeros((6, 8), np.float32)),
     (4, 8), r"pypto.scatter_update: tile_shape=\[4, 8\] has tileBS=4, which must divide s=3 or be a multiple of it"),
    (lambda x, i, s: pypto.scatter_update(x, -2, i, s), (np.zeros((2, 4, 2, 8), np.float32), np.zeros((2, 2), np.int64),
     np.zeros((2, 2, 2, 8), np.float32)), (1, 2, 1, 8), r"pypto.scatter_update: input.shape=\[2, 4, 2, 8\] must be"),
])
def test_bad_scatter_update_arguments_name_op_argument_and_rule(build, arrays, tile, match):
    with pytest.raises(OpArgumentError, match=match):
        run(build, *arrays, tile=tile)


def test_scatter_update_stores_one_row_per_index_element_on_mte3_at_the_address_the_scalar_unit_reads():
    d = 128
    x = np.zeros((64, d), np.float16)
    stores = {}
    for s in (4, 8, 16):
        index = np.arange(2 * s, dtype=np.int64).reshape(2, s)
        src = np.ones((2 * s, d), np.float16)
        for data in (True, False):  # without data the k-th index element is taken to point to row k: the same rows here
            _, session = run(lambda a, i, u: pypto.scatter_update(a, -2, i, u), x, index, src, tile=(s, d), data=data)
            events = _op_events(session, "scatter_update")
            rows = [e for e in events if e[0] == "scatter_update MTE3"]
            assert len(rows) == 2 * s and all(track.endswith("MTE3") for _, track, _ in rows)
            assert sum(1 for name, track, _ in events if name == "scatter_update index" and track.endswith("SCALAR")) == 2 * s
            assert any(name == "scatter_update MTE2" for name, _, _ in events)
            stores.setdefault(s, []).append(sorted(events))
        assert stores[s][0] == stores[s][1]  # with and without data: the same events
    # the rows' time on MTE3 grows with the index count (one copy of d elements each)
    mte3 = {s: sum(t for name, _, t in stores[s][0] if name == "scatter_update MTE3") for s in stores}
    assert mte3[4] < mte3[8] < mte3[16]


# -- index_select ------------------------------------------------------------------------------------


def test_the_docstring_example_of_index_select():
    """pypto.index_select's docstring (hicann/pypto python/pypto/op/indexing.py): x [3, 4], indices [0, 2], dims 0 and 1."""
    x = np.array([[0.1427, 0.0231, -0.5414, -1.0009], [-0.4664, 0.2647, -0.1228, -1.1068], [-1.1734, -0.6571, 0.7230, -0.6004]], np.float32)
    index = np.array([0, 2], np.int32)
    for dim in (0, 1, -1):
        got, _ = run(lambda a, i, dim=dim: pypto.index_select(a, dim, i), x, index, tile=(2, 2))
        assert same_bits(got, np.take(x, index, axis=dim))


@FAST
@given(st.integers(1, 3), st.data(), st.sampled_from([np.float16, BF16, np.float32, np.int8, np.int32, np.uint16]),
       st.sampled_from([np.int32, np.int64]), st.integers(0, 2**31))
def test_index_select_equals_the_reference(rank, data, dtype, index_dtype, seed):
    shape = tuple(data.draw(st.integers(1, 7)) for _ in range(rank))
    dim = data.draw(st.integers(-rank, rank - 1))
    index_shape = tuple(data.draw(st.integers(1, 4)) for _ in range(data.draw(st.integers(1, 2 if rank < 3 else 2))))
    axis = dim % rank
    out_shape = shape[:axis] + index_shape + shape[axis + 1:]
    if len(out_shape) > 4:
        return
    tile = tuple(data.draw(st.integers(1, n)) for n in out_shape)
    rng = np.random.default_rng(seed)
    x = _values(rng, shape, dtype)
    index = rng.integers(0, shape[axis], size=index_shape).astype(index_dtype)
    got, _ = run(lambda a, i: pypto.index_select(a, dim, i), x, index, tile=tile)
    assert same_bits(got, reference.index_select(x, axis, index))


@pytest.mark.parametrize("build,arrays,match", [
    (lambda x, i: pypto.index_select(x, 0, i), (F32, np.zeros((2,), np.int16)), r"pypto.index_select: index.dtype='DT_INT16' is not an index dtype"),
    (lambda x, i: pypto.index_select(x, 0, i), (np.zeros((4, 8), np.int64), np.zeros((2,), np.int32)), r"pypto.index_select: input.dtype='DT_INT64'"),
    (lambda x, i: pypto.index_select(x, 3, i), (F32, np.zeros((2,), np.int32)), r"pypto.index_select: dim=3 must be an int with -2 <= dim < 2"),
    (lambda x, i: pypto.index_select(x, 0, i), (F32, np.zeros((2, 2, 2), np.int32)), r"pypto.index_select: index.shape=\[2, 2, 2\] must have 1 or 2 dims"),
])
def test_bad_index_select_arguments_name_op_argument_and_rule(build, arrays, match):
    with pytest.raises(OpArgumentError, match=match):
        run(build, *arrays, tile=(4, 8, 8))


def test_index_select_loads_one_slice_per_index_element_on_mte2_at_the_address_the_index_gives():
    x = np.zeros((64, 128), np.float16)
    loads = {}
    for n in (4, 8, 16):
        index = np.arange(n, dtype=np.int32)
        for data in (True, False):  # without data the k-th index element selects row k: the same rows here
            _, session = run(lambda a, i: pypto.index_select(a, 0, i), x, index, tile=(16, 128), data=data)
            events = _op_events(session, "index_select")
            rows = [e for e in events if e[0] == "index_select MTE2" and e[1].endswith("MTE2")]
            assert len(rows) == n + 1  # the index box, then one row per index element
            assert sum(1 for name, track, _ in events if name == "index_select index" and track.endswith("SCALAR")) == n
            assert any(name == "index_select MTE3" and track.endswith("MTE3") for name, track, _ in events)
            loads.setdefault(n, []).append(sorted(events))
        assert loads[n][0] == loads[n][1]
    mte2 = {n: sum(t for name, _, t in loads[n][0] if name == "index_select MTE2") for n in loads}
    assert mte2[4] < mte2[8] < mte2[16]


@pytest.mark.parametrize("build,arrays,match", [
    (lambda a, i: pypto.index_select(a, 0, i), (F32, np.array([1, 9], np.int32)), r"index_select MTE2 addresses bytes .* out of bounds"),
    (lambda a, i, s: pypto.scatter_update(a, -2, i, s), (F32, np.array([[1, 9]], np.int64), np.ones((2, 8), np.float32)),
     r"scatter_update MTE3 addresses bytes .* out of bounds"),
])
def test_a_row_out_of_range_stops_a_run_with_data_at_its_copy(build, arrays, match):
    """The data-dependent copies of index_select and scatter_update: the address of an index value
    past the input is out of its tensor, which the copy refuses as it issues (WorkloadError)."""
    with pytest.raises(WorkloadError, match=match):
        run(build, *arrays, tile=(2, 8))


# -- index_add / index_add_ --------------------------------------------------------------------------

INDEX_ADD_DTYPES = [np.float16, BF16, np.float32, np.int32, np.int16, np.int8]


@st.composite
def index_add_cases(draw, max_rank=3):
    """An input shape, a dim (maybe negative), the index length (source.shape[dim]), a tile shape of source."""
    rank = draw(st.integers(1, max_rank))
    shape = tuple(draw(st.integers(1, 7)) for _ in range(rank))
    dim = draw(st.integers(-rank, rank - 1))
    count = draw(st.integers(1, 9))
    source_shape = tuple(count if d == dim % rank else s for d, s in enumerate(shape))
    tile = tuple(draw(st.integers(1, s)) for s in source_shape)
    return shape, dim, source_shape, tile


@FAST
@given(index_add_cases(), st.sampled_from(INDEX_ADD_DTYPES), st.sampled_from([np.int32, np.int64]),
       st.sampled_from([1, 2, -3, 1.5, 0.3, 1.0000001]), st.booleans(), st.integers(0, 2**31))
def test_index_add_equals_the_reference(case, dtype, index_dtype, alpha, in_place, seed):
    shape, dim, source_shape, tile = case
    rng = np.random.default_rng(seed)
    x, source = _values(rng, shape, dtype), _values(rng, source_shape, dtype)
    index = rng.integers(0, shape[dim], size=source_shape[dim]).astype(index_dtype)  # duplicates accumulate in order
    op = pypto.index_add_ if in_place else pypto.index_add
    got, _ = run(lambda a, i, s: op(a, dim, i, s, alpha=alpha), x, index, source, tile=tile)
    assert same_bits(got, reference.index_add(x, dim % len(shape), index, source, alpha))


def test_the_docstring_example_of_index_add_and_the_tensor_methods():
    x, source, index = np.zeros((2, 3), np.int32), np.ones((3, 3), np.int32), np.array([0, 1, 0], np.int32)
    expected = np.array([[2, 2, 2], [1, 1, 1]], np.int32)  # pypto-index_add_.md 调用示例
    for build in (lambda a, i, s: pypto.index_add_(a, 0, i, s, alpha=1), lambda a, i, s: pypto.index_add_(a, 0, i, s),
                  lambda a, i, s: a.index_add_(0, i, s), lambda a, i, s: a.index_add(0, i, s)):
        got, _ = run(build, x, index, source, tile=(4, 4))
        np.testing.assert_array_equal(got, expected)


def test_index_add_in_place_writes_the_input_and_returns_it():
    x, source, index = np.zeros((4, 8), np.float32), np.ones((4, 3), np.float32), np.array([7, 0, 7], np.int64)
    seen = {}

    def build(a, i, s):
        seen["returned"] = pypto.index_add_(a, 1, i, s, alpha=2.0)
        return a

    got, _ = run(build, x, index, source, tile=(4, 3))
    expected = np.zeros((4, 8), np.float32)
    expected[:, 7], expected[:, 0] = 4.0, 2.0
    np.testing.assert_array_equal(got, expected)


# hicann/pypto python/tests/st/operation/vector/test_indexadd_onboard.py (test_indexadd__onboard): axis,
# alpha, self shape, source shape, view shape, tile shape; fp32, index int32; run there in the host-data
# style with views of source and index per loop step (tests/frontend/pypto/upstream runs the file itself)
UPSTREAM_INDEX_ADD = [(0, 1.3, (7, 28), (13, 28), (7, 28), (5, 8))]


@pytest.mark.parametrize("axis, alpha, self_shape, src_shape, view_shape, tile", UPSTREAM_INDEX_ADD, ids=["onboard"])
def test_the_upstream_st_case_of_index_add(axis, alpha, self_shape, src_shape, view_shape, tile):
    rng = np.random.default_rng(5)
    x = (rng.random(self_shape, dtype=np.float32) * 200 - 100).astype(np.float32)
    source = (rng.random(src_shape, dtype=np.float32) * 200 - 100).astype(np.float32)
    index = rng.integers(0, self_shape[axis], src_shape[axis]).astype(np.int32)

    def build(a, i, s):
        for b0 in range(0, src_shape[0], view_shape[0]):
            for s0 in range(0, src_shape[1], view_shape[1]):
                valid = [min(src_shape[0] - b0, view_shape[0]), min(src_shape[1] - s0, view_shape[1])]
                view = pypto.view(s, list(view_shape), [b0, s0], valid_shape=valid)
                at = [b0, s0][axis]
                part = pypto.view(i, [view_shape[axis]], [at], valid_shape=[valid[axis]])
                pypto.index_add_(a, axis, part, view, alpha=alpha)
        return a

    got, _ = run(build, x, index, source, tile=tile)
    assert same_bits(got, reference.index_add(x, axis, index, source, alpha))
    golden = torch.from_numpy(x).index_add(axis, torch.from_numpy(index).long(), torch.from_numpy(source), alpha=alpha)
    assert torch.allclose(torch.from_numpy(got), golden, rtol=1e-4, atol=1e-5)


F32_2D = np.zeros((4, 8), np.float32)


@pytest.mark.parametrize("build,arrays,match", [
    (lambda x, i, s: pypto.index_add(x, 0, i, s), (F32_2D, np.zeros(2, np.int16), np.zeros((2, 8), np.float32)), r"index.dtype='DT_INT16'"),
    (lambda x, i, s: pypto.index_add(x, 0, i, s), (F32_2D, np.zeros((2, 1), np.int32), np.zeros((2, 8), np.float32)), r"index.shape=\[2, 1\] must have 1 dim"),
    (lambda x, i, s: pypto.index_add(x, 2, i, s), (F32_2D, np.zeros(2, np.int32), np.zeros((2, 8), np.float32)), r"dim=2"),
    (lambda x, i, s: pypto.index_add(x, 0, i, s), (F32_2D, np.zeros(2, np.int32), np.zeros((3, 8), np.float32)),
     r"source.shape=\[3, 8\] must have source.shape\[dim\] == index.shape\[0\] = 2"),
    (lambda x, i, s: pypto.index_add(x, 0, i, s), (F32_2D, np.zeros(2, np.int32), np.zeros((2, 4), np.float32)),
     r"source.shape=\[2, 4\] must equal input.shape=\[4, 8\] in every dim but dim"),
    (lambda x, i, s: pypto.index_add(x, 0, i, s), (F32_2D, np.zeros(2, np.int32), np.zeros((2, 8), np.float16)), r"source.dtype='DT_FP16' differs"),
    (lambda x, i, s: pypto.index_add(x, 0, i, s), (np.zeros((4, 8), np.uint8), np.zeros(2, np.int32), np.zeros((2, 8), np.uint8)),
     r"input.dtype='DT_UINT8' is not supported"),
    (lambda x, i, s: pypto.index_add(x, 0, i, s, alpha=200), (np.zeros((4, 8), np.int8), np.zeros(2, np.int32), np.zeros((2, 8), np.int8)),
     r"alpha=200 cannot be converted to type DT_INT8 without overflow"),
    (lambda x, i, s: pypto.index_add(x, 0, i, s, alpha=float("nan")), (F32_2D, np.zeros(2, np.int32), np.zeros((2, 8), np.float32)), r"alpha=nan"),
    (lambda x, i, s: pypto.index_add(x, 0, i, s, alpha="2"), (F32_2D, np.zeros(2, np.int32), np.zeros((2, 8), np.float32)), r"alpha='2' must be an int"),
])
def test_bad_index_add_arguments_name_op_argument_and_rule(build, arrays, match):
    with pytest.raises(OpArgumentError, match=match):
        run(build, *arrays, tile=(4, 8))


def test_index_add_takes_five_dims_and_refuses_six():
    x = np.zeros((2, 1, 2, 1, 3), np.float32)
    got, _ = run(lambda a, i, s: pypto.index_add(a, 2, i, s), x, np.array([1, 1], np.int32), np.ones((2, 1, 2, 1, 3), np.float32), tile=(2, 1, 2, 1, 3))
    expected = np.zeros_like(x)
    expected[:, :, 1] = 2
    np.testing.assert_array_equal(got, expected)
    with pytest.raises(OpArgumentError, match=r"pypto.index_add: input.shape=.* must have 1 to 5 dims"):
        run(lambda a, i, s: pypto.index_add(a, 0, i, s), np.zeros((1,) * 6, np.float32), np.zeros(1, np.int32), np.zeros((1,) * 6, np.float32),
            tile=(1,) * 5)


@pytest.mark.parametrize("dim", [0, 1])
def test_an_index_add_value_out_of_range_stops_a_run_with_data(dim):
    index = np.array([1, 8 if dim else 4, 0], np.int32)
    source = np.ones((3, 8) if dim == 0 else (4, 3), np.float32)
    limit = 4 if dim == 0 else 8
    with pytest.raises(OpArgumentError, match=rf"pypto.index_add: index={limit} \(a value of the index on the device\) is outside \[0, {limit}\) "
                                              rf"along dim {dim}"):
        run(lambda a, i, s: pypto.index_add(a, dim, i, s), F32_2D, index, source, tile=(4, 8))


def test_index_add_reads_each_rows_index_on_scalar_and_adds_it_by_an_mte3_atomic_store_linear_in_the_index_count():
    d = 64
    x = np.zeros((32, d), np.float32)
    times = {}
    for count in (4, 8, 16):
        index = np.arange(count, dtype=np.int32)
        source = np.ones((count, d), np.float32)
        for alpha in (1, 2.0):
            _, session = run(lambda a, i, s, alpha=alpha: pypto.index_add(a, 0, i, s, alpha=alpha), x, index, source, tile=(16, d), data=False)
            events = _op_events(session, "index_add")
            reads = [e for e in events if e[0] == "index_add index"]
            stores = [e for e in events if e[0] == "index_add MTE3"]
            muls = [e for e in events if e[0] == "index_add muls"]
            assert len(reads) == count and all(track.endswith("SCALAR") for _, track, _ in reads)
            assert len(stores) == count and all(track.endswith("MTE3") for _, track, _ in stores)
            assert len(muls) == (count if alpha != 1 else 0) and all(track.endswith("VECTOR") for _, track, _ in muls)
            assert any(name == "index_add MTE2" and track.endswith("MTE2") for name, track, _ in events)
            times[count, alpha] = _pipe_time(events, "SCALAR", "index_add index"), _pipe_time(events, "VECTOR", "index_add muls")
    assert times[8, 1][0] == 2 * times[4, 1][0] and times[16, 1][0] == 4 * times[4, 1][0]
    assert times[8, 2.0][1] == 2 * times[4, 2.0][1] > 0


def test_index_add_along_the_last_dim_stores_element_by_element():
    x = np.zeros((2, 16), np.float32)
    index = np.array([3, 3, 5], np.int64)
    source = np.ones((2, 3), np.float32)
    got, session = run(lambda a, i, s: pypto.index_add(a, -1, i, s, alpha=0.5), x, index, source, tile=(2, 3))
    expected = np.zeros_like(x)
    expected[:, 3], expected[:, 5] = 1.0, 0.5
    np.testing.assert_array_equal(got, expected)
    events = _op_events(session, "index_add")
    assert sum(1 for name, _, _ in events if name == "index_add MTE3") == 6  # one atomic add per source element
    assert sum(1 for name, _, _ in events if name == "index_add index") == 6


def test_an_index_add_run_without_data_times_what_a_run_with_data_does_for_distinct_rows():
    rng = np.random.default_rng(4)
    x = rng.standard_normal((8, 32)).astype(np.float16)
    index = np.arange(8, dtype=np.int32)  # without data the k-th value is taken to be k mod 8: the same rows
    source = rng.standard_normal((8, 32)).astype(np.float16)
    build = lambda a, i, s: pypto.index_add(a, 0, i, s, alpha=3)  # noqa: E731
    _, with_data = run(build, x, index, source, tile=(4, 32))
    values, without = run(build, x, index, source, tile=(4, 32), data=False)
    assert values is None
    assert sorted(events_of(with_data)) == sorted(events_of(without))


# -- index_put_ --------------------------------------------------------------------------------------

INDEX_PUT_DTYPES = [np.float16, BF16, np.float32, np.int32, np.int16, np.int8, np.uint8, np.uint16, np.uint32, np.int64, np.uint64]
ACCUMULATE_DTYPES = [np.float16, BF16, np.float32, np.int32, np.int16, np.int8]


def _put(accumulate):
    def build(a, *rest):
        *indices, values = rest
        assert pypto.index_put_(a, tuple(indices), values, accumulate) is None
        return a
    return build


@st.composite
def index_put_cases(draw):
    """An input shape (1-4 dims), the number of index tensors k, their length, a tile shape (1 to values.dim dims)."""
    rank = draw(st.integers(1, 4))
    shape = tuple(draw(st.integers(1, 5)) for _ in range(rank))
    k = draw(st.integers(1, rank))
    length = draw(st.integers(1, 7))
    values_shape = (length,) + shape[k:]
    tile = tuple(draw(st.integers(1, s)) for s in values_shape[:draw(st.integers(1, len(values_shape)))])
    return shape, k, values_shape, tile


@FAST
@given(index_put_cases(), st.sampled_from(INDEX_PUT_DTYPES), st.sampled_from([np.int32, np.int64, np.int16, np.uint8]), st.booleans(),
       st.integers(0, 2**31))
def test_index_put_equals_the_reference(case, dtype, index_dtype, accumulate, seed):
    shape, k, values_shape, tile = case
    accumulate = accumulate and dtype in ACCUMULATE_DTYPES
    rng = np.random.default_rng(seed)
    x, values = _values(rng, shape, dtype), _values(rng, values_shape, dtype)
    indices = [rng.integers(0, shape[j], size=values_shape[0]).astype(index_dtype) for j in range(k)]  # duplicates: in order
    got, _ = run(_put(accumulate), x, *indices, values, tile=tile)
    assert same_bits(got, reference.index_put(x, indices, values, accumulate))


@pytest.mark.parametrize("accumulate, expected", [(True, [[1, 1, 1], [1, 2, 1], [0, 2, 0]]), (False, [[1, 1, 1], [0, 1, 0], [0, 2, 0]])])
def test_the_op_page_example_of_index_put(accumulate, expected):
    x = np.array([[1, 1, 1], [1, 1, 1], [0, 0, 0]], np.int32)  # pypto-index_put_.md 调用示例
    got, _ = run(_put(accumulate), x, np.array([1, 2], np.int32), np.array([[0, 1, 0], [0, 2, 0]], np.int32), tile=(4, 16))
    np.testing.assert_array_equal(got, np.array(expected, np.int32))


# hicann/pypto python/tests/st/operation/vector/test_indexput_onboard.py (test_index_put__onboard): self [b1, s1] = -1,
# values [b2, s1] = 1, b2 distinct rows, view (vs,) and tile (ts,) of rank 1 (values' other dim taken whole);
# accumulate False. There run in the host-data style with views per loop step (tests/frontend/pypto/upstream runs the file itself)
UPSTREAM_INDEX_PUT = [(False, 8, 2, 4, 4, 4)]


@pytest.mark.parametrize("accumulate, b1, s1, b2, vs, ts", UPSTREAM_INDEX_PUT, ids=["onboard"])
def test_the_upstream_st_case_of_index_put(accumulate, b1, s1, b2, vs, ts):
    rng = np.random.default_rng(6)
    x, values = -np.ones((b1, s1), np.float32), np.ones((b2, s1), np.float32)
    index = rng.choice(b1, b2, replace=False).astype(np.int32)

    def build(a, i, v):
        for b0 in range(0, b2, vs):
            valid = min(b2 - b0, vs)
            view = pypto.view(v, [vs, s1], [b0, 0], valid_shape=[valid, s1])
            part = pypto.view(i, [vs], [b0], valid_shape=[valid])
            pypto.index_put_(a, (part,), view, accumulate=accumulate)
        return a

    got, _ = run(build, x, index, values, tile=(ts,))
    expected = torch.from_numpy(x.copy()).index_put_((torch.from_numpy(index).long(),), torch.from_numpy(values), accumulate=accumulate)
    np.testing.assert_array_equal(got, expected.numpy())


F32_3D = np.zeros((4, 3, 8), np.float32)
I2 = np.zeros(2, np.int32)


@pytest.mark.parametrize("build,arrays,tile,match", [
    (_put(False), (F32_3D, np.zeros(2, np.float32), np.zeros((2, 3, 8), np.float32)), (2,), r"indices\[0\].dtype='DT_FP32' is not an index dtype"),
    (_put(False), (F32_3D, np.zeros((2, 1), np.int32), np.zeros((2, 3, 8), np.float32)), (2,), r"indices\[0\].shape=\[2, 1\] must have 1 dim"),
    (_put(False), (F32_3D, I2, np.zeros(3, np.int32), np.zeros((2, 8), np.float32)), (2,), r"indices\[1\].shape=\[3\] differs"),
    (_put(False), (F32_3D, I2, np.zeros((2, 8), np.float32)), (2,), r"values.shape=\[2, 8\] must have input.dim \+ 1 - len\(indices\) = 3 dims"),
    (_put(False), (F32_3D, I2, np.zeros((3, 3, 8), np.float32)), (2,), r"values.shape=\[3, 3, 8\] must have values.shape\[0\] == the indices' length 2"),
    (_put(False), (F32_3D, I2, np.zeros((2, 3, 4), np.float32)), (2,), r"values.shape=\[2, 3, 4\] must end in input's last 2 sizes \[3, 8\]"),
    (_put(False), (F32_3D, I2, np.zeros((2, 3, 8), np.float16)), (2,), r"values.dtype='DT_FP16' differs"),
    (_put(True), (np.zeros((4, 8), np.uint8), I2, np.zeros((2, 8), np.uint8)), (2,), r"input.dtype='DT_UINT8' does not take accumulate=True"),
    (_put(False), (F32_3D, I2, np.zeros((2, 3, 8), np.float32)), (2, 3, 8, 1), r"tile_shape=\[2, 3, 8, 1\] must have 1 to values.dim = 3 dims"),
    (_put("yes"), (F32_3D, I2, np.zeros((2, 3, 8), np.float32)), (2,), r"accumulate='yes' must be a bool"),
    (lambda a, i, v: pypto.index_put_(a, i, v), (F32_3D, I2, np.zeros((2, 3, 8), np.float32)), (2,), r"indices=.* must be a tuple of 1 to 4"),
])
def test_bad_index_put_arguments_name_op_argument_and_rule(build, arrays, tile, match):
    with pytest.raises(OpArgumentError, match=match):
        run(build, *arrays, tile=tile)


def test_an_index_put_value_out_of_range_stops_a_run_with_data():
    with pytest.raises(OpArgumentError, match=r"pypto.index_put_: indices\[1\] value=3 \(a value of the index on the device\) is outside \[0, 3\)"):
        run(_put(False), F32_3D, np.array([0, 1], np.int32), np.array([2, 3], np.int32), np.zeros((2, 8), np.float32), tile=(2,))


def test_index_put_reads_the_indices_on_scalar_and_stores_one_slab_per_index_element_on_mte3():
    x = np.zeros((64, 4, 32), np.float32)
    events_by = {}
    for count in (4, 8, 16):
        indices = [np.arange(count, dtype=np.int32), np.arange(count, dtype=np.int32) % 4]
        values = np.ones((count, 32), np.float32)
        for data in (True, False):  # without data indices[j][i] is taken to be i mod input.shape[j]: the same values here
            for accumulate in (False, True):
                _, session = run(_put(accumulate), x, *indices, values, tile=(16,), data=data)
                events = _op_events(session, "index_put_")
                reads = [e for e in events if e[0] == "index_put_ index"]
                stores = [e for e in events if e[0] == "index_put_ MTE3"]
                assert len(reads) == 2 * count and all(track.endswith("SCALAR") for _, track, _ in reads)
                assert len(stores) == count and all(track.endswith("MTE3") for _, track, _ in stores)
                assert any(name == "index_put_ MTE2" and track.endswith("MTE2") for name, track, _ in events)
                events_by[count, data, accumulate] = sorted(events)
        assert events_by[count, True, False] == events_by[count, False, False]
        assert events_by[count, True, True] == events_by[count, False, True]
    scalar = {c: _pipe_time(events_by[c, True, False], "SCALAR", "index_put_ index") for c in (4, 8, 16)}
    assert scalar[8] == 2 * scalar[4] and scalar[16] == 4 * scalar[4]
