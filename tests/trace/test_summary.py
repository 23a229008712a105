"""The summary's grouping of events by key: the distinct keys, each event's row and the counts, as np.unique gives them."""

import numpy as np
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from npusim.trace.summary import _distinct


@given(hnp.arrays(st.sampled_from([np.int32, np.int64]), st.integers(0, 300),
                  elements=st.integers(0, 40) | st.integers(-2, 2**31 - 1) | st.integers(0, 1000)))
def test_distinct_keys_are_np_uniques(keys):
    unique, inverse, counts = _distinct(keys)
    expected = np.unique(keys, return_inverse=True, return_counts=True)
    assert unique.dtype == keys.dtype and all(np.array_equal(got, want) for got, want in zip((unique, inverse, counts), expected))
