"""PyPTO's data types and the enums of its distributed ops, spelled as PyPTO spells them.

PyPTO exposes ``pypto.DataType`` (an enum whose members are ``DT_INT32``, ``DT_FP16`` ...) and
module-level aliases ``pypto.DT_INT32`` ...; ``pypto.AtomicType.{SET, ADD}`` selects how shmem_put,
shmem_store and shmem_signal write; ``pypto.OpType`` is the comparison of shmem_wait_until (which
accepts only ``EQ``); ``pypto.TileOpFormat`` is a tensor's layout (npusim models ND only) and
``pypto.StatusType`` (``pypto.DYNAMIC``, ``pypto.STATIC``) marks a dim of a kernel parameter's
annotation as bound at run time or at compile time. Here each data type carries the numpy dtype that holds its values in the
simulator (bf16, int4, the fp8 and fp4 formats through ``ml_dtypes``, hifloat8 as
:data:`npusim.formats.HIFLOAT8` codes). Only the types numpy can hold are mirrored (the framework's
DT_HF4 / DT_FP8 / DT_FP4_E2M1X2 are not); the compute ops take the types their checks list.
"""

from __future__ import annotations

import enum

import ml_dtypes
import numpy as np

from npusim import formats


class _PyptoEnum(enum.Enum):
    """An enum that prints as PyPTO prints its members: ``DataType.DT_FP16``, ``AtomicType.ADD``."""

    def __repr__(self) -> str:
        return f"{type(self).__name__}.{self.name}"

    __str__ = __repr__


class DataType(_PyptoEnum):
    """A PyPTO tensor element type; its value is the numpy dtype that holds it."""

    DT_INT8 = np.dtype(np.int8)
    DT_INT16 = np.dtype(np.int16)
    DT_INT32 = np.dtype(np.int32)
    DT_INT64 = np.dtype(np.int64)
    DT_FP16 = np.dtype(np.float16)
    DT_FP32 = np.dtype(np.float32)
    DT_BF16 = np.dtype(ml_dtypes.bfloat16)
    DT_UINT8 = np.dtype(np.uint8)
    DT_UINT16 = np.dtype(np.uint16)
    DT_UINT32 = np.dtype(np.uint32)
    DT_UINT64 = np.dtype(np.uint64)
    DT_BOOL = np.dtype(np.bool_)
    DT_DOUBLE = np.dtype(np.float64)
    DT_INT4 = np.dtype(ml_dtypes.int4)
    DT_FP8E4M3 = np.dtype(ml_dtypes.float8_e4m3fn)
    DT_FP8E5M2 = np.dtype(ml_dtypes.float8_e5m2)
    DT_FP8E8M0 = np.dtype(ml_dtypes.float8_e8m0fnu)
    DT_FP4_E2M1 = np.dtype(ml_dtypes.float4_e2m1fn)
    DT_HF8 = formats.HIFLOAT8

    @property
    def numpy(self) -> np.dtype:
        """The numpy dtype of this type's values."""
        dtype: np.dtype = self.value
        return dtype

    @property
    def itemsize(self) -> int:
        """Bytes per element."""
        return self.numpy.itemsize

    @classmethod
    def from_numpy(cls, dtype: np.dtype | type) -> DataType:
        """The PyPTO type of a numpy dtype (ValueError if PyPTO has none mirrored here)."""
        return cls(np.dtype(dtype))


class AtomicType(_PyptoEnum):
    """How a shmem write lands: overwrite (SET) or atomic add (ADD)."""

    SET = 0
    ADD = 1


class OpType(_PyptoEnum):
    """A comparison; shmem_wait_until accepts only EQ."""

    EQ = 0
    NE = 1
    LT = 2
    LE = 3
    GT = 4
    GE = 5


class TileOpFormat(_PyptoEnum):
    """A tensor's layout in GM: row-major ND, or the cube's fractal NZ."""

    TILEOP_ND = 0
    TILEOP_NZ = 1


class StatusType(_PyptoEnum):
    """How a dim of a kernel parameter's annotation is bound: at run time (DYNAMIC, DYN) or when
    the kernel is compiled (STATIC)."""

    DYN = "DYN"
    DYNAMIC = "DYNAMIC"
    STATIC = "STATIC"


DYNAMIC = StatusType.DYNAMIC
STATIC = StatusType.STATIC
DYN = StatusType.DYN

DT_INT8 = DataType.DT_INT8
DT_INT16 = DataType.DT_INT16
DT_INT32 = DataType.DT_INT32
DT_INT64 = DataType.DT_INT64
DT_FP16 = DataType.DT_FP16
DT_FP32 = DataType.DT_FP32
DT_BF16 = DataType.DT_BF16
DT_UINT8 = DataType.DT_UINT8
DT_UINT16 = DataType.DT_UINT16
DT_UINT32 = DataType.DT_UINT32
DT_UINT64 = DataType.DT_UINT64
DT_BOOL = DataType.DT_BOOL
DT_DOUBLE = DataType.DT_DOUBLE
DT_INT4 = DataType.DT_INT4
DT_FP8E4M3 = DataType.DT_FP8E4M3
DT_FP8E5M2 = DataType.DT_FP8E5M2
DT_FP8E8M0 = DataType.DT_FP8E8M0
DT_FP4_E2M1 = DataType.DT_FP4_E2M1
DT_HF8 = DataType.DT_HF8
