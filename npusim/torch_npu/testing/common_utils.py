"""``SupportedDevices`` of ``torch_npu.testing.common_utils``: a test runs only on the chips it names."""

from __future__ import annotations

import functools
import unittest

import torch


def SupportedDevices(devices: list[str]):
    """Skip the decorated test unless ``torch.npu.get_device_name()`` starts with one of ``devices``
    (``Ascend910B`` is an A2 chip; the simulated chip's name follows the session's config)."""

    def decorate(test):
        @functools.wraps(test)
        def run(*args, **kwargs):
            name = torch.npu.get_device_name()
            if not any(name.startswith(device) for device in devices):
                raise unittest.SkipTest(f"runs on {', '.join(devices)}; the simulated device is {name}")
            return test(*args, **kwargs)

        return run

    return decorate
