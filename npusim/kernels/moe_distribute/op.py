"""What the four MoE distribute ops share as registered ops (:class:`~npusim.kernels.op.DeviceOp`):
the checks on the host, the plan (every vector core of the die, ``die.sync_all`` between phases),
joining the communication group with the attributes every rank must agree on, and the route of
the call's ``comm_alg`` that writes the kernels on the device. The registered ops are in
:mod:`.dispatch_v2`, :mod:`.combine_v2`, :mod:`.dispatch` and :mod:`.combine`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from npusim.config.products import PRODUCTS
from npusim.errors import ConfigError, UsageError
from npusim.isa.target import VectorTarget
from npusim.kernels.comm.group import comm_group
from npusim.kernels.moe_distribute import a2_fullmesh, fullmesh, fullmesh_v2, hierarchy
from npusim.kernels.moe_distribute.checks import A2, A3, SERIES, CombineProblem, DispatchProblem, check_combine, check_dispatch
from npusim.kernels.moe_distribute.kernel import MoeCall, MoePlan
from npusim.kernels.op import DeviceOp

ROUTES: dict[tuple[str, str], Any] = {(A3, "fullmesh_v1"): fullmesh, (A3, "fullmesh_v2"): fullmesh_v2, (A3, "hierarchy"): hierarchy,
                                      (A2, "fullmesh"): a2_fullmesh}
"""The module writing each (product series, ``comm_alg``)'s kernels (``dispatch_steps``, ``combine_steps``)."""

AGREED = ("moe_expert_num", "expert_shard_type", "shared_expert_num", "shared_expert_rank_num", "global_bs")
"""What every rank of a group passes alike (the op pages; ep_world_size is the group's own)."""


def buffer_bytes(spec, api: str) -> int:
    if spec.hccl is None:
        raise ConfigError(f"torch_npu.{api}: the config {spec.name!r} has no hccl: section (hccl.buffer, the HCCL_BUFFSIZE "
                          "window of each rank); add it, as in configs/a2.yaml")
    return int(spec.hccl.buffer.bytes)


def _series(product: str) -> str:
    return PRODUCTS.get(product).series


class MoeOp(DeviceOp):
    """Base of the four ops."""

    version: ClassVar[int]
    series = SERIES
    output = ""

    @classmethod
    def check_call(cls, spec, args: Mapping[str, Any]):
        return cls.check_with(spec, args)

    @classmethod
    def check_with(cls, spec, args: Mapping[str, Any]):
        raise NotImplementedError

    @classmethod
    def plan_for(cls, problem, system) -> MoePlan:
        spec = system.spec
        if spec.die.sync_all is None:
            raise ConfigError(f"torch_npu.{problem.api}: die.sync_all (the cost of a SyncAll of the cores) is missing in config "
                              f"{spec.name!r}; the kernel passes barriers between its phases: add it, as in configs/a2.yaml")
        target = VectorTarget.of(system)
        return MoePlan(target.cores, target.core_kind, cls.kernel_name)

    @classmethod
    def route(cls, problem) -> Any:
        shape = problem.shape
        module = ROUTES.get((shape.series, shape.comm_alg))
        if module is None:
            known = ", ".join(repr(alg) for series, alg in sorted(ROUTES) if series == shape.series)
            raise UsageError(f"torch_npu.{problem.api}: comm_alg {shape.comm_alg!r} is checked but its kernels are not "
                             f"modelled by npusim on this product yet; use one of {known}")
        return module

    @classmethod
    def prepare(cls, problem, plan: MoePlan, tensors: Mapping[str, Any], system) -> MoeCall:
        """Join the group (the rank's die is the device of its tensors), agree on the shared
        attributes, number the call."""
        shape = problem.shape
        die = next(iter(t for t in tensors.values() if t is not None)).device
        group = comm_group(system, problem.api, shape.group_ep, shape.ep_world_size, buffer_bytes(system.spec, problem.api))
        group.join(problem.api, shape.ep_rank_id, die, shape.ep_world_size)
        for name in AGREED + ("h", "k", "tp_world_size"):
            group.agree(problem.api, shape.ep_rank_id, name, getattr(shape, name))
        # the dispatch and the combine each have their comm_alg (a fullmesh_v2 dispatch pairs with the default combine)
        group.agree(problem.api, shape.ep_rank_id, f"{cls.kind} comm_alg", shape.comm_alg)
        cls.route(problem)
        if problem.version == 1 and shape.shared_expert_rank_num:
            raise UsageError(f"torch_npu.{problem.api}: shared_expert_rank_num={shape.shared_expert_rank_num}: the first op pair's "
                             "shared experts (each sender's tokens split over the shared ranks) are not modelled by npusim; use "
                             "npu_moe_distribute_dispatch_v2 / combine_v2 for shared experts")
        return MoeCall(problem, plan, dict(tensors), group, 0, system)

    kind: ClassVar[str]

    @classmethod
    def steps(cls, problem, plan: MoePlan, tensors: Mapping[str, Any], context: MoeCall, op: int):
        """The route's steps; the call's epoch is taken on the device, when the op starts (a graph's
        replay is a new call)."""
        context.op = op
        context.epoch = context.group.next_epoch(problem.shape.ep_rank_id, cls.kind)
        route = cls.route(problem)
        return route.dispatch_steps(context) if cls.kind == "dispatch" else route.combine_steps(context)


class MoeDispatch(MoeOp):
    kind = "dispatch"
    tensors: ClassVar[tuple[str, ...]] = ("x", "expert_ids", "scales", "x_active_mask", "expert_scales", "elastic_info", "performance_info")
    optional = frozenset({"scales", "x_active_mask", "expert_scales", "elastic_info", "performance_info"})
    control_outputs = frozenset({"expert_token_nums", "ep_recv_counts"})
    """The counts the grouped matmuls and the activation read (and the combine takes back)."""

    @classmethod
    def check_with(cls, spec, args: Mapping[str, Any]) -> DispatchProblem:
        return check_dispatch(args["api"], cls.version, _series(spec.product), dict(args), buffer_bytes(spec, args["api"]))

    @classmethod
    def outputs(cls, problem: DispatchProblem) -> dict:
        return problem.output_shapes()

    @classmethod
    def describe(cls, problem: DispatchProblem, plan) -> dict:
        s = problem.shape
        return {"group": s.group_ep, "rank": s.ep_rank_id, "ep_world_size": s.ep_world_size, "bs": s.bs, "h": s.h, "k": s.k,
                "experts": s.moe_expert_num, "quant_mode": problem.quant_mode, "comm_alg": s.comm_alg}


class MoeCombine(MoeOp):
    kind = "combine"
    assist: ClassVar[str] = "assist_info_for_combine"
    tensors: ClassVar[tuple[str, ...]] = ("expand_x", "expert_ids", "assist_info_for_combine", "ep_send_counts", "expert_scales", "tp_send_counts",
               "x_active_mask", "expand_scales", "shared_expert_x", "ori_x", "const_expert_alpha_1", "const_expert_alpha_2",
               "const_expert_v")
    optional = frozenset({"tp_send_counts", "x_active_mask", "expand_scales", "shared_expert_x", "ori_x", "const_expert_alpha_1",
                          "const_expert_alpha_2", "const_expert_v"})

    @classmethod
    def check_with(cls, spec, args: Mapping[str, Any]) -> CombineProblem:
        return check_combine(args["api"], cls.version, _series(spec.product), dict(args), buffer_bytes(spec, args["api"]))

    @classmethod
    def outputs(cls, problem: CombineProblem) -> dict:
        return {"out": ((problem.shape.bs, problem.shape.h), problem.dtype)}

    @classmethod
    def describe(cls, problem: CombineProblem, plan) -> dict:
        s = problem.shape
        return {"group": s.group_ep, "rank": s.ep_rank_id, "ep_world_size": s.ep_world_size, "bs": s.bs, "h": s.h, "k": s.k,
                "experts": s.moe_expert_num, "comm_alg": s.comm_alg}
