"""Instructions computing on local buffers that grow as they are used (npusim.hw.memory.LocalBuffer):
a vector instruction's operands in one buffer are views of the same bytes even when a later
operand grows the buffer."""

from types import SimpleNamespace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import npusim
from npusim.hw.core import AICore, KernelRun
from npusim.hw.memory import LocalBuffer
from npusim.isa.instructions import LocalTensor, VectorOp, values_together

F32 = np.dtype(np.float32)


@pytest.fixture(scope="module")
def session():
    with npusim.session("a3") as made:
        yield made


def _core(session) -> AICore:
    """An AIV core of an A3 die (instructions take real cores: compiled, their methods check the types), its UB fresh."""
    core = session.system.die(0).core("aiv", 0)
    core.buffers["UB"] = LocalBuffer("UB", 192 * 1024)
    return core


def _run(core: AICore) -> KernelRun:
    """A run on ``core`` of a program with no instructions (an effect reads its scalar registers)."""
    return KernelRun(core.env, core, SimpleNamespace(by_pipe={}, needs_end_times=False), 0)


def test_a_vector_add_whose_second_source_grows_the_buffer_writes_the_first(session):
    # pypto.add of a (22, 41) float32 tile (hypothesis found it in tests/frontend/pypto/
    # test_compute_numerics.py): the MTE2 loads leave UB 8,420 bytes long, and reading the second
    # source, up to byte 8,448, grew it after the destination's view was taken
    core = _core(session)
    a, b = LocalTensor("UB", 0, 1056, F32), LocalTensor("UB", 4224, 1056, F32)
    ub = core.buffers["UB"]
    ub.reach(8420)
    a.values(core)[:] = np.arange(1056, dtype=F32)
    ub.view(4224, (8420 - 4224) // 4, F32)[:] = 0.5  # b as far as the loads wrote it: its last row's padding not yet held
    VectorOp("add", a, [a, b], None, "rint", 0, "add").effect(core, _run(core))
    expected = np.arange(1056, dtype=F32) + np.where(np.arange(1056) < 1049, F32.type(0.5), F32.type(0))
    assert a.values(core).tolist() == expected.tolist()


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 150_000), st.integers(1, 4096)), min_size=1, max_size=4), st.integers(0, 150_000))
def test_views_taken_together_share_the_buffer_bytes(session, tensors, used):
    core = _core(session)
    core.buffers["UB"].reach(used + 1)
    locals_ = [LocalTensor("UB", offset, count, np.uint8) for offset, count in tensors]
    views = values_together(core, locals_)
    for tensor, view in zip(locals_, views):
        view[:] = 7
        assert core.buffers["UB"].view(tensor.offset, tensor.count, np.uint8).all()  # written where the buffer holds it
