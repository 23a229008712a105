"""A core's local buffer: zero-filled, allocated only as far as it is used, its bytes kept as it grows."""

import numpy as np

from npusim.hw.memory import FIRST_ALLOCATION_BYTES, LocalBuffer


def test_a_local_buffer_holds_only_the_bytes_used_and_keeps_them_as_it_grows():
    ub = LocalBuffer("UB", 192 * 1024)
    ub.view(0, 2, np.int32)[:] = [7, 9]  # a signal value: the first allocation only
    assert len(ub.reach(8)) == FIRST_ALLOCATION_BYTES < 4096
    ub.view(100_000, 4, np.float16)[:] = 1.5
    assert 100_008 <= len(ub.reach(0)) <= ub.capacity_bytes
    assert ub.view(0, 2, np.int32).tolist() == [7, 9] and ub.view(100_000, 4, np.float16).tolist() == [1.5] * 4
    whole = ub.bytes
    assert len(whole) == ub.capacity_bytes and not whole[8:100_000].any() and not whole[100_008:].any()
