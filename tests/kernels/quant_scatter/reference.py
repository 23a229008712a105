"""An independent numpy reference of ``npu_quant_scatter_``, for bit-exact tests of the simulator.

Written from the op's definition, not from npusim: quantise in float32 (divide by the scale, add the
zero point), round half to even, saturate to [-128, 127], then copy batch ``b`` into the rows
``[offset, offset + U)`` of the scatter axis of input batch ``b`` (1-D indices) or ``indices[b, 0]``
(2-D indices, offset ``indices[b, 1]``), slicing the original-rank arrays (no 4-D merge).
NaN quantises to 0 (assumed; the hardware's NaN conversion is not public), +-inf saturate.
"""

from __future__ import annotations

import numpy as np


def quantize_reference(updates: np.ndarray, scales: np.ndarray, zero_points: np.ndarray | None = None) -> np.ndarray:
    """int8 of ``rint(f32(updates) / f32(scales) [+ f32(zero_points)])``, saturated, along the last dim."""
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        value = updates.astype(np.float32) / scales.reshape(-1).astype(np.float32)
        if zero_points is not None:
            value = value + zero_points.reshape(-1).astype(np.float32)
    assert value.dtype == np.float32
    rounded = np.rint(value)
    rounded[np.isnan(rounded)] = 0
    return np.clip(rounded, -128, 127).astype(np.int8)


def quant_scatter_reference(
    input: np.ndarray,
    indices: np.ndarray,
    updates: np.ndarray,
    scales: np.ndarray,
    zero_points: np.ndarray | None = None,
    axis: int = -2,
) -> np.ndarray:
    """The output of the op: a copy of ``input`` with the quantised updates scattered in."""
    out = input.copy()
    quantized = quantize_reference(updates, scales, zero_points)
    axis = axis % input.ndim
    rows = updates.shape[axis]
    for b in range(updates.shape[0]):
        dest, offset = (b, int(indices[b])) if indices.ndim == 1 else (int(indices[b, 0]), int(indices[b, 1]))
        where = (dest,) + (slice(None),) * (axis - 1) + (slice(offset, offset + rows),)
        out[where] = quantized[b]
    return out
