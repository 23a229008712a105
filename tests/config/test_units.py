"""Quantities as configs write them: every unit family, bits, per-cycle values, and the refusals."""

import pytest

from npusim.units import Dimension, parse_quantity

GHZ = 1e9


@pytest.mark.parametrize(
    ("text", "expected_bytes"),
    [("192 KiB", 196608), ("64 GiB", 64 * 2**30), ("192 MiB", 201326592), ("32 B", 32), ("512 bytes", 512), ("1.5 MB", 1_500_000), ("2TB", 2 * 10**12)],
)
def test_sizes(text, expected_bytes):
    assert parse_quantity(text, Dimension.SIZE).bytes == expected_bytes


@pytest.mark.parametrize(
    ("text", "bytes_per_second"),
    [("1.6 TB/s", 1.6e12), ("28 GB/s", 28e9), ("28GB/s", 28e9), ("512 MiB/s", 512 * 2**20), ("200 Gb/s", 25e9), ("200 Gbps", 25e9), ("8 Mb/s", 1e6)],
)
def test_rates_per_second_and_bits(text, bytes_per_second):
    quantity = parse_quantity(text, Dimension.RATE)
    assert not quantity.per_cycle
    assert quantity.bytes_per_second(GHZ) == pytest.approx(bytes_per_second)


def test_rate_per_cycle_scales_with_the_clock():
    quantity = parse_quantity("96 B/cycle", Dimension.RATE)
    assert quantity.per_cycle
    assert quantity.bytes_per_second(1.85e9) == pytest.approx(96 * 1.85e9)
    assert quantity.bytes_per_ps(1e12) == pytest.approx(96)


@pytest.mark.parametrize(("text", "ps"), [("1.5 us", 1_500_000), ("1.5 µs", 1_500_000), ("800 ns", 800_000), ("2 ms", 2 * 10**9), ("7 ps", 7)])
def test_times(text, ps):
    assert parse_quantity(text, Dimension.TIME).to_ps(GHZ) == ps


@pytest.mark.parametrize(("text", "cycles"), [("1400 cycles", 1400), ("1 cycle", 1)])
def test_times_in_cycles_use_the_clock(text, cycles):
    quantity = parse_quantity(text, Dimension.TIME)
    assert quantity.per_cycle
    assert quantity.to_ps(GHZ) == cycles * 1000
    assert quantity.to_ps(2 * GHZ) == cycles * 500


@pytest.mark.parametrize(("text", "hz"), [("1.85 GHz", 1.85e9), ("1850 MHz", 1.85e9), ("50 MHz", 5e7), ("10 kHz", 1e4)])
def test_frequencies(text, hz):
    assert parse_quantity(text, Dimension.FREQUENCY).hz == pytest.approx(hz)


def test_text_is_kept_as_written():
    assert str(parse_quantity(" 28 GB/s ", Dimension.RATE)) == "28 GB/s"


@pytest.mark.parametrize("raw", [28, 1.5, "28", "28 "])
def test_missing_unit_is_refused_with_examples(raw):
    with pytest.raises(ValueError, match=r"missing unit: .* needs a rate unit, e\.g\. '1\.6 TB/s'"):
        parse_quantity(raw, Dimension.RATE)


@pytest.mark.parametrize(
    ("text", "dimension", "found"),
    [("3 GHz", Dimension.RATE, "a frequency unit"), ("28 GB/s", Dimension.SIZE, "a rate unit"), ("100 ns", Dimension.FREQUENCY, "a time unit"), ("3 parsecs", Dimension.TIME, "not a unit npusim knows")],
)
def test_wrong_unit_says_what_it_is_and_what_is_needed(text, dimension, found):
    with pytest.raises(ValueError, match=f"wrong unit: .*{found}; a {dimension.value} is needed, e.g."):
        parse_quantity(text, dimension)


@pytest.mark.parametrize(("text", "dimension"), [("0 B", Dimension.SIZE), ("-1 GB/s", Dimension.RATE), ("0 cycles", Dimension.TIME), ("-5 MHz", Dimension.FREQUENCY)])
def test_zero_and_negative_are_refused(text, dimension):
    with pytest.raises(ValueError, match="must be positive"):
        parse_quantity(text, dimension)


@pytest.mark.parametrize("raw", [None, True, ["28 GB/s"]])
def test_non_text_is_refused(raw):
    with pytest.raises(ValueError, match="expected a rate with a unit"):
        parse_quantity(raw, Dimension.RATE)


def test_unreadable_text_is_refused():
    with pytest.raises(ValueError, match="cannot read 'fast' as a rate"):
        parse_quantity("fast", Dimension.RATE)


@pytest.mark.parametrize(("text", "factor", "scaled"), [("1.6 TB/s", 2, "3.2 TB/s"), ("96 B/cycle", 2, "192 B/cycle"), ("2 cycles", 0.5, "1 cycles"),
                                                         ("0.5 us", 0.5, "0.25 us"), ("28GB/s", 7, "196 GB/s")])
def test_a_scaled_quantity_is_written_in_its_unit_and_parses_back(text, factor, scaled):
    dimension = Dimension.TIME if "cycles" in text or "us" in text else Dimension.RATE
    quantity = parse_quantity(text, dimension).scaled(factor)
    assert str(quantity) == scaled
    assert parse_quantity(str(quantity), dimension).value == pytest.approx(quantity.value)
