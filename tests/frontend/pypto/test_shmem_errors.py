"""Every check: each bad input is an error naming the op, the argument, the value and the rule (and,
for op arguments, the PE whose program made the call)."""

import dataclasses
import re

import numpy as np
import pytest

import npusim
from npusim import pypto
from npusim.config import load_config
from npusim.errors import ConfigError, OpArgumentError, ResourceError, UsageError, WorkloadError

D = pypto.distributed
X = pypto.experimental
FP16, FP32, INT32 = pypto.DT_FP16, pypto.DT_FP32, pypto.DT_INT32


def build(body, n_pes=2, tile=(4, 32), x_shape=(8, 32), x_dtype=np.float16):
    """Launch a kernel that sets ``tile`` and runs ``body(x, out, pe)`` on ``n_pes`` PEs of a2."""

    def kernel(x, out, pe):
        if tile:
            pypto.set_vec_tile_shapes(*tile)
        body(x, out, pe)

    with npusim.session("a2"):
        xs = [npusim.tensor(np.zeros(x_shape, x_dtype), device=pe) for pe in range(n_pes)]
        outs = [npusim.zeros(x_shape, x_dtype, device=pe) for pe in range(n_pes)]
        npusim.launch(kernel, n_pes, args=lambda pe: (xs[pe], outs[pe], pe))


def data(shape=(8, 32), dtype=FP16, group="g", n_pes=2):
    return D.create_shmem_tensor(group, n_pes, dtype, list(shape))


CASES = {
    # op arguments: PEs, dims, dtypes, offsets, views, tiles
    "src_pe of shmem_load": (lambda x, o, pe: X.shmem_load(data(), 2), "shmem_load: src_pe=2 is not a PE of the group: it must satisfy 0 <= src_pe < n_pes=2 [PE 0]"),
    "src_pe of shmem_get": (lambda x, o, pe: D.shmem_get(data(), -1), "shmem_get: src_pe=-1 is not a PE of the group"),
    "symbolic src_pe": (lambda x, o, pe: X.shmem_load(data(), D.my_symbolic_pe("g") + 1), "shmem_load: src_pe=2 is not a PE of the group: it must satisfy 0 <= src_pe < n_pes=2 [PE 1]"),
    "dst_pe of shmem_put": (lambda x, o, pe: D.shmem_put(x, [0, 0], data(), 5), "shmem_put: dst_pe=5 is not a PE of the group"),
    "target_pe of shmem_signal": (lambda x, o, pe: D.shmem_signal(data(), 0, 1, target_pe=3), "shmem_signal: target_pe=3 is not a PE of the group"),
    "symbolic -1 is not signal-all": (lambda x, o, pe: D.shmem_signal(data(), 0, 1, target_pe=D.my_symbolic_pe("g") * 0 - 1), "shmem_signal: target_pe=-1 is not a PE of the group"),
    "src_pe of shmem_wait_until": (lambda x, o, pe: D.shmem_wait_until(data(), 2, 1), "shmem_wait_until: src_pe=2 is not a PE of the group"),
    "1-D shmem tensor": (lambda x, o, pe: data(shape=(64,)), "create_shmem_tensor: shape=[64] has 1 dims; it must have 2 to 4"),
    "5-D shmem tensor": (lambda x, o, pe: data(shape=(1, 1, 1, 2, 32)), "create_shmem_tensor: shape=[1, 1, 1, 2, 32] has 5 dims; it must have 2 to 4"),
    "dtype of a shmem tensor": (lambda x, o, pe: data(dtype=pypto.DT_INT8), "create_shmem_tensor: dtype=DataType.DT_INT8 is not supported; the dtype must be one of DT_INT32, DT_FP16, DT_FP32, DT_BF16"),
    "put dtypes": (lambda x, o, pe: D.shmem_put(x, [0, 0], data(dtype=INT32), 0), "shmem_put: dst.dtype=DataType.DT_INT32 does not match the source's DT_FP16"),
    "put SET cannot widen": (lambda x, o, pe: D.shmem_put(x, [0, 0], data(dtype=FP32), 0), "(or be DT_FP32 under put_op=AtomicType.ADD from a DT_FP16/DT_BF16 source)"),
    "put_op": (lambda x, o, pe: D.shmem_put(x, [0, 0], data(), 0, put_op="add"), "shmem_put: put_op='add' must be AtomicType.SET or AtomicType.ADD"),
    "put offsets count": (lambda x, o, pe: D.shmem_put(x, [0], data(), 0), "shmem_put: offsets=[0] has 1 values; the shmem tensor [8, 32] has 2 dims"),
    "put outside the tensor": (lambda x, o, pe: D.shmem_put(x, [4, 0], data(), 0), "shmem_put: offsets=[4, 0] puts the view [8, 32] outside the shmem tensor [8, 32] in dim 0 (4 + 8 > 8)"),
    "offset past a dim": (lambda x, o, pe: X.shmem_load(data(), 0, [2, 32], [8, 0]), "shmem_load: offsets=[8, 0] has offsets[0]=8; it must satisfy 0 <= offset < 8, the size of dim 0"),
    "view dims": (lambda x, o, pe: D.shmem_view(data(), [8], [0]), "shmem_view: shape=[8] has 1 dims; the shmem tensor [8, 32] has 2"),
    "valid_shape above shape": (lambda x, o, pe: X.shmem_load(data(), 0, [4, 32], [0, 0], valid_shape=[5, 32]), "shmem_load: valid_shape=[5, 32] has valid_shape[0]=5; it must satisfy 0 <= valid <= 4"),
    "tile dims": (lambda x, o, pe: (pypto.set_vec_tile_shapes(4, 4, 4), X.shmem_load(data(), 0)), "shmem_load: tile_shape=[4, 4, 4] has 3 dims; it must have 2, as the data it tiles"),
    "1023 tiles": (lambda x, o, pe: (pypto.set_vec_tile_shapes(1, 1), X.shmem_load(data(shape=(32, 32)), 0)), "shmem_load: the tile shape [1, 1] splits the shape [32, 32] into 1024 tiles (32 x 32), more than the 1023 tile ops a shmem op may have"),
    "tile shape values": (lambda x, o, pe: pypto.set_vec_tile_shapes(0, 4), "set_vec_tile_shapes: shape=[0, 4] must be 1 to 5 positive ints"),
    "cmp": (lambda x, o, pe: D.shmem_wait_until(data(), 0, 1, cmp=pypto.OpType.GE), "shmem_wait_until: cmp=OpType.GE is not supported; only OpType.EQ is"),
    "cmp_value int32": (lambda x, o, pe: D.shmem_wait_until(data(), 0, 2**31), "shmem_wait_until: cmp_value=2147483648 must be an int in [-2147483648, 2147483647]"),
    "signal int32": (lambda x, o, pe: D.shmem_signal(data(), 0, 1.5, target_pe=0), "shmem_signal: signal=1.5 must be an int in"),
    "sig_op": (lambda x, o, pe: D.shmem_signal(data(), 0, 1, target_pe=0, sig_op=None), "shmem_signal: sig_op=None must be AtomicType.SET or AtomicType.ADD"),
    "clear_signal flag": (lambda x, o, pe: D.shmem_wait_until(data(), 0, 1, clear_signal=1), "shmem_wait_until: clear_signal=1 must be True or False"),
    "signal view divides the tensor": (lambda x, o, pe: D.shmem_signal(data(), 0, 1, [3, 32], [0, 0], target_pe=0), "shmem_signal: shape=[3, 32] does not divide the shmem tensor [8, 32]: dim 0 is 8, not a multiple of 3"),
    # preds
    "pred not a list": (lambda x, o, pe: X.shmem_load(data(), 0, pred=x), "shmem_load: pred=pypto.Tensor(GM, shape=[8, 32], DT_FP16, PE 0) must be a list of tensors (or None)"),
    "pred empty": (lambda x, o, pe: X.shmem_load(data(), 0, pred=[]), "shmem_load: pred=[] lists no tensor; pass None or at least one tensor"),
    "pred a shmem tensor": (lambda x, o, pe: X.shmem_load(data(), 0, pred=[data()]), "shmem_load: pred[0]=pypto.ShmemTensor(#1"),
    # groups and windows
    "group name": (lambda x, o, pe: D.create_shmem_tensor("", 2, FP16, [8, 32]), "create_shmem_tensor: group_name='' must be a string of 1 to 127 characters"),
    "my_symbolic_pe group": (lambda x, o, pe: D.my_symbolic_pe("x" * 128), "my_symbolic_pe: group_name='xxxx"),
    "window per group": (lambda x, o, pe: data(shape=(2**20, 101)), "create_shmem_tensor: shape=[1048576, 101] of DT_FP16 needs 211812352 bytes, more than the 209715200-byte data window each PE has for group 'g'"),
    "at most 2 groups": (lambda x, o, pe: [data(group=g) for g in ("a", "b", "c")], "create_shmem_tensor: group_name='c' would be communication group number 3, but a program may use at most 2 (it has ['a', 'b'])"),
    "n_pes of a group": (lambda x, o, pe: data(n_pes=4), "create_shmem_tensor: n_pes=4, but npusim.launch started 2 PEs; a communication group spans every PE of the launch"),
    "n_pes positive": (lambda x, o, pe: data(n_pes=0), "create_shmem_tensor: n_pes=0 must be a positive int"),
    # tensors and tiles
    "signal tensor has no data": (lambda x, o, pe: X.shmem_load(D.create_shmem_signal("g", 2), 0), "shmem_load: src=pypto.ShmemTensor(#0, group 'g', signal, view [1, 8] at [0, 0]) is a signal tensor (create_shmem_signal); it holds no data to move"),
    "put src in GM": (lambda x, o, pe: D.shmem_put(data(), [0, 0], data(), 0), "shmem_put: src=pypto.ShmemTensor(#0"),
    "store src is a UB tile": (lambda x, o, pe: X.shmem_store(x, [0, 0], data(), 0), "shmem_store: src=pypto.Tensor(GM, shape=[8, 32], DT_FP16, PE 0) must be a UB tile tensor (a shmem_load result); a GM tensor goes with shmem_put"),
    "store dtypes": (lambda x, o, pe: X.shmem_store(X.shmem_load(data(), 0), [0, 0], data(dtype=FP32), 1, put_op=pypto.AtomicType.ADD), "shmem_store: dst.dtype=DataType.DT_FP32 does not match the source's DT_FP16; the shmem tensor must have the source's dtype [PE 0]"),
    "store tiles as loaded": (lambda x, o, pe: (lambda t: (pypto.set_vec_tile_shapes(8, 32), X.shmem_store(t, [0, 0], data(), 1)))(X.shmem_load(data(), 0)), "shmem_store: tile_shape=[8, 32] differs from [4, 32], the tile shape src was loaded with"),
    "assemble a token": (lambda x, o, pe: o.__setitem__((slice(0, None), slice(0, None)), D.shmem_clear_data(data())), "assemble: input=pypto.Tensor(token, shape=[1, 1], DT_INT32, PE 0) is an op's token (a pred), not data"),
    "assemble outside out": (lambda x, o, pe: o.__setitem__((slice(4, None), slice(0, None)), X.shmem_load(data(), 0, [8, 32], [0, 0])), "assemble: offsets=[4, 0] puts the valid part [8, 32] of the input outside out [8, 32] in dim 0 (0 <= 4 and 4 + 8 <= 8 must hold)"),
    "assemble dtype": (lambda x, o, pe: pypto.assemble(X.shmem_load(data(dtype=FP32), 0), [0, 0], o), "assemble: input.dtype=DT_FP32 differs from out.dtype=DT_FP16; assemble does not convert"),
    "view dtype": (lambda x, o, pe: pypto.view(x, dtype=FP32), "view: dtype=DataType.DT_FP32 differs from the input's DT_FP16; views that reinterpret memory are not modelled"),
    "view outside": (lambda x, o, pe: pypto.view(x, [4, 32], [6, 0], valid_shape=[4, 32]),
                     "view: offsets=[6, 0] puts the valid part of the view [4, 32] outside the tensor [8, 32] in dim 0 (6 + 4 > 8)"),
}


@pytest.mark.parametrize("case", CASES)
def test_each_bad_argument_names_op_argument_value_and_rule(case):
    body, message = CASES[case]
    with pytest.raises((OpArgumentError, WorkloadError, UsageError)) as error:
        build(body)
    assert message in str(error.value)


def test_a_pred_with_one_dim_is_refused():
    def body(x, out, pe):
        flat = pypto.Tensor([256], pypto.DT_FP16)  # a 1-D kernel-local tensor
        X.shmem_load(data(), 0, pred=[flat])

    with pytest.raises(OpArgumentError, match=re.escape("shmem_load: pred[0].shape=[256] has 1 dims; a pred tensor must have 2 to 4")):
        build(body)


def test_a_tile_shape_must_be_set():
    with pytest.raises(OpArgumentError, match=re.escape("shmem_load: tile_shape=None is not set; call pypto.set_vec_tile_shapes(...) before the op [PE 0]")):
        build(lambda x, o, pe: X.shmem_load(data(), 0), tile=None)


def test_a_load_tile_must_fit_ub():
    with pytest.raises(ResourceError, match=re.escape("shmem_load: a tile of [128, 1024] DT_FP16 needs 262144 bytes of UB, more than the 196608 bytes of an AIV core")):
        build(lambda x, o, pe: X.shmem_load(data(shape=(128, 1024)), 0), tile=(128, 1024))


def test_every_pe_must_create_the_same_shmem_tensors():
    with pytest.raises(WorkloadError, match=re.escape("create_shmem_tensor: PE 1 creates shmem tensor #0 as DT_FP16 [16, 32] of group 'g' with n_pes=2, but PE 0 created it as DT_FP16 [8, 32] of group 'g' with n_pes=2")):
        build(lambda x, o, pe: data(shape=(8 * (pe + 1), 32)))
    with pytest.raises(WorkloadError, match=re.escape("npusim.launch: PE 0 created 1 shmem tensors, but PE 1 created 2")):
        build(lambda x, o, pe: [data() for _ in range(pe + 1)])


def test_tensors_of_another_pe_are_refused():
    kept = {}

    def body(x, out, pe):
        kept.setdefault("x", x)
        X.shmem_load(data(), 0, pred=[kept["x"]])

    with pytest.raises(UsageError, match=re.escape("shmem_load: pred[0] belongs to PE 0's program, not to PE 1's; each PE uses its own tensors")):
        build(body)


def test_a_store_that_waits_for_what_follows_its_load_is_a_cycle():
    def body(x, out, pe):
        shmem = data()
        tile = X.shmem_load(shmem, 0)
        after = D.shmem_signal(shmem, 0, 1, target_pe=0, pred=[tile])
        X.shmem_store(tile, [0, 0], shmem, 1, pred=[after])

    with pytest.raises(WorkloadError, match=r"PE 0: the preds form a cycle among shmem_load#\d+, shmem_signal#\d+: a tile op that stores or assigns a loaded tile runs with its shmem_load"):
        build(body)


def test_ops_outside_a_launch_are_refused():
    with npusim.session("a2"):
        with pytest.raises(UsageError, match=re.escape("pypto.distributed.create_shmem_signal is called outside a kernel: PyPTO ops run inside the kernel function that npusim.launch(kernel, n_pes, args=...) calls once per PE")):
            D.create_shmem_signal("g", 2)
        with pytest.raises(UsageError, match="pypto.add is called outside a kernel"):
            pypto.add(None, 1)


def test_a_tile_shape_set_on_the_host_is_where_kernels_start():
    """The framework's scope default: pypto_test.py's run_pto sets it before recording the function."""
    with npusim.session("a2"):
        pypto.set_vec_tile_shapes(2, 8)
        assert pypto.get_vec_tile_shapes() == [2, 8]

        def kernel(x, out):
            assert pypto.get_vec_tile_shapes() == [2, 8]
            out[:] = x + x

        out = npusim.zeros((4, 8), np.float32)
        npusim.launch(kernel, 1, args=lambda pe: (npusim.tensor(np.ones((4, 8), np.float32)), out))
        assert (out.numpy() == 2).all()
    with npusim.session("a2"):  # the default belongs to its session
        with pytest.raises(OpArgumentError, match="tile_shape=None is not set"):
            npusim.launch(lambda x, out: pypto.add(x, x), 1, args=lambda pe: (npusim.tensor(np.ones((4, 8), np.float32)), None))


LAUNCH_CASES = {
    "more PEs than dies": (dict(n_pes=9), OpArgumentError, "npusim.launch: n_pes=9 is more than the 8 dies of config 'a2'; each PE runs on its own die"),
    "n_pes zero": (dict(n_pes=0), OpArgumentError, "npusim.launch: n_pes=0 must be a positive int (the PEs of the group)"),
    "n_pes bool": (dict(n_pes=True), OpArgumentError, "npusim.launch: n_pes=True must be a positive int"),
    "group_dies length": (dict(group_dies=[0]), OpArgumentError, "npusim.launch: group_dies=[0] has 1 dies; it must give one die per PE (n_pes=2)"),
    "group_dies range": (dict(group_dies=[0, 8]), OpArgumentError, "npusim.launch: group_dies=[0, 8] names die 8; the config 'a2' has dies 0..7"),
    "group_dies twice": (dict(group_dies=[3, 3]), OpArgumentError, "npusim.launch: group_dies=[3, 3] names a die twice; each PE needs a die of its own"),
    "races mode": (dict(races="ignore"), UsageError, "npusim.launch: races='ignore' must be one of warn, error"),
    "args not callable": (dict(args=(1, 2)), UsageError, "npusim.launch: args=(1, 2) must be a function of the PE returning its arguments"),
    "kernel not callable": (dict(kernel="allgather"), UsageError, "npusim.launch: kernel='allgather' must be a function (the PyPTO kernel)"),
    "tensor on another die": (dict(args=lambda pe: (npusim.zeros((2, 8), np.float16, device=0),)), UsageError,
                              "npusim.launch: args(1)[0] is a tensor on die 0, but PE 1 runs on die 1; create PE 1's tensors with device=1"),
}


@pytest.mark.parametrize("case", LAUNCH_CASES)
def test_each_bad_launch_is_refused(case):
    changes, kind, message = LAUNCH_CASES[case]
    arguments = dict(kernel=lambda *a: None, n_pes=2, args=None) | changes
    with npusim.session("a2"):
        with pytest.raises(kind) as error:
            npusim.launch(arguments.pop("kernel"), arguments.pop("n_pes"), **arguments)
    assert message in str(error.value)


def test_a_config_without_a_shmem_section_is_refused():
    loaded = load_config("a2")
    bare = dataclasses.replace(loaded, spec=loaded.spec.model_copy(update={"shmem": None}))
    with npusim.session(bare):
        with pytest.raises(ConfigError, match=re.escape("config 'a2' has no shmem: section, which npusim.launch needs")):
            npusim.launch(lambda: None, 2)


def test_pypto_on_a_product_it_does_not_support_is_refused_naming_the_product():
    with npusim.session("atlas-300i-duo"):
        with pytest.raises(UsageError, match=re.escape(
                "npusim.launch: PyPTO runs on Atlas A2 (ascend910b), Atlas A3 (ascend910c), Ascend 950DT (ascend950dt, what-if), "
                "Ascend 950PR (ascend950pr, what-if) only (its docs), not on Atlas inference series (ascend310p) of config "
                "'atlas-300i-duo'; run the PyPTO kernel with a config of those products")):
            npusim.launch(lambda: None, 2)
        with pytest.raises(UsageError, match=re.escape("pypto.function('f'): PyPTO runs on Atlas A2 (ascend910b), ")):
            with pypto.function("f"):
                pass


def test_a_wait_whose_slots_no_signal_numbered_is_refused():
    with pytest.raises(WorkloadError, match=re.escape("shmem tensor #0 (group 'g') on PE 0: a signal slot at byte 512 lies past the signal areas the program's shmem_signal ops numbered; a shmem_wait_until must use the view and tile shape of its shmem_signal")):
        build(lambda x, o, pe: D.shmem_wait_until(data(shape=(32, 32)), 0, 1, pred=[x]), tile=(1, 32))
