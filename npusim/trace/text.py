"""Lines of ASCII text made a whole column at a time with numpy, byte for byte what Python's own
formatting gives (``str(int)``, ``f"{n:03d}"``, ``f"{x:.3f}"``): the trace writer's events,
flows and counters are hundreds of thousands of lines that differ only in a few numbers.

:class:`Lines` lays every row out in one byte matrix, each part (a text, a text chosen from a
:class:`Texts` table, a decimal integer, zero-padded digits) in its own columns of the widest
width it takes. A byte a row does not have there (a row absent from a part, or shorter in it) is
NUL, which no text holds, and the rows' text is the matrix's other bytes in row order. Decimal
digits are looked up four at a time (one division by 10,000 per four digits). The text comes out
as ASCII bytes, ready for a binary file.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

_POWERS = 10 ** np.arange(19, dtype=np.int64)  # 1, 10, ... 10**18: every power of ten an int64 holds
_GROUP = 4  # digits looked up at a time
_GROUP_LIMIT = 10**_GROUP


def _words(codes: np.ndarray) -> np.ndarray:
    """Rows of four byte codes as little-endian words (a word's bytes, in order, are its row)."""
    words: np.ndarray = np.ascontiguousarray(codes, dtype=np.uint8).view("<u4")[:, 0]
    return words


_DIGITS = (np.arange(_GROUP_LIMIT)[:, None] // 10 ** np.arange(_GROUP - 1, -1, -1)) % 10  # the 4 digits of 0 ... 9999
_LEADING = np.cumsum(_DIGITS, axis=1) == 0  # the zeros before a group's first digit (all four for 0)
# "0000" ... "9999" (the digits of a group with more digits before it), then the same without their
# leading zeros (the first group of a number; those bytes NUL)
_GROUPS = np.concatenate([_words(_DIGITS + ord("0")), _words(np.where(_LEADING, 0, _DIGITS + ord("0")))])
_ZERO = _words(np.array([[0, 0, 0, ord("0")]]))[0]  # the number 0 as a first group: a single "0"
# ".000" ... ".999" and "000" ... "999" (then a NUL), each as a word; row _BLANK of both is all NUL (no text)
_DOT_THOUSANDS = np.append(_words(np.column_stack([np.full(1000, ord(".")), _DIGITS[:1000, 1:] + ord("0")])), np.uint32(0))
_THOUSANDS = np.append(_words(np.column_stack([_DIGITS[:1000, 1:] + ord("0"), np.zeros(1000, np.int64)])), np.uint32(0))
_BLANK = 1000
FIXED3_LIMIT = 2.0**52  # fixed3 is exact below this magnitude (larger values are left to Python)


def _codes(encoded: bytes) -> np.ndarray:
    """The codes of ASCII text (NUL is the matrix's "no byte here": no text holds it)."""
    if b"\0" in encoded:
        raise ValueError(f"{encoded!r}: a text of Lines cannot hold NUL")
    return np.frombuffer(encoded, dtype=np.uint8)


class Texts:
    """A table of texts (ASCII) a part of :class:`Lines` picks from row by row; its last row
    (``blank``) is no text, what rows absent from the part pick."""

    def __init__(self, texts: Sequence[str]) -> None:
        encoded = [text.encode("ascii") for text in texts]
        lengths = np.array([len(text) for text in encoded], dtype=np.int64)
        self.width = int(lengths.max(initial=0))
        self.blank = len(encoded)
        self.codes = np.zeros((len(encoded) + 1, self.width), dtype=np.uint8)  # NUL after each text
        self.codes[: len(encoded)][np.arange(self.width) < lengths[:, None]] = _codes(b"".join(encoded))


class Lines:
    """The text of ``rows`` rows, each the same sequence of parts; ``where`` (a boolean per row)
    keeps a part on some rows only. Build with the part methods in order, then take the
    :meth:`joined` text."""

    def __init__(self, rows: int) -> None:
        self.rows = rows
        self._parts: list[np.ndarray] = []  # the codes of each part, (rows, w) or (w,) (the same on every row); NUL: no byte

    def _add(self, codes: np.ndarray, where: np.ndarray | None) -> Lines:
        if where is not None:
            codes = np.where(where[:, None], codes, np.uint8(0))
        self._parts.append(codes)
        return self

    def text(self, text: str, where: np.ndarray | None = None) -> Lines:
        """The same ``text`` on every row (of ``where``)."""
        if where is not None and not where.any():  # on no row: no bytes
            return self
        return self._add(_codes(text.encode("ascii")), where)

    def choice(self, texts: Texts, index: np.ndarray, where: np.ndarray | None = None) -> Lines:
        """``texts[index[row]]`` on each row (of ``where``; ``index`` is ignored elsewhere)."""
        if where is not None and not where.any():
            return self
        if where is not None:
            index = np.where(where, index, texts.blank)
        self._parts.append(texts.codes[index])
        return self

    def integer(self, values: np.ndarray, where: np.ndarray | None = None) -> Lines:
        """Each value as ``str(int)`` does (a ``-`` for a negative one), on each row (of ``where``)."""
        if where is not None and not where.any():
            return self
        values = np.asarray(values, dtype=np.int64)
        if where is not None:
            values = np.where(where, values, 0)
        negative = values < 0
        if negative.any():
            self.text("-", negative)
            values = np.abs(values)
        width = max(int(np.searchsorted(_POWERS, values.max(initial=0), side="right")), 1)
        groups = -(-width // _GROUP)
        codes = np.empty((len(values), groups), dtype="<u4")
        zero, rest = values == 0, values
        for group in range(groups - 1, -1, -1):  # the last group first; a scalar divisor each time: numpy divides fast by one
            quotient = rest // _GROUP_LIMIT
            codes[:, group] = _GROUPS[rest - quotient * _GROUP_LIMIT + (quotient == 0) * _GROUP_LIMIT]
            rest = quotient
        codes[zero, -1] = _ZERO
        return self._add(codes.view(np.uint8)[:, groups * _GROUP - width :], where)

    def fraction(self, values: np.ndarray, places: int, where: np.ndarray | None = None, *, zero: bool = True) -> Lines:
        """Each value (0 <= value < 10**places; ``places`` a multiple of 3) after a ``.`` as
        ``f".{value:0{places}d}"`` writes it, on each row (of ``where``; with ``zero=False`` not on
        rows whose value is 0): looked up three digits at a time."""
        if where is not None and not where.any():
            return self
        values = np.asarray(values, dtype=np.int64)
        absent = None if where is None else ~where
        if not zero:
            absent = values == 0 if absent is None else absent | (values == 0)
        groups = []
        for _ in range(places // 3):
            values, group = np.divmod(values, 1000)
            groups.append(group)
        groups.reverse()
        codes = np.empty((len(values), len(groups)), dtype="<u4")
        for column, (group, table) in enumerate(zip(groups, [_DOT_THOUSANDS] + [_THOUSANDS] * (len(groups) - 1))):
            codes[:, column] = table[group if absent is None else np.where(absent, _BLANK, group)]
        self._parts.append(codes.view(np.uint8))
        return self

    def layout(self) -> np.ndarray:
        """Every row's bytes in one matrix, NUL where a row has none."""
        widths = [codes.shape[-1] for codes in self._parts]
        matrix = np.empty((self.rows, sum(widths)), dtype=np.uint8)
        column = 0
        for codes, width in zip(self._parts, widths):
            matrix[:, column : column + width] = codes
            column += width
        return matrix

    def joined(self, separator: str, inserted: Sequence[tuple[Lines, np.ndarray]] = ()) -> memoryview:
        """The rows' text (ASCII bytes, a view of the laid-out bytes) with ``separator`` between two
        rows and, for each ``(lines, after)`` of ``inserted``, row ``k`` of ``lines`` after row
        ``after[k]`` of these (``after`` ascending; rows inserted after the same row come in the
        order of ``inserted``, then in their own): all laid out in one matrix, compressed once."""
        inserted = [(lines, after) for lines, after in inserted if lines.rows]
        rows = self.rows + sum(lines.rows for lines, _ in inserted)
        if not rows:
            return memoryview(b"")
        own = self.text(separator).layout()
        if not inserted:
            return squeezed(own)[: -len(separator) or None]
        extras = [lines.text(separator).layout() for lines, _ in inserted]
        after = np.concatenate([after for _, after in inserted])
        order = np.argsort(after, kind="stable")
        ordered = after[order]
        before = np.bincount(after, minlength=self.rows)  # rows inserted after each row
        own_rows = np.arange(self.rows) + np.cumsum(before) - before
        extra_rows = np.empty(len(after), dtype=np.int64)
        extra_rows[order] = own_rows[ordered] + 1 + np.arange(len(after)) - np.searchsorted(ordered, ordered)
        matrix = np.zeros((rows, max(codes.shape[1] for codes in (own, *extras))), dtype=np.uint8)  # NUL after the narrower rows
        matrix[own_rows, : own.shape[1]] = own
        first = 0
        for extra in extras:
            matrix[extra_rows[first : first + len(extra)], : extra.shape[1]] = extra
            first += len(extra)
        return squeezed(matrix)[: -len(separator) or None]


SAMPLE_ROWS = 256  # rows of a matrix looked at (spread over it) to tell how much of it is NUL
DENSE = 0.98  # a matrix at least this much text (not NUL) is squeezed by bytes.replace (measured: ~1.7x faster on the rate counters, 98.5-99.9% text; numpy's mask ~4-5x faster on the events and flows, 56-81%)


def squeezed(matrix: np.ndarray) -> memoryview:
    """The bytes of ``matrix`` in row order without its NULs: by deleting them from its bytes
    when it is nearly all text (``SAMPLE_ROWS`` rows spread over it at least ``DENSE``), else
    with a mask. The same bytes either way."""
    sample = matrix[:: max(1, len(matrix) // SAMPLE_ROWS)]
    if sample.size and np.count_nonzero(sample) >= DENSE * sample.size:
        return memoryview(matrix.tobytes().replace(b"\0", b""))
    return memoryview(matrix[matrix != 0])


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
