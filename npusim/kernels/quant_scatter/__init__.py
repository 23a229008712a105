"""``torch_npu.npu_quant_scatter_`` on Atlas A2/A3 and the Atlas inference series (310P): argument
checks, index mapping, the kernel's tiling and its lowering to per-core ISA programs.

See ``docs/quant_scatter.md`` for what is modelled and the sources. The names below are those of
its modules, each imported on the first use of one of its names (the op's registration,
:mod:`.op`, needs none of them until the op is called).
"""

import importlib

_MODULE_OF = {
    "OverlappingWritesWarning": "checks",
    "QuantScatterProblem": "checks",
    "Segment": "checks",
    "UncheckedIndexWarning": "checks",
    "check_indices": "checks",
    "check_quant_scatter": "checks",
    "describe_overlaps": "checks",
    "find_overlaps": "checks",
    "KERNEL_NAME": "op",
    "QuantScatterTensors": "kernel",
    "build_quant_scatter": "kernel",
    "tiling_arguments": "kernel",
    "BlockWrite": "tiling",
    "CorePlan": "tiling",
    "Iteration": "tiling",
    "QuantScatterPlan": "tiling",
    "TilingMode": "tiling",
    "UbLayout": "tiling",
    "VectorIssue": "tiling",
    "VectorStep": "tiling",
    "plan_quant_scatter": "tiling",
}
"""Public name -> the module of this package that defines it."""

__all__ = sorted(_MODULE_OF)


def __getattr__(name: str):
    if name not in _MODULE_OF:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{_MODULE_OF[name]}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
