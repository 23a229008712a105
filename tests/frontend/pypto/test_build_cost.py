"""A PyPTO kernel's build costs linear time and memory in its tile ops (issue 32, point 11): a loop
that rewrites one tile keeps one write of it, and each tile op waits only for the writers its box
meets; the session's wall-clock limit is looked at while the kernel builds; running out of memory
in a loop is an error naming the loop, after which the process goes on."""

from __future__ import annotations

import gc
import itertools

import numpy as np
import pytest

import npusim
from npusim import pypto
from npusim.errors import MemoryLimitError, OutOfMemoryError, WallTimeError
from npusim.frontend.memory import MemoryBudget, resident_bytes
from npusim.frontend.session import Session
from npusim.runtime import launch as runtime_launch
from npusim.runtime import tasks


@pypto.frontend.jit
def rewrite_one_tile(x, out, n):
    pypto.set_vec_tile_shapes(1, x.shape[1])
    for _ in pypto.loop(n, name="REWRITE"):
        out[0:1, :] = pypto.add(x[0:1, :], x[0:1, :])


@pypto.frontend.jit
def copy_rows(x, out, n):
    pypto.set_vec_tile_shapes(1, x.shape[1])
    for i in pypto.loop(n, name="ROWS"):
        out[i:i + 1, :] = x[i:i + 1, :]


def dependencies(launch: runtime_launch.ShmemLaunch) -> int:
    return sum(len(task.deps) for program in launch.programs for task in program.tasks)


@pytest.mark.parametrize(("kernel", "rows"), [(rewrite_one_tile, lambda n: 1), (copy_rows, lambda n: n)])
def test_a_loop_builds_tile_ops_that_wait_for_a_bounded_number_of_others(pypto_launches, kernel, rows):
    """Every tile op of the loop waited for every earlier writer of the tile (n^2 / 2 dependencies:
    87 s and 4 GB at n = 10,000); now for the one before it at most, and the results are the same."""
    n = 300
    with npusim.session("a2") as session:
        x = npusim.tensor(np.arange(rows(n) * 64, dtype=np.float32).reshape(rows(n), 64))
        out = npusim.zeros((rows(n), 64), np.float32)
        kernel(x, out, n)
        got = out.numpy()
    (launch,) = pypto_launches
    tasks = [task for program in launch.programs for task in program.tasks]
    assert len(tasks) == n and dependencies(launch) <= n
    assert all(task.clock == 0 and task.bit == -1 for task in tasks)  # no shmem access: no happens-before bits to carry
    np.testing.assert_array_equal(got, 2 * x.numpy()[:1] if kernel is rewrite_one_tile else x.numpy())
    assert session.result.status == "ok"


def test_the_wall_clock_limit_stops_a_kernel_while_it_builds_naming_the_loop(monkeypatch):
    ticks = itertools.count()
    monkeypatch.setattr(npusim.frontend.session.time, "perf_counter", lambda: float(next(ticks)))  # a second per look
    with pytest.raises(WallTimeError, match=r"wall-clock limit of 20 s at 0.000 us simulated while PE 0's kernel was built, in "
                                            r"pypto.loop 'REWRITE' \(test_build_cost.py:\d+\) at iteration \d+ of 1,000,000$"):
        with npusim.session("a2", data=False, wall_limit_s=20):
            rewrite_one_tile(npusim.zeros((1, 64), np.float32), npusim.zeros((1, 64), np.float32), 1_000_000)


@pypto.frontend.jit
def grows(x, out, n):
    # 64 MiB the kernel function holds while it builds the loop: above glibc's largest mmap threshold (32 MiB), so
    # fresh pages whatever the process freed before (32 MiB could come from freed heap already resident)
    ballast = np.ones(64 << 17)
    pypto.set_vec_tile_shapes(1, x.shape[1])
    for _ in pypto.loop(n, name="GROWS"):
        out[0:1, :] = pypto.add(x[0:1, :], x[0:1, :])
    assert ballast.sum() > 0


def test_the_memory_limit_stops_a_kernel_while_it_builds_naming_the_loop():
    budget = MemoryBudget(1 << 50, "a test")
    with pytest.raises(MemoryLimitError, match=r"of memory while PE 0's kernel was built, in pypto.loop 'GROWS' \(test_build_cost.py:\d+\) "
                                               r"at iteration \d+ of 1,000: more than its limit of .* \(a test\)"):
        with npusim.session("a2", data=False, max_memory=budget):
            budget.limit = resident_bytes() + (8 << 20)  # what the process holds as the workload starts, and 8 MiB
            grows(npusim.zeros((1, 64), np.float32), npusim.zeros((1, 64), np.float32), 1000)


@pypto.frontend.jit
def runs_out_of_memory(x, out, n, at):
    pypto.set_vec_tile_shapes(1, x.shape[1])
    for i in pypto.loop(n, name="BIG"):
        if int(i) == at:
            raise MemoryError  # as an allocation that fails deep inside the build raises it
        out[0:1, :] = pypto.add(x[0:1, :], x[0:1, :])


def test_running_out_of_memory_in_a_loop_names_it_and_frees_the_build_for_the_next_session():
    gc.collect()
    earlier = [o for o in gc.get_objects() if issubclass(type(o), (Session, tasks.Task))]  # other tests' (held: their ids stay theirs)
    with pytest.raises(OutOfMemoryError, match=r"^the machine ran out of memory while PE 0's kernel was built, in pypto.loop 'BIG' "
                                               r"\(test_build_cost.py:\d+\) at iteration 31 of 1,000, with 30 tile ops built \(each takes "
                                               r"about 11 kB once simulated, docs/pypto.md\); give the loop fewer iterations"):
        with npusim.session("a2", data=False) as failed:
            runs_out_of_memory(npusim.zeros((1, 64), np.float32), npusim.zeros((1, 64), np.float32), 1000, 30)
    assert failed.result.status == "failed" and failed.system.recorder.ops == []  # the ops that never ran are not in its trace
    del failed
    gc.collect()
    known = {id(o) for o in earlier}
    assert not [o for o in gc.get_objects() if issubclass(type(o), (Session, tasks.Task)) and id(o) not in known]  # nothing of it is kept
    with npusim.session("a2") as later:
        out = npusim.zeros((1, 64), np.float32)
        rewrite_one_tile(npusim.tensor(np.ones((1, 64), np.float32)), out, 3)
        assert out.numpy().tolist() == [[2.0] * 64]
    assert later.result.status == "ok"


@pytest.mark.parametrize("looks_before_freeze, freezes", [(2, True), (10**9, False)])
def test_a_long_pypto_build_freezes_what_it_keeps_alive_as_it_builds(monkeypatch, looks_before_freeze, freezes):
    """A launch's programs, tasks and tensors live until they have run: a build long enough (from the
    session's BUILD_LOOKS_BEFORE_FREEZE-th look, one every BUILD_LOOK_OPS ops built) freezes them out
    of the collector's sight as it builds, before the stepping loop's first look; a shorter one
    freezes nothing. Either way the caller's collector is as it was after the session."""
    from shmem_allgather import run_allgather

    import npusim.frontend.session as session_module
    from npusim.runtime import program as program_module

    monkeypatch.setattr(session_module, "PROGRESS_STEPS", 10**9)  # the stepping loop never looks: only the build may freeze
    monkeypatch.setattr(session_module, "BUILD_LOOKS_BEFORE_FREEZE", looks_before_freeze)
    monkeypatch.setattr(program_module, "BUILD_LOOK_OPS", 1)  # a look at every op built
    with npusim.session("a2", data=False) as s:
        run_allgather(n_pes=2, rows=8, cols=256, tile_rows=4)
        assert s.froze_survivors is freezes and (gc.get_freeze_count() > 0) is freezes
    assert gc.get_freeze_count() == 0
