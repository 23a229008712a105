"""The tiling of the Ascend 950 (arch35, ``__NPU_ARCH__`` 3510) build of ``QuantUpdateScatter``.

The Ascend 950 runs aclnnInplaceQuantScatterV2 (hicann/ops-nn ``index/quant_update_scatter``:
``op_kernel/arch35/``, a RegBase kernel, and ``op_host/arch35/`` its tiling). What npusim takes from
it:

- the output chain per written dtype (``quant_update_scatter_base.h``'s cast traits): int8 through
  int16 and fp16, each step rounding half to even, as the A2/A3 build; float8_e4m3fn and float8_e5m2
  in one conversion from fp32 rounding half to even, hifloat8 in one conversion with the call's
  round mode ('round' or 'hybrid'), all three saturating (the kernel sets the float overflow mode to
  saturate for them);
- two buffers per staged operand (its ``BUFFER_NUM = 2``): the loads of one iteration overlap the
  vector work and writes of the one before.

Modes, core split and chunking are the A2/A3 tiling's (:mod:`.tiling`) against the 950's UB; the
arch35 host tiling's own choices are not modelled (``docs/quant_scatter.md``), so the 950's times
are a what-if of the same algorithm on the 950's cores.
"""

from __future__ import annotations

from npusim import formats
from npusim.isa.target import VectorTarget
from npusim.kernels.quant_scatter.checks import INT8, QuantScatterProblem
from npusim.kernels.quant_scatter.tiling import A2_A3, KernelVariant, QuantScatterPlan, plan_quant_scatter


def variant_950(problem: QuantScatterProblem) -> KernelVariant:
    """The Ascend 950 kernel's conversion of the fp32 quotient to ``problem.output_dtype``."""
    if problem.output_dtype == INT8:
        return A2_A3
    return KernelVariant(((formats.name_of(problem.output_dtype), problem.round_mode),))


def plan_quant_scatter_950(
    problem: QuantScatterProblem, target: VectorTarget, *, vector_cores: int, double_buffer: bool = True
) -> QuantScatterPlan:
    """The Ascend 950 kernel's tiling of ``problem`` on ``vector_cores`` AIVs of ``target``: always
    double-buffered (the arch35 kernel's two buffers; ``double_buffer`` is the A2/A3 what-if's switch
    and changes nothing here)."""
    return plan_quant_scatter(problem, target, vector_cores=vector_cores, double_buffer=True, variant=variant_950(problem))
