"""The happens-before race detector on hand-made accesses."""

from hypothesis import given
from hypothesis import strategies as st

from npusim.kernels.shmem.races import READ, WRITE, Access, RaceDetector


def access(kind, bit, ancestors=0, intervals=((0, 64),), start=0, memory=(0, 0), who=None):
    """An access of the tile op of bit ``bit``, ordered after the tile ops of ``ancestors``'s bits."""
    return Access(kind, who or f"{kind} {bit}", memory, "memory M", list(intervals), bit, ancestors | 1 << bit, start)


def detector():
    found = []
    return RaceDetector(lambda message, reader, writer, racing: found.append((reader.who, writer.who, message))), found


def test_an_unordered_read_and_write_of_the_same_bytes_race_once_both_ended():
    races, found = detector()
    write, read = access(WRITE, 0, start=10), access(READ, 1, start=20)
    races.record(write)
    races.record(read)
    races.ended(read, 30)
    assert found == []  # the write has not ended yet
    races.ended(write, 40)
    assert [(r, w) for r, w, _ in found] == [("read 1", "write 0")]
    assert found[0][2] == ("data race on memory M, bytes 0..64: read 1 reads them (0.000-0.000 us) while write 0 writes them "
                           "(0.000-0.000 us), and neither is ordered before the other; order them with shmem_signal -> "
                           "shmem_wait_until -> pred (or a shmem_barrier_all)")


def test_ordered_accesses_do_not_race_in_either_direction():
    races, found = detector()
    write = access(WRITE, 0)
    read_after = access(READ, 1, ancestors=1 << 0)
    races.record(write)
    races.record(read_after)
    read_before = access(READ, 2)
    write_after = access(WRITE, 3, ancestors=1 << 2)
    for a in (read_before, write_after):
        races.record(a)
    for a in (write, read_after, read_before, write_after):
        races.ended(a, 100)
    assert sorted((r, w) for r, w, _ in found) == [("read 1", "write 3"), ("read 2", "write 0")]  # the unordered pairs only


def test_disjoint_bytes_other_memories_same_kinds_and_one_tile_op_never_race():
    races, found = detector()
    for a in (access(WRITE, 0, intervals=((0, 32),)), access(READ, 1, intervals=((32, 64),)), access(WRITE, 2, intervals=((0, 32),)),
              access(READ, 3, memory=(1, 0)), access(WRITE, 4, memory=(2, 0)), access(READ, 4, memory=(2, 0))):
        races.record(a)
        races.ended(a, 5)
    assert [(r, w) for r, w, _ in found] == []


@st.composite
def _accesses(draw):
    """Accesses of two memories in start order: kinds, tile op bits, ancestors, byte ranges."""
    made = []
    for index in range(draw(st.integers(1, 24))):
        ranges = sorted(draw(st.lists(st.tuples(st.integers(0, 256), st.integers(1, 64)), min_size=1, max_size=3)))
        bit = draw(st.integers(0, 12))
        ancestors = draw(st.integers(0, (1 << 13) - 1)) & ~(1 << bit)
        made.append(access(draw(st.sampled_from([READ, WRITE])), bit, ancestors, [(lo, lo + n) for lo, n in ranges], index,
                           memory=(draw(st.integers(0, 1)), 0), who=f"a{index}"))
    return made


@given(_accesses())
def test_each_access_finds_the_earlier_ones_it_races_with_in_start_order(accesses):
    """The index by first byte finds what a scan of every earlier access of the other kind finds."""
    races, _ = detector()
    for position, new in enumerate(accesses):
        races.record(new)
        expected = [other for other in accesses[:position]
                    if other.memory == new.memory and other.kind != new.kind and other.bit != new.bit
                    and not 1 << other.bit & new.clock and not 1 << new.bit & other.clock and other.overlap(new) is not None]
        assert [a.who for a in new.pending] == [a.who for a in expected]
