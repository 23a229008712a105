"""torch_npu's test helpers (``torch_npu.testing``) for test files run on the simulator:
``testcase.TestCase`` / ``run_tests`` and ``common_utils.SupportedDevices``."""
