"""``torch_npu.testing.common_utils``: ``SupportedDevices`` (a test runs only on the chips it
names) and ``get_npu_device`` / ``set_npu_device`` (the device tests put their tensors on)."""

from __future__ import annotations

import functools
import os
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


def get_npu_device() -> str:
    """The device the tests use: ``npu:<SET_NPU_DEVICE>``, ``npu:0`` when that variable is unset (torch_npu's rule)."""
    index = os.environ.get("SET_NPU_DEVICE")
    return "npu:0" if index is None else f"npu:{index}"


def set_npu_device() -> str:
    """Make :func:`get_npu_device` the current device and return it."""
    from npusim.frontend.torch_device.npu_module import set_device

    device = get_npu_device()
    set_device(device)
    return device
