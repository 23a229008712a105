"""The annotated YAML of a resolved config: each value written as YAML writes it, whatever was written before."""

import yaml
from hypothesis import given
from hypothesis import strategies as st

from npusim.config.annotated import _scalar

SCALARS = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), st.text(max_size=12))


@given(st.lists(SCALARS, max_size=8))
def test_every_scalar_is_written_as_yaml_writes_it_alone(values):
    for value in values:  # in one process, after the others: equal values of other kinds are written apart
        assert _scalar(value) == yaml.safe_dump(value, default_flow_style=True, allow_unicode=True, sort_keys=False,
                                                width=1 << 30).removesuffix("\n").removesuffix("\n...")


def test_equal_values_of_other_kinds_are_written_apart():
    assert [_scalar(value) for value in (1, True, 1.0, 0.0, -0.0, "1")] == ["1", "true", "1.0", "0.0", "-0.0", "'1'"]
