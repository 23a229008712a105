"""Dynamic per-token int8 quantisation on the vector pipe, as the vendor's kernels write it
(``QuantProcess`` of hicann/ops-transformer's MoE dispatch, ``DynamicQuant`` of ops-nn): the row in
float32, its largest magnitude, ``scale = 127 / max`` (float32), the row times the scale rounded to
int32 (half to even), to float16 (exact), to int8 (exact), and the dequantisation scale
``1 / scale``. Used by the MoE dispatch (``npu_dequant_swiglu_quant``'s kernel computes its scale
the other way round, ``max * (1 / 127)`` then a division: :mod:`npusim.kernels.swiglu_quant.op`)."""

from __future__ import annotations

import numpy as np

from npusim import isa
from npusim.isa.instructions import LocalTensor

F32, F16, I32, I8 = np.dtype(np.float32), np.dtype(np.float16), np.dtype(np.int32), np.dtype(np.int8)
QUANT_MAX = 127.0
"""Dynamic int8 quantisation maps the row's largest magnitude to 127 (the op pages: 127 / max|x|)."""


def _align(value: int, to: int) -> int:
    return -(-value // to) * to


class Quantizer:
    """One core's buffers for quantising rows of ``h`` values: ``f32`` holds the row in float32
    (a caller may compute into it and call :meth:`finish`), ``smooth`` optional smooth scales."""

    def __init__(self, p: isa.CoreProgram, h: int, smooth: bool = False) -> None:
        self.p, self.h = p, h
        width = _align(h, 64)
        self.f32 = p.alloc(width, F32)
        self.scratch = p.alloc(width, F32)
        self.h16 = p.alloc(_align(h, 128), F16)
        self.smooth = p.alloc(width, F32) if smooth else None
        self.small = p.alloc(8, F32)
        p.dup(self.small[1:2], QUANT_MAX, name="quant: dup 127")
        p.dup(self.small[3:4], 1.0, name="quant: dup 1")

    def quantize(self, xin: LocalTensor, flags, b: int, row: LocalTensor, scale_slot: LocalTensor, wait_out) -> None:
        """``xin`` (the token in its dtype, its MTE2 done: the vector pipe frees it with flag
        ``b`` to MTE2) times the smooth scales (loaded by MTE2, flag 2) into ``row[:h]`` (int8)
        and ``scale_slot`` (float32); ``wait_out()`` is called before ``row`` is written."""
        p, f32 = self.p, self.f32[0 : self.h]
        p.cast(f32, xin, name="quant: cast f32")
        flags.set("VECTOR", "MTE2", b)
        if self.smooth is not None:
            flags.wait("MTE2", "VECTOR", 2)
            p.mul(f32, f32, self.smooth[0 : self.h], name="quant: smooth scales")
            flags.set("VECTOR", "MTE2", 2)
        self.finish(row, scale_slot, wait_out)

    def from_input(self, xin: LocalTensor, row: LocalTensor, scale_slot: LocalTensor) -> None:
        """Quantise the token ``xin`` (in its dtype, in UB; no smooth scales) into ``row[:h]`` and ``scale_slot``."""
        self.p.cast(self.f32[0 : self.h], xin, name="quant: cast f32")
        self.finish(row, scale_slot, lambda: None)

    def finish(self, row: LocalTensor, scale_slot: LocalTensor, wait_out) -> None:
        """Quantise ``f32[:h]`` into ``row[:h]`` (int8) and ``scale_slot`` (float32 ``1 / scale``)."""
        p, h, f32, scratch, small = self.p, self.h, self.f32[0 : self.h], self.scratch[0 : self.h], self.small
        p.abs(scratch, f32, name="quant: abs")
        p.reduce("reduce_max", small[0:1], scratch, ((1, h), (h, 1)), (1,), name="quant: max")
        p.div(small[2:3], small[1:2], small[0:1], name="quant: scale")
        p.set_flag("VECTOR", "SCALAR", 1)
        p.wait_flag("VECTOR", "SCALAR", 1)
        scale = p.read_scalar(small, 2, name="quant: read scale")
        p.muls(f32, f32, scale, name="quant: times scale")
        as_int = self.scratch.reinterpret(I32)[0:h]
        p.cast(as_int, f32, "rint", name="quant: to int32")
        p.cast(self.h16[0:h], as_int, "rint", name="quant: to half")
        wait_out()
        p.cast(row.reinterpret(I8)[0:h], self.h16[0:h], "trunc", name="quant: to int8")
        p.div(scale_slot, small[3:4], small[2:3], name="quant: 1 / scale")
