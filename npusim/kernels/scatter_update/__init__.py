"""``torch_npu.scatter_update_`` on Atlas A2/A3: argument checks, the kernel's split over the vector
cores and its lowering to per-core ISA programs (see ``docs/torch.md``)."""

from npusim.kernels.scatter_update.checks import ScatterUpdateProblem, check_scatter_update
from npusim.kernels.scatter_update.kernel import ScatterUpdatePlan, build_scatter_update, plan_scatter_update

__all__ = ["ScatterUpdatePlan", "ScatterUpdateProblem", "build_scatter_update", "check_scatter_update", "plan_scatter_update"]
