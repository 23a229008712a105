"""``TestCase`` and ``run_tests`` of ``torch_npu.testing.testcase``, for unittest files run inside
an npusim session (``npusim run --config a2 test_file.py``)."""

from __future__ import annotations

import sys
import unittest

import numpy as np
import torch

from npusim.errors import WorkloadError


def _host(value) -> np.ndarray:
    if isinstance(value, torch.Tensor):
        value = value.cpu()
        return (value.float() if value.dtype == torch.bfloat16 else value).numpy()
    return np.asarray(value)


class TestCase(unittest.TestCase):
    """unittest's TestCase with torch_npu's comparison of results."""

    def assertRtolEqual(self, x, y, prec: float = 1.0e-4, prec16: float = 1.0e-3, auto_trans_dtype: bool = False, message=None):
        """Every element of ``x`` within ``prec`` relative to ``y`` (``prec16`` for 16-bit floats);
        integers differ by at most ``prec`` times their magnitude (so exactly, for prec < 1)."""
        half = isinstance(x, torch.Tensor) and x.dtype in (torch.float16, torch.bfloat16)
        a, b = _host(x), _host(y)
        self.assertEqual(a.shape, b.shape, message or f"shapes differ: {a.shape} vs {b.shape}")
        tolerance = prec16 if half else prec
        a64, b64 = a.astype(np.float64), b.astype(np.float64)
        both_nan = np.isnan(a64) & np.isnan(b64)
        error = np.where(both_nan, 0.0, np.abs(a64 - b64))
        limit = tolerance * np.maximum(np.abs(b64), 1.0)
        bad = error > limit
        if bad.any():
            where = tuple(int(i) for i in np.argwhere(bad)[0])
            self.fail(message or f"{int(bad.sum())} of {a.size} elements differ beyond {tolerance}; first at {where}: {a[where]} vs {b[where]}")


def run_tests() -> None:
    """Run the ``TestCase`` classes of the running file; a failing test fails the run."""
    program = unittest.main(module="__main__", argv=[sys.argv[0]], exit=False, verbosity=2)
    result = program.result
    if not result.wasSuccessful():
        raise WorkloadError(f"{len(result.failures)} test(s) failed and {len(result.errors)} raised an error (see above)")
