"""The recorder's event rows: what is recorded one by one, in bulk or by the hot loop's packed
puts reads back as columns, whatever the number of events (the buffer grows), and reading never
stops recording."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from npusim.errors import UsageError
from npusim.trace.recorder import Recorder
from npusim.trace.rows import FIRST_ROWS, ROW_BYTES, pack

events = st.lists(
    st.tuples(st.integers(0, 2**20), st.integers(0, 2**20), st.integers(0, 2**50), st.integers(0, 2**20),
              st.integers(0, 2**40), st.integers(-1, 2**20), st.integers(-1, 2**20)),
    max_size=60,
)


@settings(max_examples=40, deadline=None)
@given(one_by_one=events, in_bulk=events)
def test_recorded_events_read_back_as_columns(one_by_one, in_bulk):
    recorder = Recorder()
    indices = [recorder.record(track, name, start, start + length, nbytes, op, tile)
               for track, name, start, length, nbytes, op, tile in one_by_one]
    assert indices == list(range(len(one_by_one)))
    if in_bulk:
        recorder.record_columns(*(np.array(column, dtype=np.int64) for column in _fields(in_bulk)))
    everything = one_by_one + in_bulk
    columns = recorder.columns()
    assert len(recorder) == len(everything)
    expected = _fields(everything) if everything else [[]] * 7
    for key, values in zip(("track", "name", "start_ps", "end_ps", "bytes", "op", "tile"), expected):
        assert columns[key].tolist() == list(values), key
    assert [recorder.end_ps(i) for i in range(len(everything))] == list(expected[3])


def _fields(rows):
    track, name, start, length, nbytes, op, tile = map(list, zip(*rows))
    return track, name, start, [s + n for s, n in zip(start, length)], nbytes, op, tile


def test_the_rows_grow_past_their_first_size_and_chunks_cover_every_event():
    recorder = Recorder()
    assert recorder.rows.capacity == FIRST_ROWS
    n = 3 * FIRST_ROWS + 5
    for i in range(n):
        recorder.record(i % 7, i % 3, 1000 * i, 1000 * i + 10, i, -1, i)
    assert len(recorder) == n and len(recorder.rows.buffer) == recorder.rows.capacity * ROW_BYTES == 4 * FIRST_ROWS * ROW_BYTES  # doubled twice
    starts = np.concatenate([columns["start_ps"] for _, columns in recorder.chunks(size=1000)])
    assert starts.tolist() == [1000 * i for i in range(n)]
    assert recorder.columns(n - 2)["tile"].tolist() == [n - 2, n - 1]


def test_the_hot_loops_packed_puts_grow_the_rows_as_records_do():
    """What the core's pipes do: put rows whose lane and label they packed once; past the capacity
    the buffer grows, also after rows appended in bulk (which leave it exactly full)."""
    recorder = Recorder()
    rows = recorder.rows
    assert [rows.put(pack(3, 0), pack(5, index), index, index + 1, 32) for index in range(FIRST_ROWS + 1)] == list(range(FIRST_ROWS + 1))
    assert recorder.columns(FIRST_ROWS - 1)["tile"].tolist() == [FIRST_ROWS - 1, FIRST_ROWS]
    assert recorder.columns(FIRST_ROWS)["track"].tolist() == [3] and recorder.columns(FIRST_ROWS)["op"].tolist() == [0]
    empty = Recorder()
    empty.record_columns(*([] for _ in range(7)))
    assert empty.rows.put(pack(1, -1), pack(2, -1), 3, 4, 5) == 0 and empty.table().tolist() == [[pack(1, -1), pack(2, -1), 3, 4, 5]]


def test_reading_between_records_leaves_the_buffer_free_to_grow():
    recorder = Recorder()
    capacity = recorder.rows.capacity
    for i in range(capacity):
        recorder.record(0, 0, i, i, 0, -1, -1)
    held = recorder.columns()  # copies: holding them does not pin the buffer
    recorder.record(0, 0, capacity, capacity, 0, -1, -1)
    assert len(held["start_ps"]) == capacity and len(recorder) == capacity + 1


def test_the_table_is_read_only():
    recorder = Recorder()
    recorder.record(1, 2, 3, 4, 5, 6, 7)
    table = recorder.table()
    assert table.tolist() == [[pack(1, 6), pack(2, 7), 3, 4, 5]]
    with pytest.raises(ValueError):
        table[0, 2] = 0


def test_a_flow_must_join_recorded_events():
    recorder = Recorder()
    recorder.record(0, 0, 0, 1, 0, -1, -1)
    with pytest.raises(UsageError, match="not a recorded event index"):
        recorder.flow(0, 1, "data")
    for bad in (-1, 0.0, "0", None):
        with pytest.raises(UsageError, match=f"its from event {bad!r} is not a recorded event index"):
            recorder.flow(bad, 0, "data")
    assert recorder.flow_count == 0


def test_flows_take_python_and_numpy_indices_alike():
    recorder = Recorder()
    for _ in range(3):
        recorder.record(0, 0, 0, 1, 0, -1, -1)
    recorder.flow(0, 2, "data")
    recorder.flow(np.int64(1), np.int32(2), "ready")
    recorder.flow(True, 2, "data")  # a bool is an int: event 1
    flows = recorder.flows()
    assert flows["from"].tolist() == [0, 1, 1] and flows["to"].tolist() == [2, 2, 2]
    assert [recorder.names[i] for i in flows["name"].tolist()] == ["data", "ready", "data"]


def test_a_flow_of_ids_records_what_flow_records_by_name():
    by_name, by_id = Recorder(), Recorder()
    for recorder in (by_name, by_id):
        for _ in range(3):
            recorder.record(0, 0, 0, 1, 0, -1, -1)
    by_name.flow(0, 2, "ready")
    by_name.flow(1, 2, "dispatch", released_at=500)
    by_id.flow_of_ids(0, 2, by_id.name_id("ready"))
    by_id.flow_of_ids(1, 2, by_id.name_id("dispatch"), 500)
    assert by_id.names == by_name.names
    assert {k: v.tolist() for k, v in by_id.flows().items()} == {k: v.tolist() for k, v in by_name.flows().items()}
    assert list(by_id.flow_released) == list(by_name.flow_released) == [-1, 500]  # -1: released at the source's end


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_flag_flows_pair_each_wait_with_the_set_it_consumed_first_in_first_out(data):
    """Random interleavings of set_flag / wait_flag events of two flags on two cores, each core
    running several kernels (the same op twice on one of them, flags left unconsumed at a run's
    end): the recorder's pairs are the ones a FIFO queue per (run, flag) gives, in wait order."""
    recorder = Recorder()
    names = {(kind, key): recorder.name_id(f"{kind} #{key}", waits=kind == "wait") for kind in ("set", "wait") for key in (0, 1)}
    for (kind, key), name_id in names.items():
        recorder.flag_name(name_id, kind == "set", key)
    tracks = {(core, pipe): recorder.track(0, f"aiv{core}", pipe) for core in (0, 1) for pipe in ("MTE2", "VECTOR")}
    runs = {core: data.draw(st.integers(1, 3), label=f"runs on core {core}") for core in (0, 1)}
    queues, expected, current = {}, [], {}
    pending = [(core, run) for core in (0, 1) for run in range(runs[core])]
    while pending:  # interleave the two cores' runs; a core's runs in order
        heads = sorted({core for core, _ in pending})
        core = data.draw(st.sampled_from(heads))
        run = min(r for c, r in pending if c == core)
        if current.get(core) != run:
            recorder.kernel_run(0, f"aiv{core}")
            current[core] = run
        key = data.draw(st.integers(0, 1))
        queue = queues.setdefault((core, run, key), [])
        if queue and data.draw(st.booleans()):
            expected.append((queue.pop(0), recorder.record(tracks[(core, "VECTOR")], names[("wait", key)], 0, 1, 0, 0, -1)))
        else:
            queue.append(recorder.record(tracks[(core, "MTE2")], names[("set", key)], 0, 1, 0, 0, -1))
        if data.draw(st.integers(0, 5)) == 0:
            pending.remove((core, run))
    sets, waits = recorder.flag_flow_pairs()
    assert list(zip(sets.tolist(), waits.tolist())) == expected
    assert recorder.flag_flow_count == len(expected)


def test_flags_recorded_outside_any_kernel_run_pair_per_core():
    """Flag events of cores that never marked a run (e.g. recorded in bulk) still pair first in,
    first out per core and flag, and never with another core's."""
    recorder = Recorder()
    set_id, wait_id = recorder.name_id("set #0"), recorder.name_id("wait #0", waits=True)
    recorder.flag_name(set_id, True, 0)
    recorder.flag_name(wait_id, False, 0)
    a, b = recorder.track(0, "aiv0", "MTE2"), recorder.track(0, "aiv1", "MTE2")
    recorder.kernel_run(0, "aiv2")  # another core's run: must not swallow the others
    events = [recorder.record(track, name, 0, 1, 0, -1, -1) for track, name in
              ((a, set_id), (b, set_id), (b, wait_id), (a, set_id), (a, wait_id), (a, wait_id))]
    sets, waits = recorder.flag_flow_pairs()
    assert list(zip(sets.tolist(), waits.tolist())) == [(events[1], events[2]), (events[0], events[4]), (events[3], events[5])]
