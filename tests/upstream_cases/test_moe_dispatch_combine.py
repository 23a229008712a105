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


def expected_control_reads(inputs, rank: int, ranks: int, experts: int) -> int:
    """The device-valued scalars rank ``rank``'s kernels read, as the program is written: in the
    dispatch, the mask per pair, the expert id and its position per active pair, the received
    total, two starts per local expert, each block's count and each non-empty block's start; in
    the combine, the loop bound, each received row's (sender, token, k) and the mask per token."""
    batch, topk = inputs[0][1].shape
    local = experts // ranks
    active = int(inputs[rank][3].sum())
    received = [int((ids[mask == 1] == expert).sum()) for _, ids, _, mask in inputs for expert in range(rank * local, (rank + 1) * local)]
    dispatch = batch * topk + 2 * active * topk + 1 + 2 * local + local * ranks + sum(n > 0 for n in received)
    return dispatch + 1 + 3 * sum(received) + batch


def test_the_control_aicpu_reads_each_device_valued_scalar_of_the_program_once():
    """The example's time is the control-flow AICPU's reads (docs/moe.md): each is one the program
    makes, none is added, and a rank's reads are on its own die's control lane."""
    ranks, experts = 2, 8
    with npusim.session("a3") as session:
        inputs, _, _, _ = moe.run(ranks, 4, 64, experts, 2, 3, seed=2)
        recorder = session.system.recorder
        tracks = recorder.columns()["track"]
    control_dies = [track.die for track in recorder.tracks if track.lane == "CONTROL"]
    reads = [sum(recorder.tracks[t].lane == "CONTROL" and recorder.tracks[t].die == die for t in tracks.tolist()) for die in control_dies]
    assert control_dies == [0, 1]
    assert reads == [expected_control_reads(inputs, rank, ranks, experts) for rank in range(ranks)]
