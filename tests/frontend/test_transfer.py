"""npusim.transfer: HIXL-style put / get of whole blocks between two dies, its data, trace and errors."""

import numpy as np
import pytest

import npusim
from npusim.errors import OpArgumentError
from npusim.hw.stream import Stream

KiB, MiB = 2**10, 2**20


def blocks_of(tensor, count):
    size = tensor.size // count
    return [tensor[i * size : (i + 1) * size] for i in range(count)]


@pytest.mark.parametrize("protocol", ["hccs", "rdma"])
def test_write_pushes_every_local_block_into_the_peer(protocol):
    rng = np.random.default_rng(1)
    values = rng.integers(0, 255, 4 * 64 * KiB, dtype=np.uint8)
    with npusim.session("a2"):
        local = npusim.tensor(values, device=0)
        remote = npusim.zeros(values.size, np.uint8, device=3)
        npusim.transfer("write", blocks_of(local, 4), blocks_of(remote, 4), protocol=protocol)
        assert np.array_equal(remote.numpy(), values)


@pytest.mark.parametrize("protocol", ["hccs", "rdma"])
def test_read_pulls_the_peer_blocks_into_local_memory(protocol):
    values = np.arange(3 * 1024, dtype=np.float32)
    with npusim.session("a3"):
        remote = npusim.tensor(values, device=5)
        local = npusim.zeros(values.size, np.float32, device=0)
        npusim.transfer("READ", blocks_of(local, 3)[::-1], blocks_of(remote, 3)[::-1], protocol=protocol)
        assert np.array_equal(local.numpy(), values)


def test_each_block_lands_at_its_own_offsets():
    with npusim.session("a2"):
        local = npusim.tensor(np.arange(8, dtype=np.int64), device=0)
        remote = npusim.zeros(8, np.int64, device=1)
        npusim.transfer("write", [local[0:2], local[4:6]], [remote[6:8], remote[0:2]])
        assert remote.numpy().tolist() == [4, 5, 0, 0, 0, 0, 0, 1]


def test_sdma_blocks_are_events_on_a_channel_lane_and_the_transfer_is_an_op():
    with npusim.session("a2", data=False) as s:
        local = npusim.empty(4 * MiB, np.uint8, device=0)
        remote = npusim.empty(4 * MiB, np.uint8, device=1)
        npusim.transfer("write", blocks_of(local, 4), blocks_of(remote, 4))
    recorder = s.result.recorder
    track = recorder.tracks.index(next(t for t in recorder.tracks if (t.die, t.unit, t.lane) == (0, "sdma", "ch0")))
    columns = recorder.columns()
    mine = columns["track"] == track
    assert mine.sum() == 4
    assert {recorder.names[n] for n in columns["name"][mine]} == {"write to die1"}
    assert columns["bytes"][mine].tolist() == [MiB] * 4
    assert np.all(columns["start_ps"][mine][1:] == columns["end_ps"][mine][:-1])  # one block after the other
    assert [(op.name, op.die, op.args) for op in recorder.ops] == [
        ("transfer", 0, {"op": "write", "protocol": "hccs", "peer": 1, "blocks": 4, "bytes": 4 * MiB})]


def test_concurrent_transfers_of_one_die_take_different_channels():
    with npusim.session("a2", data=False) as s:
        local = npusim.empty(2 * MiB, np.uint8, device=0)
        remote = npusim.empty(2 * MiB, np.uint8, device=1)
        npusim.transfer("write", local[:MiB], remote[:MiB])
        npusim.transfer("write", local[MiB:], remote[MiB:], stream=Stream(s.env, 0, "second"))
    lanes = sorted(t.lane for t in s.result.recorder.tracks if t.unit == "sdma")
    assert lanes == ["ch0", "ch1"]


def test_rdma_blocks_are_events_on_the_queue_pair_lane():
    with npusim.session("a3", data=False) as s:
        local = npusim.empty(2 * MiB, np.uint8, device=0)
        remote = npusim.empty(2 * MiB, np.uint8, device=4)
        npusim.transfer("read", blocks_of(local, 2), blocks_of(remote, 2), protocol="rdma")
    tracks = [(t.die, t.unit, t.lane) for t in s.result.recorder.tracks]
    assert tracks == [(0, "rdma", "qp die4")]
    assert len(s.result.recorder) == 2


@pytest.mark.parametrize("op", ["write", "read"])
def test_between_a2_servers_hccs_goes_through_the_nics_as_hccl_does(op):
    values = np.arange(2 * KiB, dtype=np.uint8)
    durations = {}
    for protocol in ("hccs", "rdma"):
        with npusim.session("a2", ["shape.nodes=2"]) as s:
            source = npusim.tensor(values, device=0 if op == "write" else 9)
            target = npusim.zeros(values.size, np.uint8, device=9 if op == "write" else 0)
            local, remote = (source, target) if op == "write" else (target, source)
            npusim.transfer(op, blocks_of(local, 2), blocks_of(remote, 2), protocol=protocol)
            assert np.array_equal(target.numpy(), values)
        assert [(t.die, t.unit, t.lane) for t in s.result.recorder.tracks] == [(0, "rdma", "qp die9")]
        assert s.result.recorder.ops[0].args["protocol"] == protocol  # recorded as asked
        durations[protocol] = s.result.simulated_ps
    assert durations["hccs"] == durations["rdma"]


def test_one_sdma_block_costs_setup_memory_latency_round_trip_and_bytes_at_the_link_rate():
    with npusim.session("a2", data=False) as s:
        local = npusim.empty(MiB, np.uint8, device=0)
        remote = npusim.empty(MiB, np.uint8, device=1)
        npusim.transfer("read", local, remote)
    die, link = s.config.spec.die, s.config.spec.fabrics.node.link
    hz = die.clock.hz
    fixed = die.sdma.setup.to_ps(hz) + die.l2.latency.to_ps(hz) + die.hbm.latency.to_ps(hz) + 2 * link.latency.to_ps(hz)
    rate = link.bandwidth.bytes_per_ps(hz) * link.efficiency
    assert s.result.simulated_ps == pytest.approx(fixed + MiB / rate, abs=2)


def test_rdma_pays_the_path_latency_once_per_transfer_not_per_block():
    def duration(blocks):
        with npusim.session("a2", data=False) as s:
            local = npusim.empty(8 * MiB, np.uint8, device=0)
            remote = npusim.empty(8 * MiB, np.uint8, device=2)
            npusim.transfer("write", blocks_of(local, blocks), blocks_of(remote, blocks), protocol="rdma")
        return s.result.simulated_ps

    assert duration(64) == pytest.approx(duration(1), abs=64)  # rounding of 64 flow ends, not 63 latencies


# -- bad inputs ------------------------------------------------------------------------------------


def error_of(call) -> str:
    with pytest.raises(OpArgumentError) as caught:
        call()
    return str(caught.value)


@pytest.fixture
def a3():
    with npusim.session("a3", data=False) as s:
        yield s


def test_unknown_op_and_protocol(a3):
    x, y = npusim.empty(64, np.uint8, device=0), npusim.empty(64, np.uint8, device=2)
    assert "op='put' is not supported; op is one of 'write', 'read'" in error_of(lambda: npusim.transfer("put", x, y))
    assert "protocol='nvlink' is not supported; protocol is one of 'hccs', 'rdma'" in error_of(
        lambda: npusim.transfer("write", x, y, protocol="nvlink"))


def test_blocks_must_be_device_tensors_and_pair_up(a3):
    x, y = npusim.empty(64, np.uint8, device=0), npusim.empty(64, np.uint8, device=2)
    assert "local must be a device tensor or a list of them, got ndarray" in error_of(lambda: npusim.transfer("write", np.zeros(4), y))
    assert "remote is an empty list" in error_of(lambda: npusim.transfer("write", x, []))
    assert "local has 2 blocks but remote has 1" in error_of(lambda: npusim.transfer("write", [x[:32], x[32:]], [y]))
    assert "block 0 has 32 B locally but 64 B remotely" in error_of(lambda: npusim.transfer("write", x[:32], y))


def test_blocks_must_be_contiguous(a3):
    x = npusim.empty((8, 8), np.uint8, device=0)
    y = npusim.empty((8, 8), np.uint8, device=2)
    message = error_of(lambda: npusim.transfer("write", x.T, y))
    assert "local[0]" in message and "is not contiguous" in message and "one contiguous byte range" in message


def test_a_transfer_joins_two_dies_each_on_one_die(a3):
    x, y, z = (npusim.empty(64, np.uint8, device=d) for d in (0, 2, 4))
    assert "both on die 0; a transfer moves data between two dies" in error_of(lambda: npusim.transfer("write", x[:32], x[32:]))
    assert "the remote blocks are on dies [2, 4]" in error_of(lambda: npusim.transfer("write", [x[:32], x[32:]], [y[:32], z[:32]]))


def test_the_stream_must_be_the_initiators(a3):
    x, y = npusim.empty(64, np.uint8, device=0), npusim.empty(64, np.uint8, device=2)
    assert "the stream given belongs to die 2, not to the initiator die 0" in error_of(lambda: npusim.transfer("write", x, y, stream=Stream(a3.env, 2, "other")))


def test_rdma_needs_two_nics():
    with npusim.session("a3", ["fabrics.scale_out.per=package"], data=False):
        x, y = npusim.empty(64, np.uint8, device=0), npusim.empty(64, np.uint8, device=1)
        assert "dies 0 and 1 share one NIC of the scale-out network (fabrics.scale_out)" in error_of(lambda: npusim.transfer("read", x, y, protocol="rdma"))


def test_tensors_of_another_session_are_refused():
    with npusim.session("a2", data=False):
        stale = npusim.empty(64, np.uint8, device=0)
    with npusim.session("a2", data=False):
        fresh = npusim.empty(64, np.uint8, device=1)
        assert "local[0] belongs to another session" in error_of(lambda: npusim.transfer("write", stale, fresh))
