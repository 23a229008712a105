"""Sweep axes: the --grid syntax (commas, quotes), checks of keys and values, the cartesian product."""

import pytest

from npusim.analysis.grid import axes_from, parse_grid_option, points_of, value_text
from npusim.errors import UsageError


def test_values_are_split_on_commas_and_trimmed():
    axis = parse_grid_option("die.hbm.bandwidth=1.6 TB/s, 3.2TB/s ,6.4 TB/s")
    assert (axis.key, axis.values, axis.is_param) == ("die.hbm.bandwidth", ("1.6 TB/s", "3.2TB/s", "6.4 TB/s"), False)


def test_a_value_holding_a_comma_is_quoted():
    axis = parse_grid_option('param.shape="8,16","32,64", 7')
    assert axis.values == ("8,16", "32,64", "7")
    assert (axis.is_param, axis.param_name) == (True, "shape")


@pytest.mark.parametrize("text, message", [
    ("die.hbm.bandwidth", "write KEY=V1,V2"),
    ("=1,2", "write KEY=V1,V2"),
    ("die..hbm=1", "not a dotted key path"),
    ("param.=1", "does not name a parameter"),
    ("param.tile size=1", "does not name a parameter"),
    ("param.tile=8,,16", "value 2 of param.tile is empty"),
    ("param.tile=8,16,8", "lists '8' more than once"),
    ('param.tile="8,16', "cannot split the values"),
    ("param.tile=", "give param.tile a list of one or more values"),
])
def test_malformed_axes_are_refused_with_the_rule(text, message):
    with pytest.raises(UsageError, match=message):
        parse_grid_option(text)


def test_a_key_given_twice_and_an_empty_grid_are_refused():
    with pytest.raises(UsageError, match="gives param.tile more than once"):
        axes_from(["param.tile=1,2", "param.tile=3"])
    with pytest.raises(UsageError, match="nothing to sweep"):
        axes_from([])
    with pytest.raises(UsageError, match="a list of one or more values"):
        axes_from({"param.tile": 8})


def test_the_product_varies_the_last_axis_fastest_and_splits_overrides_from_params():
    points = points_of(axes_from({"die.hbm.bandwidth": ["1.6 TB/s", "3.2 TB/s"], "param.tile": [8192, 16384], "shape.nodes": [1]}))
    assert [p.values for p in points] == [
        {"die.hbm.bandwidth": "1.6 TB/s", "param.tile": "8192", "shape.nodes": "1"},
        {"die.hbm.bandwidth": "1.6 TB/s", "param.tile": "16384", "shape.nodes": "1"},
        {"die.hbm.bandwidth": "3.2 TB/s", "param.tile": "8192", "shape.nodes": "1"},
        {"die.hbm.bandwidth": "3.2 TB/s", "param.tile": "16384", "shape.nodes": "1"},
    ]
    assert points[1].overrides == ("die.hbm.bandwidth=1.6 TB/s", "shape.nodes=1")
    assert points[1].params == {"tile": 16384}


def test_values_are_written_as_the_config_loader_reads_them():
    assert [value_text(v) for v in ("3.2 TB/s", 4, 2.5, True, None)] == ["3.2 TB/s", "4", "2.5", "true", "null"]
