"""How tile ops depend on each other: the pred split tile by tile, whole preds, merged preds, and
consumers of a loaded tile running in the load's tile op."""

import numpy as np
import pytest

import npusim
from npusim import pypto

D = pypto.distributed
X = pypto.experimental
pytestmark = pytest.mark.filterwarnings("ignore::npusim.kernels.shmem.races.ShmemRaceWarning")  # unsynchronised on purpose


def build(body):
    """Build (and run) ``body(x, pe)`` on 2 PEs of a2 with tile [4, 32]; returns PE 0's ops by name."""
    with npusim.session("a2"):
        xs = [npusim.tensor(np.zeros((8, 32), np.float16), device=pe) for pe in range(2)]

        def kernel(x, pe):
            pypto.set_vec_tile_shapes(4, 32)
            body(x, pe)

        launch = npusim.launch(kernel, 2, args=lambda pe: (xs[pe], pe))
    ops: dict[str, list] = {}
    for op in launch.programs[0].ops:
        ops.setdefault(op.name, []).append(op)
    return ops


def deps(task):
    return sorted((d.op.name, d.tile) for d in task.deps.values())


def test_equal_tilings_depend_tile_by_tile():
    def body(x, pe):
        data = D.create_shmem_tensor("g", 2, pypto.DT_FP16, [8, 32])
        put = D.shmem_put(x, [0, 0], data, 1 - pe)
        D.shmem_signal(data, 1 - pe, 1, [8, 32], [0, 0], target_pe=1 - pe, pred=[put])
        seen = D.shmem_wait_until(data, pe, 1, [8, 32], [0, 0], pred=[x])
        X.shmem_load(data, pe, [8, 32], [0, 0], pred=[seen])

    ops = build(body)
    signal, = ops["shmem_signal"]
    assert [deps(t) for t in signal.tasks] == [[("shmem_put", 0)], [("shmem_put", 1)]]
    wait, = ops["shmem_wait_until"]
    assert [deps(t) for t in wait.tasks] == [[], []]  # an input as pred: nothing to wait for
    load, = ops["shmem_load"]
    assert [deps(t) for t in load.tasks] == [[("shmem_wait_until", 0)], [("shmem_wait_until", 1)]]


def test_several_preds_and_small_preds_make_every_tile_wait_for_all():
    def body(x, pe):
        data = D.create_shmem_tensor("g", 2, pypto.DT_FP16, [8, 32])
        first = D.shmem_put(x, [0, 0], data, 0)
        second = D.shmem_put(x, [0, 0], data, 1)
        D.shmem_signal(data, 0, 1, [8, 32], [0, 0], target_pe=0, pred=[first, second])
        cleared = D.shmem_clear_signal(data, pred=[first])  # a [1, 1] token
        X.shmem_load(data, pe, [8, 32], [0, 0], pred=[cleared])

    ops = build(body)
    signal, = ops["shmem_signal"]
    everything = [("shmem_put", 0), ("shmem_put", 0), ("shmem_put", 1), ("shmem_put", 1)]
    assert [deps(t) for t in signal.tasks] == [everything, everything]
    load, = ops["shmem_load"]
    assert [deps(t) for t in load.tasks] == [[("shmem_clear_signal", 0)]] * 2


def test_stores_and_assignments_of_a_loaded_tile_run_in_its_tile_op():
    def body(x, pe):
        data = D.create_shmem_tensor("g", 2, pypto.DT_FP16, [8, 32])
        tile = X.shmem_load(data, pe, pred=[x])
        x[0:, 0:] = tile
        X.shmem_store(tile, [0, 0], data, 1 - pe, pred=[tile])

    ops = build(body)
    load, = ops["shmem_load"]
    assemble, = ops["assemble"]
    store, = ops["shmem_store"]
    assert assemble.tasks == store.tasks == load.tasks
    assert [len(t.consumers) for t in load.tasks] == [2, 2]
