"""The cases of the PyPTO framework's distributed system tests, as kernels of npusim's own in PyPTO's
Python API: the collectives of its C++ ST suite and the fused kernels of its Python ST suite.

Each case runs one launch over its ranks (one PE per die) with the case table's shapes, dtypes,
valid shapes, tile shapes and rank counts, and checks every rank's output against numpy with the
case's tolerance. The kernels and the numpy references are written from what each op computes; only
the case tables are the framework's (hicann/pypto at commit 883e7dfb0):

- ``framework/tests/st/distributed/ops/test_case/*.csv|json`` (C++ ST): ``all_gather``,
  ``all_reduce_two_shot`` (AllReduce_test_1), ``all_reduce_one_shot`` (AllReduce_test_2),
  ``reduce_scatter_fp16`` / ``_bf16`` / ``_int32``, ``two_group_all_gather`` (Multi_Comm_Groups),
  ``all_reduce_add_all_reduce``, ``all_gather_attn_post_reduce_scatter``; compared as the suite's
  resultCmp (an element is wrong when both its absolute and relative error exceed eps = 0.001,
  0.1 for the attention case; at most size x eps wrong);
- ``python/tests/st/operator/distributed/test_*.py`` (Python ST): ``all_gather_matmul``,
  ``matmul_all_reduce_add_rmsnorm`` (rtol = min((1 + log2(W) / 4) x 1.5, 3) x 2^-7 x sqrt(W), atol =
  rtol x mean |expected|), ``cascading_all_reduce`` (test_multi_comm_groups: rtol = atol = 8e-3).
  The MoE dispatch + combine case is ``examples/moe_dispatch_combine.py``.

``tests/upstream_cases/`` runs every case with small shapes (``SMALL``).

Parameters: ``case`` (a name above, or ``all``, the default).

Run: npusim run --config a3 examples/pypto_collectives.py --param case=all_gather
"""

import math

import ml_dtypes
import numpy as np

import npusim
from npusim import pypto
from npusim.errors import UsageError

D, X = pypto.distributed, pypto.experimental
BF16 = ml_dtypes.bfloat16
NUMPY = {pypto.DT_INT32: np.int32, pypto.DT_FP16: np.float16, pypto.DT_BF16: BF16, pypto.DT_FP32: np.float32}
WORLD = "world"

# -- the case tables (hicann/pypto 883e7dfb0) ---------------------------------------------------------------

CASES = {
    # framework/tests/st/distributed/ops/test_case/Allgather_st_test_cases.csv
    "all_gather": dict(kind="all_gather", shape=(128, 256), dtype=pypto.DT_INT32, valid=(32, 73), tile=(16, 32), ranks=4),
    # .../Allreduce_st_test_cases.csv (AllReduce_test_1, AllReduce_test_2)
    "all_reduce_two_shot": dict(kind="all_reduce", shape=(64, 256), dtype=pypto.DT_INT32, valid=(64, 256), tile=(16, 64), ranks=4, two_shot=True),
    "all_reduce_one_shot": dict(kind="all_reduce", shape=(50, 256), dtype=pypto.DT_BF16, valid=(25, 127), tile=(50, 256), ranks=4, two_shot=False),
    # .../Reducescatter_st_test_cases.csv
    "reduce_scatter_fp16": dict(kind="reduce_scatter", shape=(128, 256), dtype=pypto.DT_FP16, tile=(16, 128), ranks=4),
    "reduce_scatter_bf16": dict(kind="reduce_scatter", shape=(32, 32), dtype=pypto.DT_BF16, tile=(4, 16), ranks=4),
    "reduce_scatter_int32": dict(kind="reduce_scatter", shape=(128, 256), dtype=pypto.DT_INT32, tile=(16, 128), ranks=4),
    # .../Multi_Comm_Groups_Allgather_st_test_case.csv
    "two_group_all_gather": dict(kind="two_group_all_gather", shape=(8, 16), dtype=pypto.DT_INT32, valid=(8, 16), tile=(8, 16), ranks=4),
    # .../Allreduce_Add_Allreduce_st_test_cases.json
    "all_reduce_add_all_reduce": dict(kind="all_reduce_add_all_reduce", shape=(4096, 8192), dtype=pypto.DT_BF16, valid=(128, 256), ranks=4),
    # .../Allgather_AttnPost_Reducescatter_st_test_cases.json
    "all_gather_attn_post_reduce_scatter": dict(kind="attn_post", batch=64, seq=1, heads=32, lora=256, head_dim=128, hidden=128, ranks=4),
    # python/tests/st/operator/distributed/test_allgather_matmul.py (generate_golden_data, the kernel's tiles)
    "all_gather_matmul": dict(kind="all_gather_matmul", rows=8, k=1536, n=5120, ranks=2, cube=([8, 8], [128, 256], [256, 512])),
    # .../test_matmul_allreduce_add_rmsnorm.py
    "matmul_all_reduce_add_rmsnorm": dict(kind="matmul_all_reduce_add_rmsnorm", rows=8, k=1536, n=5120, ranks=4, eps=1e-5,
                                          cube=([8, 8], [128, 256], [256, 512])),
    # .../test_multi_comm_groups.py (batch 13, hidden 256, groups even/odd then halves)
    "cascading_all_reduce": dict(kind="cascading_all_reduce", rows=13, cols=256, ranks=4),
}

SMALL = {  # the same cases with shapes small enough for the test suite (tests/upstream_cases/)
    "all_gather": dict(shape=(32, 64), valid=(8, 19), tile=(8, 32)),
    "all_reduce_two_shot": dict(shape=(16, 64), valid=(16, 64), tile=(4, 64)),
    "all_reduce_one_shot": dict(shape=(10, 64), valid=(5, 31), tile=(10, 64)),
    "reduce_scatter_fp16": dict(shape=(32, 64), tile=(4, 64)),
    "reduce_scatter_bf16": dict(shape=(16, 32), tile=(4, 16)),
    "reduce_scatter_int32": dict(shape=(32, 64), tile=(4, 64)),
    "two_group_all_gather": dict(),
    "all_reduce_add_all_reduce": dict(shape=(64, 128), valid=(16, 64)),
    "all_gather_attn_post_reduce_scatter": dict(batch=8, heads=4, lora=64, head_dim=32, hidden=32),
    "all_gather_matmul": dict(k=128, n=256, cube=([8, 8], [64, 128], [128, 256])),
    "matmul_all_reduce_add_rmsnorm": dict(k=128, n=256, cube=([8, 8], [64, 128], [128, 256])),
    "cascading_all_reduce": dict(cols=64),
}


def case(name: str, small: bool = False) -> dict:
    """A case's table row, with the small shapes when ``small``."""
    return {**CASES[name], **(SMALL[name] if small else {})}


def wide(dtype):
    """The dtype a reduction of ``dtype`` accumulates in on the shmem tensor (fp32 for fp16 / bf16)."""
    return pypto.DT_FP32 if dtype in (pypto.DT_FP16, pypto.DT_BF16) else dtype


def valid_view(x, valid):
    """``x`` with its valid part ``valid`` (the framework's UpdateDynValidShape)."""
    return pypto.view(x, list(x.shape), [0] * len(x.shape), valid_shape=list(valid))


# -- building blocks: collectives over a group, written with shmem ops -------------------------------------------


def gather_rows(x, shmem, out, group, ranks, pred):
    """All-gather of ``x``'s valid part: every rank puts it into each rank's ``shmem`` at its own block
    and signals there; each rank takes each sender's valid block once signalled and packs it into
    ``out`` at ``sender x valid rows``."""
    rows, cols = x.shape
    valid_rows, valid_cols = x.valid_shape
    me = D.my_symbolic_pe(group)
    for peer in range(ranks):
        put = D.shmem_put(x, [me * rows, 0], shmem, peer, pred=[pred])
        told = D.shmem_signal(shmem, peer, 1, [rows, cols], [me * rows, 0], target_pe=peer, pred=[put])
        here = D.shmem_wait_until(shmem, me, 1, [rows, cols], [peer * rows, 0], clear_signal=True, pred=[told])
        block = D.shmem_get(shmem, me, [rows, cols], [peer * rows, 0], valid_shape=[valid_rows, valid_cols], pred=[here])
        out[peer * valid_rows:, 0:] = block


def sum_into(x, shmem, group, ranks, pred):
    """Every rank adds ``x`` into every rank's ``shmem`` (atomic adds) and signals; returns this rank's
    sum (valid part as ``x``'s) once all have added, in ``x``'s dtype."""
    rows, cols = x.shape
    me = D.my_symbolic_pe(group)
    for peer in range(ranks):
        put = D.shmem_put(x, [0, 0], shmem, peer, put_op=pypto.AtomicType.ADD, pred=[pred])
        D.shmem_signal(shmem, peer, 1, [rows, cols], [0, 0], target_pe=peer, sig_op=pypto.AtomicType.ADD, pred=[put])
    done = D.shmem_wait_until(shmem, me, ranks, [rows, cols], [0, 0], clear_signal=True, pred=[x])
    total = D.shmem_get(shmem, me, [rows, cols], [0, 0], valid_shape=list(x.valid_shape), pred=[done])
    return total if total.dtype is x.dtype else pypto.cast(total, x.dtype)


def sum_scatter(x, shmem, group, ranks, pred):
    """Reduce-scatter: block ``q`` of ``x``'s rows is added into rank q's ``shmem``; returns this rank's
    summed block, in ``x``'s dtype."""
    rows, cols = x.shape
    block = rows // ranks
    me = D.my_symbolic_pe(group)
    for peer in range(ranks):
        put = D.shmem_put(pypto.view(x, [block, cols], [peer * block, 0]), [0, 0], shmem, peer, put_op=pypto.AtomicType.ADD, pred=[pred])
        D.shmem_signal(shmem, peer, 1, [block, cols], [0, 0], target_pe=peer, sig_op=pypto.AtomicType.ADD, pred=[put])
    done = D.shmem_wait_until(shmem, me, ranks, [block, cols], [0, 0], clear_signal=True, pred=[pred])
    total = D.shmem_get(shmem, me, [block, cols], [0, 0], pred=[done])
    return total if total.dtype is x.dtype else pypto.cast(total, x.dtype)


def sum_two_shot(x, shmem, out, group, ranks, pred):
    """All-reduce in two steps: block q of every rank's rows is summed on rank q (atomic adds, a
    signal to every rank), then every rank reads each summed block from its owner into ``out``."""
    rows, cols = x.shape
    block = rows // ranks
    for owner in range(ranks):
        put = D.shmem_put(pypto.view(x, [block, cols], [owner * block, 0]), [0, 0], shmem, owner, put_op=pypto.AtomicType.ADD, pred=[pred])
        D.shmem_signal(shmem, owner, 1, [block, cols], [0, 0], target_pe=-1, sig_op=pypto.AtomicType.ADD, pred=[put])
        done = D.shmem_wait_until(shmem, owner, ranks, [block, cols], [0, 0], clear_signal=True, pred=[pred])
        total = D.shmem_get(shmem, owner, [block, cols], [0, 0], pred=[done])
        out[owner * block:, 0:] = total if total.dtype is x.dtype else pypto.cast(total, x.dtype)


# -- the kernels of the cases ----------------------------------------------------------------------------------------


@pypto.frontend.jit
def all_gather_kernel(x, out, group, ranks, valid, tile):
    rows, cols = x.shape
    x = valid_view(x, valid)
    pypto.set_vec_tile_shapes(*tile)
    shmem = D.create_shmem_tensor(group, ranks, x.dtype, [ranks * rows, cols])
    gather_rows(x, shmem, out, group, ranks, x)


@pypto.frontend.jit
def all_reduce_kernel(x, out, ranks, valid, tile, two_shot):
    rows, cols = x.shape
    x = valid_view(x, valid)
    pypto.set_vec_tile_shapes(*tile)
    shmem = D.create_shmem_tensor(WORLD, ranks, wide(x.dtype), [rows // ranks if two_shot else rows, cols])
    if two_shot:
        sum_two_shot(x, shmem, out, WORLD, ranks, x)
    else:
        out[:] = sum_into(x, shmem, WORLD, ranks, x)


@pypto.frontend.jit
def reduce_scatter_kernel(x, out, ranks, tile):
    rows, cols = x.shape
    shmem = D.create_shmem_tensor(WORLD, ranks, wide(x.dtype), [rows // ranks, cols])
    pypto.set_vec_tile_shapes(*tile)
    out[:] = sum_scatter(x, shmem, WORLD, ranks, x)


@pypto.frontend.jit
def all_reduce_add_all_reduce_kernel(x, out, ranks, valid):
    rows, cols = x.shape
    x = valid_view(x, valid)
    shmem = D.create_shmem_tensor(WORLD, ranks, wide(x.dtype), [rows, cols])
    pypto.set_vec_tile_shapes(rows, cols)
    reduced = valid_view(sum_into(x, shmem, WORLD, ranks, x), valid)
    pypto.set_vec_tile_shapes(128, 256)
    doubled = valid_view(pypto.add(reduced, reduced), valid)
    # reuse the shmem tensor: all ranks done with it, cleared, all ranks know it is clear
    first, second = D.create_shmem_signal(WORLD, ranks), D.create_shmem_signal(WORLD, ranks)
    pypto.set_vec_tile_shapes(1, 8)
    quiet = D.shmem_barrier_all(first, [doubled])
    pypto.set_vec_tile_shapes(rows, cols)
    cleared = [D.shmem_clear_data(shmem, pred=[quiet]), D.shmem_clear_signal(shmem, pred=[quiet])]
    pypto.set_vec_tile_shapes(1, 8)
    clear = D.shmem_barrier_all(second, cleared)
    pypto.set_vec_tile_shapes(rows, cols)
    out[:] = sum_into(doubled, shmem, WORLD, ranks, clear)


@pypto.frontend.jit
def attn_post_kernel(x, w_lora, w_out, out, ranks, batch, seq, heads, lora, head_dim, hidden):
    """All-gather the attention output rows, per head times w_lora, all heads times w_out, reduce-scatter."""
    tokens = batch * seq
    gathered = pypto.tensor([tokens * heads, lora], x.dtype, "gathered")
    shmem = D.create_shmem_tensor(WORLD, ranks, x.dtype, [tokens * heads, lora])
    pypto.set_vec_tile_shapes(64, lora)
    gather_rows(x, shmem, gathered, WORLD, ranks, x)
    pypto.set_vec_tile_shapes(4, 16, 1, lora)
    per_token = pypto.transpose(pypto.reshape(gathered, [batch, heads, seq, lora]), 1, 2)   # [b, s, n, lora]
    pypto.set_vec_tile_shapes(4, 16, lora)
    per_head = pypto.transpose(pypto.reshape(per_token, [tokens, heads, lora]), 0, 1)       # [n, b*s, lora]
    pypto.set_cube_tile_shapes([16, 16], [256, 256], [128, 128])
    projected = pypto.cast(pypto.matmul(per_head, w_lora, pypto.DT_FP32), x.dtype)         # [n, b*s, head_dim]
    pypto.set_vec_tile_shapes(32, 4, head_dim)
    joined = pypto.reshape(pypto.transpose(projected, 0, 1), [tokens, heads * head_dim])     # [b*s, n*head_dim]
    partial = pypto.matmul(joined, w_out, x.dtype)                                          # [b*s, hidden]
    scatter = D.create_shmem_tensor(WORLD, ranks, wide(x.dtype), [tokens // ranks, hidden])
    pypto.set_vec_tile_shapes(16, hidden)
    out[:] = sum_scatter(partial, scatter, WORLD, ranks, partial)


@pypto.frontend.jit
def all_gather_matmul_kernel(x, w, out, ranks, cube):
    """Gather every rank's rows in blocks of 8 rows, then the gathered rows times w^T."""
    rows, k = x.shape
    block = 8
    for start in pypto.loop(0, rows, block, name="BLOCKS", idx_name="start"):
        shmem = D.create_shmem_tensor(WORLD, ranks, x.dtype, [block * ranks, k])
        barrier = D.create_shmem_signal(WORLD, ranks)
        part = pypto.view(x, [block, k], [start, 0], valid_shape=[(rows - start).min(block), k])
        pypto.set_vec_tile_shapes(block, k)
        clear = D.shmem_clear_data(shmem, pred=[part])
        ready = D.shmem_barrier_all(barrier, [clear])
        gathered = pypto.tensor([block * ranks, k], x.dtype, "gathered")
        gather_rows(part, shmem, gathered, WORLD, ranks, ready)
        pypto.set_cube_tile_shapes(*cube)
        out[start * ranks:, 0:] = pypto.matmul(gathered, w, x.dtype, b_trans=True)


@pypto.frontend.jit
def matmul_all_reduce_add_rmsnorm_kernel(x, w, residual, gamma, bias, out, residual_out, eps, ranks, cube):
    """x w^T summed over the ranks, plus the residual (kept as residual_out), RMS-normalised with
    gamma and bias."""
    rows, _ = x.shape
    hidden = w.shape[0]
    pypto.set_vec_tile_shapes(hidden)
    gamma, bias = pypto.reshape(gamma, [1, hidden]), pypto.reshape(bias, [1, hidden])
    shmem = D.create_shmem_tensor(WORLD, ranks, x.dtype, [rows, hidden])
    barrier = D.create_shmem_signal(WORLD, ranks)
    pypto.set_vec_tile_shapes(rows, hidden)
    ready = D.shmem_barrier_all(barrier, [D.shmem_clear_data(shmem, pred=[x])])
    pypto.set_cube_tile_shapes(*cube)
    product = pypto.matmul(x, w, x.dtype, b_trans=True)
    me = D.my_symbolic_pe(WORLD)
    for peer in range(ranks):
        put = D.shmem_put(product, [0, 0], shmem, peer, put_op=pypto.AtomicType.ADD, pred=[ready])
        D.shmem_signal(shmem, peer, 1, [rows, hidden], [0, 0], target_pe=peer, sig_op=pypto.AtomicType.ADD, pred=[put])
    done = D.shmem_wait_until(shmem, me, ranks, [rows, hidden], [0, 0], clear_signal=True, pred=[x])
    pypto.set_vec_tile_shapes(1, hidden)
    total = X.shmem_load(shmem, me, [rows, hidden], [0, 0], pred=[done])
    added = pypto.add(pypto.cast(total, pypto.DT_FP32), pypto.cast(residual, pypto.DT_FP32))
    mean_square = pypto.sum(pypto.mul(pypto.mul(added, added), 1.0 / hidden), -1, True)
    normed = pypto.div(added, pypto.sqrt(pypto.add(mean_square, eps)))
    scaled = pypto.add(pypto.mul(normed, pypto.cast(gamma, pypto.DT_FP32)), pypto.cast(bias, pypto.DT_FP32))
    out[:] = pypto.cast(scaled, out.dtype)
    residual_out[:] = pypto.cast(added, residual_out.dtype)


@pypto.frontend.jit
def cascading_all_reduce_kernel(x, out, first, second):
    """Sum over the ranks of group ``first`` (even / odd ranks), then of group ``second`` (halves), in
    blocks of 8 rows (the last one partly valid)."""
    rows, cols = x.shape
    block = 8
    for start in pypto.loop(0, rows, block, name="BLOCKS", idx_name="start"):
        valid = [(rows - start).min(block), cols]
        part = pypto.view(x, [block, cols], [start, 0], valid_shape=valid)
        value = part
        for group, ranks in (first, second):
            shmem = D.create_shmem_tensor(group, ranks, pypto.DT_FP32, [block, cols])
            pypto.set_vec_tile_shapes(block, cols)
            wide_value = pypto.cast(value, pypto.DT_FP32)
            summed = sum_into(valid_view(wide_value, valid), shmem, group, ranks, wide_value)
            pypto.set_vec_tile_shapes(1, cols)
            value = pypto.cast(summed, x.dtype)
        out[start:, 0:] = value


# -- inputs, references and checks -------------------------------------------------------------------------------------


def random(rng, shape, dtype):
    """The suites' inputs: ints in [-10, 10), floats standard normal."""
    if dtype is pypto.DT_INT32:
        return rng.integers(-10, 10, size=shape, dtype=np.int32)
    return rng.standard_normal(shape).astype(NUMPY[dtype])


def f32(a):
    return np.asarray(a, dtype=np.float32)


def result_cmp(expected, actual, eps: float) -> bool:
    """The C++ suite's comparison: wrong where both |difference| and |difference / expected| exceed
    eps; at most size x eps wrong elements and at most 1000 zeros where the expected is not zero."""
    e, a = f32(expected).ravel(), f32(actual).ravel()
    diff = np.abs(e - a)
    with np.errstate(divide="ignore", invalid="ignore"):
        wrong = (diff > eps) & (diff > eps * np.abs(e))
    zeros = np.sum((np.abs(a) <= 1e-6) & (np.abs(e) > 1e-6))
    return int(wrong.sum()) <= int(e.size * eps) and zeros <= 1000


def all_close(expected, actual, rtol: float, atol: float) -> bool:
    return bool(np.all(np.abs(f32(actual) - f32(expected)) <= atol + rtol * np.abs(f32(expected))))


def scaled_tolerance(ranks: int, expected) -> tuple[float, float]:
    """The Python suite's tolerance of the fused kernels."""
    rtol = min((1 + 0.25 * math.log2(ranks)) * 1.5, 3.0) * 2.0**-7 * math.sqrt(ranks)
    return rtol, rtol * (float(np.mean(np.abs(f32(expected)))) + 1e-12)


def launch(kernel, ranks, args, groups=None):
    npusim.launch(kernel, ranks, args=args, groups=groups)
    npusim.synchronize()


def run_case(name: str, small: bool = False, seed: int = 0) -> bool:
    """Run one case on the active session; True if every rank's output passes the case's check
    (True without data: nothing to check)."""
    c = case(name, small)
    rng = np.random.default_rng(seed)
    return RUNNERS[c["kind"]](c, rng, npusim.current_session().with_data)


def _all_gather(c, rng, data):
    rows, cols = c["shape"]
    ranks, (vr, vc) = c["ranks"], c["valid"]
    xs = [random(rng, c["shape"], c["dtype"]) for _ in range(ranks)]
    outs = [npusim.zeros((ranks * rows, cols), NUMPY[c["dtype"]], device=r) for r in range(ranks)]
    ins = [npusim.tensor(x, device=r) for r, x in enumerate(xs)]
    launch(all_gather_kernel, ranks, lambda r: (ins[r], outs[r], WORLD, ranks, c["valid"], c["tile"]))
    want = np.zeros((ranks * rows, cols), NUMPY[c["dtype"]])
    want[:ranks * vr, :vc] = np.concatenate([x[:vr, :vc] for x in xs])
    return not data or all(result_cmp(want, o.numpy(), 0.001) for o in outs)


def _two_group_all_gather(c, rng, data):
    rows, cols = c["shape"]
    ranks = c["ranks"]
    groups = {"even": list(range(0, ranks, 2)), "odd": list(range(1, ranks, 2))}
    group_of = {r: name for name, members in groups.items() for r in members}
    xs = [random(rng, c["shape"], c["dtype"]) for _ in range(ranks)]
    ins = [npusim.tensor(x, device=r) for r, x in enumerate(xs)]
    outs = [npusim.zeros((len(groups[group_of[r]]) * rows, cols), NUMPY[c["dtype"]], device=r) for r in range(ranks)]
    launch(all_gather_kernel, ranks, lambda r: (ins[r], outs[r], group_of[r], len(groups[group_of[r]]), c["valid"], c["tile"]),
           groups=groups)
    vr, vc = c["valid"]
    ok = True
    for r in range(ranks):
        members = groups[group_of[r]]
        want = np.zeros(outs[r].shape, NUMPY[c["dtype"]])
        want[:len(members) * vr, :vc] = np.concatenate([xs[m][:vr, :vc] for m in members])
        ok = ok and (not data or result_cmp(want, outs[r].numpy(), 0.001))
    return ok


def _summed(parts, dtype):
    """The ranks' parts summed in fp32 (int32 exactly) and given back in ``dtype``."""
    if dtype is pypto.DT_INT32:
        return np.sum(parts, axis=0, dtype=np.int32)
    return np.sum([f32(p) for p in parts], axis=0).astype(NUMPY[dtype])


def _all_reduce(c, rng, data):
    ranks, (vr, vc) = c["ranks"], c["valid"]
    xs = [random(rng, c["shape"], c["dtype"]) for _ in range(ranks)]
    ins = [npusim.tensor(x, device=r) for r, x in enumerate(xs)]
    outs = [npusim.zeros(c["shape"], NUMPY[c["dtype"]], device=r) for r in range(ranks)]
    launch(all_reduce_kernel, ranks, lambda r: (ins[r], outs[r], ranks, c["valid"], c["tile"], c["two_shot"]))
    want = np.zeros(c["shape"], NUMPY[c["dtype"]])
    want[:vr, :vc] = _summed([x[:vr, :vc] for x in xs], c["dtype"])
    return not data or all(result_cmp(want, o.numpy(), 0.001) for o in outs)


def _reduce_scatter(c, rng, data):
    ranks = c["ranks"]
    rows, cols = c["shape"]
    xs = [random(rng, c["shape"], c["dtype"]) for _ in range(ranks)]
    ins = [npusim.tensor(x, device=r) for r, x in enumerate(xs)]
    outs = [npusim.zeros((rows // ranks, cols), NUMPY[c["dtype"]], device=r) for r in range(ranks)]
    launch(reduce_scatter_kernel, ranks, lambda r: (ins[r], outs[r], ranks, c["tile"]))
    total = _summed(xs, c["dtype"])
    block = rows // ranks
    return not data or all(result_cmp(total[r * block:(r + 1) * block], o.numpy(), 0.001) for r, o in enumerate(outs))


def _all_reduce_add_all_reduce(c, rng, data):
    ranks, (vr, vc) = c["ranks"], c["valid"]
    xs = [random(rng, c["shape"], c["dtype"]) for _ in range(ranks)]
    ins = [npusim.tensor(x, device=r) for r, x in enumerate(xs)]
    outs = [npusim.zeros(c["shape"], NUMPY[c["dtype"]], device=r) for r in range(ranks)]
    launch(all_reduce_add_all_reduce_kernel, ranks, lambda r: (ins[r], outs[r], ranks, c["valid"]))
    once = _summed([x[:vr, :vc] for x in xs], c["dtype"])
    doubled = (f32(once) + f32(once)).astype(NUMPY[c["dtype"]])
    want = np.zeros(c["shape"], NUMPY[c["dtype"]])
    want[:vr, :vc] = _summed([doubled] * ranks, c["dtype"])
    return not data or all(result_cmp(want, o.numpy(), 0.001) for o in outs)


def _attn_post(c, rng, data):
    ranks, b, s, n, lora, hd, h = c["ranks"], c["batch"], c["seq"], c["heads"], c["lora"], c["head_dim"], c["hidden"]
    xs = [random(rng, (b * n * s // ranks, lora), pypto.DT_BF16) for _ in range(ranks)]
    w_lora = [random(rng, (n, lora, hd), pypto.DT_BF16) for _ in range(ranks)]
    w_out = [random(rng, (n * hd, h), pypto.DT_BF16) for _ in range(ranks)]
    dev = [(npusim.tensor(xs[r], device=r), npusim.tensor(w_lora[r], device=r), npusim.tensor(w_out[r], device=r),
            npusim.zeros((b * s // ranks, h), BF16, device=r)) for r in range(ranks)]
    launch(attn_post_kernel, ranks, lambda r: (*dev[r], ranks, b, s, n, lora, hd, h))
    gathered = np.concatenate(xs)                                                       # [b*n*s, lora]
    per_head = f32(gathered).reshape(b, n, s, lora).transpose(0, 2, 1, 3).reshape(b * s, n, lora).transpose(1, 0, 2)
    partials = []
    for r in range(ranks):
        projected = np.matmul(per_head, f32(w_lora[r])).astype(BF16)                    # [n, b*s, hd]
        joined = f32(projected).transpose(1, 0, 2).reshape(b * s, n * hd)
        partials.append((joined @ f32(w_out[r])).astype(BF16))
    total = _summed(partials, pypto.DT_BF16)
    block = b * s // ranks
    return not data or all(result_cmp(total[r * block:(r + 1) * block], dev[r][3].numpy(), 0.1) for r in range(ranks))


def _all_gather_matmul(c, rng, data):
    ranks, rows, k, n = c["ranks"], c["rows"], c["k"], c["n"]
    xs = [random(rng, (rows, k), pypto.DT_BF16) for _ in range(ranks)]
    ws = [random(rng, (n, k), pypto.DT_BF16) for _ in range(ranks)]
    dev = [(npusim.tensor(xs[r], device=r), npusim.tensor(ws[r], device=r), npusim.zeros((rows * ranks, n), BF16, device=r))
           for r in range(ranks)]
    launch(all_gather_matmul_kernel, ranks, lambda r: (*dev[r], ranks, c["cube"]))
    gathered = f32(np.concatenate(xs))
    ok = True
    for r in range(ranks):
        want = (gathered @ f32(ws[r]).T).astype(BF16)
        ok = ok and (not data or all_close(want, dev[r][2].numpy(), *scaled_tolerance(ranks, want)))
    return ok


def _matmul_all_reduce_add_rmsnorm(c, rng, data):
    ranks, rows, k, n, eps = c["ranks"], c["rows"], c["k"], c["n"], c["eps"]
    inputs = [dict(x=random(rng, (rows, k), pypto.DT_BF16), w=random(rng, (n, k), pypto.DT_BF16), residual=random(rng, (rows, n), pypto.DT_BF16),
                   gamma=random(rng, (n,), pypto.DT_BF16), bias=random(rng, (n,), pypto.DT_BF16)) for _ in range(ranks)]
    dev = [dict(**{key: npusim.tensor(v, device=r) for key, v in inp.items()}, out=npusim.zeros((rows, n), BF16, device=r),
                res_out=npusim.zeros((rows, n), BF16, device=r)) for r, inp in enumerate(inputs)]
    launch(matmul_all_reduce_add_rmsnorm_kernel, ranks, lambda r: (
        dev[r]["x"], dev[r]["w"], dev[r]["residual"], dev[r]["gamma"], dev[r]["bias"], dev[r]["out"], dev[r]["res_out"], eps, ranks, c["cube"]))
    reduced = f32(_summed([(f32(i["x"]) @ f32(i["w"]).T).astype(BF16) for i in inputs], pypto.DT_BF16))
    ok = True
    for r, i in enumerate(inputs):
        added = reduced + f32(i["residual"])
        normed = added / np.sqrt(np.mean(added * added, axis=-1, keepdims=True) + eps)
        want_out = (normed * f32(i["gamma"]) + f32(i["bias"])).astype(BF16)
        want_res = added.astype(BF16)
        ok = ok and (not data or (all_close(want_out, dev[r]["out"].numpy(), *scaled_tolerance(ranks, want_out))
                                  and all_close(want_res, dev[r]["res_out"].numpy(), *scaled_tolerance(ranks, want_res))))
    return ok


def _cascading_all_reduce(c, rng, data):
    ranks, rows, cols = c["ranks"], c["rows"], c["cols"]
    first = {"even": list(range(0, ranks, 2)), "odd": list(range(1, ranks, 2))}
    second = {"low": list(range(ranks // 2)), "high": list(range(ranks // 2, ranks))}
    group = lambda groups, r: next(name for name, members in groups.items() if r in members)  # noqa: E731
    xs = [random(rng, (rows, cols), pypto.DT_BF16) for _ in range(ranks)]
    ins = [npusim.tensor(x, device=r) for r, x in enumerate(xs)]
    outs = [npusim.zeros((rows, cols), BF16, device=r) for r in range(ranks)]
    launch(cascading_all_reduce_kernel, ranks, lambda r: (ins[r], outs[r], (group(first, r), len(first[group(first, r)])),
                                                          (group(second, r), len(second[group(second, r)]))), groups={**first, **second})
    stage = [_summed([xs[m] for m in first[group(first, r)]], pypto.DT_BF16) for r in range(ranks)]
    final = [_summed([stage[m] for m in second[group(second, r)]], pypto.DT_BF16) for r in range(ranks)]
    return not data or all(all_close(final[r], outs[r].numpy(), 8e-3, 8e-3) for r in range(ranks))


RUNNERS = {"all_gather": _all_gather, "two_group_all_gather": _two_group_all_gather, "all_reduce": _all_reduce,
           "reduce_scatter": _reduce_scatter, "all_reduce_add_all_reduce": _all_reduce_add_all_reduce, "attn_post": _attn_post,
           "all_gather_matmul": _all_gather_matmul, "matmul_all_reduce_add_rmsnorm": _matmul_all_reduce_add_rmsnorm,
           "cascading_all_reduce": _cascading_all_reduce}


def main() -> None:
    session = npusim.current_session()
    chosen = npusim.param("case", "all", f"the case to run: all, or one of {', '.join(CASES)}")
    names = list(CASES) if chosen == "all" else [chosen]
    if any(name not in CASES for name in names):
        raise UsageError(f"--param case={chosen!r}: the cases are all, {', '.join(CASES)}")
    failed = []
    for name in names:
        start = session.now_us
        ok = run_case(name)
        print(f"{name}: {session.now_us - start:.2f} us simulated, outputs {'checked: pass' if session.with_data and ok else 'FAIL' if not ok else 'not checked'}")
        if not ok:
            failed.append(name)
    if failed:
        raise AssertionError(f"cases whose outputs differ from the expected: {', '.join(failed)}")
