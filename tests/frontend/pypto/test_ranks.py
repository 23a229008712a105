"""SPMD ranks as the framework's distributed tests start them (npusim.pypto.ranks in place of
multiprocessing): every rank's jit call meets the others' in one launch, groups give group-relative
ranks, a program may run its ranks again, and calls that cannot meet are clear errors."""

import numpy as np
import pytest

import npusim
from npusim import pypto
from npusim.errors import UsageError
from npusim.pypto import ranks as mp


@pypto.frontend.jit
def rank_in_group(out, group):
    """out[0] = this PE's rank in ``group``."""
    pypto.set_vec_tile_shapes(1)
    out[0] = pypto.distributed.my_symbolic_pe(group)


@pypto.frontend.jit
def other_kernel(out, group):
    pypto.set_vec_tile_shapes(1)
    out[0] = 7


def _worker(rank, group_of, results, errors, kernel=rank_in_group):
    try:
        out = npusim.zeros((1,), np.int32, device=rank)
        kernel(out, group_of(rank))
        results[rank] = int(out.numpy()[0])
    except Exception as error:
        errors.put((rank, str(error)))
        raise


def _run_ranks(n, group_of, kernels=None):
    results, errors = {}, mp.Queue()
    mp.set_start_method("spawn", force=True)
    processes = [mp.Process(target=_worker, args=(r, group_of, results, errors, (kernels or {}).get(r, rank_in_group))) for r in range(n)]
    for p in processes:
        p.start()
    for p in processes:
        p.join()
    messages = []
    while not errors.empty():
        messages.append(errors.get_nowait())
    return results, [p.exitcode for p in processes], messages


def test_every_rank_gets_its_rank_in_its_group():
    with npusim.session("a3"):
        halves = {name: mp.new_group(members) for name, members in (("low", [0, 1]), ("high", [2, 3]))}
        results, exitcodes, _ = _run_ranks(4, lambda r: halves["low" if r < 2 else "high"])
    assert exitcodes == [0] * 4 and results == {0: 0, 1: 1, 2: 0, 3: 1}


def test_ranks_started_after_the_last_program_ended_are_a_new_program():
    with npusim.session("a3"):
        world = mp.new_group([0, 1])
        first = _run_ranks(2, lambda r: world)
        second = _run_ranks(2, lambda r: world)
    assert first == second == ({0: 0, 1: 1}, [0, 0], [])


def test_new_group_gives_the_same_name_for_the_same_ranks_and_refuses_bad_ones():
    with npusim.session("a3"):
        assert mp.new_group([0, 1]) == mp.new_group([0, 1]) == "hccl_0_1"
        with pytest.raises(UsageError, match="the ranks must be distinct non-negative ints"):
            mp.new_group([1, 1])
        with pytest.raises(UsageError, match="'hccl_0_1' is already used for ranks \\[0, 1\\]"):
            mp.new_group([2, 3], name="hccl_0_1")


def test_ranks_calling_different_kernels_fail_with_a_message_naming_both():
    with npusim.session("a3"):
        world = mp.new_group([0, 1])
        _, exitcodes, messages = _run_ranks(2, lambda r: world, kernels={1: other_kernel})
    assert exitcodes == [1, 1]
    assert any("rank 1's jit call #1 is other_kernel, rank 0's is rank_in_group" in m for _, m in messages)


def test_a_rank_that_ends_without_the_call_the_others_wait_for_fails_them_with_a_message():
    def silent(out, group):
        pass

    with npusim.session("a3"):
        world = mp.new_group([0, 1])
        _, exitcodes, messages = _run_ranks(2, lambda r: world, kernels={1: silent})
    assert exitcodes == [1, 0]
    assert messages == [(0, "rank 0 called a jit kernel (its call #1 from the host), but rank(s) [1] ended without making that call; "
                            "every rank must call the same kernels in the same order")]
