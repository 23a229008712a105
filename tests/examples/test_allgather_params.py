"""examples/shmem_allgather.py's workload parameters: a small all-gather still gathers correctly,
the parameters are recorded and change the run, and a PE count the config cannot hold is refused."""

from pathlib import Path

import pytest

import npusim
from npusim.errors import UsageError

ROOT = Path(__file__).parents[2]
ALLGATHER = ROOT / "examples" / "shmem_allgather.py"
SMALL = {"n_pes": 2, "rows": 8, "cols": 64, "tile_rows": 4}


def test_a_small_all_gather_matches_and_records_its_parameters(capsys):
    result = npusim.simulate("a2", ALLGATHER, params=SMALL)  # the workload checks the outputs against numpy
    assert result.status == "ok" and result.params == SMALL
    printed = capsys.readouterr().out
    assert "2 PEs x 8x64 fp16 (1 KiB each), tiles [4, 64]" in printed and "outputs match the expected all-gather: yes" in printed


def test_the_tile_rows_change_the_run():
    events = {rows: npusim.simulate("a2", ALLGATHER, params={**SMALL, "tile_rows": rows}, data=False).summary["events"] for rows in (2, 8)}
    assert events[2] > events[8]  # a quarter of the rows per tile: more tile ops, more instructions


@pytest.mark.parametrize("n_pes", [0, 9])
def test_a_pe_count_outside_the_dies_is_refused(n_pes):
    with pytest.raises(UsageError, match=rf"n_pes={n_pes} must be between 1 and the 8 dies of the config 'a2'.*--param n_pes=N"):
        npusim.simulate("a2", ALLGATHER, params={**SMALL, "n_pes": n_pes}, data=False)
