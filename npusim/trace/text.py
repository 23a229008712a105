"""Lines of ASCII text made a whole column at a time with numpy, byte for byte what Python's own
formatting gives (``str(int)``, ``f"{n:03d}"``, ``f"{x:.3f}"``): the trace writer's events,
flows and counters are hundreds of thousands of lines that differ only in a few numbers.

:class:`Lines` lays every row out in one byte matrix, each part (a text, a text chosen from a
:class:`Texts` table, a decimal integer, zero-padded digits) in its own columns of the widest
width it takes, marks the bytes each row really has, and keeps those in row order: a row absent
from a part, or shorter in it, simply has fewer bytes there.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

_POWERS = 10 ** np.arange(19, dtype=np.int64)  # 1, 10, ... 10**18: every power of ten an int64 holds
_DIGIT_ZERO = ord("0")
FIXED3_LIMIT = 2.0**52  # fixed3 is exact below this magnitude (larger values are left to Python)


class Texts:
    """A table of texts (ASCII) a part of :class:`Lines` picks from row by row."""

    def __init__(self, texts: Sequence[str]) -> None:
        encoded = [text.encode("ascii") for text in texts] or [b""]  # a row even for no texts: rows that pick none index it
        self.width = max(map(len, encoded), default=0)
        self.lengths = np.array([len(text) for text in encoded], dtype=np.int64)
        self.codes = np.zeros((len(encoded), self.width), dtype=np.uint8)
        for row, text in enumerate(encoded):
            self.codes[row, : len(text)] = np.frombuffer(text, dtype=np.uint8)
        self.kept = np.arange(self.width) < self.lengths[:, None]  # the bytes each text has


class Lines:
    """The text of ``rows`` rows, each the same sequence of parts; ``where`` (a boolean per row)
    keeps a part on some rows only. Build with the part methods in order, then take the
    :meth:`text`."""

    def __init__(self, rows: int) -> None:
        self.rows = rows
        self._parts: list[tuple[np.ndarray, np.ndarray | None]] = []  # (codes (rows, w) or (w,), kept bytes (rows, w) or (rows, 1) or None: all)

    def _add(self, codes: np.ndarray, kept: np.ndarray | None, where: np.ndarray | None) -> Lines:
        if where is not None:
            kept = where[:, None] if kept is None else kept & where[:, None]
        self._parts.append((codes, kept))
        return self

    def text(self, text: str, where: np.ndarray | None = None) -> Lines:
        """The same ``text`` on every row (of ``where``)."""
        return self._add(np.frombuffer(text.encode("ascii"), dtype=np.uint8), None, where)

    def choice(self, texts: Texts, index: np.ndarray, where: np.ndarray | None = None) -> Lines:
        """``texts[index[row]]`` on each row (of ``where``; ``index`` is ignored elsewhere)."""
        if where is not None:
            index = np.where(where, index, 0)
        return self._add(texts.codes[index], texts.kept[index], where)

    def integer(self, values: np.ndarray, where: np.ndarray | None = None) -> Lines:
        """Each value as ``str(int)`` does (a ``-`` for a negative one), on each row (of ``where``)."""
        values = np.asarray(values, dtype=np.int64)
        if where is not None:
            values = np.where(where, values, 0)
        negative = values < 0
        if negative.any():
            self.text("-", negative)
            values = np.abs(values)
        digits = np.maximum(np.searchsorted(_POWERS, values, side="right"), 1)
        width = int(digits.max(initial=1))
        return self._add(_digit_codes(values, width), np.arange(width) >= (width - digits)[:, None], where)

    def digits(self, values: np.ndarray, width: int, where: np.ndarray | None = None, prefix: str = "") -> Lines:
        """Each value (0 <= value < 10**width) zero-padded to ``width`` digits, as
        ``f"{value:0{width}d}"`` does, after ``prefix``, on each row (of ``where``)."""
        codes = _digit_codes(np.asarray(values, dtype=np.int64), width, len(prefix))
        codes[:, : len(prefix)] = np.frombuffer(prefix.encode("ascii"), dtype=np.uint8)
        return self._add(codes, None, where)

    def layout(self) -> tuple[np.ndarray, np.ndarray]:
        """Every row's bytes in one matrix and which of them it has (a boolean per byte)."""
        widths = [codes.shape[-1] for codes, _ in self._parts]
        matrix = np.empty((self.rows, sum(widths)), dtype=np.uint8)
        kept = np.ones((self.rows, sum(widths)), dtype=bool)
        column = 0
        for (codes, present), width in zip(self._parts, widths):
            matrix[:, column : column + width] = codes
            if present is not None:
                kept[:, column : column + width] = present
            column += width
        return matrix, kept

    def text_of_rows(self) -> tuple[str, np.ndarray]:
        """The rows' text, one after the other, and where each row ends in it."""
        matrix, kept = self.layout()
        return str(matrix[kept].data, "ascii"), np.cumsum(kept.sum(axis=1))

    def joined(self, separator: str) -> str:
        """The rows' text with ``separator`` between two rows."""
        if not self.rows:
            return ""
        self.text(separator)
        matrix, kept = self.layout()
        return str(matrix[kept].data, "ascii")[: -len(separator) or None]


def _digit_codes(values: np.ndarray, width: int, before: int = 0) -> np.ndarray:
    """The last ``width`` decimal digits of each value (>= 0) as ASCII codes, a row per value,
    after ``before`` columns left for the caller."""
    codes = np.empty((len(values), before + width), dtype=np.uint8)
    for column in range(before + width - 1, before - 1, -1):  # a scalar divisor each time: numpy divides fast by one
        values, codes[:, column] = np.divmod(values, 10)
    codes[:, before:] += _DIGIT_ZERO
    return codes


def fixed3(values: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """Each float64 as ``f"{value:.3f}"`` writes it, in parts: its sign (True: ``-``, as for
    -0.0), its whole part and its three decimals, rounded as Python rounds (the exact binary value
    to the nearest thousandth, a tie to even); None if a value is not finite or not below
    ``FIXED3_LIMIT`` in magnitude (the caller formats those with Python)."""
    magnitude = np.abs(values)
    if not bool(np.all(magnitude < FIXED3_LIMIT)):  # also False for a NaN
        return None
    fraction, exponent = np.frexp(magnitude)  # magnitude = fraction * 2**exponent, 0.5 <= fraction < 1 (or 0)
    scaled = (fraction * 2.0**53).astype(np.uint64) * np.uint64(1000)  # magnitude * 1000 * 2**(53 - exponent), exactly: < 2**63
    shift = 53 - exponent.astype(np.int64)  # >= 1, as magnitude < 2**52
    bounded = np.minimum(shift, 63).astype(np.uint64)
    quotient = scaled >> bounded
    remainder = scaled - (quotient << bounded)
    half = np.uint64(1) << (bounded - np.uint64(1))
    quotient += (remainder > half) | ((remainder == half) & (quotient & np.uint64(1) == 1))
    thousandths = np.where(shift < 64, quotient, 0).astype(np.int64)  # shifted 64 or more: below 2**63 / 2**64 = 0.5, so 0
    whole, decimals = np.divmod(thousandths, 1000)
    return np.signbit(values), whole, decimals
