"""``torch_npu.npu_quant_scatter_`` on Atlas A2/A3: argument checks, index mapping and kernel tiling.

See ``docs/quant_scatter.md`` for what is modelled and the sources.
"""

from npusim.kernels.quant_scatter.checks import (
    QuantScatterProblem,
    Segment,
    UncheckedIndexWarning,
    check_indices,
    check_quant_scatter,
    find_overlaps,
)
from npusim.kernels.quant_scatter.tiling import (
    BlockWrite,
    CorePlan,
    Iteration,
    QuantScatterPlan,
    TilingMode,
    VectorIssue,
    VectorStep,
    blocks_32b,
    plan_quant_scatter,
)

__all__ = [
    "BlockWrite",
    "CorePlan",
    "Iteration",
    "QuantScatterPlan",
    "QuantScatterProblem",
    "Segment",
    "TilingMode",
    "UncheckedIndexWarning",
    "VectorIssue",
    "VectorStep",
    "blocks_32b",
    "check_indices",
    "check_quant_scatter",
    "find_overlaps",
    "plan_quant_scatter",
]
