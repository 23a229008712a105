"""The bulk-copy engines beyond the calibration table: laws a calibrated model must also obey.

Bandwidth rises with the block size and saturates; transfers sharing a link share its bandwidth; a
path through more switches costs its extra latency but keeps the rate; each calibration parameter
moves the result the way its mechanism says.
"""

import numpy as np
import pytest
import simpy
from hypothesis import given, settings
from hypothesis import strategies as st

import npusim
from npusim.analysis.calibration import CalibrationCase, simulate
from npusim.config import load_config
from npusim.engine.loop import Environment
from npusim.hw.dma import Channels, GmBlock, VectorCoreWrites
from npusim.hw.stream import Stream
from npusim.hw.topology import Direction

MiB = 2**20
CLOCK = 1.85e9


def one_block_ps(config, op: str, nbytes: int, peer: int, overrides=(), protocol="hccs") -> int:
    """Simulated time of one transfer of one block from die 0."""
    with npusim.session(config, list(overrides), data=False) as s:
        local = npusim.empty(nbytes, np.uint8, device=0)
        remote = npusim.empty(nbytes, np.uint8, device=peer)
        npusim.transfer(op, local, remote, protocol=protocol)
    return s.result.simulated_ps


def gbps(nbytes: int, ps: int) -> float:
    return nbytes / ps * 1e3


@pytest.mark.parametrize(("config", "peer", "op"), [("a2", 1, "read"), ("a2", 1, "write"), ("a3", 2, "read"), ("a3", 2, "write")])
def test_bandwidth_rises_with_block_size_and_saturates(config, peer, op):
    sizes = [2**k for k in range(12, 27)]  # 4 KiB .. 64 MiB
    rates = [gbps(n, one_block_ps(config, op, n, peer)) for n in sizes]
    assert all(a < b for a, b in zip(rates, rates[1:]))
    assert rates[0] < 0.25 * rates[-1]  # a small block is dominated by the per-block cost (0.75 us on a2, 1.5 us on a3)
    assert rates[-1] / rates[-2] < 1.01  # saturated


def test_saturated_rate_is_the_link_rate_for_reads_and_the_write_credit_rate_for_writes():
    link = load_config("a2").spec.fabrics.node.link
    payload = link.bandwidth.bytes_per_second(CLOCK) / 1e9 * link.efficiency
    credits = link.write_credits.bytes / (2 * link.latency.to_ps(CLOCK)) * 1e3
    n = 256 * MiB
    assert gbps(n, one_block_ps("a2", "read", n, 1)) == pytest.approx(payload, rel=0.01)
    assert gbps(n, one_block_ps("a2", "write", n, 1)) == pytest.approx(credits, rel=0.01)
    assert credits < payload


def concurrent_rates(config, transfers, nbytes=32 * MiB):
    """GB/s of each of ``transfers`` ((op, initiator, peer) each, on its own stream), all started
    together."""
    ends = []
    with npusim.session(config, data=False) as s:
        for i, (op, initiator, peer) in enumerate(transfers):
            local = npusim.empty(nbytes, np.uint8, device=initiator)
            remote = npusim.empty(nbytes, np.uint8, device=peer)
            done = npusim.transfer(op, local, remote, stream=Stream(s.env, initiator, f"s{i}"))
            done.callbacks.append(lambda _event: ends.append(s.env.now))
    return [gbps(nbytes, end) for end in ends]


@pytest.mark.parametrize(("config", "op", "a", "b"), [
    ("a2", "write", (0, 1), (0, 1)),  # two puts from die 0 to die 1: one HCCS link, two SDMA channels
    ("a2", "read", (1, 0), (1, 0)),  # two gets by die 1 of die 0's data: the same link direction
    ("a3", "write", (0, 4), (2, 4)),  # two senders into one receiver: its UB ports
])
def test_two_concurrent_transfers_over_the_same_link_each_get_about_half(config, op, a, b):
    [alone] = concurrent_rates(config, [(op, *a)])
    shared = concurrent_rates(config, [(op, *a), (op, *b)])
    assert shared == pytest.approx([alone / 2] * 2, rel=0.02)


def test_transfers_over_different_links_do_not_share():
    [alone] = concurrent_rates("a2", [("write", 0, 1)])
    assert concurrent_rates("a2", [("write", 0, 1), ("write", 0, 2)]) == pytest.approx([alone] * 2, rel=1e-6)


@pytest.mark.parametrize("op", ["read", "write"])
def test_a_path_through_more_switches_is_slower_by_its_extra_latency_not_by_a_rate(op):
    fabrics = load_config("a3").spec.fabrics
    # across nodes a hop also crosses: die -> L1 -> L2 -> L1 -> die instead of die -> L1 -> die
    node = fabrics.node
    extra_one_way = sum(q.to_ps(CLOCK) for q in (node.link.latency, node.link.latency, node.switch.latency, fabrics.pod.switch.latency))
    for nbytes in (MiB, 8 * MiB, 64 * MiB):
        one_node = one_block_ps("a3", op, nbytes, 2)
        two_nodes = one_block_ps("a3", op, nbytes, 16, ["shape.nodes=2"])
        assert two_nodes - one_node == pytest.approx(2 * extra_one_way, abs=2)  # one round trip per block


# -- calibration parameters move the result the way their mechanism says ---------------------------


def hixl_GiBps(config, op, block_bytes, overrides=(), nodes=1, protocol="hccs") -> float:
    """The simulated bandwidth of a HIXL benchmark row (128 MiB in blocks)."""
    case = CalibrationCase(config, nodes, protocol, op, block_bytes, measured_GiBps=1.0)
    return simulate(case, load_config(config, [*overrides, f"shape.nodes={nodes}"]))


def test_lower_link_efficiency_lowers_the_bandwidth():
    assert hixl_GiBps("a3", "read", 8 * MiB, ["fabrics.node.link.efficiency=0.6"]) < 0.8 * hixl_GiBps("a3", "read", 8 * MiB)


def test_higher_setup_costs_more_at_small_blocks_than_at_large_ones():
    def drop(block):
        return 1 - hixl_GiBps("a2", "write", block, ["die.sdma.setup=2 us"]) / hixl_GiBps("a2", "write", block)

    assert drop(MiB) > 0.02
    assert drop(MiB) > 4 * drop(8 * MiB) > 0


def test_write_credits_limit_writes_only():
    more = ["fabrics.node.link.write_credits=12 KiB"]
    assert hixl_GiBps("a2", "write", 8 * MiB, more) > 1.2 * hixl_GiBps("a2", "write", 8 * MiB)
    assert hixl_GiBps("a2", "read", 8 * MiB, more) == hixl_GiBps("a2", "read", 8 * MiB)


def test_switch_latency_slows_transfers_that_cross_it_only():
    slower = ["fabrics.pod.switch.latency=1 us"]
    assert hixl_GiBps("a3", "read", MiB, slower, nodes=2) < 0.95 * hixl_GiBps("a3", "read", MiB, nodes=2)
    assert hixl_GiBps("a3", "read", MiB, slower) == hixl_GiBps("a3", "read", MiB)


def test_nic_efficiency_sets_the_rdma_rate():
    base = hixl_GiBps("a2", "write", MiB, protocol="rdma")
    assert hixl_GiBps("a2", "write", MiB, ["fabrics.scale_out.efficiency=0.5"], protocol="rdma") == pytest.approx(base * 0.5 / 0.971, rel=0.01)



def test_vector_core_writes_pay_the_cores_set_up_and_move_at_their_rate():
    """An AIV-expanded copy: MTE2 + MTE3 set-up, the path's latency once, at most cores x the cores' rate."""
    with npusim.session("a2", data=False) as s:
        system = s.system
        die = system.die(0)
        engine = VectorCoreWrites(die, "aiv")
        src, dst = die.memory.allocate(MiB, "src"), system.die(1).memory.allocate(MiB, "dst")
        path = system.copy_path(0, 1, Direction.WRITE, rdma=False)
        recorder = system.recorder
        process = s.env.process(engine.run([GmBlock(src, 0, dst, 0, 64)], path, 1.0, recorder.name_id("copy"), recorder.op("copy", 0)))
        s.synchronize(process)
        aiv = load_config("a2").spec.die.cores["aiv"].engines
        fixed = (aiv["MTE2"].setup.to_ps(CLOCK) + aiv["MTE3"].setup.to_ps(CLOCK) + path.memory_latency_ps + path.path_latency_ps)
        assert s.env.now > fixed and s.env.now < fixed + 10_000  # 64 B: the fixed part dominates
        assert engine.core_rate == min(aiv["MTE2"].rate.bytes_per_ps(CLOCK), aiv["MTE3"].rate.bytes_per_ps(CLOCK))


def _store_of_channels(env: simpy.Environment, count: int) -> simpy.PriorityStore:
    """The SDMA's free channels as SimPy's store, filled as the engine filled it before Channels."""
    store = simpy.PriorityStore(env, capacity=count)
    for channel in range(count):
        store.put(channel)
    return store


def _channel_order(pool_of, count: int, users: list[tuple[int, int, int]]) -> list[tuple[int, int, str, int]]:
    """(time, index, what, events queued) of what ``users`` ((arrival ps, zero-time steps, holding
    ps) each) do with a pool of ``count`` channels made by ``pool_of``, in the order they do it:
    each arrives, asks for a channel after its zero-time steps (so that gets, puts and their events
    meet at one instant in every order), holds it, gives it back, waits for the put and takes one
    more zero-time step. The pool is made at the first get (as a die, and its SDMA, on first use);
    the events queued (SimPy's queue) tell the same events apart from fewer."""
    env = Environment()
    pools = []
    seen: list[tuple[int, int, str, int]] = []

    def note(what: str) -> None:
        seen.append((env.now, len(seen), what, len(env._queue)))

    def user(i: int, arrival: int, steps: int, hold: int):
        yield env.timeout(arrival)
        for step in range(steps):
            yield env.timeout(0)
            note(f"step {step} of {i}")
        if not pools:
            pools.append(pool_of(env, count))
        pool = pools[0]
        channel = yield pool.get()
        note(f"{i} takes channel {channel}")
        yield env.timeout(hold)
        yield pool.put(channel)
        note(f"{i} gave channel {channel} back")
        yield env.timeout(0)
        note(f"after the put of {i}")

    for i, (arrival, steps, hold) in enumerate(users):
        env.process(user(i, arrival, steps, hold))
    env.run()
    return seen


@settings(max_examples=500, deadline=None)
@given(st.integers(1, 3), st.lists(st.tuples(st.integers(0, 2), st.integers(0, 4), st.integers(0, 1)), min_size=1, max_size=8))
def test_the_sdma_channels_are_taken_at_the_moments_simpys_priority_store_gives_them(count, users):
    assert _channel_order(Channels, count, users) == _channel_order(_store_of_channels, count, users)
