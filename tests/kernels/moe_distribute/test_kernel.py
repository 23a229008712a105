"""The MoE distribute ops' outputs against the numpy reference of their op pages, exactly."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.kernels.moe_distribute import reference
from tests.kernels.moe_distribute.harness import Case, make_inputs, run_dispatch


def check_dispatch(case: Case, got, inputs, scales) -> None:
    want = reference.dispatch(inputs, case.experts, quant=case.quant, scales=scales, shared_ranks=case.shared_ranks,
                              shared_num=case.shared_num, tokens_type=case.tokens_type)
    for rank, (out, ref) in enumerate(zip(got, want)):
        expand_x, dynamic_scales, assist, tokens, counts = out[:5]
        n = len(ref["rows"])
        assert expand_x.shape[0] >= n
        assert np.array_equal(expand_x[:n].view(np.uint8), ref["rows"].view(np.uint8)), f"rank {rank}: expand_x"
        if case.config == "a2":  # the A2 kernels return each pair's position among the rank's pairs of its expert
            check_positions(inputs[rank], assist, case)
        else:
            assert np.array_equal(assist[: 3 * n].reshape(n, 3), ref["assist"]), f"rank {rank}: assist"
        assert np.array_equal(tokens, ref["expert_token_nums"]), f"rank {rank}: expert_token_nums"
        assert np.array_equal(counts[: len(ref["ep_recv_counts"])], ref["ep_recv_counts"]), f"rank {rank}: ep_recv_counts"
        if case.quant:
            assert np.array_equal(dynamic_scales[:n].view(np.uint32), ref["scales"].view(np.uint32)), f"rank {rank}: dynamic_scales"
        if case.comm_alg == "hierarchy":  # expand_scales: each row's weight
            weights = [inputs[s].expert_scales[t, k] for s, t, k in ref["assist"]]
            assert np.array_equal(out[6][:n], np.array(weights, np.float32)), f"rank {rank}: expand_scales"


def check_positions(ri, positions, case: Case) -> None:
    """expand_idx: each valid pair's position among the rank's valid pairs of the same expert."""
    seen: dict[int, int] = {}
    for t, k, e in reference.pairs_of(ri.ids, ri.mask, case.experts):
        assert int(positions[t * case.k + k]) == seen.get(e, 0), f"expand_idx of pair ({t}, {k}) of expert {e}"
        seen[e] = seen.get(e, 0) + 1


def expert_outputs(case: Case, inputs, rng) -> list[np.ndarray]:
    """Stand-in expert outputs for the combine: new random rows in each rank's expand_x order."""
    order = reference.dispatch(inputs, case.experts, shared_ranks=case.shared_ranks, shared_num=case.shared_num)
    return [rng.standard_normal((len(o["assist"]), case.h)).astype(case.dtype) for o in order]


CASES = {
    "bf16": Case(),
    "quant": Case(quant=True),
    "quant, smooth scales": Case(quant=True, smooth=True),
    "fp16, prefix sums": Case(dtype=np.dtype(np.float16), tokens_type=0),
    "1-D mask": Case(mask="1d", seed=3),
    "2-D mask": Case(mask="2d", seed=4),
    "one expert per rank": Case(experts=4, k=2),
    "shared experts": Case(ep=4, experts=6, shared_ranks=1, quant=True, smooth=True),
    "two shared experts": Case(ep=6, experts=8, shared_ranks=2, shared_num=2, k=3),
    "zero copy const": Case(zero=1, copy=1, const=1, k=3, seed=5),
}


@pytest.mark.parametrize("name", list(CASES))
def test_dispatch_and_combine_match_the_reference(name: str, cases: dict | None = None) -> None:
    case = (cases or CASES)[name]
    inputs, scales = make_inputs(case)
    rng = np.random.default_rng(99)
    rows = expert_outputs(case, inputs, rng)
    extra = {}
    if case.copy or case.const:
        extra["ori_x"] = [ri.x for ri in inputs]
    if case.const:
        extra.update({name: [rng.standard_normal((case.const, case.h)).astype(case.dtype) for _ in inputs]
                      for name in ("const_expert_alpha_1", "const_expert_alpha_2", "const_expert_v")})
    got, combined, _ = run_dispatch(case, inputs, scales, combine_rows=rows, combine_extra=extra)
    check_dispatch(case, got, inputs, scales)
    want = reference.combine(inputs, rows, case.experts, dtype=case.dtype, zero=case.zero, copy=case.copy, const=case.const,
                             ori_x=extra.get("ori_x"), alpha1=extra.get("const_expert_alpha_1"),
                             alpha2=extra.get("const_expert_alpha_2"), v=extra.get("const_expert_v"),
                             shared_ranks=case.shared_ranks, shared_num=case.shared_num)
    for rank, (g, w) in enumerate(zip(combined, want)):
        assert np.array_equal(g.view(np.uint16), w.view(np.uint16)), f"rank {rank}: combined tokens"


A2_CASES = {name: dataclasses.replace(CASES[name], config="a2") for name in ("bf16", "quant, smooth scales", "fp16, prefix sums",
                                                                            "1-D mask", "one expert per rank")}


V2_CASES = {name: dataclasses.replace(CASES[name], comm_alg="fullmesh_v2") for name in ("bf16", "quant, smooth scales", "fp16, prefix sums",
                                                                                       "2-D mask", "zero copy const")}


@pytest.mark.parametrize("name", list(V2_CASES))
def test_fullmesh_v2_matches_the_reference(name: str) -> None:
    """A3's "fullmesh_v2": sends expert by expert, counts from the last core, rows copied out a UB-full
    at a time once their flags are in; its combine is the default one."""
    test_dispatch_and_combine_match_the_reference(name, V2_CASES)


HIERARCHY_CASES = {"bf16": Case(ep=32, bs=3, k=3, experts=32, comm_alg="hierarchy", overrides=["shape.nodes=2", "hccl.buffer=512 MiB"]),
                   "quant, two experts a rank": Case(ep=32, bs=2, k=4, experts=64, quant=True, comm_alg="hierarchy",
                                                     overrides=["shape.nodes=2", "hccl.buffer=512 MiB"], seed=3)}


@pytest.mark.parametrize("name", list(HIERARCHY_CASES))
def test_a3_hierarchy_matches_the_reference(name: str) -> None:
    """A3's "hierarchy": tokens cross servers once per server, fan out inside it; the combine sums
    inside each server first."""
    case = HIERARCHY_CASES[name]
    inputs, scales = make_inputs(case)
    rows = expert_outputs(case, inputs, np.random.default_rng(97))
    got, combined, _ = run_dispatch(case, inputs, scales, combine_rows=rows)
    check_dispatch(case, got, inputs, scales)
    want = reference.combine_hierarchy(inputs, rows, case.experts, dtype=case.dtype)
    for rank, (g, w) in enumerate(zip(combined, want)):
        assert np.array_equal(g.view(np.uint16), w.view(np.uint16)), f"rank {rank}: combined tokens"


@pytest.mark.parametrize("name", list(A2_CASES))
def test_a2_fullmesh_matches_the_reference(name: str) -> None:
    """Atlas A2's "fullmesh": rows staged per destination rank, one RDMA write each from the AICPU."""
    case = A2_CASES[name]
    inputs, scales = make_inputs(case)
    rows = expert_outputs(case, inputs, np.random.default_rng(98))
    got, combined, session = run_dispatch(case, inputs, scales, combine_rows=rows)
    check_dispatch(case, got, inputs, scales)
    want = reference.combine(inputs, rows, case.experts, dtype=case.dtype)
    for rank, (g, w) in enumerate(zip(combined, want)):
        assert np.array_equal(g.view(np.uint16), w.view(np.uint16)), f"rank {rank}: combined tokens"
    lanes = {track.lane for track in session.system.recorder.tracks}
    assert any(lane.startswith("qp die") for lane in lanes) and "hccl" in lanes  # the RDMA writes and the AICPU's posts


@settings(max_examples=12, deadline=None)
@given(ep=st.sampled_from([2, 3, 4]), bs=st.integers(1, 5), per_rank=st.sampled_from([1, 2, 3]), k=st.integers(1, 4),
       quant=st.booleans(), seed=st.integers(0, 1000))
def test_dispatch_matches_the_reference_on_random_shapes(ep, bs, per_rank, k, quant, seed) -> None:
    experts = ep * per_rank
    case = Case(ep=ep, bs=bs, experts=experts, k=min(k, experts), quant=quant, seed=seed)
    inputs, scales = make_inputs(case)
    got, _, _ = run_dispatch(case, inputs, scales)
    check_dispatch(case, got, inputs, scales)


def test_timing_only_run_takes_the_same_time_as_with_data() -> None:
    """Routing from the synthetic ids (data off) differs from real ids, so compare two timing-only runs
    against each other for determinism, and a data run that routes like the synthetic ids."""
    case = Case(quant=True)
    inputs, scales = make_inputs(case)
    _, _, first = run_dispatch(case, inputs, scales, data=False)
    _, _, second = run_dispatch(case, inputs, scales, data=False)
    assert first.result.simulated_ps == second.result.simulated_ps > 0


def test_routing_by_the_synthetic_ids_times_as_with_data() -> None:
    from npusim.kernels.moe_distribute.routing import synthetic_expert_ids

    case = Case(quant=True)
    inputs, scales = make_inputs(case)
    shape_of = _shapes(case)
    inputs = [dataclasses.replace(ri, ids=synthetic_expert_ids(shape_of(rank), 1)) for rank, ri in enumerate(inputs)]
    outs, _, with_data = run_dispatch(case, inputs, scales)
    counts, _, without = run_dispatch(case, inputs, scales, data=False)
    assert with_data.result.simulated_ps == without.result.simulated_ps
    for rank, out in enumerate(outs):  # the counts are real without data: the grouped matmuls after read them
        np.testing.assert_array_equal(counts[rank][0], out[3])
        np.testing.assert_array_equal(counts[rank][1], out[4])
        assert counts[rank][0].sum() > 0


def _shapes(case: Case):
    from npusim.kernels.moe_distribute.checks import MoeShape

    def shape(rank: int) -> MoeShape:
        return MoeShape("atlas_a3", "fullmesh_v1", case.bs, case.h, case.k, case.ep, rank, case.experts, 0, 0, "ep", "", 0, 1, 0, 0, 0, 0, 0)

    return shape


@pytest.mark.parametrize("quant, config", [(False, "a3"), (True, "a3"), (True, "a2")])
def test_first_op_pair_matches_the_reference(quant: bool, config: str) -> None:
    """npu_moe_distribute_dispatch / combine (v1): expand_idx is each pair's position among this
    rank's pairs of its expert; the combine reads rows back at (expert, expand_idx). On A2 (16 ranks
    on two servers, the first pair's smallest group there) the "fullmesh" route runs it."""
    import npusim
    import npusim.torch_npu as torch_npu

    case = (Case(ep=8, bs=3, h=7168, k=3, experts=16, quant=quant, seed=7) if config == "a3"
            else Case(ep=16, bs=2, h=1024, k=2, experts=16, quant=quant, seed=7, config="a2"))
    inputs, scales = make_inputs(case)
    rows = expert_outputs(case, inputs, np.random.default_rng(5))
    overrides = ["hccl.buffer=1 GiB"] + (["shape.nodes=2"] if config == "a2" else [])
    with npusim.session(config, overrides):
        outs, ids = [], []
        for rank, ri in enumerate(inputs):
            ids.append(npusim.tensor(ri.ids, device=rank))
            outs.append(torch_npu.npu_moe_distribute_dispatch(npusim.tensor(ri.x, device=rank), ids[rank], "ep1", case.ep, rank,
                                                              case.experts, quant_mode=2 if quant else 0))
        combined = []
        for rank, ri in enumerate(inputs):
            expand_x, _, expand_idx, _, counts, _, expand_scales = outs[rank]
            back = np.zeros(expand_x.shape, case.dtype)
            back[: len(rows[rank])] = rows[rank]
            combined.append(torch_npu.npu_moe_distribute_combine(npusim.tensor(back, device=rank), ids[rank], expand_idx, counts,
                                                                 npusim.tensor(ri.expert_scales, device=rank), "ep1", case.ep, rank,
                                                                 case.experts, expand_scales=expand_scales if config == "a2" else None))
        got = [[t.numpy() for t in out] for out in outs]
        combined = [c.numpy() for c in combined]
    want = reference.dispatch(inputs, case.experts, quant=quant)
    for rank, (out, ref) in enumerate(zip(got, want)):
        n = len(ref["rows"])
        assert np.array_equal(out[0][:n].view(np.uint8), ref["rows"].view(np.uint8))
        assert np.array_equal(out[4][: len(ref["ep_recv_counts"])], ref["ep_recv_counts"])
        positions = {}
        for t, k, e in reference.pairs_of(inputs[rank].ids, None, case.experts):
            positions.setdefault(e, []).append(t * case.k + k)
        for e, pairs in positions.items():
            assert [int(out[2][pair]) for pair in pairs] == list(range(len(pairs))), f"rank {rank}: expand_idx of expert {e}"
    for g, w in zip(combined, reference.combine(inputs, rows, case.experts, dtype=case.dtype)):
        assert np.array_equal(g.view(np.uint16), w.view(np.uint16))
