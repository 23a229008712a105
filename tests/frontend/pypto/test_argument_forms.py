"""The ops take their int and list arguments in every form a Python program passes them: tuples for
lists, numpy ints (and numpy bools) for ints and flags, as the interpreted ops always have. Compiled
(mypyc checks a parameter's declared type as the call enters), an op must still take them, and a
wrong argument must still be the op's own error naming the op, the argument and the rule, never a
bare TypeError from the compiled code's entry."""

import re

import numpy as np
import pytest

import npusim
from npusim import pypto
from npusim.errors import OpArgumentError
from npusim.trace.chrome import write_chrome_trace

D = pypto.distributed
X = pypto.experimental


def plain(value):
    return value


FORMS = {
    # (int, dims, flag): how a program writes an int, a list of ints and a flag
    "ints and lists": (plain, lambda *dims: list(dims), plain),
    "tuples": (plain, lambda *dims: tuple(dims), plain),
    "numpy ints": (np.int64, lambda *dims: [np.int32(d) for d in dims], np.bool_),
    "numpy ints in tuples": (np.intc, lambda *dims: tuple(np.int64(d) for d in dims), np.bool_),
}


def every_op(x, out, pe, form):
    """A PE's program calling every op that takes ints, lists or flags, each written in ``form``."""
    i, dims, flag = FORMS[form]
    pypto.set_vec_tile_shapes(*dims(4, 32))
    data = D.create_shmem_tensor("g", i(2), pypto.DT_FP16, dims(16, 32))
    relay = D.create_shmem_tensor("g", i(2), pypto.DT_FP16, dims(8, 32))
    signal = D.create_shmem_signal("g", i(2))
    other = i(1 - pe)
    head = pypto.view(x, dims(8, 32), dims(0, 0), valid_shape=dims(8, 32))
    put = D.shmem_put(head, dims(i(pe) * 8, 0), data, other)
    D.shmem_signal(data, other, i(1), dims(8, 32), dims(pe * 8, 0), target_pe=other, sig_op=pypto.AtomicType.ADD, pred=[put])
    seen = D.shmem_wait_until(data, i(pe), i(1), dims(8, 32), dims(i(1 - pe) * 8, 0), clear_signal=flag(True), pred=[x])
    got = D.shmem_get(data, i(pe), dims(8, 32), dims(i(1 - pe) * 8, 0), pred=[seen])
    tile = X.shmem_load(D.shmem_view(data, dims(8, 32), dims(i(1 - pe) * 8, 0)), i(pe), dims(8, 32), dims(0, 0), pred=[seen],
                        valid_shape=dims(8, 32))
    stored = X.shmem_store(tile, dims(0, 0), relay, i(pe), pred=[tile])
    ready = D.shmem_barrier_all(signal, [stored, got])
    pypto.assemble(got, dims(0, 0), out)
    pypto.assemble(X.shmem_load(relay, i(pe), dims(8, 32), dims(0, 0), pred=[ready]), dims(8, 0), out)
    cleared = D.shmem_clear_data(data, dims(8, 32), dims(8, 0), pred=[ready])
    D.shmem_clear_signal(data, pred=[cleared])


def run(form, tmp_path):
    """Each PE's output and the run's trace, as bytes."""
    inputs = [np.arange(16 * 32, dtype=np.float16).reshape(16, 32) + 1000 * pe for pe in range(2)]
    with npusim.session("a2") as session:
        xs = [npusim.tensor(a, device=pe) for pe, a in enumerate(inputs)]
        outs = [npusim.zeros((16, 32), np.float16, device=pe) for pe in range(2)]
        npusim.launch(every_op, 2, args=lambda pe: (xs[pe], outs[pe], pe, form), races="error")
        npusim.synchronize()
        values = [o.numpy() for o in outs]
        trace = write_chrome_trace(session.system.record(), tmp_path / f"{form}.json").read_bytes()
    return inputs, values, trace


def test_every_form_of_an_int_or_a_list_runs_the_same_program(tmp_path):
    inputs, expected, trace = run("ints and lists", tmp_path)
    for pe in range(2):  # the peer's rows put into this PE, got, and loaded then stored into the relay
        np.testing.assert_array_equal(expected[pe], np.concatenate([inputs[1 - pe][:8]] * 2))
    for form in FORMS:
        _, values, form_trace = run(form, tmp_path)
        for pe in range(2):
            np.testing.assert_array_equal(values[pe], expected[pe], err_msg=form)
        assert form_trace == trace, f"{form}: the trace differs from the one of plain ints and lists"


WRONG = {
    # each call with an argument of the wrong kind, and the op's error (not the compiled entry's TypeError)
    "signal as a float": (lambda x, data: D.shmem_signal(data, 0, 1.5, target_pe=0), "shmem_signal: signal=1.5 must be an int in"),
    "cmp_value as a string": (lambda x, data: D.shmem_wait_until(data, 0, "1"), "shmem_wait_until: cmp_value='1' must be an int in"),
    "clear_signal as an int": (lambda x, data: D.shmem_wait_until(data, 0, 1, clear_signal=1), "shmem_wait_until: clear_signal=1 must be True or False"),
    "src_pe as a float": (lambda x, data: X.shmem_load(data, 1.0), "shmem_load: src_pe=1.0 is not a PE of the group"),
    "dst_pe as None": (lambda x, data: D.shmem_put(x, [0, 0], data, None), "shmem_put: dst_pe=None is not a PE of the group"),
    "shape as an int": (lambda x, data: D.shmem_view(data, 8, [0, 0]), "shmem_view: shape=8 must be a list of ints or SymbolicScalars"),
    "offsets as a numpy array": (lambda x, data: X.shmem_load(data, 0, [8, 32], np.zeros(2, int)),
                                 "shmem_load: offsets=array([0, 0]) must be a list of ints or SymbolicScalars"),
    "n_pes as a string": (lambda x, data: D.create_shmem_signal("g", "2"), "create_shmem_signal: n_pes='2' must be a positive int"),
    "group_name as an int": (lambda x, data: D.create_shmem_tensor(7, 2, pypto.DT_FP16, [8, 32]),
                             "create_shmem_tensor: group_name=7 must be a string of 1 to 127 characters"),
    "group_name of my_symbolic_pe": (lambda x, data: D.my_symbolic_pe(None), "my_symbolic_pe: group_name=None must be a string"),
    "tile shape as floats": (lambda x, data: pypto.set_vec_tile_shapes(4.0, 32), "set_vec_tile_shapes: shape=[4.0, 32] must be 1 to 5 positive ints"),
    "view shape as a string": (lambda x, data: pypto.view(x, "8, 32"), "view: shape='8, 32' must be a list of ints or SymbolicScalars"),
}


@pytest.mark.parametrize("case", WRONG)
def test_an_argument_of_the_wrong_kind_is_the_ops_error(case):
    call, message = WRONG[case]

    def kernel(x, out, pe):
        pypto.set_vec_tile_shapes(4, 32)
        call(x, D.create_shmem_tensor("g", 2, pypto.DT_FP16, [8, 32]))

    with npusim.session("a2"):
        xs = [npusim.zeros((8, 32), np.float16, device=pe) for pe in range(2)]
        with pytest.raises(OpArgumentError, match=re.escape(message)):
            npusim.launch(kernel, 2, args=lambda pe: (xs[pe], None, pe))
