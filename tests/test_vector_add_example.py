"""examples/vector_add.py's parameters: every combination still adds correctly; double buffering
pays; a tile that does not divide the size is refused."""

from pathlib import Path

import pytest

import npusim
from npusim.errors import UsageError

DEMO = Path(__file__).resolve().parents[1] / "examples" / "vector_add.py"
SMALL = {"elements": 8 * 4 * 4096, "tile": 4096, "cores": 8}


@pytest.mark.parametrize("double_buffer", ["true", "false"])
def test_the_sum_is_right_with_and_without_double_buffering(double_buffer):
    result = npusim.simulate("a2", DEMO, params={**SMALL, "double_buffer": double_buffer})  # the workload checks z against numpy
    assert result.status == "ok" and result.params == {**SMALL, "double_buffer": double_buffer == "true"}


def test_double_buffering_overlaps_loads_with_work():
    times = {flag: npusim.simulate("a2", DEMO, params={**SMALL, "double_buffer": flag}, data=False).simulated_ps for flag in (True, False)}
    assert times[True] < times[False]


def test_uneven_shares_and_bad_tiles():
    assert npusim.simulate("a2", DEMO, params={**SMALL, "cores": 5}).status == "ok"  # 32 tiles over 5 cores
    with pytest.raises(UsageError, match="32768 elements do not split into tiles of 5000 elements"):
        npusim.simulate("a2", DEMO, params={"elements": 32768, "tile": 5000}, data=False)
