"""PyPTO's DataType, AtomicType and OpType, and their numpy dtypes."""

import ml_dtypes
import numpy as np
import pytest

from npusim.kernels.shmem import dtypes
from npusim.kernels.shmem.dtypes import AtomicType, DataType, OpType


@pytest.mark.parametrize(
    ("data_type", "numpy_dtype", "itemsize"),
    [
        (dtypes.DT_INT32, np.int32, 4),
        (dtypes.DT_FP16, np.float16, 2),
        (dtypes.DT_FP32, np.float32, 4),
        (dtypes.DT_BF16, ml_dtypes.bfloat16, 2),
    ],
)
def test_shmem_types_map_to_numpy(data_type, numpy_dtype, itemsize):
    assert data_type.numpy == np.dtype(numpy_dtype)
    assert data_type.itemsize == itemsize
    assert DataType.from_numpy(numpy_dtype) is data_type
    assert np.zeros(2, dtype=data_type.numpy).dtype == np.dtype(numpy_dtype)


def test_names_and_reprs_follow_pypto():
    assert dtypes.DT_BF16 is DataType.DT_BF16
    assert repr(DataType.DT_BF16) == str(DataType.DT_BF16) == "DataType.DT_BF16"
    assert [a.name for a in AtomicType] == ["SET", "ADD"]
    assert repr(AtomicType.ADD) == "AtomicType.ADD"
    assert [o.name for o in OpType] == ["EQ", "NE", "LT", "LE", "GT", "GE"]
    assert str(OpType.EQ) == "OpType.EQ"


def test_every_mirrored_type_has_a_distinct_numpy_dtype():
    assert len({t.numpy for t in DataType}) == len(DataType)
    with pytest.raises(ValueError):
        DataType.from_numpy(np.complex64)
