"""The hardware description a config file declares, as frozen pydantic models.

Every component declares its parameters with a type, a unit and a one-line meaning (gem5 style).
Quantities are :class:`~npusim.units.Quantity` values parsed from strings with units; a bare number,
a wrong unit or a non-positive value is refused. Unknown keys are refused (``extra='forbid'``).
The hardware model (``npusim.hw``) reads these specs and never writes them.
"""

from __future__ import annotations

from typing import Annotated, Literal, Union

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, PlainSerializer, model_validator

from npusim.config.registry import OPS, settings_of
from npusim.units import Dimension, Quantity, parse_quantity


def _quantity(dimension: Dimension):
    def parse(raw: object) -> Quantity:
        if isinstance(raw, Quantity):
            if raw.dimension is not dimension:
                raise ValueError(f"expected a {dimension.value}, got a {raw.dimension.value} ({raw})")
            return raw
        return parse_quantity(raw, dimension)

    return Annotated[Quantity, BeforeValidator(parse), PlainSerializer(str, return_type=str)]


Size = _quantity(Dimension.SIZE)
Rate = _quantity(Dimension.RATE)
Time = _quantity(Dimension.TIME)
Frequency = _quantity(Dimension.FREQUENCY)
PositiveInt = Annotated[int, Field(gt=0)]
Fraction = Annotated[float, Field(gt=0.0, le=1.0)]


class Spec(BaseModel):
    """Base of every spec: frozen, unknown keys refused."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class DmaEngineSpec(Spec):
    """One core's DMA engine (an MTE or FixPipe queue): its own rate caps every copy it makes."""

    rate: Rate = Field(description="peak rate of this core's engine (per core, one direction)")
    setup: Time = Field(description="fixed cost of one DMA instruction: issue and descriptor set-up")
    per_burst: Time = Field(description="extra cost per burst of a strided (multi-burst) copy")
    burst_bytes: PositiveInt = Field(32, description="transfer granule in bytes; copies move whole granules")


class VectorSpec(Spec):
    """The AIV vector unit: instructions of up to ``max_repeats`` repeats of ``repeat_bytes``."""

    repeat_bytes: PositiveInt = Field(256, description="bytes processed by one repeat (128 fp16 / 64 fp32 lanes)")
    max_repeats: PositiveInt = Field(255, description="largest repeat count one instruction can carry")
    per_repeat: Time = Field(description="issue interval of one repeat")
    issue: Time = Field(description="fixed issue overhead of one vector instruction")
    latency: dict[str, Time] = Field(description="pipeline latency per instruction kind (add, mul, div, exp, conv, dup, default)")

    @model_validator(mode="after")
    def _has_default(self) -> "VectorSpec":
        if "default" not in self.latency:
            raise ValueError("vector.latency needs a 'default' entry, used for kinds not listed")
        return self


class ScalarSpec(Spec):
    """The scalar unit: address arithmetic, single-value reads from UB, pipe synchronisation."""

    instruction: Time = Field(description="one scalar instruction")
    ub_read: Time = Field(description="reading one value from UB into a scalar register")
    flag: Time = Field(description="one set_flag / wait_flag that does not block")
    barrier: Time = Field(description="one pipe_barrier once the pipes are drained")


class CubeSpec(Spec):
    """The AIC cube unit: an m x n x k block of multiply-accumulates per cycle."""

    m: PositiveInt = 16
    n: PositiveInt = 16
    k: PositiveInt = 16
    per_block: Time = Field(description="time of one m x n x k fp16 block")


class AicSpec(Spec):
    """A cube core (AIC): pipes SCALAR, CUBE, MTE1, MTE2, FIXP; buffers L1, L0A, L0B, L0C."""

    l1: Size
    l0a: Size
    l0b: Size
    l0c: Size
    mte2: DmaEngineSpec = Field(description="GM -> L1 / L0A / L0B")
    mte1: DmaEngineSpec = Field(description="L1 -> L0A / L0B")
    fixp: DmaEngineSpec = Field(description="L0C -> GM / L1")
    cube: CubeSpec


class AivSpec(Spec):
    """A vector core (AIV): pipes SCALAR, VECTOR, MTE2, MTE3; buffer UB."""

    ub: Size
    mte2: DmaEngineSpec = Field(description="GM -> UB (local or remote GM)")
    mte3: DmaEngineSpec = Field(description="UB -> GM (local or remote GM)")


class MemorySpec(Spec):
    """HBM of one die: capacity, peak bandwidth shared by all its readers and writers, access latency."""

    size: Size
    bandwidth: Rate
    latency: Time


class L2Spec(Spec):
    """The die's L2: every GM access crosses it; its bandwidth is shared like HBM's."""

    size: Size
    bandwidth: Rate
    latency: Time
    atomic_add: Time | None = Field(
        None,
        description="read-modify-write of one atomic-add store (e.g. shmem_put with ADD) at the L2 of the target die; "
        "atomic adds to the same 32-byte blocks wait for each other's",
    )


class AicpuSpec(Spec):
    """The die's AICPUs: they schedule tile ops and poll signals."""

    count: PositiveInt
    schedule: Time = Field(description="scheduling one ready task onto a core")
    dependency: Time = Field(description="resolving the dependencies of one finished task")
    completion: Time = Field(description="handling the completion of one task")
    poll_interval: Time = Field(description="interval between two polls of a signal slot")


class DieSpec(Spec):
    """One die (one device, one rank): AI core clusters, L2, HBM, AICPUs."""

    clock: Frequency = Field(description="AI core clock; cycles in this config are of this clock")
    aic_count: PositiveInt
    aiv_count: PositiveInt
    aic: AicSpec
    aiv: AivSpec
    vector: VectorSpec
    scalar: ScalarSpec
    l2: L2Spec
    hbm: MemorySpec
    aicpu: AicpuSpec
    sdma: "SdmaSpec" = Field(description="system DMA engine: bulk GM-to-GM copies between dies (HIXL / HCCL over the scale-up fabric)")


class LinkSpec(Spec):
    """A point-to-point link, the same in both directions; ``bandwidth`` is per direction."""

    bandwidth: Rate
    latency: Time = Field(description="one traversal of the link (serdes, wire, port)")
    efficiency: Fraction = Field(1.0, description="fraction of the raw rate that carries payload (protocol overhead)")
    write_credits: Size | None = Field(
        None,
        description="posted-write data the receiving port buffers (link-level credit flow control); a credit returns one "
        "link round trip (2 x latency) after use, so writes cross the link at most write_credits / (2 x latency); "
        "None: writes are limited by the bandwidth alone",
    )


class SwitchSpec(Spec):
    """A switch: non-blocking inside, a fixed latency per traversal."""

    latency: Time


class FullMeshFabric(Spec):
    """Scale-up fabric of an A2 server: one link between every pair of NPUs (HCCS)."""

    kind: Literal["full_mesh"]
    link: LinkSpec


class UbSwitchFabric(Spec):
    """Scale-up fabric of an A3 node / SuperPoD: each die has one link into each of ``planes``
    first-tier switches of its node; nodes are joined by second-tier switches of the same plane."""

    kind: Literal["ub_switch"]
    planes: PositiveInt = Field(description="first-tier switches per node = links per die")
    link: LinkSpec = Field(description="one die-to-switch link")
    l1_switch: SwitchSpec
    l2_switch: SwitchSpec


class ExplicitLink(Spec):
    """One bidirectional link between two dies of an explicit topology."""

    a: int = Field(ge=0, description="die index of one end")
    b: int = Field(ge=0, description="die index of the other end")
    link: LinkSpec


class ExplicitFabric(Spec):
    """A scale-up fabric written link by link (for what-if topologies)."""

    kind: Literal["links"]
    links: list[ExplicitLink]


Fabric = Annotated[Union[FullMeshFabric, UbSwitchFabric, ExplicitFabric], Field(discriminator="kind")]


class NicSpec(Spec):
    """Scale-out RoCE NIC, one per ``per`` (npu package or die), reaching every other NIC."""

    bandwidth: Rate
    latency: Time
    per: Literal["package", "die"] = "package"
    efficiency: Fraction = Field(1.0, description="fraction of the line rate that carries payload (RoCE v2 headers per packet)")


class SystemShape(Spec):
    """How many nodes, packages and dies the system has."""

    nodes: Annotated[int, Field(ge=1, le=48)] = Field(1, description="nodes (A3 SuperPoD: up to 48)")
    packages_per_node: PositiveInt = Field(description="NPU packages per node")
    dies_per_package: Annotated[int, Field(ge=1, le=2)] = Field(1, description="dies per package (2 on 910C)")

    @property
    def dies_per_node(self) -> int:
        return self.packages_per_node * self.dies_per_package

    @property
    def dies(self) -> int:
        return self.nodes * self.dies_per_node


class SystemSpec(Spec):
    """A whole simulated machine: what ``--config`` names."""

    name: str = Field(description="short name used in output folders (a2, a3, ...)")
    description: str = ""
    product: Literal["ascend910b", "ascend910c"] = Field(description="chip product; decides which op dtypes are supported")
    shape: SystemShape
    die: DieSpec
    fabric: Fabric
    package_link: LinkSpec | None = Field(None, description="die-to-die link inside a package (SIO on 910C)")
    nic: NicSpec
    ops: settings_of(OPS) = Field(default_factory=dict, description="per-op settings of the kernels npusim models (not hardware), "
                                  "each validated by its op's own model")
    shmem: "ShmemSpec | None" = Field(None, description="PyPTO's distributed (shmem) runtime; needed by npusim.launch")
    host: "HostSpec | None" = Field(None, description="the host thread that issues torch programs' ops (npusim.torch_npu with torch); "
                                    "None: launches cost no host time")

    @model_validator(mode="after")
    def _topology_is_consistent(self) -> "SystemSpec":
        dies = self.shape.dies
        if isinstance(self.fabric, ExplicitFabric):
            for i, link in enumerate(self.fabric.links):
                for end in ("a", "b"):
                    die = getattr(link, end)
                    if die >= dies:
                        raise ValueError(
                            f"fabric.links[{i}].{end} references die {die}, but the system has {dies} dies "
                            f"(0..{dies - 1}); fix the link or raise shape.packages_per_node"
                        )
        if isinstance(self.fabric, FullMeshFabric) and self.shape.nodes != 1:
            raise ValueError("a full_mesh fabric joins the dies of one node; set shape.nodes: 1 or use a ub_switch fabric")
        if self.shape.dies_per_package > 1 and self.package_link is None:
            raise ValueError("shape.dies_per_package is 2 but package_link (the die-to-die link) is missing")
        return self

    @model_validator(mode="after")
    def _op_settings_fit_the_system(self) -> "SystemSpec":
        for name, settings in self.ops.items():
            OPS.get(name).check_settings(settings, self)
        return self

    @model_validator(mode="after")
    def _shmem_schedulers_fit_the_aicpus(self) -> "SystemSpec":
        if self.shmem is not None and self.shmem.schedulers > self.die.aicpu.count:
            raise ValueError(
                f"shmem.schedulers is {self.shmem.schedulers}, but a die has only {self.die.aicpu.count} AICPUs "
                "(die.aicpu.count); lower shmem.schedulers"
            )
        return self


class SdmaSpec(Spec):
    """A die's system DMA engine (SDMA): ``channels`` independent queues, each executing its copy
    descriptors one after the other (a descriptor starts when the previous one has completed)."""

    channels: PositiveInt = Field(description="channels: transfers that run at once on the die, one per channel")
    rate: Rate = Field(description="peak rate of one channel (one direction)")
    setup: Time = Field(description="fixed cost of one descriptor: fetch and decode, completion report")


class HostSpec(Spec):
    """The host CPU thread of a torch program: what each eager op and each graph replay costs it
    before the device sees the work (docs/torch.md)."""

    op_launch: Time = Field(description="one eager op call: torch dispatch, the aclnn API's checks and executor, and queueing its kernels on the stream")
    tiling: Time = Field(description="the op's tiling computed on the host and copied to the device, for ops that have one")
    graph_launch: Time = Field(description="one replay of a captured graph (all its kernels in one launch)")


class ShmemSpec(Spec):
    """PyPTO's distributed runtime on each die: how a device task schedules tile ops onto the AIV
    cores, the communication windows of a group, and the fixed buffers of its tile ops."""

    core_choice: Literal["round_robin", "least_loaded"] = Field(
        description="how a scheduler picks the AIV core of a ready tile op: the next core in turn, or the core "
        "with the fewest tile ops dispatched and not yet finished"
    )
    schedulers: PositiveInt = Field(description="AICPU scheduler threads per device task; each manages an equal share of the AIV cores")
    data_window: Size = Field(description="data window per PE and communication group (HCCL buffer)")
    signal_window: Size = Field(description="signal window per PE and communication group")
    max_groups: PositiveInt = Field(description="communication groups one program may use")
    staging_buffer: Size = Field(description="UB buffer of one put/get tile op per ping-pong half")


DieSpec.model_rebuild()
SystemSpec.model_rebuild()
