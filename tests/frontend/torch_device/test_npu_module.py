"""torch.npu on the simulator: devices, streams and events ordering work as torch's semantics say,
NPUGraph capture / replay, the host thread running ahead, the host lane in the trace."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import npusim
import npusim.torch_npu as torch_npu
from npusim.errors import GraphCaptureError

FAST_HOST = ["host.op_launch=1 ns", "host.tiling=1 ns", "host.graph_launch=1 ns"]


def test_devices_are_the_dies_of_the_session():
    assert not torch.npu.is_available()
    with npusim.session("a2"):
        assert torch.npu.is_available() and torch.npu.device_count() == 8
        assert torch.npu.get_device_name().startswith("Ascend910B")
        torch.npu.set_device(3)
        assert torch.ones(2).npu().device == torch.device("npu:3")
        with pytest.raises(npusim.errors.UsageError, match="npu:9 does not exist"):
            torch.npu.set_device(9)


def test_a_device_outside_a_session_says_there_is_no_session():
    """The framework's distributed tests as written start a process per rank (multiprocessing):
    there, without a session, the error says so and what to do."""
    with pytest.raises(npusim.errors.UsageError, match=r"npu:1: no npusim session is running in this process.*npusim.pypto.ranks"):
        torch.npu.get_device_name(1)


def test_views_copies_casts_and_fills_behave_as_on_the_cpu():
    rng = np.random.default_rng(0)
    host = torch.from_numpy(rng.normal(0, 3, (4, 6)))
    with npusim.session("a2"):
        x = host.npu()
        assert x.size() == torch.Size([4, 6]) and x.dim() == 2 and x.dtype == torch.float64
        assert torch.equal(x.t()[1:3].cpu(), host.t()[1:3])
        assert torch.equal(x.to(torch.bfloat16).cpu(), host.to(torch.bfloat16))  # the Cast kernel, through float32
        assert torch.equal(x.to(torch.int32).cpu(), host.to(torch.int32))  # toward zero
        assert torch.equal(x.t().contiguous().cpu(), host.t().contiguous())
        y = torch.empty(4, 6, device="npu", dtype=torch.float64)
        y.copy_(x.t().t())
        assert torch.equal(y.cpu(), host)
        assert torch.equal(torch.zeros(3, 5, device="npu").cpu(), torch.zeros(3, 5))
        assert torch.equal(torch.full((7,), 2.5, device="npu").cpu(), torch.full((7,), 2.5))
        assert x[1, 2].item() == host[1, 2].item()


def test_a_kernel_waiting_an_event_of_another_stream_starts_after_that_streams_work():
    with npusim.session("a2", overrides=FAST_HOST) as session:
        big = torch.zeros(1 << 20).npu()
        a, b = torch.npu.Stream(), torch.npu.Stream()
        for wait in (True, False):
            torch.npu.synchronize()
            with torch.npu.stream(a):
                assert torch.npu.current_stream() == a
                big.clone()
                a_done = torch.npu.Event()
                a_done.record()
            with torch.npu.stream(b):
                if wait:
                    b.wait_event(a_done)
                b_start = torch.npu.Event()
                b_start.record()
                big[:64].clone()
            assert torch.npu.current_stream() == torch.npu.default_stream()
            b_start.synchronize()
            assert session.host.now_ps >= b_start.event.time_ps
            torch.npu.synchronize()
            if wait:
                assert b_start.event.time_ps >= a_done.event.time_ps > 0
            else:  # the control: without the wait, stream b does not wait for stream a
                assert b_start.event.time_ps < a_done.event.time_ps
        assert a_done.elapsed_time(a_done) == 0.0


def test_the_host_runs_ahead_until_it_synchronises():
    with npusim.session("a2") as session:
        x = torch.zeros(1 << 16).npu()
        host = session.host
        before = host.now_ps
        for _ in range(3):
            x.clone()
        assert host.now_ps == before + 3 * host.op_launch_ps and session.env.now < host.now_ps  # nothing has run yet
        torch.npu.synchronize()
        assert host.now_ps == session.env.now > before + 3 * host.op_launch_ps  # the host waited for the last kernel
        recorder = session.system.recorder
        lanes = {(t.unit, t.lane) for t in recorder.tracks}
        assert ("host", "launch") in lanes
        names = [recorder.names[i] for i in recorder.flows()["name"]]
        assert names.count("launch") >= 3


def kv_write(cache, indices, step_values):
    """A decode step's KV-cache write: one token per batch, quantised into the int8 cache."""
    return torch_npu.npu_quant_scatter_(cache, indices, step_values[0], step_values[1], None, axis=-2, quant_axis=-1)


def test_npu_graph_replay_gives_the_eager_result_with_one_host_launch():
    rng = np.random.default_rng(1)
    batches, seq, dim = 4, 16, 128
    steps = [torch.from_numpy(rng.uniform(-4, 4, (batches, 1, dim)).astype(np.float32)).to(torch.bfloat16) for _ in range(3)]
    scales = torch.from_numpy(rng.uniform(0.5, 2, dim).astype(np.float32)).to(torch.bfloat16)
    results = {}
    for mode in ("eager", "graph"):
        with npusim.session("a2") as session:
            cache = torch.zeros(batches, seq, dim, dtype=torch.int8).npu()
            indices = torch.zeros(batches, dtype=torch.int32).npu()
            values = (torch.empty(batches, 1, dim, dtype=torch.bfloat16).npu(), scales.npu())
            graph = torch.npu.NPUGraph()
            if mode == "graph":
                with torch.npu.graph(graph):
                    kv_write(cache, indices, values)
            host = []
            for position, step in enumerate(steps):
                indices.copy_(torch.full((batches,), position, dtype=torch.int32))
                values[0].copy_(step)
                start = session.host.now_ps
                graph.replay() if mode == "graph" else kv_write(cache, indices, values)
                host.append(session.host.now_ps - start)
            results[mode] = (cache.cpu().numpy(), host, session.host)
    (eager, eager_host, host), (graph_cache, graph_host, _) = results["eager"], results["graph"]
    assert np.array_equal(eager, graph_cache) and np.count_nonzero(eager[:, :3]) > 0 and not eager[:, 3:].any()
    assert eager_host == [host.op_launch_ps + host.tiling_ps] * 3 and graph_host == [host.graph_launch_ps] * 3


def test_capture_errors():
    with npusim.session("a2"):
        graph = torch.npu.NPUGraph()
        with pytest.raises(GraphCaptureError, match="replay\\(\\) before its capture ended"):
            graph.replay()
        graph.capture_begin()
        with pytest.raises(GraphCaptureError, match="torch.npu.synchronize"):
            torch.npu.synchronize()
        with pytest.raises(GraphCaptureError, match="while NPUGraph is being captured"):
            torch.npu.NPUGraph().capture_begin()
        graph.capture_end()
        with pytest.raises(GraphCaptureError, match="already captured"):
            graph.capture_begin()


@pytest.mark.filterwarnings("ignore::npusim.frontend.torch_device.aten.HostFallbackWarning")
def test_an_op_the_device_does_not_model_runs_on_the_host():
    with npusim.session("a2") as session:
        x = torch.arange(6.0).npu()
        assert torch.equal((x + 1).cpu(), torch.arange(6.0) + 1)  # a host fallback, marked in the trace
        assert any(i.name == "host fallback" and "aten.add" in i.message for i in session.system.recorder.instants)
        assert x.add_(1) is x and torch.equal(x.cpu(), torch.arange(6.0) + 1)  # written back to the device


@pytest.mark.parametrize("config", ["a2", "a3", "atlas-300i-duo", "ascend-950pr", "ascend-950dt"])
def test_the_device_name_is_the_products_from_the_registry(config):
    from npusim.config.products import PRODUCTS

    with npusim.session(config, data=False) as session:
        assert torch.npu.get_device_name() == PRODUCTS.get(session.system.spec.product).device_name
        if config == "atlas-300i-duo":
            assert torch.npu.get_device_name(1) == "Ascend310P3"  # each of the card's two chips
