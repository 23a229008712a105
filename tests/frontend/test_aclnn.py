"""The launch path every registered op shares (npusim.frontend.aclnn): what it refuses before any
kernel is built."""

import numpy as np
import pytest

import npusim
from npusim.config.registry import OPS
from npusim.errors import UsageError
from npusim.frontend.aclnn import run_op


def test_every_op_names_the_series_it_is_modelled_on_or_none():
    series = {name: op.series for name, op in OPS}
    assert series["scatter_update"] == frozenset({"atlas_a2", "atlas_a3"})
    assert series["quantize"] == frozenset({"atlas_a2", "atlas_a3", "ascend_950"})  # its 950 outputs (fp8, hifloat8)
    assert series["quant_scatter"] is None  # its tilings are per series, the 310P's included


def test_an_op_not_modelled_on_the_product_is_refused_naming_both():
    with npusim.session("atlas-300i-duo"):
        data = npusim.tensor(np.zeros((4, 8, 32), np.float16))
        updates = npusim.tensor(np.ones((2, 8, 32), np.float16))
        indices = npusim.tensor(np.array([0, 2], np.int32))
        with pytest.raises(UsageError, match=r"scatter_update_: the op is modelled on atlas_a2, atlas_a3 only, not on "
                                             r"Atlas inference series \(ascend310p\) \(config 'atlas-300i-duo'\)"):
            run_op("scatter_update", "scatter_update_", {"input": data, "indices": indices, "updates": updates, "axis": -2}, out=data)
