"""The L2 as a cache (npusim.hw.cache): hits and misses by line, least recently used eviction,
write-back of dirty lines, a warm start, and the fills and write-backs it puts on the HBM."""

from hypothesis import given
from hypothesis import strategies as st

from npusim.engine.flow import FlowNetwork, Resource
from npusim.engine.loop import Environment
from npusim.hw.cache import L2Cache, L2Tally
from npusim.hw.memory import Allocation

LINE = 512
FETCH_PS = 81_000  # a fetch from HBM reaches the L2 this long after a miss


def cache(capacity_lines: int = 1024, initial_hit_rate: float = 0.0):
    env = Environment()
    network = FlowNetwork(env)
    hbm = network.add_resource(Resource("hbm", 1.0, kind="hbm"))
    return env, hbm, L2Cache(0, LINE, capacity_lines * LINE, initial_hit_rate, network, hbm, FETCH_PS)


def allocation(address: int = 0, size: int = 1 << 20) -> Allocation:
    return Allocation(0, address, size, "x", None)


def read(l2: L2Cache, gm: Allocation, offset: int, length: int, stride: int = 0, count: int = 1, tally=None, at_ps: int = 0):
    """(lines that hit, lines) of a read."""
    return l2.access(gm, offset, length, stride or length, count, False, at_ps, tally, length * count)[:2]


def test_a_reread_hits_and_a_first_read_misses():
    _, _, l2 = cache()
    gm = allocation()
    assert read(l2, gm, 0, 4 * LINE) == (0.0, 4)
    assert read(l2, gm, 0, 4 * LINE) == (4.0, 4)
    assert read(l2, gm, 2 * LINE, 4 * LINE) == (2.0, 4)  # half of it was read before
    assert read(l2, gm, 100, 10) == (1.0, 1)  # any byte of a resident line hits
    assert (l2.tally.read_hit, l2.tally.read_miss) == (7.0, 6.0)


def test_a_strided_tile_is_its_rows_lines():
    """A tile of rows (a burst per row, rows a pitch apart) touches the lines of each row only: a
    tile beside it in the same lines hits (a miss fetched whole lines), one in other lines misses."""
    _, _, l2 = cache()
    gm = allocation()
    pitch = 24 * LINE  # 12288 B: a 128 x 6144 fp16 matrix's rows
    assert read(l2, gm, 0, 128, pitch, 16) == (0.0, 16)  # 16 rows of 128 B: one line each
    assert read(l2, gm, 128, 128, pitch, 16) == (16.0, 16)  # the next 64 columns: the same lines
    assert read(l2, gm, LINE, 128, pitch, 16) == (0.0, 16)  # the next line of each row
    assert read(l2, gm, 0, 2 * LINE, pitch, 16) == (32.0, 32)


def test_rows_that_do_not_start_on_lines_touch_each_of_their_lines():
    _, _, l2 = cache()
    gm = allocation()
    pitch = 2816  # 1408 fp16: 5.5 lines a row
    hit, lines = read(l2, gm, 0, LINE, pitch, 8)
    expected = {line for row in range(8) for line in range(row * pitch // LINE, (row * pitch + LINE - 1) // LINE + 1)}
    assert (hit, lines) == (0.0, len(expected))
    assert read(l2, gm, 0, LINE, pitch, 8) == (float(len(expected)), len(expected))


def test_a_line_an_earlier_miss_is_fetching_hits_once_it_has_arrived():
    """Two reads of a line close together: the first misses; the second hits (the HBM carries the
    line once), but its data is there only when the first one's fetch is."""
    _, _, l2 = cache()
    gm = allocation()
    assert l2.access(gm, 0, 2 * LINE, 2 * LINE, 1, False, 1000, None, 2 * LINE) == (0.0, 2, 0)
    assert l2.access(gm, 0, 2 * LINE, 2 * LINE, 1, False, 5000, None, 2 * LINE) == (2.0, 2, 1000 + FETCH_PS)
    assert l2.access(gm, LINE, 2 * LINE, 2 * LINE, 1, False, 9000, None, 2 * LINE) == (1.0, 2, 1000 + FETCH_PS)  # one line hits
    assert l2.access(gm, 2 * LINE, LINE, LINE, 1, False, 9500, None, LINE) == (1.0, 1, 9000 + FETCH_PS)  # the line the last one fetched


def test_the_least_recently_used_lines_go_first():
    _, _, l2 = cache(capacity_lines=8)
    gm = allocation()
    a, b, c = (read(l2, gm, i * 4 * LINE, 4 * LINE) for i in range(3))  # 12 lines through an 8-line L2: a is evicted
    assert l2.resident == 8
    assert read(l2, gm, 8 * LINE, 4 * LINE) == (4.0, 4)  # c stayed
    assert read(l2, gm, 4 * LINE, 4 * LINE) == (4.0, 4)  # b stayed, and is now the most recent
    assert read(l2, gm, 0, 4 * LINE) == (0.0, 4)  # a missed, and evicts c (used before b)
    assert read(l2, gm, 4 * LINE, 4 * LINE) == (4.0, 4)
    assert read(l2, gm, 8 * LINE, 4 * LINE) == (0.0, 4)


def test_dirty_lines_evicted_are_written_back_to_hbm():
    env, hbm, l2 = cache(capacity_lines=4)
    gm = allocation()
    tally = L2Tally()
    assert l2.access(gm, 0, 4 * LINE, 4 * LINE, 1, True, 0, tally, 4 * LINE)[:2] == (0.0, 4)  # written: allocated dirty
    assert l2.access(gm, 0, 2 * LINE, 2 * LINE, 1, True, 0, tally, 2 * LINE)[:2] == (2.0, 2)  # a write hit
    read(l2, gm, 8 * LINE, 2 * LINE, tally=tally)  # evicts the two lines written longest ago (the first entry's, not re-written)
    assert l2.tally.written_back == tally.written_back == 2  # counted to the accessor that evicted them too
    read(l2, gm, 16 * LINE, 4 * LINE)  # evicts the rest: two dirty, two clean
    assert l2.tally.written_back == 4
    env.run()
    assert hbm.bytes_moved == 4 * LINE  # the write-backs, on HBM (reads of whole lines fetch nothing more)
    assert (tally.write_hit, tally.write_miss) == (2.0, 4.0)


def test_a_read_that_misses_part_of_a_line_fetches_the_whole_line_from_hbm():
    env, hbm, l2 = cache()
    read(l2, allocation(), 0, 128, 24 * LINE, 4)  # 4 lines, 128 B of each asked for
    env.run()
    assert hbm.bytes_moved == 4 * (LINE - 128)  # the rest of the lines; the asked-for bytes flow with the request


def test_a_warm_start_hits_on_first_access_then_behaves_as_a_cache():
    _, _, l2 = cache(capacity_lines=4, initial_hit_rate=1.0)
    gm = allocation()
    assert read(l2, gm, 0, 4 * LINE) == (4.0, 4)
    assert read(l2, gm, 4 * LINE, 4 * LINE) == (4.0, 4)  # first touch: hits too, and evicts the first four
    assert read(l2, gm, 0, 4 * LINE) == (0.0, 4)  # evicted: a miss now
    _, _, half = cache(initial_hit_rate=0.5)
    assert read(half, gm, 0, 4 * LINE) == (2.0, 4)


def test_an_address_known_only_with_data_misses_and_changes_nothing():
    _, _, l2 = cache()
    assert l2.unknown(3 * LINE + 1, False, 0, None) == (0.0, 4, 0)
    assert l2.resident == 0 and l2.tally.read_miss == 4


def resident_lines(l2: L2Cache, gm: Allocation) -> set[int]:
    """The lines of ``gm`` resident in ``l2`` (counted from its first line), from its runs."""
    return {line for run in l2._lines[gm].runs if run.stamp for line in range(run.start, run.end)}


def reference_lru(accesses, capacity):
    """Least recently used by line (ties among the lines of one access broken by line): what is resident."""
    last: dict[int, int] = {}
    for tick, lines in enumerate(accesses):
        for line in lines:
            last[line] = tick
        while len(last) > capacity:
            del last[min(last, key=lambda line: (last[line], line))]
    return set(last)


@given(st.lists(st.tuples(st.integers(0, 40), st.integers(1, 6), st.integers(1, 9), st.integers(1, 3)), min_size=1, max_size=40),
       st.integers(4, 24))
def test_eviction_is_least_recently_used_by_line_up_to_one_access(accesses, capacity):
    """What stays resident is what a least-recently-used cache of lines keeps, less at most one
    access's lines (eviction drops whole accesses' lines); and it never exceeds the capacity."""
    _, _, l2 = cache(capacity_lines=capacity)
    gm = allocation()
    touched = []
    for first, width, step, rows in accesses:
        read(l2, gm, first * LINE, width * LINE, (width + step) * LINE, rows)
        touched.append({first + row * (width + step) + i for row in range(rows) for i in range(width)})
    resident = resident_lines(l2, gm)
    expected = reference_lru(touched, capacity)
    assert resident <= expected
    assert len(expected) - len(resident) < max(len(t) for t in touched)
    assert len(resident) == l2.resident <= capacity


def test_a_working_set_beyond_the_l2_writes_back_on_hbm_in_a_run():
    """An AIV writes 256 KiB through a 64 KiB L2, then reads the first 16 KiB again: the dirty lines
    evicted are written back (HBM carries them), and the re-read misses (it was evicted)."""
    import numpy as np

    import npusim
    from npusim import isa

    chunk = 16 * 1024
    with npusim.session("a2", overrides=["die.l2.size=64 KiB"], data=False) as s:
        out = npusim.empty(16 * chunk // 2, np.float16)
        k = isa.Kernel("k", die=0)
        p = k.aiv(0)
        ub = p.alloc(chunk // 2, np.float16)
        for i in range(16):
            p.copy(isa.gm(out, i * chunk // 2), ub)
        p.set_flag("MTE3", "MTE2", 0)
        p.wait_flag("MTE3", "MTE2", 0)
        p.copy(ub, isa.gm(out))
        k.launch()
    die = s.system.die(0)
    tally = die.cache.tally
    assert (tally.write_hit, tally.write_miss) == (0.0, 16 * 32.0)
    assert (tally.read_hit, tally.read_miss) == (0.0, 32.0)
    assert tally.written_back == 16 * 32 - 128 + 32  # all but the 128 lines resident at the end, and the re-read evicts 32 more
    assert die.hbm.bytes_moved == (tally.written_back + 32) * 512  # the write-backs and the re-read's miss


class PerLine:
    """The L2 of npusim.hw.cache modelled line by line, as simply as it reads: each resident line's
    stamp (the tick of the access that last touched it), dirty lines, each line's last fetch (ps,
    kept after eviction: a write allocates a line without fetching it), lines touched yet (a warm
    start), and the queue of accesses that eviction pops (every access's lines, from the start)."""

    def __init__(self, capacity: int, initial_hit_rate: float):
        self.capacity, self.initial_hit_rate = capacity, initial_hit_rate
        self.tick = self.resident = self.written_back = 0
        self.stamp: dict[tuple[int, int], int] = {}  # (allocation, line) of each resident line: its tick
        self.dirty: set[tuple[int, int]] = set()
        self.filled: dict[tuple[int, int], int] = {}
        self.seen: set[tuple[int, int]] = set()
        self.fetched_until: dict[int, int] = {}
        self.queue: list[tuple[int, list[tuple[int, int]]]] = []

    def access(self, gm: int, lines: list[int], write: bool, at_ps: int) -> tuple[float, int, int]:
        """(lines that hit, lines, when the resident ones are in L2 (ps), if one is still on its way; else 0)."""
        self.tick += 1
        keys = [(gm, line) for line in lines]
        held = [key for key in keys if key in self.stamp]
        hit = float(len(held))
        if self.initial_hit_rate:
            hit += self.initial_hit_rate * sum(key not in self.seen for key in keys)
            self.seen.update(keys)
        arrived = 0
        if not write:
            if held and at_ps < self.fetched_until.get(gm, 0):
                arrived = max(self.filled.get(key, 0) for key in held)
            if len(held) < len(keys):
                for key in keys:
                    if key not in self.stamp:
                        self.filled[key] = at_ps + FETCH_PS
                self.fetched_until[gm] = max(self.fetched_until.get(gm, 0), at_ps + FETCH_PS)
        for key in keys:
            self.stamp[key] = self.tick
            if write:
                self.dirty.add(key)
        self.queue.append((self.tick, keys))
        self.resident += len(keys) - len(held)
        while self.resident > self.capacity and self.queue:
            tick, old = self.queue.pop(0)
            for key in old:
                if self.stamp.get(key) == tick:
                    del self.stamp[key]
                    self.resident -= 1
                    if key in self.dirty:
                        self.dirty.discard(key)
                        self.written_back += 1
        return hit, len(keys), arrived


def lines_of(offset: int, length: int, stride: int, count: int) -> list[int]:
    """The lines that hold a byte of ``count`` runs of ``length`` bytes ``stride`` apart from byte ``offset``."""
    return sorted({byte // LINE for row in range(count) for byte in range(offset + row * stride, offset + row * stride + length)})


SIZES = (20 * LINE, 33 * LINE - 100)  # two allocations, the second not whole lines


@st.composite
def accesses(draw):
    """(allocation, offset, length, stride, count, write, delay to reach the L2, ps the clock moves first)."""
    gm = draw(st.integers(0, len(SIZES) - 1))
    count = draw(st.integers(1, 4))
    length = draw(st.sampled_from([1, 100, LINE, LINE + 1, 2 * LINE, 3 * LINE - 7]))
    stride = draw(st.sampled_from([length, LINE, 2 * LINE, 3 * LINE, 4 * LINE, 700, 1, length // 2 or 1]))
    reach = stride * (count - 1) + length
    if reach > SIZES[gm]:
        count, reach = 1, length
    offset = draw(st.integers(0, SIZES[gm] - reach))
    return gm, offset, length, stride, count, draw(st.booleans()), draw(st.integers(0, 3 * FETCH_PS)), draw(st.sampled_from([0, 0, 1000, FETCH_PS]))


@given(st.lists(accesses(), min_size=1, max_size=60), st.integers(2, 16), st.sampled_from([0.0, 0.5, 1.0]))
def test_the_runs_of_lines_behave_as_a_cache_of_single_lines(steps, capacity, initial_hit_rate):
    """The L2's runs of lines give, access after access, what a model of single lines gives: hits,
    lines, when the hits are in L2 (as its users read it: no earlier than the access), the lines
    resident and the lines written back; and they stay runs: ascending, from line 0, neighbours in
    different states."""
    env, _, l2 = cache(capacity, initial_hit_rate)
    reference = PerLine(capacity, initial_hit_rate)
    address = 0
    allocations = []
    for size in SIZES:
        allocations.append(Allocation(0, address, size, "x", None))
        address += -(-size // LINE) * LINE + 7 * LINE
    for gm, offset, length, stride, count, write, delay, advance in steps:
        if advance:
            env.run(until=env.now + advance)
        at_ps = env.now + delay
        hit, lines, arrived = l2.access(allocations[gm], offset, length, stride, count, write, at_ps, None, length * count)
        expected_hit, expected_lines, expected_arrived = reference.access(gm, lines_of(offset, length, stride, count), write, at_ps)
        assert (hit, lines, max(arrived, at_ps)) == (expected_hit, expected_lines, max(expected_arrived, at_ps))
        assert l2.resident == reference.resident
        assert l2.tally.written_back == reference.written_back
        for index, gm_allocation in enumerate(allocations):
            if gm_allocation in l2._lines:
                assert resident_lines(l2, gm_allocation) == {line for (of, line) in reference.stamp if of == index}
                runs = l2._lines[gm_allocation]
                bounds = [run.start for run in runs.runs] + [runs.count]  # the runs tile the lines, in order, none empty
                assert bounds[0] == 0 and all(a < b for a, b in zip(bounds, bounds[1:])) and all(run.end == bounds[k + 1] for k, run in enumerate(runs.runs))
                states = [(run.stamp, run.flags, run.filled) for run in runs.runs]
                assert all(a != b for a, b in zip(states, states[1:]))
