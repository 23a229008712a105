"""torch_npu.testing on the simulator: assertRtolEqual compares as torch_npu's does, SupportedDevices
skips on other chips, run_tests fails the run on a failing test."""

import unittest

import pytest

torch = pytest.importorskip("torch")

import npusim  # noqa: E402
from npusim.errors import WorkloadError  # noqa: E402
from npusim.torch_npu.testing.common_utils import SupportedDevices  # noqa: E402
from npusim.torch_npu.testing.testcase import TestCase, run_tests  # noqa: E402


class Cases(TestCase):
    def runTest(self):
        pass


def test_assert_rtol_equal_passes_within_and_fails_beyond_the_tolerance():
    case = Cases()
    with npusim.session("a2"):
        x = torch.tensor([1.0, 2.0, 3.0]).npu()
        case.assertRtolEqual(x, torch.tensor([1.0, 2.0, 3.0001]), 0.001)
        with pytest.raises(AssertionError, match="1 of 3 elements differ beyond 0.001; first at \\(2,\\)"):
            case.assertRtolEqual(x, torch.tensor([1.0, 2.0, 3.1]), 0.001)
        with pytest.raises(AssertionError):
            case.assertRtolEqual(torch.tensor([1, 2], dtype=torch.int8).npu(), torch.tensor([1, 3], dtype=torch.int8), 0.001)


def test_supported_devices_skips_on_other_chips():
    ran = []

    @SupportedDevices(["Ascend910B"])
    def on_a2():
        ran.append("a2")

    @SupportedDevices(["Ascend950"])
    def on_950():
        ran.append("950")

    with npusim.session("a2"):
        on_a2()
        with pytest.raises(unittest.SkipTest, match="runs on Ascend950; the simulated device is Ascend910B2"):
            on_950()
    assert ran == ["a2"]


def test_run_tests_fails_the_run_when_a_test_fails(tmp_path, monkeypatch):
    import sys
    import types

    module = types.ModuleType("__main__")

    class Failing(TestCase):
        def test_fails(self):
            self.assertRtolEqual(torch.ones(2), torch.zeros(2))

    module.Failing = Failing
    monkeypatch.setitem(sys.modules, "__main__", module)
    with pytest.raises(WorkloadError, match="1 test\\(s\\) failed"):
        run_tests()
