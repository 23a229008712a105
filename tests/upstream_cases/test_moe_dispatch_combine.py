"""The MoE dispatch + combine of hicann/pypto's test_moe_distributed_dispatch_combine.py (its
algorithm; kernels and references in examples/moe_dispatch_combine.py), at small shapes and on
several rank counts, checked against numpy."""

import moe_dispatch_combine as moe
import pytest

import npusim
from npusim.errors import UsageError


@pytest.mark.parametrize("ranks, batch, experts, topk, active", [
    (2, 4, 8, 2, 3),    # the framework's 2-rank layout, one token inactive
    (4, 3, 8, 4, 3),    # every token active, half the experts per token
    (8, 2, 16, 3, 1),   # most experts receive nothing
])
def test_dispatch_and_combine_match_numpy(ranks, batch, experts, topk, active):
    with npusim.session("a3"):
        inputs, dispatched, combined, (t_dispatch, t_combine) = moe.run(ranks, batch, 64, experts, topk, active, seed=ranks)
        assert moe.check(inputs, dispatched, combined, ranks, experts) == []
        assert t_dispatch > 0 and t_combine > 0


def test_check_reports_a_wrong_count():
    with npusim.session("a3"):
        inputs, dispatched, combined, _ = moe.run(2, 4, 64, 8, 2, 4)
    expand, assist, tokens, count = dispatched[0]
    problems = moe.check(inputs, [(expand, assist, tokens, count + 1), dispatched[1]], combined, 2, 8)
    assert len(problems) == 1 and problems[0].startswith("rank 0: recv_count")


def test_without_data_the_device_valued_branch_is_an_error_naming_the_op():
    with npusim.session("a3", data=False), pytest.raises(UsageError, match=r"GetTensorData.*--no-data.*run it with data"):
        moe.run(2, 4, 64, 8, 2, 3)
