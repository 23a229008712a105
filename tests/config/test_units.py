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


# -- what the engine can take ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "dimension"),
    [("1 ps", Dimension.TIME), ("1 B", Dimension.SIZE), ("8192 TiB", Dimension.SIZE), ("9000 s", Dimension.TIME),
     ("200 B/s", Dimension.RATE), ("1e6 TB/s", Dimension.RATE), ("1 Hz", Dimension.FREQUENCY), ("1000 GHz", Dimension.FREQUENCY)],
)
def test_the_engine_takes_quantities_in_its_range(text, dimension):
    assert parse_quantity(text, dimension).engine_problem(GHZ) is None


@pytest.mark.parametrize(
    ("text", "dimension", "problem"),
    [("0.1 ps", Dimension.TIME, "'0.1 ps' is 0.1 ps, which rounds to 0 in the engine's whole ps; give at least 1 ps"),
     ("0.4 cycles", Dimension.TIME, "'0.4 cycles' at the 1e+12 Hz clock is 0.4 ps, which rounds to 0 in the engine's whole ps; give at least 1 ps"),
     ("0.1 B", Dimension.SIZE, "'0.1 B' is 0.1 bytes, which rounds to 0 in the engine's whole bytes; give at least 1 B"),
     ("8193 TiB", Dimension.SIZE, "'8193 TiB' is more than 2**53 bytes"),
     ("1e308 TB", Dimension.SIZE, "'1e308 TB' is more than 2**53 bytes"),
     ("10000 s", Dimension.TIME, "'10000 s' is more than 2**53 ps"),
     ("1e400 TB/s", Dimension.RATE, "'1e400 TB/s' is more than 2**53 bytes/ps, the most the engine's float64 arithmetic holds exactly; give a smaller value"),
     ("1e-5 B/s", Dimension.RATE, "'1e-5 B/s' is 1e-17 bytes/ps, less than 2**-53 bytes/ps, the least the engine holds; give a larger value"),
     ("1e-300 Hz", Dimension.FREQUENCY, "'1e-300 Hz' is more than 2**53 ps per cycle, the most the engine's float64 arithmetic holds exactly; give a higher value"),
     ("1e30 Hz", Dimension.FREQUENCY, "'1e30 Hz' is 1e-18 ps per cycle, less than 2**-53 ps per cycle, the least the engine holds; give a lower value")],
)
def test_the_engine_refuses_what_rounds_to_zero_overflows_or_is_out_of_range(text, dimension, problem):
    assert parse_quantity(text, dimension).engine_problem(1e12).startswith(problem)


def test_the_range_is_checked_on_the_values_the_engine_gets():
    """A per-cycle quantity is in range at one clock and out of it at another; what is checked is the
    conversion the hardware model makes (to_ps, bytes_per_ps)."""
    quantity = parse_quantity("1 cycle", Dimension.TIME)
    assert quantity.to_ps(1e12) == 1 and quantity.engine_problem(1e12) is None
    assert quantity.to_ps(4e12) == 0 and "rounds to 0" in quantity.engine_problem(4e12)
