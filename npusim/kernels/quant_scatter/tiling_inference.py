"""The tiling of the Ascend 310P (Atlas inference series) build of ``QuantUpdateScatter``.

The TIK kernel (``impl/dynamic/quant_update_scatter.py``) is one file for every product; on a 310P
(its ``is_ascend310p()``) it converts the fp32 quotient to int8 through int32, as the 310P AI core
has no fp32 -> int16 conversion (Ascend310P3.ini: ``f322s32r`` and ``deq`` but no ``f322s16r``
among its ``vconv``), and it allocates the updates buffer twice as large to hold the int32
values. Modes, core split, chunking and loops are the A2/A3 tiling's (:mod:`.tiling`), against
the 310P's own UB. Its host tiling is not public; ``docs/quant_scatter.md`` lists what is assumed.
"""

from __future__ import annotations

from npusim.isa.target import VectorTarget
from npusim.kernels.quant_scatter.checks import QuantScatterProblem
from npusim.kernels.quant_scatter.tiling import KernelVariant, QuantScatterPlan, plan_quant_scatter

ASCEND_310P = KernelVariant((("int32", "rint"), ("float16", ""), ("int8", "")), wide_updates=True)
"""fp32 -> int32 (rint, saturating; ``conv_f32_to_s8`` "round") -> fp16 (``conv_s8_to_s4``, deq with
scale 1.0) -> int8 (saturating), the int32 values in the widened updates buffer."""


def plan_quant_scatter_310p(
    problem: QuantScatterProblem, target: VectorTarget, *, vector_cores: int, double_buffer: bool = False
) -> QuantScatterPlan:
    """The 310P kernel's tiling of ``problem`` on ``vector_cores`` AI cores of ``target``."""
    return plan_quant_scatter(problem, target, vector_cores=vector_cores, double_buffer=double_buffer, variant=ASCEND_310P)
