"""``torch_npu.npu_quant_scatter_`` on Atlas A2/A3 and the Atlas inference series (310P): argument
checks, index mapping, the kernel's tiling and its lowering to per-core ISA programs.

See ``docs/quant_scatter.md`` for what is modelled and the sources.
"""

from npusim.kernels.quant_scatter.checks import (
    OverlappingWritesWarning,
    QuantScatterProblem,
    Segment,
    UncheckedIndexWarning,
    check_indices,
    check_quant_scatter,
    describe_overlaps,
    find_overlaps,
)
from npusim.kernels.quant_scatter.kernel import (
    KERNEL_NAME,
    QuantScatterTensors,
    build_quant_scatter,
    tiling_arguments,
)
from npusim.kernels.quant_scatter.tiling import (
    BlockWrite,
    CorePlan,
    Iteration,
    QuantScatterPlan,
    TilingMode,
    UbLayout,
    VectorIssue,
    VectorStep,
    plan_quant_scatter,
)

__all__ = [
    "BlockWrite",
    "CorePlan",
    "Iteration",
    "KERNEL_NAME",
    "OverlappingWritesWarning",
    "QuantScatterPlan",
    "QuantScatterProblem",
    "QuantScatterTensors",
    "Segment",
    "TilingMode",
    "UbLayout",
    "UncheckedIndexWarning",
    "VectorIssue",
    "VectorStep",
    "build_quant_scatter",
    "check_indices",
    "check_quant_scatter",
    "describe_overlaps",
    "find_overlaps",
    "plan_quant_scatter",
    "tiling_arguments",
]
