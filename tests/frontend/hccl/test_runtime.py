"""HCCL's collectives played on the simulated machine (npusim.hccl, one call for every rank): exact
results on A2, A3, across servers and SuperPoDs, the trace's hccl lanes, and the refusals."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import npusim
from npusim.errors import DeadlockError, OpArgumentError
from npusim.frontend.hccl.runtime import Communicator, Request
from tests.conftest import events_of

BF16 = np.dtype(ml_dtypes.bfloat16)


def run_all(config: str, overrides=(), ranks=None, dtype=np.int32, count=24, op="sum", data=True):
    """Every collective on every die of the config; returns their inputs and outputs (host arrays)."""
    rng = np.random.default_rng(count)
    with npusim.session(config, overrides=list(overrides), data=data) as session:
        dies = list(range(session.system.die_count)) if ranks is None else list(range(ranks))
        p = len(dies)
        world = npusim.hccl.communicator(dies)
        xs = [rng.integers(-9, 9, count).astype(dtype) for _ in range(p)]
        ys = [rng.integers(-9, 9, count * p).astype(dtype) for _ in range(p)]
        ar = [npusim.tensor(x, device=d) for x, d in zip(xs, dies)]
        world.all_reduce(ar, op=op)
        ag = [npusim.zeros((count * p,), dtype, device=d) for d in dies]
        world.all_gather(ag, [npusim.tensor(x, device=d) for x, d in zip(xs, dies)])
        rs = [npusim.zeros((count,), dtype, device=d) for d in dies]
        world.reduce_scatter(rs, [npusim.tensor(y, device=d) for y, d in zip(ys, dies)], op=op)
        bc = [npusim.tensor(x, device=d) for x, d in zip(xs, dies)]
        world.broadcast(bc, root=p - 1)
        a2a = [npusim.zeros((count * p,), dtype, device=d) for d in dies]
        world.all_to_all(a2a, [npusim.tensor(y, device=d) for y, d in zip(ys, dies)])
        session.synchronize()
        outs = {name: [t.numpy() for t in ts] if data else [] for name, ts in (("ar", ar), ("ag", ag), ("rs", rs), ("bc", bc), ("a2a", a2a))}
    return xs, ys, outs, session.result


def check(xs, ys, outs, op=np.add) -> None:
    p, count = len(xs), len(xs[0])
    total = xs[0]
    for x in xs[1:]:
        total = op(total, x)
    assert all(np.array_equal(o, total) for o in outs["ar"])
    assert all(np.array_equal(o, np.concatenate(xs)) for o in outs["ag"])
    reduced = ys[0]
    for y in ys[1:]:
        reduced = op(reduced, y)
    assert all(np.array_equal(outs["rs"][r], reduced[r * count:(r + 1) * count]) for r in range(p))
    assert all(np.array_equal(o, xs[-1]) for o in outs["bc"])
    for j in range(p):
        assert np.array_equal(outs["a2a"][j], np.concatenate([ys[i][j * count:(j + 1) * count] for i in range(p)]))


@pytest.mark.parametrize("config,overrides,ranks", [
    ("a2", (), None),                                      # one server: mesh over HCCS
    ("a2", ("shape.nodes=2",), None),                      # two servers: RDMA between them
    ("a3", (), None),                                      # one node: double ring over UB and SIO
    ("a3", ("shape.pods=2", "shape.nodes=1"), 32),        # two SuperPoDs: level 2 over RoCE
])
def test_every_collective_is_exact(config: str, overrides, ranks) -> None:
    xs, ys, outs, _ = run_all(config, overrides, ranks)
    check(xs, ys, outs)


@pytest.mark.parametrize("op,combine", [("max", np.maximum), ("min", np.minimum), ("prod", np.multiply)])
def test_reductions(op: str, combine) -> None:
    """prod is not an inline reduce: it lands in scratch and a local pass reduces it (same result)."""
    xs, ys, outs, _ = run_all("a2", ranks=4, op=op, count=8)
    check(xs, ys, outs, combine)


def test_avg_divides_the_sum_on_the_device() -> None:
    with npusim.session("a2") as session:
        world = npusim.hccl.communicator(range(4))
        xs = [npusim.tensor(np.full(6, r + 1, np.float16), device=r) for r in range(4)]
        world.all_reduce(xs, op="avg")
        assert all(np.array_equal(x.numpy(), np.full(6, 2.5, np.float16)) for x in xs)
    assert any(e["name"] == "avg: divide by the group size" for e in events_of(session.result))


@pytest.mark.parametrize("dtype", [np.float16, BF16, np.float32, np.int8])
def test_dtypes(dtype) -> None:
    """bf16 / fp16 / fp32 / int8 (int8 sums wrap, as the hardware's)."""
    xs, ys, outs, _ = run_all("a2", ranks=8, dtype=dtype, count=16)
    assert all(np.array_equal(o, np.concatenate(xs)) for o in outs["ag"])
    if np.dtype(dtype).kind == "i":
        check(xs, ys, outs)
    else:
        exact = np.sum([x.astype(np.float64) for x in xs], axis=0)
        assert all(np.allclose(o.astype(np.float64), exact, atol=1e-2) for o in outs["ar"])


def test_deterministic_mode_adds_the_mesh_in_rank_order() -> None:
    """With hccl.deterministic the mesh's adds into rank j are applied in the order j+1, j+2, ...: fp16
    sums come out exactly as that sequence of fp16 adds."""
    rng = np.random.default_rng(7)
    hosts = [rng.standard_normal(8).astype(np.float16) * 100 for _ in range(8)]
    with npusim.session("a2", overrides=["hccl.deterministic=true"]):
        xs = [npusim.tensor(h, device=r) for r, h in enumerate(hosts)]
        npusim.hccl.communicator().all_reduce(xs)
        got = xs[3].numpy()
    for j in range(8):
        total = hosts[j][j]
        for d in range(1, 8):
            total = np.float16(np.float32(total) + np.float32(hosts[(j + d) % 8][j]))
        assert got[j] == total


def test_the_trace_names_each_step() -> None:
    """An hccl lane per rank, one event per step: algorithm, phase, step, peer; SDMA lanes carry the bytes."""
    _, _, _, result = run_all("a2", ranks=8, count=1024)
    events = events_of(result)
    lanes = {(e["die"], e["unit"], e["lane"]) for e in events if e["unit"] == "hccl"}
    assert lanes == {(d, "hccl", "world") for d in range(8)}
    names = {e["name"] for e in events if e["unit"] == "hccl" and e["die"] == 0}
    assert {"stage in local", "mesh AR 1/2 ->7 peers <-7 peers", "mesh RS ->7 peers <-7 peers", "mesh AG ->7 peers <-7 peers",
            "stage out local"} <= names
    sent = {e["name"][:9]: e["bytes"] for e in events if e["unit"] == "hccl" and e["die"] == 0 and e["name"].startswith("mesh")}
    assert sent["mesh AR 1"] == 7 * 1024 * 4 // 8 and sent["mesh RS -"] == 7 * 1024 * 4  # the all-reduce's blocks, the reduce-scatter's
    assert any(e["unit"] == "sdma" for e in events)


def test_timing_only_gives_the_same_times() -> None:
    *_, with_data = run_all("a2", ("shape.nodes=2",), count=4096)
    *_, without = run_all("a2", ("shape.nodes=2",), count=4096, data=False)
    assert with_data.simulated_ps == without.simulated_ps


def test_aiv_expansion_is_faster_for_small_messages() -> None:
    def time(overrides):
        with npusim.session("a3", overrides=overrides, data=False) as session:
            xs = [npusim.zeros((256,), np.float16, device=d) for d in range(16)]
            npusim.hccl.communicator().all_reduce(xs)
        return session.result.simulated_ps, events_of(session.result)

    dma, _ = time([])
    aiv, events = time(["hccl.expansion_mode=aiv"])
    assert aiv < dma
    assert any(e["lane"] == "aiv writes" for e in events)


def test_send_and_scatter() -> None:
    with npusim.session("a2") as session:
        world = npusim.hccl.communicator(range(4))
        into = npusim.zeros((5,), np.int32, device=3)
        world.send(npusim.tensor(np.arange(5, dtype=np.int32), device=1), 1, into, 3)
        outs = [npusim.zeros((2,), np.int32, device=r) for r in range(4)]
        world.scatter(outs, npusim.tensor(np.arange(8, dtype=np.int32), device=2), root=2)
        assert np.array_equal(into.numpy(), np.arange(5))
        assert [o.numpy().tolist() for o in outs] == [[0, 1], [2, 3], [4, 5], [6, 7]]
        assert session.now_us > 0


def test_a_rank_that_never_calls_is_named_in_the_deadlock_report() -> None:
    with pytest.raises(DeadlockError) as error, npusim.session("a2") as session:
        comm = Communicator(session, 4, "tp", dies=range(4))
        tensors = [npusim.zeros((8,), np.float32, device=r) for r in range(4)]
        for rank in (0, 1, 3):
            comm.call(rank, Request("allreduce", tensors[rank], tensors[rank], session.stream(rank), reduce_op="sum"))
    assert "communicator 'tp': HcclAllReduce #1: rank(s) 0, 1, 3 called it and wait; rank(s) 2 never did (rank 2 on npu:2)" in str(error.value)


@pytest.mark.parametrize("second,message", [
    (dict(dtype=np.float16), "rank 1 passes dtype float16 but rank 0 float32"),
    (dict(count=9), "rank 1 passes 9 elements per rank but rank 0 8"),
    (dict(op="allgather"), "rank 1 calls HcclAllGather where rank 0 called HcclAllReduce"),
    (dict(reduce_op="max"), "rank 1 passes reduction max but rank 0 sum"),
])
def test_mismatched_calls_are_refused(second: dict, message: str) -> None:
    with pytest.raises(OpArgumentError, match=message), npusim.session("a2") as session:
        comm = Communicator(session, 2, "pair", dies=[0, 1])
        first = npusim.zeros((8,), np.float32, device=0)
        comm.call(0, Request("allreduce", first, first, session.stream(0), reduce_op="sum"))
        other = npusim.zeros((second.get("count", 8) * (2 if second.get("op") == "allgather" else 1),), second.get("dtype", np.float32), device=1)
        op = second.get("op", "allreduce")
        tensor = npusim.zeros((second.get("count", 8),), second.get("dtype", np.float32), device=1)
        comm.call(1, Request(op, tensor, other if op == "allgather" else tensor, session.stream(1),
                             reduce_op=None if op == "allgather" else second.get("reduce_op", "sum")))


def test_bad_arguments_are_refused() -> None:
    with npusim.session("a2") as session:
        world = npusim.hccl.communicator(range(4))
        with pytest.raises(OpArgumentError, match="root = 4: communicator 'world' has ranks 0..3"):
            world.broadcast([npusim.zeros((2,), np.float32, device=r) for r in range(4)], root=4)
        with pytest.raises(OpArgumentError, match="rank 0's input .* is not contiguous"):
            world.all_reduce([npusim.zeros((4, 4), np.float32, device=r).T for r in range(4)])
        with pytest.raises(OpArgumentError, match="op='band' is not a reduction HCCL takes"):
            world.all_reduce([npusim.zeros((2,), np.float32, device=r) for r in range(4)], op="band")
        with pytest.raises(OpArgumentError, match="HCCL refuses PROD of bfloat16"):
            world.all_reduce([npusim.zeros((2,), BF16, device=r) for r in range(4)], op="prod")
        with pytest.raises(OpArgumentError, match="ranks 0 and 1 both run on npu:0"):
            Communicator(session, 2, "twice", dies=[0, 0])


def test_all_to_all_splits_must_agree() -> None:
    """Checked as each rank arrives (the one that disagrees is refused; the others, left waiting, end the
    run when the program goes on)."""
    with pytest.raises(OpArgumentError, match="rank 1 sends 1 elements to rank 0, but rank 0 expects 2 from rank 1"), \
            npusim.session("a2") as session:
        tensors = [npusim.zeros((3,), np.float32, device=r) for r in range(2)]
        comm = Communicator(session, 2, "a2a", dies=[0, 1])
        comm.call(0, Request("alltoall", tensors[0], tensors[0], session.stream(0), send_counts=(1, 2), recv_counts=(1, 2)))
        comm.call(1, Request("alltoall", tensors[1], tensors[1], session.stream(1), send_counts=(1, 2), recv_counts=(2, 2)))
