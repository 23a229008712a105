"""The registry of PyPTO ops: every op a namespace of ``npusim.pypto`` offers is registered there
with the unit its tile ops run on, and an op registered later (docs/architecture.md "Adding a
PyPTO op", followed here for a scratch op) is offered, checked and run as the built-in ones are."""

import numpy as np
import pytest

import npusim
from npusim import pypto
from npusim.errors import OpArgumentError
from npusim.frontend.pypto.compute import _elementwise, _input
from npusim.frontend.pypto.ops import pypto_op
from npusim.frontend.pypto.runtime import current_program
from npusim.kernels.compute import checks
from npusim.runtime.ops import PYPTO_OPS, PyptoOp, ops_in

NAMESPACES = {"pypto": pypto, "distributed": pypto.distributed, "experimental": pypto.experimental}


@pytest.mark.parametrize("namespace", NAMESPACES)
def test_each_namespace_offers_exactly_its_registered_ops(namespace):
    module = NAMESPACES[namespace]
    for name, api in ops_in(namespace).items():
        assert getattr(module, name) is api and name in module.__all__
    offered = {name for name in module.__all__ if name in PYPTO_OPS and namespace in PYPTO_OPS.get(name).namespaces}
    assert offered == set(ops_in(namespace))


def test_the_units_are_those_the_ops_run_on():
    units = {name: op.unit for name, op in PYPTO_OPS}
    assert units["matmul"] == "cube" and units["add"] == units["shmem_put"] == units["sin"] == "vector"
    assert units["gather"] == units["scatter"] == units["scatter_"] == "vector"
    assert units["shmem_wait_until"] == "aicpu" and units["view"] == units["create_shmem_tensor"] == "none"
    assert pypto.greater is pypto.gt and pypto.experimental.shmem_load is pypto.distributed.shmem_load


def test_a_registration_names_its_namespaces_and_unit_from_the_known_ones():
    with pytest.raises(ValueError, match=r"PyPTO op 'x': unit='gpu' must be one of vector, cube, aicpu, none"):
        PyptoOp("x", ("pypto",), "gpu", print)
    with pytest.raises(ValueError, match=r"namespaces=\('torch',\) must be some of pypto, distributed, experimental"):
        PyptoOp("x", ("torch",), "vector", print)
    with pytest.raises(ValueError, match=r"PyPTO op 'add' is registered twice"):
        pypto_op("add")(lambda input: input)


@pytest.fixture
def scratch_registry(monkeypatch):
    """The registry as it is; what a test registers is gone after it."""
    monkeypatch.setattr(PYPTO_OPS, "_providers", dict(PYPTO_OPS._providers))


def test_an_op_added_by_registering_it_runs_as_the_built_in_ones(scratch_registry, monkeypatch):
    monkeypatch.setitem(checks.OP_DTYPES, "scratch_twice", checks.FLOAT)  # its dtypes (the how-to's step 1)

    @pypto_op()
    def scratch_twice(input):
        """``pypto.scratch_twice``: 2 x input, one vector ``muls`` per tile."""
        op = "scratch_twice"
        x = _input(op, "input", input, current_program(op))
        checks.check_dtype(op, "input", x.dtype.name)
        return _elementwise(op, [x], "muls", scalar=2.0)

    assert pypto.scratch_twice is scratch_twice and not hasattr(pypto.distributed, "scratch_twice")
    with npusim.session("a2") as session:
        x = np.arange(64, dtype=np.float32).reshape(8, 8)
        source, out = npusim.tensor(x, device=0), npusim.zeros((8, 8), np.float32, device=0)

        def kernel(a, b):
            pypto.set_vec_tile_shapes(4, 8)
            b[0:, 0:] = pypto.scratch_twice(a)

        npusim.launch(kernel, 1, args=lambda pe: (source, out))
        npusim.synchronize()
        assert np.array_equal(out.numpy(), 2 * x)
        assert "scratch_twice" in {op.name for op in session.system.recorder.ops}
    with npusim.session("a2"), pytest.raises(OpArgumentError, match=r"scratch_twice.*\[PE 0\]"):
        npusim.launch(lambda: pypto.scratch_twice(pypto.tensor([4, 4], pypto.DT_INT64)), 1)
