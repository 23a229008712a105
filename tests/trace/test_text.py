"""Lines made a column at a time give byte for byte what Python's own formatting gives."""

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from npusim.trace import text
from npusim.trace.text import FIXED3_LIMIT, Lines, Texts, fixed3, squeezed

INT64 = st.integers(-(2**59), 2**59)  # times 7 still an int64
FINITE = st.floats(allow_nan=False, allow_infinity=False, min_value=-FIXED3_LIMIT, max_value=FIXED3_LIMIT, exclude_min=True, exclude_max=True)


def fixed3_text(values: list[float]) -> list[str]:
    parts = fixed3(np.array(values, dtype=np.float64))
    assert parts is not None
    negative, whole, decimals = parts
    return Lines(len(values)).text("-", negative).integer(whole).fraction(decimals, 3).joined("\n").tobytes().decode().split("\n")


@settings(suppress_health_check=[HealthCheck.too_slow], deadline=None)  # drawing floats is slow on a busy machine, not wrong
@given(st.lists(FINITE, min_size=1, max_size=20))
def test_fixed3_rounds_as_python_formats_three_decimals(values):
    assert fixed3_text(values) == [f"{value:.3f}" for value in values]


def test_fixed3_rounds_exact_ties_to_even_and_keeps_the_sign_of_zero():
    ties = [k / 2000 for k in range(1, 4000, 2)] + [k / 16 for k in range(64)] + [0.0005, 0.0015, 2.0**-11, 2.0**-10, 5e-324]
    values = ties + [-value for value in ties] + [0.0, -0.0, -1e-9, 2.0**52 - 1]
    assert fixed3_text(values) == [f"{value:.3f}" for value in values]


def test_fixed3_leaves_what_it_cannot_write_exactly_to_the_caller():
    for value in (np.nan, np.inf, -np.inf, FIXED3_LIMIT, -FIXED3_LIMIT):
        assert fixed3(np.array([1.5, value])) is None


@given(st.lists(st.tuples(INT64, st.booleans(), st.integers(0, 999)), max_size=40))
def test_integers_digits_and_parts_on_some_rows_only(rows):
    values, where, small = (np.array(column, dtype=np.int64) for column in zip(*rows)) if rows else (np.zeros(0, np.int64),) * 3
    where = where.astype(bool)
    lines = Lines(len(rows)).text("[").integer(values).text(",").integer(values * 7, where).text(";", ~where).fraction(small, 3).text("]")
    assert lines.joined(", ").tobytes().decode() == ", ".join(f"[{v},{v * 7 if w else ''}{'' if w else ';'}.{s:03d}]" for v, w, s in rows)


@given(st.lists(st.integers(0, 3), max_size=40), st.lists(st.booleans(), min_size=40, max_size=40))
def test_choices_pick_their_text_row_by_row(index, where):
    texts = ["", "abc", '"q"', "x" * 33]
    picked = np.array(index, dtype=np.int64)
    kept = np.array(where[: len(index)], dtype=bool)
    text = Lines(len(index)).choice(Texts(texts), picked).text("|").choice(Texts(texts), picked, kept).joined(";")
    assert text.tobytes().decode() == ";".join(f"{texts[i]}|{texts[i] if w else ''}" for i, w in zip(index, kept.tolist()))


@given(st.integers(1, 12), st.lists(st.lists(st.integers(0, 11), max_size=15), max_size=3))
def test_inserted_rows_follow_the_row_they_are_after_in_order(rows, inserted):
    own = Lines(rows).text("row ").integer(np.arange(rows))
    sets = []
    for number, after in enumerate(inserted):
        after = sorted(a % rows for a in after)
        sets.append((Lines(len(after)).text(f"set {number} after ").integer(np.array(after, dtype=np.int64)).text(" " * number), np.array(after, dtype=np.int64)))
    expected = []
    for row in range(rows):
        expected.append(f"row {row}")
        expected += [f"set {number} after {row}" + " " * number for number, (_, after) in enumerate(sets) for a in after.tolist() if a == row]
    assert own.joined(",\n", sets).tobytes().decode() == ",\n".join(expected)


def test_no_rows_no_text_and_an_empty_table_is_never_picked():
    assert Lines(0).text("x").integer(np.zeros(0, np.int64)).joined(",\n") == b""
    assert Lines(2).text("a").choice(Texts([]), np.zeros(2, np.int64), np.zeros(2, bool)).joined(",") == b"a,a"


def test_a_text_holding_nul_is_refused():
    # NUL marks the bytes a row does not have: a text with one would lose it
    with pytest.raises(ValueError, match="NUL"):
        Lines(1).text("a\0b")
    with pytest.raises(ValueError, match="NUL"):
        Texts(["ok", "\0"])


@given(st.lists(st.tuples(st.integers(0, 10**6 - 1), st.booleans()), max_size=40))
def test_fractions_of_three_and_six_places_and_zero_left_out_on_request(rows):
    values, where = (np.array(column, dtype=np.int64) for column in zip(*rows)) if rows else (np.zeros(0, np.int64),) * 2
    where = where.astype(bool)
    lines = Lines(len(rows)).text("<").fraction(values, 6).text("|").fraction(values % 1000, 3, where, zero=False).text(">")
    assert lines.joined(";").tobytes().decode() == ";".join(f"<.{v:06d}|{f'.{v % 1000:03d}' if w and v % 1000 else ''}>" for v, w in rows)


@pytest.mark.parametrize("dense", [0.0, 1.01])  # every matrix squeezed by bytes.replace; none
@given(matrix=st.integers(0, 600).flatmap(lambda rows: hnp.arrays(np.uint8, (rows, 7), elements=st.sampled_from([0, 48, 65, 123]))))
def test_a_matrix_squeezed_is_its_bytes_without_nul_by_either_way(dense, matrix):
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(text, "DENSE", dense)
        assert bytes(squeezed(matrix)) == matrix.tobytes().replace(b"\0", b"")
