"""Golden outputs of the shmem ops: the examples for several PE counts and tile shapes, and each op
(get, store, clear, valid shapes, 3-D data, PE-to-die mappings) against numpy."""

import warnings

import numpy as np
import pytest
from shmem_allgather import run_allgather
from shmem_allreduce import run_allreduce

import npusim
from npusim import pypto

D = pypto.distributed
X = pypto.experimental


@pytest.mark.parametrize("n_pes, rows, cols, tile_rows, tile_cols", [
    (2, 16, 256, 8, None),   # two tiles per peer
    (3, 10, 96, 4, None),    # a tail tile of 2 rows; 192-byte rows
    (4, 8, 128, 8, 48),      # 2-D tiling with a tail of 32 columns
    (8, 4, 64, 4, None),     # every die of a2, one tile per peer
])
def test_allgather_gathers_every_pe_rows(n_pes, rows, cols, tile_rows, tile_cols):
    with npusim.session("a2"):
        inputs, outs, _ = run_allgather(n_pes, rows, cols, tile_rows, tile_cols=tile_cols, races="error")
        expected = np.concatenate(inputs)
        for out in outs:
            np.testing.assert_array_equal(out.numpy(), expected)


def test_allgather_on_a3_crosses_sio_and_ub_switches():
    with npusim.session("a3", ["shape.packages_per_node=2"]) as session:
        inputs, outs, _ = run_allgather(4, 8, 128, 4, races="error")
        for out in outs:
            np.testing.assert_array_equal(out.numpy(), np.concatenate(inputs))
    moved = {r.name: r.bytes_moved for r in session.system.network.resources if r.kind == "link"}
    assert moved["pkg0 SIO die0->die1"] > 0 and moved["die0 UB tx"] > 0


@pytest.mark.parametrize("n_pes, rows, cols, tile_rows", [(2, 8, 64, 8), (4, 12, 128, 5)])
def test_allreduce_sums_in_fp32(n_pes, rows, cols, tile_rows):
    with npusim.session("a2"):
        inputs, outs, _ = run_allreduce(n_pes, rows, cols, tile_rows, races="error")
        expected = np.sum([x.astype(np.float32) for x in inputs], axis=0)
        for out in outs:
            np.testing.assert_array_equal(out.numpy(), expected)


def _launch(kernel, n_pes, inputs, outputs=None):
    """Run ``kernel(x, out, pe)`` on ``n_pes`` PEs; any race fails the test."""
    xs = [npusim.tensor(a, device=pe) for pe, a in enumerate(inputs)]
    outs = [npusim.zeros(o.shape, o.dtype, device=pe) for pe, o in enumerate(outputs or [])]
    npusim.launch(kernel, n_pes, args=lambda pe: (xs[pe], outs[pe] if outs else None, pe), races="error")
    npusim.synchronize()
    return outs


def test_get_fetches_a_neighbours_rows_into_local_gm():
    got = {}

    def kernel(x, _out, pe):
        pypto.set_vec_tile_shapes(4, 32)
        data = D.create_shmem_tensor("g", 3, pypto.DT_INT32, [8, 32])
        signal = D.create_shmem_signal("g", 3)
        mine = D.shmem_put(x, [0, 0], data, D.my_symbolic_pe("g"))
        ready = D.shmem_barrier_all(signal, [mine])
        got[pe] = D.shmem_get(data, (pe + 1) % 3, [6, 32], [2, 0], pred=[ready])

    inputs = [np.arange(256, dtype=np.int32).reshape(8, 32) + 1000 * pe for pe in range(3)]
    with npusim.session("a2"):
        _launch(kernel, 3, inputs)
        for pe in range(3):
            np.testing.assert_array_equal(got[pe].numpy(), inputs[(pe + 1) % 3][2:])


def test_store_sends_a_loaded_tile_on_with_set_and_add():
    def kernel(x, out, pe):
        pypto.set_vec_tile_shapes(4, 16)
        data = D.create_shmem_tensor("g", 2, pypto.DT_FP32, [8, 16])
        relay = D.create_shmem_tensor("g", 2, pypto.DT_FP32, [8, 16])
        signal = D.create_shmem_signal("g", 2)
        mine = D.shmem_put(x, [0, 0], data, pe)
        ready = D.shmem_barrier_all(signal, [mine])
        tile = X.shmem_load(data, pe, [8, 16], [0, 0], pred=[ready])
        other = 1 - pe
        first = X.shmem_store(tile, [0, 0], relay, other, pred=[tile])
        D.shmem_signal(relay, other, 1, [8, 16], [0, 0], target_pe=other, pred=[first])
        seen = D.shmem_wait_until(relay, pe, 1, [8, 16], [0, 0], clear_signal=True, pred=[x])
        back = X.shmem_load(relay, pe, [8, 16], [0, 0], pred=[seen])
        added = X.shmem_store(back, [0, 0], relay, pe, put_op=pypto.AtomicType.ADD, pred=[back])
        D.shmem_signal(relay, pe, 1, [8, 16], [0, 0], target_pe=pe, pred=[added])
        done = D.shmem_wait_until(relay, pe, 1, [8, 16], [0, 0], pred=[seen])
        out[0:, 0:] = X.shmem_load(relay, pe, [8, 16], [0, 0], pred=[done])

    inputs = [np.full((8, 16), 1.5 + pe, np.float32) for pe in range(2)]
    with npusim.session("a2"):
        outs = _launch(kernel, 2, inputs, inputs)
        for pe in range(2):
            np.testing.assert_array_equal(outs[pe].numpy(), 2 * inputs[1 - pe])  # stored by the peer, then added to itself


def test_valid_shape_moves_only_the_valid_region():
    def kernel(x, out, pe):
        pypto.set_vec_tile_shapes(4, 64)
        data = D.create_shmem_tensor("g", 2, pypto.DT_FP16, [8, 64])
        signal = D.create_shmem_signal("g", 2)
        part = pypto.view(x, [8, 64], [0, 0], valid_shape=[6, 40])
        put = D.shmem_put(part, [0, 0], data, pe)
        ready = D.shmem_barrier_all(signal, [put])
        out[0:, 0:] = X.shmem_load(data, pe, [8, 64], [0, 0], valid_shape=[5, 64], pred=[ready])

    inputs = [np.arange(512, dtype=np.float16).reshape(8, 64) + pe for pe in range(2)]
    with npusim.session("a2"):
        outs = _launch(kernel, 2, inputs, inputs)
        for pe in range(2):
            expected = np.zeros((8, 64), np.float16)
            expected[:5, :40] = inputs[pe][:5, :40]  # put moved [6, 40]; load moved [5, 64]
            np.testing.assert_array_equal(outs[pe].numpy(), expected)


def test_clear_data_and_clear_signal_zero_this_pe():
    values = {}

    def kernel(x, out, pe):
        pypto.set_vec_tile_shapes(2, 2, 32)
        data = D.create_shmem_tensor("g", 2, pypto.DT_FP32, [2, 4, 32])
        signal = D.create_shmem_signal("g", 2)
        put = D.shmem_put(x, [0, 0, 0], data, pe)
        raised = D.shmem_signal(data, pe, 7, target_pe=pe, pred=[put])
        seen = D.shmem_wait_until(data, pe, 7, pred=[put])
        cleared = D.shmem_clear_data(data, [1, 4, 32], [1, 0, 0], pred=[seen, raised])
        pypto.set_vec_tile_shapes(1, 8)
        ready = D.shmem_barrier_all(signal, [cleared])
        pypto.set_vec_tile_shapes(2, 2, 32)
        out[0:, 0:, 0:] = X.shmem_load(data, pe, [2, 4, 32], [0, 0, 0], pred=[ready])
        values[pe] = data

    inputs = [np.full((2, 4, 32), 3.0 + pe, np.float32) for pe in range(2)]
    with npusim.session("a2"):
        outs = _launch(kernel, 2, inputs, inputs)
        for pe in range(2):
            expected = inputs[pe].copy()
            expected[1] = 0.0
            np.testing.assert_array_equal(outs[pe].numpy(), expected)


def test_group_dies_place_the_pes():
    with npusim.session("a2") as session:
        xs = [npusim.tensor(np.full((4, 32), pe, np.float16), device=die) for pe, die in enumerate([5, 2])]
        outs = [npusim.zeros((8, 32), np.float16, device=die) for die in [5, 2]]

        def kernel(x, out):
            pypto.set_vec_tile_shapes(4, 32)
            data = D.create_shmem_tensor("g", 2, pypto.DT_FP16, [8, 32])
            me = D.my_symbolic_pe("g")
            for peer in range(2):
                put = D.shmem_put(x, [me * 4, 0], data, peer)
                D.shmem_signal(data, peer, 1, [4, 32], [me * 4, 0], target_pe=peer, pred=[put])
            for peer in range(2):
                seen = D.shmem_wait_until(data, me, 1, [4, 32], [peer * 4, 0], pred=[x])
                out[peer * 4:, 0:] = X.shmem_load(data, me, [4, 32], [peer * 4, 0], pred=[seen])

        npusim.launch(kernel, 2, args=lambda pe: (xs[pe], outs[pe]), group_dies=[5, 2], races="error")
        expected = np.concatenate([np.full((4, 32), pe, np.float16) for pe in range(2)])
        for out in outs:
            np.testing.assert_array_equal(out.numpy(), expected)
    assert {r.name for r in session.system.network.resources if r.kind == "link" and r.bytes_moved} == {"die5->die2 HCCS", "die2->die5 HCCS"}


def test_timing_only_runs_take_the_same_time_and_keep_signals():
    times = []
    for data in (True, False):
        with npusim.session("a2", data=data) as session:
            run_allgather(3, 8, 64, 4)
        times.append((session.result.simulated_ps, len(session.result.recorder)))
    assert times[0] == times[1]


def test_the_same_run_gives_the_same_events():
    runs = []
    for _ in range(2):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with npusim.session("a2") as session:
                run_allgather(3, 8, 64, 4, wait=False)
        columns = session.result.recorder.columns()
        runs.append(({k: v.tolist() for k, v in columns.items()}, [i.message for i in session.result.recorder.instants]))
    assert runs[0] == runs[1]
