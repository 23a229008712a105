"""The PyPTO runtime's tasks implement the device-task protocol the AICPU schedulers call
(``hw.device_task``): every task a launch hands its schedulers is of the protocol of its kind (a
core task, a polled wait, a control read)."""

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

import npusim
from npusim import pypto
from npusim.hw.device_task import AicpuWait, ControlWork, CoreWork, DeviceTask
from npusim.runtime.tasks import ControlRead, CoreTask, WaitTask, joined

D = pypto.distributed
X = pypto.experimental


def tasks_of(launches) -> list:
    """The tasks handed to the schedulers of ``launches`` (a run that ended made each ready and ran it)."""
    return [task for launch in launches for scheduler in launch.schedulers for task in scheduler.tasks]


def kind_of(task) -> type:
    return ControlWork if task.on_control else CoreWork if task.on_core else AicpuWait


def test_shmem_tile_ops_are_core_work_and_polled_waits(pypto_launches):
    with npusim.session("a2"):
        xs = [npusim.tensor(np.ones((8, 32), np.float16), device=pe) for pe in range(2)]

        def kernel(x, pe):
            pypto.set_vec_tile_shapes(4, 32)
            data = D.create_shmem_tensor("g", 2, pypto.DT_FP16, [8, 32])
            put = D.shmem_put(pypto.add(x, x), [0, 0], data, 1 - pe)
            D.shmem_signal(data, 1 - pe, 1, [8, 32], [0, 0], target_pe=1 - pe, pred=[put])
            seen = D.shmem_wait_until(data, pe, 1, [8, 32], [0, 0], pred=[x])
            X.shmem_load(data, pe, [8, 32], [0, 0], pred=[seen])

        npusim.launch(kernel, 2, args=lambda pe: (xs[pe], pe))
        npusim.synchronize()
    ready_tasks = tasks_of(pypto_launches)
    assert {type(task) for task in ready_tasks} == {CoreTask, WaitTask}
    for task in ready_tasks:
        assert isinstance(task, DeviceTask) and isinstance(task, kind_of(task)), task
    assert sum(isinstance(task, WaitTask) for task in ready_tasks) == 4  # 2 PEs x 2 tiles


@pypto.frontend.jit
def copy_rows(x, n, out):
    pypto.set_vec_tile_shapes(1, x.shape[1])
    for i in pypto.loop(n[0], name="ROWS", idx_name="i"):
        out[i:i + 1, :] = x[i:i + 1, :]


def test_a_device_value_read_is_control_work(pypto_launches):
    with npusim.session("a2"):
        out = npusim.zeros((4, 8), np.float32, device=0)
        copy_rows(npusim.tensor(np.ones((4, 8), np.float32), device=0), npusim.tensor(np.array([3], np.int32), device=0), out)
        npusim.synchronize()
        assert out.numpy()[:3].all() and not out.numpy()[3:].any()
    ready_tasks = tasks_of(pypto_launches)
    reads = [task for task in ready_tasks if isinstance(task, ControlRead)]
    assert reads and all(isinstance(task, ControlWork) and kind_of(task) is ControlWork for task in reads)
    assert all(isinstance(task, CoreWork) for task in ready_tasks if isinstance(task, CoreTask))


@given(st.integers(0, (1 << 200) - 1), st.integers(0, (1 << 200) - 1))
def test_joined_clocks_are_the_union_and_share_an_operand_that_holds_it(clock, other):
    """A tile op's clock joined with a predecessor's: the union of their bits; when one of the two
    already holds every bit of the other, that very int (tile ops ordered after the same ones share it)."""
    big = 1 << 300  # ints past the small-int cache, as a launch's clocks are
    a, b = clock | big, other | big
    union = joined(a, b)
    assert union == a | b
    if a | b == a:
        assert union is a
    elif a | b == b:
        assert union is b
