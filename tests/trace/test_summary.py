"""The summary's grouping of events by key (the distinct keys, each event's row and the counts, as
np.unique gives them) and its columnar tables."""

import numpy as np
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from npusim.trace.summary import _distinct, records, table_length, table_of


@given(hnp.arrays(st.sampled_from([np.int32, np.int64]), st.integers(0, 300),
                  elements=st.integers(0, 40) | st.integers(-2, 2**31 - 1) | st.integers(0, 1000)))
def test_distinct_keys_are_np_uniques(keys):
    unique, inverse, counts = _distinct(keys)
    expected = np.unique(keys, return_inverse=True, return_counts=True)
    assert unique.dtype == keys.dtype and all(np.array_equal(got, want) for got, want in zip((unique, inverse, counts), expected))


VALUES = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=4)


@given(st.lists(st.text(max_size=3), unique=True, min_size=1, max_size=5).flatmap(
    lambda names: st.lists(st.fixed_dictionaries({name: VALUES for name in names}), max_size=8)))
def test_a_table_of_rows_gives_those_rows_back(rows):
    table = table_of(rows)
    assert records(table) == rows and table_length(table) == len(rows)
    assert all(len(column) == len(rows) for column in table.values())
    assert table_of(records(table)) == table


def test_a_row_without_a_column_holds_none_there_and_no_rows_is_no_columns():
    assert table_of([{"a": 1}, {"b": 2}]) == {"a": [1, None], "b": [None, 2]}
    assert table_of([]) == {} and records({}) == [] and table_length({}) == 0
