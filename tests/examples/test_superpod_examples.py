"""examples/moe_dispatch.py and examples/hierarchical_allgather.py: small runs move the right data,
the parameters shape the run, and sizes the config cannot hold are refused."""

from pathlib import Path

import pytest

import npusim
from npusim.errors import UsageError
from npusim.trace.summary import records

ROOT = Path(__file__).parents[2]
DISPATCH = ROOT / "examples" / "moe_dispatch.py"
HIERARCHICAL = ROOT / "examples" / "hierarchical_allgather.py"


def test_a_small_dispatch_delivers_every_chunk_in_each_group(capsys):
    params = {"ep": 2, "groups": 3, "tokens": 4, "hidden": 64}
    result = npusim.simulate("a2", DISPATCH, params=params)  # the workload checks each output against the chunks sent
    assert result.status == "ok" and result.params == {**params, "tile_tokens": 4}
    assert "3 EP groups of 2 PEs" in capsys.readouterr().out


def test_dispatch_groups_are_separate_launches_on_their_own_dies():
    result = npusim.simulate("a2", DISPATCH, params={"ep": 4, "groups": 2, "tokens": 2, "hidden": 64}, data=False)
    dies = {row["die"] for row in records(result.summary["pipes"])}
    assert dies == set(range(8))
    one = npusim.simulate("a2", DISPATCH, params={"ep": 4, "groups": 1, "tokens": 2, "hidden": 64}, data=False)
    assert {row["die"] for row in records(one.summary["pipes"])} == set(range(4))


def test_a_dispatch_larger_than_the_config_is_refused():
    with pytest.raises(UsageError, match=r"ep=4 x groups=3 PEs must be at least 1 and at most the 8 dies"):
        npusim.simulate("a2", DISPATCH, params={"ep": 4, "groups": 3}, data=False)


def test_a_small_hierarchical_all_gather_gathers_across_node_groups(capsys):
    params = {"n_pes": 8, "local": 4, "rows": 2, "cols": 64}
    result = npusim.simulate("a3", HIERARCHICAL, params=params)  # the workload checks the outputs against numpy
    assert result.status == "ok" and "2 node groups of 4 PEs" in capsys.readouterr().out


def test_each_pe_forwards_its_node_block_to_every_other_node_group():
    for local, groups in ((8, 1), (2, 4)):
        result = npusim.simulate("a3", HIERARCHICAL, params={"n_pes": 8, "local": local, "rows": 2, "cols": 64}, data=False)
        ops = result.summary["ops"]["name"]
        # a put and a signal to each PE of its group; a forward (a store run by the block's load) and a signal to each other group
        assert ops.count("shmem_put") == 8 * local and ops.count("shmem_signal") == 8 * local + 8 * (groups - 1)


def test_a_pe_count_not_a_multiple_of_the_node_group_is_refused():
    with pytest.raises(UsageError, match=r"n_pes=6 must be a multiple of local=4"):
        npusim.simulate("a3", HIERARCHICAL, params={"n_pes": 6, "local": 4}, data=False)
