"""Device tensors: contiguous and strided views of GM, values after synchronisation."""

import ml_dtypes
import numpy as np
import pytest

import npusim
from npusim.errors import UsageError


def test_values_round_trip_in_any_dtype(a2_session):
    for dtype in (np.int8, np.int32, np.float16, np.float32, ml_dtypes.bfloat16):
        host = (np.arange(24) - 7).astype(dtype).reshape(2, 3, 4)
        t = npusim.tensor(host, device=3)
        assert t.device == 3 and t.shape == (2, 3, 4) and t.dtype == np.dtype(dtype)
        assert np.array_equal(t.numpy(), host)


def test_views_share_bytes_and_report_strides(a2_session):
    host = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    t = npusim.tensor(host)
    assert t.is_contiguous() and t.element_strides() == (12, 4, 1)
    tr = t.transpose(1, 2)
    assert not tr.is_contiguous() and tr.shape == (2, 4, 3)
    assert np.array_equal(tr.numpy(), host.transpose(0, 2, 1))
    sl = t[:, 1:, ::2]
    assert np.array_equal(sl.numpy(), host[:, 1:, ::2])
    assert sl.offset_bytes == 16 and sl.allocation is t.allocation
    assert np.array_equal(t[1, 2].numpy(), host[1, 2])
    assert np.array_equal(t.view(6, -1).numpy(), host.reshape(6, 4))
    assert np.array_equal(t.permute(2, 0, 1).numpy(), host.transpose(2, 0, 1))


def test_bad_views_are_refused(a2_session):
    t = npusim.tensor(np.zeros((4, 4), np.float32))
    with pytest.raises(UsageError, match="only integers and slices give a device view"):
        t[[0, 1]]
    with pytest.raises(UsageError, match=r"cannot view \[4, 4\] \(16 elements\) as \[5, 3\]"):
        t.view(5, 3)
    with pytest.raises(UsageError, match="view\\(\\) needs a contiguous tensor"):
        t.T.view(16)
    with pytest.raises(UsageError, match="index 4 is out of bounds"):
        t[4]


def test_values_are_not_kept_without_data():
    with npusim.session("a2", data=False):
        t = npusim.tensor(np.ones(4, np.float32))
        with pytest.raises(UsageError, match="timing only"):
            t.numpy()


def test_a_tensor_needs_a_session():
    with pytest.raises(UsageError, match="no npusim session is active"):
        npusim.tensor([1.0])


def test_hbm_capacity_is_enforced():
    with npusim.session("a2", overrides=["die.hbm.size=1 MiB", "die.l2.size=256 KiB"], data=False):
        npusim.empty(512 * 1024, np.uint8)
        with pytest.raises(npusim.errors.ResourceError, match=r"die 0: allocating .* exceeds the HBM of 1.00 MiB"):
            npusim.empty(768 * 1024, np.uint8)
