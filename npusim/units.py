"""Physical quantities as people write them in configs (``1.6 TB/s``, ``192 KiB``, ``1.5 us``).

The simulator's one time base is the integer **picosecond**; sizes are bytes; rates are converted to
bytes per picosecond only at the edge of the engine. A quantity written in cycles (``1400 cycles``,
``32 B/cycle``) keeps its cycles until a clock converts it.
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass

PS_PER_SECOND = 10**12
PS_PER_US = 10**6

ENGINE_MAX = 2**53
"""Largest number of picoseconds or bytes the engine takes (about 2.5 hours, 8 PiB): its flow model
computes times and sizes in float64, which holds whole numbers exactly only up to 2**53. Rates in
bytes per picosecond and clock periods in picoseconds must lie in [1 / ENGINE_MAX, ENGINE_MAX]."""


class Dimension(enum.Enum):
    """What a quantity measures, with the units it accepts in the error messages."""

    SIZE = "size"
    RATE = "rate"
    TIME = "time"
    FREQUENCY = "frequency"


_SIZE_UNITS = {
    "B": 1, "bytes": 1, "byte": 1,
    "KB": 10**3, "MB": 10**6, "GB": 10**9, "TB": 10**12,
    "KiB": 2**10, "MiB": 2**20, "GiB": 2**30, "TiB": 2**40,
}
_BIT_UNITS = {"b": 1, "Kb": 10**3, "Mb": 10**6, "Gb": 10**9, "Tb": 10**12}
_TIME_UNITS = {"ps": 1e-12, "ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0}
_CYCLE_WORDS = ("cycle", "cycles")
_FREQ_UNITS = {"Hz": 1.0, "kHz": 1e3, "KHz": 1e3, "MHz": 1e6, "GHz": 1e9}

EXAMPLES = {
    Dimension.SIZE: "'192 KiB', '64 GiB', '32 B'",
    Dimension.RATE: "'1.6 TB/s', '28 GB/s', '200 Gb/s', '32 B/cycle'",
    Dimension.TIME: "'1.5 us', '800 ns', '1400 cycles'",
    Dimension.FREQUENCY: "'1.85 GHz', '50 MHz'",
}

_ENGINE_UNITS = {Dimension.TIME: "ps", Dimension.SIZE: "bytes", Dimension.RATE: "bytes/ps", Dimension.FREQUENCY: "ps per cycle"}
_LEAST = {Dimension.TIME: "1 ps", Dimension.SIZE: "1 B"}

_NUMBER_AND_UNIT = re.compile(r"^\s*([-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?)\s*(\S.*?)?\s*$")


@dataclass(frozen=True)
class Quantity:
    """A parsed quantity: ``value`` in the base unit of its dimension (bytes, bytes/s, seconds, Hz),
    or in cycles (``per_cycle``) for times and rates written against the clock; ``text`` is how it was
    written."""

    value: float
    dimension: Dimension
    text: str
    per_cycle: bool = False

    @property
    def bytes(self) -> int:
        """A size in bytes."""
        assert self.dimension is Dimension.SIZE
        return int(round(self.value))

    @property
    def hz(self) -> float:
        """A frequency in hertz."""
        assert self.dimension is Dimension.FREQUENCY
        return self.value

    def to_ps(self, clock_hz: float) -> int:
        """A time in integer picoseconds (cycles converted with ``clock_hz``)."""
        assert self.dimension is Dimension.TIME
        return int(round(self._in_engine_units(clock_hz)))

    def bytes_per_ps(self, clock_hz: float) -> float:
        """A rate in bytes per picosecond (per-cycle rates converted with ``clock_hz``)."""
        assert self.dimension is Dimension.RATE
        return self._in_engine_units(clock_hz)

    def engine_problem(self, clock_hz: float) -> str | None:
        """Why the engine cannot take this quantity once converted to its units (whole picoseconds,
        whole bytes, bytes per picosecond, picoseconds per cycle; cycles with ``clock_hz``), with
        what to do; None when it can. A time or a size must round to 1 .. ENGINE_MAX; a rate or a
        clock period must lie in [1 / ENGINE_MAX, ENGINE_MAX]."""
        converted = self._in_engine_units(clock_hz)
        unit = _ENGINE_UNITS[self.dimension]
        written = f"{self.text!r} at the {clock_hz:.6g} Hz clock" if self.per_cycle else repr(self.text)
        smaller, larger = ("a higher", "a lower") if self.dimension is Dimension.FREQUENCY else ("a smaller", "a larger")
        if not converted <= ENGINE_MAX:  # also infinity (an overflow, e.g. 1e400) and NaN
            return f"{written} is more than 2**53 {unit}, the most the engine's float64 arithmetic holds exactly; give {smaller} value"
        if self.dimension in (Dimension.TIME, Dimension.SIZE) and round(converted) < 1:
            return f"{written} is {converted:.3g} {unit}, which rounds to 0 in the engine's whole {unit}; give at least {_LEAST[self.dimension]}"
        if converted < 1 / ENGINE_MAX:
            return f"{written} is {converted:.3g} {unit}, less than 2**-53 {unit}, the least the engine holds; give {larger} value"
        return None

    def _in_engine_units(self, clock_hz: float) -> float:
        """This quantity in the unit the engine works in (:data:`_ENGINE_UNITS`), before any rounding."""
        if self.dimension is Dimension.TIME:
            seconds = self.value / clock_hz if self.per_cycle else self.value
            return seconds * PS_PER_SECOND
        if self.dimension is Dimension.RATE:
            per_second = self.value * clock_hz if self.per_cycle else self.value
            return per_second / PS_PER_SECOND
        if self.dimension is Dimension.FREQUENCY:
            return PS_PER_SECOND / self.value
        return self.value  # a size: bytes

    def bytes_per_second(self, clock_hz: float) -> float:
        """A rate in bytes per second."""
        return self.bytes_per_ps(clock_hz) * PS_PER_SECOND

    def scaled(self, factor: float) -> Quantity:
        """The same quantity times ``factor``, written in the unit it was written in (``28 GB/s``
        x 2 is ``56 GB/s``), so its text is itself a valid config value (what-if overrides)."""
        return Quantity(self.value * factor, self.dimension, scale_text(self.text, factor), self.per_cycle)

    def __str__(self) -> str:
        return self.text


def parse_quantity(raw: object, dimension: Dimension) -> Quantity:
    """Parse ``raw`` (e.g. ``'28 GB/s'``) as a quantity of ``dimension``.

    Raises ValueError with a message that says what was expected and gives examples; a bare number is
    refused (``missing unit``), as is a unit of another dimension and a value that is not positive.
    """
    examples = EXAMPLES[dimension]
    if isinstance(raw, bool) or raw is None:
        raise ValueError(f"expected a {dimension.value} with a unit, e.g. {examples}; got {raw!r}")
    if isinstance(raw, (int, float)):
        raise ValueError(f"missing unit: {raw!r} needs a {dimension.value} unit, e.g. {examples}")
    if not isinstance(raw, str):
        raise ValueError(f"expected a {dimension.value} with a unit, e.g. {examples}; got {raw!r}")
    match = _NUMBER_AND_UNIT.match(raw)
    if not match:
        raise ValueError(f"cannot read {raw!r} as a {dimension.value}; write a number and a unit, e.g. {examples}")
    number, unit = float(match.group(1)), (match.group(2) or "")
    if not unit:
        raise ValueError(f"missing unit: {raw!r} needs a {dimension.value} unit, e.g. {examples}")
    quantity = _convert(number, unit, dimension, raw.strip())
    if quantity is None:
        found = _dimension_of(unit)
        what = f"a {found.value} unit" if found else "not a unit npusim knows"
        raise ValueError(f"wrong unit: {unit!r} in {raw!r} is {what}; a {dimension.value} is needed, e.g. {examples}")
    if not quantity.value > 0:
        raise ValueError(f"{raw!r} must be positive")
    return quantity


def scale_text(text: str, factor: float) -> str:
    """A quantity as written (``'1.6 TB/s'``, ``'2 cycles'``) times ``factor``, in the same unit
    (``'3.2 TB/s'``, ``'1 cycles'``)."""
    match = _NUMBER_AND_UNIT.match(text)
    if not match or not match.group(2):
        raise ValueError(f"cannot scale {text!r}: it is not a number followed by a unit")
    return f"{float(match.group(1)) * factor:.12g} {match.group(2)}"


def _convert(number: float, unit: str, dimension: Dimension, text: str) -> Quantity | None:
    if dimension is Dimension.SIZE and unit in _SIZE_UNITS:
        return Quantity(number * _SIZE_UNITS[unit], dimension, text)
    if dimension is Dimension.FREQUENCY and unit in _FREQ_UNITS:
        return Quantity(number * _FREQ_UNITS[unit], dimension, text)
    if dimension is Dimension.TIME:
        if unit in _TIME_UNITS:
            return Quantity(number * _TIME_UNITS[unit], dimension, text)
        if unit in _CYCLE_WORDS:
            return Quantity(number, dimension, text, per_cycle=True)
    if dimension is Dimension.RATE:
        if unit.endswith("ps") and unit[:-2] in _BIT_UNITS:  # 200 Gbps
            return Quantity(number * _BIT_UNITS[unit[:-2]] / 8, dimension, text)
        amount, _, per = unit.partition("/")
        if per == "s" and amount in _SIZE_UNITS:
            return Quantity(number * _SIZE_UNITS[amount], dimension, text)
        if per == "s" and amount in _BIT_UNITS:
            return Quantity(number * _BIT_UNITS[amount] / 8, dimension, text)
        if per in _CYCLE_WORDS and amount in _SIZE_UNITS:
            return Quantity(number * _SIZE_UNITS[amount], dimension, text, per_cycle=True)
    return None


def _dimension_of(unit: str) -> Dimension | None:
    for dimension in Dimension:
        if _convert(1.0, unit, dimension, unit) is not None:
            return dimension
    return None


def format_bytes(n: float) -> str:
    """``n`` bytes in binary units for tables (``1.50 MiB``)."""
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if abs(n) >= scale:
            return f"{n / scale:.2f} {unit}"
    return f"{int(n)} B"


def format_time_ps(ps: float) -> str:
    """A duration in picoseconds in the most readable of ns / us / ms."""
    if ps >= 10**9:
        return f"{ps / 10**9:.3f} ms"
    if ps >= 10**6:
        return f"{ps / 10**6:.3f} us"
    return f"{ps / 10**3:.1f} ns"


def format_rate(bytes_per_second: float) -> str:
    """A bandwidth in GB/s (decimal, as vendors quote them)."""
    return f"{bytes_per_second / 1e9:.2f} GB/s"
