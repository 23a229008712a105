"""Flows of a shmem launch (docs/trace-format.md): put -> signal -> wait -> load across PEs, and the
AICPU scheduler's ready -> dispatch -> program -> complete; drawn with both ends inside their
slices; the critical path follows them across PEs to the fabric."""

import json
import re
from collections import Counter

import numpy as np
import pytest
from shmem_allgather import run_allgather

import npusim
from npusim import pypto
from npusim.trace.chrome import write_chrome_trace
from tests.trace.viewers import perfetto_import, perfetto_ns

D = pypto.distributed
ROWS, COLS, TILE_ROWS = 64, 4096, 16  # per PE 512 KiB of fp16; a tile: 128 KiB, put in 16 KiB chunks over HCCS
HCCS_DIRECTION = re.compile(r"die\d+->die\d+ HCCS")


@pytest.fixture(scope="module", params=[(2, ROWS), (3, ROWS), (4, ROWS)], ids=lambda p: f"{p[0]}PEs")
def allgather(request, tmp_path_factory):
    """(PEs, tiles per put, result, written trace) of the example's all-gather on a2, timing only."""
    n_pes, rows = request.param
    with npusim.session("a2", data=False) as session:
        run_allgather(n_pes=n_pes, rows=rows, cols=COLS, tile_rows=TILE_ROWS)
    path = write_chrome_trace(session.system.record(), tmp_path_factory.mktemp("trace") / "trace.json")
    return n_pes, rows // TILE_ROWS, session.result, json.loads(path.read_text())["traceEvents"]


def arrows(events, name):
    """(source slice, target slice) of each arrow called ``name``: the slices Perfetto binds its
    two ends to (``tests/trace/viewers.py``)."""
    imported = perfetto_import(events)
    return [(events[source.index], events[target.index]) for (_, flow), (source, target) in imported.flows.items() if flow == name]


def lane_names(events):
    return {(e["pid"], e["tid"]): e["args"]["name"] for e in events if e["name"] == "thread_name"}


def test_put_signal_wait_load_arrows_join_the_right_slices_across_pes(allgather):
    n_pes, tiles, _, events = allgather
    lanes = lane_names(events)
    puts = arrows(events, "put->signal")
    signals = arrows(events, "signal->wait")
    loads = arrows(events, "wait->load")
    # every PE puts each tile to each PE, signals it, waits for it and loads it; each barrier wait sees n_pes signals
    assert (len(puts), len(signals), len(loads)) == (n_pes * n_pes * tiles, n_pes * n_pes * (tiles + 1), n_pes * n_pes * tiles)
    for arrows_of, source, target in ((puts, "shmem_put MTE3", "shmem_signal MTE3"), (signals, "shmem_signal MTE3", "poll"),
                                      (loads, "poll", "shmem_load address")):
        for a, b in arrows_of:
            if not (a["name"] == "shmem_barrier_all MTE3" and b["name"] == "poll"):
                assert (a["name"], b["name"]) == (source, target)
            assert a["ts"] + a["dur"] <= b["ts"] + 1e-9  # the source ended before the target started
    assert all(a["pid"] == b["pid"] for a, b in puts + loads)  # a PE signals after its own put, loads after its own wait
    assert sum(a["pid"] != b["pid"] for a, b in signals) == n_pes * (n_pes - 1) * (tiles + 1)  # signals cross to the peers
    assert {lanes[(b["pid"], b["tid"])].split()[1] for _, b in signals} == {"SCHEDULE"}  # the poll on an AICPU lane
    tile_of = {(a["pid"], a["args"]["op"], a["args"]["tile"]) for a, _ in puts}
    assert len(tile_of) == len(puts)  # one arrow per put tile op, from its last store


def test_the_scheduler_arrows_chain_each_tile_op_through_the_aicpu(allgather):
    n_pes, tiles, result, events = allgather
    lanes = lane_names(events)
    counts = Counter(e["name"] for e in events if e["ph"] == "s")
    core_ops = sum(1 for e in events if e["ph"] == "X" and e["name"] == "dispatch")
    assert counts["dispatch"] == counts["complete"] == core_ops  # every tile op run on a core
    for a, b in arrows(events, "dispatch"):
        assert a["name"] == "dispatch" and lanes[(b["pid"], b["tid"])].startswith("aiv")
        assert (a["pid"], a["args"]["op"], a["args"]["tile"]) == (b["pid"], b["args"]["op"], b["args"]["tile"])
        assert perfetto_ns(b["ts"]) == perfetto_ns(a["ts"]) + perfetto_ns(a["dur"])  # the core was free: the program starts at once
    for a, b in arrows(events, "complete"):
        assert b["name"] == "complete" and (a["args"]["op"], a["args"]["tile"]) == (b["args"]["op"], b["args"]["tile"])
    for a, b in arrows(events, "ready"):
        assert a["name"] == "complete" and b["name"] in ("dispatch", "poll") and a["pid"] == b["pid"]
    assert result.recorder.flow_count == sum(counts.values()) - counts["data"]  # data arrows are derived by the writer


def hccs_rows(path) -> list[dict]:
    """The rows of the path's breakdown spent waiting on an HCCS link direction (or its write credits)."""
    return [row for row in path.breakdown() if row["kind"] in ("link", "credits") and HCCS_DIRECTION.search(row["label"])]


def flows_taken(result, path) -> set[str]:
    """The names of the flows the path goes along (source and target consecutive on it)."""
    recorder = result.recorder
    flows = recorder.flows()
    on_path = set(zip(path.events, path.events[1:]))
    return {recorder.names[n] for a, b, n in zip(flows["from"].tolist(), flows["to"].tolist(), flows["name"].tolist()) if (a, b) in on_path}


def test_the_critical_path_goes_through_the_aicpu_to_an_hccs_link(allgather):
    _, _, result, _ = allgather
    path = result.critical_path()
    rows = hccs_rows(path)
    assert rows and rows[0]["share"] > 0.3, path.describe()  # the puts' stores wait on an HCCS link (its write credits)
    assert {"ready", "dispatch", "complete"} <= flows_taken(result, path)
    assert not [seg for seg in path.segments if seg.kind == "idle"]  # every moment is explained by an event


def test_the_critical_path_follows_a_signal_to_the_wait_on_another_pe():
    """PE 1 puts 512 KiB into PE 0 and signals it; PE 0 waits (its AICPU idle, polling) and loads:
    the path goes load <- wait <- poll <- signal (PE 1) <- put over the die1->die0 HCCS link."""

    def kernel(x, pe):
        pypto.set_vec_tile_shapes(TILE_ROWS, COLS)
        data = D.create_shmem_tensor("g", 2, pypto.DT_FP16, [ROWS, COLS])
        if pe == 1:
            put = D.shmem_put(x, [0, 0], data, 0)
            D.shmem_signal(data, 1, 1, [ROWS, COLS], [0, 0], target_pe=0, pred=[put])
        else:
            seen = D.shmem_wait_until(data, 1, 1, [ROWS, COLS], [0, 0], pred=[x])
            pypto.experimental.shmem_load(data, 0, [ROWS, COLS], [0, 0], pred=[seen])  # its own copy, which PE 1 filled

    with npusim.session("a2", data=False) as session:
        xs = [npusim.tensor(np.zeros((ROWS, COLS), np.float16), device=pe) for pe in range(2)]
        npusim.launch(kernel, 2, args=lambda pe: (xs[pe], pe))
    result = session.result
    path = result.critical_path()
    assert {"signal->wait", "ready", "dispatch", "complete"} <= flows_taken(result, path)
    assert [row["label"] for row in hccs_rows(path)] == ["MTE3 waiting on die1->die0 HCCS write credits"]
    recorder = result.recorder
    dies = [recorder.tracks[t].die for t in recorder.columns()["track"][path.events]]
    assert dies[0] == 1 and dies[-1] == 0  # from PE 1's put to PE 0's load
