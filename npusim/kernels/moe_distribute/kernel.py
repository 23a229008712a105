"""What every route of the MoE ops shares: the plan of a call (its cores, its barrier), the call's
context on the device, and the pieces of per-core programs the vendor's kernels repeat (reading
the expert ids, counting a pair's predecessors, quantising a token, the double-buffered rows).

Programs follow hicann/ops-transformer's A3 kernels (``moe_distribute_dispatch_v2.h``,
``moe_distribute_combine_v2.h`` at c29bc10): all AIV cores of the die, ``SplitToCore`` splits,
``TQue`` double buffers of two rows, a ``SyncAll`` between the dispatch's phases.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from npusim import isa
from npusim.isa.instructions import GmAddress, LocalTensor
from npusim.kernels.comm.group import CommGroup
from npusim.kernels.moe_distribute.checks import I32, MoeShape


@dataclass(frozen=True)
class MoePlan:
    """How a call runs: on ``cores`` vector cores of kind ``core_kind``."""

    cores: int
    core_kind: str
    kernel_name: str


@dataclass
class MoeCall:
    """A call on the device: its problem and plan, its tensors, its group (and TP group), the
    epoch its flags carry, and what it leaves for the combine that follows it."""

    problem: Any
    plan: MoePlan
    tensors: dict
    group: CommGroup
    epoch: int
    system: Any
    op: int = -1
    tp_group: CommGroup | None = None
    notes: dict = field(default_factory=dict)

    @property
    def shape(self) -> MoeShape:
        return self.problem.shape

    @property
    def die(self) -> int:
        return self.group.die_of(self.shape.ep_rank_id)

    def kernel(self, phase: str) -> isa.Kernel:
        """A kernel of this call's op (its events carry the call's op id). Every rank runs the same
        program over its own data: the race check runs on the first rank, the first MoE rank and the
        last (the shapes of work a rank can have), not on every rank of a large group."""
        kernel = isa.Kernel(f"{self.plan.kernel_name}", die=self.die, system=self.system, op=self.op, op_args={"phase": phase})
        shape = self.shape
        kernel.race_checked = shape.ep_rank_id in (0, shape.shared_expert_rank_num, shape.ep_world_size - 1)
        return kernel

    def values(self, name: str) -> np.ndarray | None:
        """The values of tensor ``name`` as the device holds them now (None with data off or no tensor)."""
        tensor = self.tensors.get(name)
        if tensor is None or not self.system.with_data:
            return None
        return tensor.host_view().copy()


def gm_at(tensor, element: int) -> GmAddress:
    """The GM address of element ``element`` (flat) of a device tensor."""
    return isa.gm(tensor, element)


class CountCalc:
    """``CalTokenSendExpertCnt``: how many of the first ``n`` expert ids equal an expert, by vector
    compares over them (dup, sub, abs, mins) and a reduction, then a scalar read of the count,
    which decides an address. The op computes the count where it writes the program
    (:mod:`.routing`), so the vector work is timed, not computed (``vector_time``)."""

    STEPS = ("dup", "sub", "abs", "mins", "add")

    def __init__(self, p: isa.CoreProgram, result: LocalTensor) -> None:
        self.p, self.result = p, result

    def __call__(self, n: int) -> None:
        if n <= 0:
            return
        p = self.p
        p.vector_time([(kind, n, I32) for kind in self.STEPS], "count pairs")
        p.set_flag("VECTOR", "SCALAR", 0)
        p.wait_flag("VECTOR", "SCALAR", 0)
        p.read_scalar(self.result, 0, name="count: read")


def sender_plan(call: MoeCall):
    """The pairs this rank sends (:func:`~.routing.send_plan`): from the expert ids the device holds
    (checked: out of range, repeated, a mask with a gap), or with data off the synthetic ids; kept in
    the group's notes for the peers' and the combine's host model."""
    from npusim.kernels.moe_distribute.routing import check_ids, send_plan, synthetic_expert_ids

    shape = call.shape
    ids, mask = call.values("expert_ids"), call.values("x_active_mask")
    if ids is None:
        ids = synthetic_expert_ids(shape, call.epoch)
    else:
        check_ids(call.problem.api, shape, ids, mask)
    plan = send_plan(shape, ids, mask)
    call.group.notes[(shape.ep_rank_id, call.epoch)] = plan
    return plan
