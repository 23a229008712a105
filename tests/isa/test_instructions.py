"""Instructions computing on local buffers that grow as they are used (npusim.hw.memory.LocalBuffer):
a vector instruction's operands in one buffer are views of the same bytes even when a later
operand grows the buffer."""

from types import SimpleNamespace

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from npusim.hw.memory import LocalBuffer
from npusim.isa.instructions import LocalTensor, VectorOp, values_together

F32 = np.dtype(np.float32)


def _core() -> SimpleNamespace:
    return SimpleNamespace(buffers={"UB": LocalBuffer("UB", 192 * 1024)})


def test_a_vector_add_whose_second_source_grows_the_buffer_writes_the_first():
    # pypto.add of a (22, 41) float32 tile (hypothesis found it in tests/frontend/pypto/
    # test_compute_numerics.py): the MTE2 loads leave UB 8,420 bytes long, and reading the second
    # source, up to byte 8,448, grew it after the destination's view was taken
    core = _core()
    a, b = LocalTensor("UB", 0, 1056, F32), LocalTensor("UB", 4224, 1056, F32)
    ub = core.buffers["UB"]
    ub.reach(8420)
    a.values(core)[:] = np.arange(1056, dtype=F32)
    ub.view(4224, (8420 - 4224) // 4, F32)[:] = 0.5  # b as far as the loads wrote it: its last row's padding not yet held
    VectorOp("add", a, [a, b], None, "rint", 0, "add")._compute(core, None)
    expected = np.arange(1056, dtype=F32) + np.where(np.arange(1056) < 1049, F32.type(0.5), F32.type(0))
    assert a.values(core).tolist() == expected.tolist()


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 150_000), st.integers(1, 4096)), min_size=1, max_size=4), st.integers(0, 150_000))
def test_views_taken_together_share_the_buffer_bytes(tensors, used):
    core = _core()
    core.buffers["UB"].reach(used + 1)
    locals_ = [LocalTensor("UB", offset, count, np.uint8) for offset, count in tensors]
    views = values_together(core, locals_)
    for tensor, view in zip(locals_, views):
        view[:] = 7
        assert core.buffers["UB"].view(tensor.offset, tensor.count, np.uint8).all()  # written where the buffer holds it
