"""The cases of hicann/pypto's distributed system tests (C++ ST collectives and the Python ST fused
kernels, case tables at commit 883e7dfb0, named per case in examples/pypto_collectives.py), with
npusim's own kernels and numpy references, at small shapes; the full shapes run as the example."""

import numpy as np
import pypto_collectives as cases
import pytest

import npusim


@pytest.mark.parametrize("name", list(cases.CASES))
def test_case_outputs_pass_the_suites_check(name):
    with npusim.session("a3"):
        assert cases.run_case(name, small=True)


@pytest.mark.parametrize("name", ["all_reduce_one_shot", "cascading_all_reduce"])
def test_case_runs_again_in_the_same_session(name):
    with npusim.session("a3"):
        assert [cases.run_case(name, small=True, seed=seed) for seed in range(2)] == [True, True]


def test_case_without_data_runs_and_takes_time():
    with npusim.session("a3", data=False) as session:
        assert cases.run_case("reduce_scatter_bf16", small=True)
        assert session.now_us > 0


def test_result_cmp_counts_elements_wrong_in_both_absolute_and_relative_error():
    expected = np.full(2000, 100.0, np.float32)
    close = expected * (1 + 5e-4)  # relative error under eps: right though |difference| > eps
    assert cases.result_cmp(expected, close, 0.001)
    wrong = expected.copy()
    wrong[:3] += 1.0  # 3 wrong of 2000: more than size x eps = 2
    assert not cases.result_cmp(expected, wrong, 0.001)
    assert cases.result_cmp(expected, wrong[:2].tolist() + expected[2:].tolist(), 0.001)


def test_scaled_tolerance_grows_with_the_ranks():
    expected = np.ones(4)
    (rtol2, atol2), (rtol8, _) = cases.scaled_tolerance(2, expected), cases.scaled_tolerance(8, expected)
    assert rtol2 == pytest.approx(1.875 * 2**-7 * 2**0.5) and atol2 == pytest.approx(rtol2)
    assert rtol8 > rtol2
