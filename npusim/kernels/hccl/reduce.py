"""The reductions of HCCL's collectives on real bytes, and which dtypes and ops HCCL takes.

A reducing transfer combines the bytes it carries into the receiver's (``dst = dst op src``, as HCCL's
inline reduce does on arrival). Integers wrap on overflow; 16-bit floats are computed in fp32 and
rounded once, which is the correctly rounded result (fp32 holds more than twice their precision).

Sources:
- torch_npu ``ProcessGroupHCCL.cpp`` (Ascend/pytorch): ReduceOp SUM, PRODUCT, MIN, MAX map to HCCL's;
  AVG is a sum then a division by the group size on the device ("PTA supports it by summing first,
  then dividing"); BAND / BOR / BXOR are refused; a bool SUM is a MAX; reductions take int8, int16,
  int32, int64, fp16, fp32, bf16 (``checkSupportedDataType``), all-gather and broadcast every dtype.
- hcomm ``device_capacity.cc``: the SDMA and RDMA inline reduce of 910B / 910_93 take fp32, fp16,
  int8, int16, int32, bf16 with sum, max, min (``IsSupportSDMAReduce``, ``IsSupportRDMAReduce``);
  any other reduction lands in a scratch buffer and is reduced by a separate pass.
- hcomm ``hccl_communicator.cc`` ``CheckReduceDataType``: on 910B and 910_93 PROD of int16 and bf16 is
  refused.
"""

from __future__ import annotations

from collections.abc import Callable

import ml_dtypes
import numpy as np

from npusim.errors import OpArgumentError

REDUCE_OPS = ("sum", "prod", "max", "min", "avg")
"""The reductions torch's hccl backend takes (avg: a sum, then a division by the group size)."""
REDUCING_DTYPES = frozenset({"int8", "int16", "int32", "int64", "float16", "float32", "bfloat16", "bool"})
"""The dtypes of torch_npu's reducing collectives (bool through uint8, its SUM taken as MAX)."""
INLINE_DTYPES = frozenset({"int8", "int16", "int32", "float16", "float32", "bfloat16"})
INLINE_OPS = frozenset({"sum", "max", "min", "avg"})
"""The reductions the SDMA / RDMA engines apply inline on 910B and 910_93 (avg is a sum)."""
NO_PROD = frozenset({"int16", "bfloat16"})
"""Dtypes HCCL refuses for PROD on 910B and 910_93."""
AIV_DTYPES = INLINE_DTYPES
"""Dtypes an AIV-expanded reduction takes (hcomm ``IsSupportAIVReduce``; ops sum, max, min)."""

_FLOAT16 = frozenset({np.dtype(np.float16), np.dtype(ml_dtypes.bfloat16)})


def check_reduction(op: str, dtype: np.dtype, api: str) -> None:
    """An OpArgumentError unless HCCL reduces ``dtype`` with ``op``."""
    name = np.dtype(dtype).name
    if op not in REDUCE_OPS:
        raise OpArgumentError(f"{api}: op={op!r} is not a reduction HCCL takes; use one of {', '.join(REDUCE_OPS)} "
                              "(torch_npu refuses BAND, BOR and BXOR with HCCL)")
    if name not in REDUCING_DTYPES:
        raise OpArgumentError(f"{api}: dtype {name} is not one HCCL reduces; use one of {', '.join(sorted(REDUCING_DTYPES))} "
                              "(torch_npu checkSupportedDataType)")
    if op == "prod" and name in NO_PROD:
        raise OpArgumentError(f"{api}: HCCL refuses PROD of {name} on Atlas A2 / A3 (CheckReduceDataType); use float32 or int32")
    if op == "avg" and not np.issubdtype(dtype, np.floating) and dtype != np.dtype(ml_dtypes.bfloat16):
        raise OpArgumentError(f"{api}: op='avg' of {name}: the average is a sum divided by the group size, which torch "
                              "defines for floating dtypes only; use a float dtype or op='sum'")


def inline(op: str, dtype: np.dtype) -> bool:
    """Whether the transfer engines reduce ``op`` of ``dtype`` on arrival."""
    return op in INLINE_OPS and np.dtype(dtype).name in INLINE_DTYPES


def combiner(op: str, dtype: np.dtype) -> Callable[[np.ndarray, np.ndarray], np.ndarray]:
    """``f(dst, src)``: the reduced values, in ``dtype`` (avg combines as a sum)."""
    dtype = np.dtype(dtype)
    if dtype == np.bool_:
        return np.logical_and if op in ("prod", "min") else np.logical_or
    ufunc = {"sum": np.add, "avg": np.add, "prod": np.multiply, "max": np.maximum, "min": np.minimum}[op]
    if dtype in _FLOAT16:
        return lambda dst, src: ufunc(dst.astype(np.float32), src.astype(np.float32)).astype(dtype)
    if np.issubdtype(dtype, np.integer):
        return lambda dst, src: ufunc(dst, src, dtype=dtype, casting="unsafe")
    return ufunc


def divide(values: np.ndarray, ranks: int) -> np.ndarray:
    """AVG's division by the group size, in the dtype (16-bit floats through fp32, rounded once)."""
    dtype = values.dtype
    if dtype in _FLOAT16:
        return (values.astype(np.float32) / np.float32(ranks)).astype(dtype)
    return (values / dtype.type(ranks)).astype(dtype)
