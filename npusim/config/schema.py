"""The hardware description a config file declares, as frozen pydantic models.

Every component declares its parameters with a type, a unit and a one-line meaning (gem5 style).
Quantities are :class:`~npusim.units.Quantity` values parsed from strings with units; a bare number,
a wrong unit or a non-positive value is refused, and so is one that the engine cannot take once
converted to its units (:meth:`~npusim.units.Quantity.engine_problem`, checked for every quantity of
a whole system). Unknown keys are refused (``extra='forbid'``), and values are not coerced
(``strict``): ``true`` is not the number 1, ``4.0`` is not the whole number 4.
The hardware model (``npusim.hw``) reads these specs and never writes them.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from typing import Annotated, ClassVar, Literal

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, PlainSerializer, SerializeAsAny, model_validator

from npusim.config.products import PRODUCTS
from npusim.config.registry import COLLECTIVES, FABRICS, OPS, KindOf, SettingsOf
from npusim.units import Dimension, Quantity, parse_quantity


def _parser(dimension: Dimension) -> Callable[[object], Quantity]:
    """The validator of a quantity of ``dimension``: a string with a unit, or a Quantity of it."""

    def parse(raw: object) -> Quantity:
        if isinstance(raw, Quantity):
            if raw.dimension is not dimension:
                raise ValueError(f"expected a {dimension.value}, got a {raw.dimension.value} ({raw})")
            return raw
        return parse_quantity(raw, dimension)

    return parse


_AS_WRITTEN = PlainSerializer(str, return_type=str)
Size = Annotated[Quantity, BeforeValidator(_parser(Dimension.SIZE)), _AS_WRITTEN]
Rate = Annotated[Quantity, BeforeValidator(_parser(Dimension.RATE)), _AS_WRITTEN]
Time = Annotated[Quantity, BeforeValidator(_parser(Dimension.TIME)), _AS_WRITTEN]
Frequency = Annotated[Quantity, BeforeValidator(_parser(Dimension.FREQUENCY)), _AS_WRITTEN]
Fraction = Annotated[float, Field(gt=0.0, le=1.0)]

# Every count of the schema is bounded above by what any Ascend part could have, far above the
# products' own values, so that a typo (``--set die.sdma.channels=100000000``) is a located config
# error at once rather than a process that allocates for minutes (tests/config/test_schema.py
# checks that every whole-number field has a bound).
MAX_CORES = 1024
"""AI cores of one kind per die (A2: 24 cube + 48 vector; 310P: 8 + 7)."""
MAX_AICPUS = 64
"""AICPUs per die, and AICPU threads of one task (A2/A3: 6; 310P: 7)."""
MAX_CHANNELS = 1024
"""Queues of one engine (SDMA channels: 8 assumed on A2/A3), switch planes of one node (A3: 7)."""
MAX_PACKAGES = 64
"""NPU packages per node (A2 / A3 servers: 8; an Atlas 300I Duo card: 2)."""
MAX_GRANULE_BYTES = 1 << 20
"""A transfer granule or an alignment in bytes (32 to 1024 on Ascend): no core buffer holds more than 1 MiB."""
MAX_VECTOR_BYTES = 4096
"""Bytes of one vector repeat (256 on Ascend: 128 fp16 lanes)."""
MAX_REPEATS = 65535
"""Repeats one vector instruction carries (255 on Ascend, an 8-bit field; a 16-bit one at most)."""
MAX_CUBE_SIDE = 256
"""A side of the cube unit's m x n x k block (16 on Ascend)."""
MAX_GROUPS = 64
"""Communication groups one program may use (PyPTO: 2)."""
MAX_PODS = 64
"""SuperPoDs of one system joined by RoCE (Huawei's announced Atlas 950 SuperCluster: 64)."""
MAX_QUEUE_DEPTH = 1024
"""Requests one DMA engine or SDMA channel keeps in flight (assumed 4 and 1 on A2/A3)."""


CoreCount = Annotated[int, Field(gt=0, le=MAX_CORES)]
AicpuCount = Annotated[int, Field(gt=0, le=MAX_AICPUS)]
ChannelCount = Annotated[int, Field(gt=0, le=MAX_CHANNELS)]
PackageCount = Annotated[int, Field(gt=0, le=MAX_PACKAGES)]
GranuleBytes = Annotated[int, Field(gt=0, le=MAX_GRANULE_BYTES)]
VectorBytes = Annotated[int, Field(gt=0, le=MAX_VECTOR_BYTES)]
RepeatCount = Annotated[int, Field(gt=0, le=MAX_REPEATS)]
CubeSide = Annotated[int, Field(gt=0, le=MAX_CUBE_SIDE)]
GroupCount = Annotated[int, Field(gt=0, le=MAX_GROUPS)]
PodCount = Annotated[int, Field(gt=0, le=MAX_PODS)]

_SAFE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")


def _safe_name(purpose: str, example: str) -> Callable[[str], str]:
    """The check of a name that ``purpose`` puts where only plain names are safe."""

    def check(name: str) -> str:
        if not _SAFE_NAME.fullmatch(name):
            raise ValueError(
                f"{name!r} is not a safe name: {purpose}, so it must be "
                f"1 to 64 letters, digits, '.', '_' or '-', starting with a letter or a digit (no '/', no spaces), e.g. {example}"
            )
        return name

    return check


ConfigName = Annotated[str, AfterValidator(_safe_name("the name becomes part of output folders (traces/<workload>-<name>)", "a3-superpod"))]
MemoryName = Annotated[str, AfterValidator(_safe_name("the name labels the memory in reports, traces and plots (die0 <name>)", "LPDDR4X"))]


class Spec(BaseModel):
    """Base of every spec: frozen, unknown keys refused, no coercion between types. Its validator
    is built when first used (``defer_build``): most specs are only validated inside a whole
    system's, and a fabric kind's or op's settings only when a config names them."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True, defer_build=True)


def _quantities(value: object, path: str) -> Iterator[tuple[str, Quantity]]:
    """Every quantity inside ``value`` (a spec, a mapping or a list of them) with its key path below
    ``path`` (``fabric.links[0].link.latency``)."""
    if isinstance(value, Quantity):
        yield path, value
    elif isinstance(value, BaseModel):
        for name in type(value).model_fields:
            yield from _quantities(getattr(value, name), f"{path}.{name}" if path else name)
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _quantities(item, f"{path}.{key}")
    elif isinstance(value, (list, tuple)):
        for index, item in enumerate(value):
            yield from _quantities(item, f"{path}[{index}]")


PipeName = Literal["SCALAR", "VECTOR", "CUBE", "MTE1", "MTE2", "MTE3", "FIXP"]
"""A pipe of an AI core, as the vendor's tools name it (the hardware model's ``Pipe``; a test keeps the two equal)."""
BufferName = Annotated[str, Field(pattern=r"^[A-Z][A-Z0-9]*$", description="an on-chip buffer, as the vendor names it (UB, L1, L0A ...)")]
Move = Annotated[str, Field(pattern=r"^[A-Z][A-Z0-9]*->[A-Z][A-Z0-9]*$", description="SOURCE->DESTINATION, e.g. GM->UB")]
GM = "GM"
"""The device's global memory (HBM through L2), the one place every core kind reaches."""


QueueDepth = Annotated[int, Field(ge=1, le=MAX_QUEUE_DEPTH, description="requests an engine keeps in flight (1: each completes before the next is issued)")]
"""How many requests a DMA engine's queue holds at once; 0 is refused (an engine that takes no request moves nothing)."""


class CopyEngineSpec(Spec):
    """A core's DMA engine on one pipe (an MTE or the FixPipe): the copies it makes, the rate of
    each (its own rate, which caps every copy it drives, or a rate of the move), its fixed costs,
    and how many requests it keeps in flight (``queue_depth``: the set-up of a request overlaps the
    streaming of earlier ones; requests stream one after another and complete in order)."""

    moves: list[Move] = Field(min_length=1, description="what the engine copies: SOURCE->DESTINATION (GM or a buffer of the core)")
    rate: Rate = Field(description="peak rate of this core's engine (per core, one direction), for every move without its own in rates")
    rates: dict[Move, Rate] = Field(default_factory=dict, description="the peak rate of a move where it differs from rate (a path of the "
                                    "core's data paths: GM->L1, L1->L0A ...)")
    remote_rate: Rate | None = Field(None, description="cap of a copy whose GM side is another die's (its requests cross the fabric); "
                                     "None: the move's rate (the fabric's links limit it)")
    setup: Time = Field(description="fixed cost of one DMA instruction before its bursts: issue and descriptor set-up (overlaps the "
                        "streaming of earlier requests when queue_depth > 1)")
    per_burst: Time = Field(description="the engine's own work for each burst of a copy (one GM request per burst), paid one after another as "
                            "the copy streams")
    burst_bytes: GranuleBytes = Field(32, description="transfer granule in bytes; copies move whole granules")
    queue_depth: QueueDepth = Field(1, description="requests the engine keeps in flight: a request's set-up and route latency overlap "
                                    "the streaming of earlier ones, which stream one after another and complete in order")

    @model_validator(mode="after")
    def _rates_are_moves(self) -> CopyEngineSpec:
        for move in self.rates:
            if move not in self.moves:
                raise ValueError(f"rates.{move}: the engine does not make that move (moves: {', '.join(self.moves)}); "
                                 "give rates only for moves listed in moves")
        return self


class BufferSpec(Spec):
    """An on-chip buffer of a core: its capacity and the alignment of every allocation in it."""

    size: Size
    alignment: GranuleBytes = Field(description="bytes every allocation starts at a multiple of")


class CoreKindSpec(Spec):
    """One kind of core of a die (AIC, AIV, a 310P AI core ...): how many the die has, its pipes
    (each an in-order queue, all running concurrently), its buffers, and its copy engines by pipe."""

    count: CoreCount = Field(description=f"cores of this kind per die (at most {MAX_CORES})")
    pipes: list[PipeName] = Field(min_length=1, description="its pipes; SCALAR issues every instruction")
    buffers: dict[BufferName, BufferSpec] = Field(default_factory=dict)
    engines: dict[PipeName, CopyEngineSpec] = Field(default_factory=dict, description="copy engines, by the pipe they run on")

    @model_validator(mode="after")
    def _engines_fit_the_core(self) -> CoreKindSpec:
        if "SCALAR" not in self.pipes:
            raise ValueError("pipes must include SCALAR: the scalar unit issues every instruction of a core")
        if len(set(self.pipes)) != len(self.pipes):
            raise ValueError(f"pipes {self.pipes} names a pipe twice; list each once")
        places = set(self.buffers) | {GM}
        seen: dict[str, str] = {}
        for pipe, engine in self.engines.items():
            if pipe not in self.pipes:
                raise ValueError(f"engines.{pipe}: the core has no {pipe} pipe (pipes: {', '.join(self.pipes)}); add it to pipes")
            for move in engine.moves:
                source, destination = move.split("->")
                for end in (source, destination):
                    if end not in places:
                        raise ValueError(f"engines.{pipe}.moves: {move} names {end}, which is neither GM nor a buffer of "
                                         f"this core ({', '.join(sorted(self.buffers)) or 'none'}); add it under buffers")
                if source == destination:
                    raise ValueError(f"engines.{pipe}.moves: {move} copies a place onto itself; give a source and another destination")
                if move in seen:
                    raise ValueError(f"engines.{pipe}.moves: {move} is also moved by {seen[move]}; one engine per move")
                seen[move] = pipe
        return self


class VectorSpec(Spec):
    """The AIV vector unit: instructions of up to ``max_repeats`` repeats of ``repeat_bytes``."""

    repeat_bytes: VectorBytes = Field(256, description="bytes processed by one repeat (128 fp16 / 64 fp32 lanes)")
    max_repeats: RepeatCount = Field(255, description="largest repeat count one instruction can carry")
    per_repeat: Time = Field(description="issue interval of one repeat")
    issue: Time = Field(description="fixed issue overhead of one vector instruction")
    latency: dict[str, Time] = Field(description="pipeline latency per instruction kind (add, mul, div, exp, conv, dup, default)")

    @model_validator(mode="after")
    def _has_default(self) -> VectorSpec:
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
    """The cube unit of the cores with a CUBE pipe: an m x n x k block of multiply-accumulates per cycle."""

    m: CubeSide = 16
    n: CubeSide = 16
    k: CubeSide = 16
    per_block: Time = Field(description="time of one m x n x k fp16 block")


class MemorySpec(Spec):
    """The DRAM of one die (HBM on 910B/910C, LPDDR4X on 310P; the config key is ``hbm``): capacity,
    peak bandwidth shared by all its readers and writers, access latency, and the memory's name."""

    size: Size
    bandwidth: Rate
    latency: Time
    technology: MemoryName = Field("HBM", description="what the memory is (HBM, LPDDR4X): its name in reports, traces and plots (die0 HBM)")


HitRate = Annotated[float, Field(ge=0.0, le=1.0, description="a fraction of accesses that hit, from 0 to 1")]


class L2Spec(Spec):
    """The die's L2, a write-back cache in front of its HBM (docs/architecture.md, "The memory
    model"): every GM access of the die's memory crosses it; a read that misses fetches whole lines
    from HBM, a write allocates its lines dirty, and a dirty line written back to HBM when evicted
    (least recently used first). Its bandwidth is shared like HBM's."""

    size: Size = Field(description="capacity: at most this many bytes of lines are resident")
    bandwidth: Rate = Field(description="peak rate of hits and fills, shared by every reader and writer of the die's memory")
    latency: Time = Field(description="a hit's access latency (a miss adds die.hbm.latency)")
    line: Size = Field(description="bytes of one cache line: what a miss fetches from HBM and an eviction writes back")
    initial_hit_rate: HitRate = Field(0.0, description="hit rate of the first access to a line in the run: 0 (a cold L2, as measurements "
                                      "flush it) up to 1 (every line the run touches was resident at its start)")
    atomic_add: Time | None = Field(
        None,
        description="read-modify-write of one atomic-add store (e.g. shmem_put with ADD) at the L2 of the target die; "
        "atomic adds to the same 32-byte blocks wait for each other's",
    )
    atomic_rate: Rate | None = Field(None, description="peak rate at which the L2 applies atomic-add stores' bytes (reads, adds and "
                                     "writes them), shared by every atomic-add store into the die's memory, local or from another die; "
                                     "None: only the L2's bandwidth limits them")


class AicpuSpec(Spec):
    """The die's AICPUs: they schedule tile ops and poll signals."""

    count: AicpuCount = Field(description=f"AICPUs of the die (at most {MAX_AICPUS})")
    schedule: Time = Field(description="scheduling one ready task onto a core")
    dependency: Time = Field(description="resolving the dependencies of one finished task")
    completion: Time = Field(description="handling the completion of one task")
    poll_interval: Time = Field(description="interval between two polls of a signal slot")
    control_read: Time = Field(description="one read of a GM value by the control-flow AICPU (a device-valued scalar of a PyPTO kernel)")
    rdma_post: Time | None = Field(None, description="posting one RDMA write to the RoCE NIC (one item of HCCL's BatchWrite, the A2 "
                                   "MoE ops' transfers); ops that post from the AICPU need it")


class DieSpec(Spec):
    """One die (one device, one rank): its AI cores by kind, their vector, cube and scalar units,
    L2, HBM, AICPUs and SDMA."""

    clock: Frequency = Field(description="AI core clock; cycles in this config are of this clock")
    cores: dict[str, CoreKindSpec] = Field(min_length=1, description="the die's core kinds by name (aic, aiv ...), in trace order")
    vector: VectorSpec | None = Field(None, description="the vector unit of the cores with a VECTOR pipe")
    cube: CubeSpec | None = Field(None, description="the cube unit of the cores with a CUBE pipe")
    scalar: ScalarSpec
    l2: L2Spec
    hbm: MemorySpec
    aicpu: AicpuSpec
    sdma: SdmaSpec = Field(description="system DMA engine: bulk GM-to-GM copies between dies (HIXL / HCCL over the scale-up fabric)")
    sync_all: Time | None = Field(None, description="one SyncAll of a kernel's vector cores (Ascend C's cross-core barrier: every core "
                                  "waits until all have reached it); kernels that call it need it")

    @model_validator(mode="after")
    def _l2_fits_the_memory(self) -> DieSpec:
        sizes = (self.l2.size, self.l2.line, self.hbm.size)
        if any(size.engine_problem(self.clock.hz) is not None for size in sizes):
            return self  # a size the engine cannot take has its own error (SystemSpec._quantities_fit_the_engine)
        if self.l2.size.bytes > self.hbm.size.bytes:
            raise ValueError(f"die.l2.size ({self.l2.size}) is larger than the memory it caches (die.hbm.size {self.hbm.size}); "
                             "an L2 holds a part of the die's memory: give die.l2.size at most die.hbm.size")
        if self.l2.line.bytes > self.l2.size.bytes:
            raise ValueError(f"die.l2.line ({self.l2.line}) is larger than die.l2.size ({self.l2.size}); a cache holds at least one line")
        return self

    @model_validator(mode="after")
    def _units_of_the_pipes(self) -> DieSpec:
        for unit, pipe in (("vector", "VECTOR"), ("cube", "CUBE")):
            users = [name for name, kind in self.cores.items() if pipe in kind.pipes]
            if users and getattr(self, unit) is None:
                raise ValueError(f"die.cores.{users[0]} has a {pipe} pipe, but die.{unit} (the {unit} unit's costs) is missing; add it")
        return self


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


LEVELS = ("package", "node", "pod", "scale_out")
"""The levels of a system's interconnect (the keys of ``fabrics``), innermost first."""


class FabricSpec(Spec):
    """Base of the config section of one fabric kind (its module in ``npusim.hw.fabrics`` registers
    it): ``kind`` names it, ``levels`` are the levels of ``fabrics`` it may sit at; ``uplinks``: its
    switches reach an outer level (its implementation has ``uplink`` / ``downlink``)."""

    kind: str
    levels: ClassVar[tuple[str, ...]] = ()
    uplinks: ClassVar[bool] = False

    def check(self, level: str, system: SystemSpec) -> None:
        """Raise ValueError (naming the key path) when this fabric does not fit ``system`` at
        ``level``; the default accepts it (the level itself is checked by the system)."""


FabricLevel = Annotated[SerializeAsAny[FabricSpec], KindOf(FABRICS)]
"""A level of ``fabrics``: validated, and written out, as the model of its registered kind."""
OptionalFabricLevel = Annotated[SerializeAsAny[FabricSpec] | None, KindOf(FABRICS, optional=True)]


class FabricsSpec(Spec):
    """The interconnect of a system as levels (as ASTRA-sim composes per-dimension topologies): a
    transfer between two dies takes the innermost level that joins them; a level may reach across
    its members through the level inside it (second-tier switches through the first tier's)."""

    package: OptionalFabricLevel = Field(None, description="joins the dies of one package (SIO on 910C); required when shape.dies_per_package > 1")
    node: FabricLevel = Field(description="joins the dies of one node (HCCS full mesh in an A2 server, first-tier UB switches in an A3 node)")
    pod: OptionalFabricLevel = Field(
        None, description="joins the nodes of the system (second-tier UB switches of an A3 SuperPoD); without it, "
        "dies of different nodes have no load/store path and reach each other by RDMA only"
    )
    scale_out: OptionalFabricLevel = Field(
        None, description="the NICs joining every die of every node through a switch (RoCE); carries RDMA. Absent for a system "
        "whose dies have no NIC (an Atlas 300I Duo card): it then has no RDMA, and one node unless a pod fabric joins nodes"
    )


def fabric_kinds_at(level: str) -> list[str]:
    """The registered fabric kinds that may sit at ``level``."""
    return [name for name, provider in FABRICS if level in provider.Spec.levels]


class SystemShape(Spec):
    """How many pods, nodes, packages and dies the system has. Dies are numbered pod by pod, node
    by node, package by package; nodes are numbered across pods (node ``k`` of pod ``p`` is node
    ``p x nodes + k``)."""

    pods: PodCount = Field(1, description="pods (A3 SuperPoDs) of `nodes` nodes each; the pod fabric joins the nodes of one "
                           "pod only, so dies of two pods reach each other through the scale-out network (RDMA) alone")
    nodes: Annotated[int, Field(ge=1, le=128)] = Field(
        1, description="nodes per pod: A2 servers, the nodes of an A3 SuperPoD (up to 48) or the cabinets of an Atlas 950 SuperPoD (up to 128)")
    packages_per_node: PackageCount = Field(description=f"NPU packages per node (at most {MAX_PACKAGES})")
    dies_per_package: Annotated[int, Field(ge=1, le=2)] = Field(1, description="dies per package (2 on 910C)")

    @property
    def dies_per_node(self) -> int:
        return self.packages_per_node * self.dies_per_package

    @property
    def dies_per_pod(self) -> int:
        return self.nodes * self.dies_per_node

    @property
    def dies(self) -> int:
        return self.pods * self.dies_per_pod

    def pod_of(self, die: int) -> int:
        """The pod die ``die`` belongs to."""
        return die // self.dies_per_pod

    def package_of(self, die: int) -> int:
        """The NPU package die ``die`` belongs to (dies are numbered package by package)."""
        return die // self.dies_per_package

    def node_of(self, die: int) -> int:
        """The node die ``die`` belongs to (dies are numbered node by node, across pods)."""
        return die // self.dies_per_node


HCCL_OPS = ("allreduce", "allgather", "reducescatter", "broadcast", "reduce", "alltoall", "scatter")
"""The op names of HCCL_ALGO's per-op form (``allreduce=level0:NA;level1:ring/...``): the HCCL user
guide's HCCL_ALGO page (allgather also covers AllGatherV, reducescatter ReduceScatterV, alltoall
AlltoAllV and AlltoAllVC)."""
HCCL_LEVELS = ("level0", "level1", "level2")
"""HCCL's levels: inside a server (node), between servers (the nodes of a pod, or A2 servers over
RoCE), between SuperPoDs (pods)."""
HCCL_ALGO_ALIASES = {"h-d_r": "rhd", "hd": "rhd", "nhr_v1": "nhr", "na": "NA", "auto": "auto"}
"""HCCL_ALGO's spellings of an algorithm -> npusim's name (H-D_R is recursive halving-doubling; NA
at level0 and an unset level are HCCL's own choice, npusim's ``NA`` / ``auto``)."""


def _algorithm_name(value: object) -> str:
    """An algorithm as HCCL_ALGO spells it (any case) -> its registered name, ``auto`` or ``NA``."""
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"{value!r} is not an algorithm name; use auto, NA or one of {', '.join(COLLECTIVES.names())}")
    name = value.strip().lower()
    name = HCCL_ALGO_ALIASES.get(name, name)
    if name in ("auto", "NA") or name in COLLECTIVES:
        return name
    if name == "ahc":
        raise ValueError("AHC (asymmetric hierarchical concatenation) is not modelled; use ring, rhd (H-D_R), nhr, nb or pipeline")
    raise ValueError(COLLECTIVES.unknown(name) + " (or auto: HCCL's own choice; NA at level0)")


AlgorithmName = Annotated[str, BeforeValidator(_algorithm_name)]


class HcclLevelsSpec(Spec):
    """The algorithm of each level for one op (HCCL_ALGO's ``<op>=level0:NA;level1:<algo>``); an
    unset level takes the global choice."""

    level0: AlgorithmName | None = Field(None, description="inside a server: NA (the topology's algorithm: mesh on A2, double_ring on A3)")
    level1: AlgorithmName | None = Field(None, description="between servers (the nodes of a SuperPoD, or A2 servers over RoCE)")
    level2: AlgorithmName | None = Field(None, description="between SuperPoDs (pods, over RoCE)")


def parse_hccl_algo(text: str) -> dict[str, object]:
    """HCCL_ALGO's own syntax as the mapping ``hccl.algo`` takes: ``level0:NA;level1:ring`` (every
    op) and ``allreduce=level0:NA;level1:ring/allgather=level1:H-D_R`` (per op), the two forms
    joined by ``/``."""
    result: dict[str, object] = {}
    for part in (p.strip() for p in text.split("/")):
        if not part:
            continue
        op, sep, levels_text = part.partition("=")
        if not sep:
            op, levels_text = "", part
        op = op.strip().lower()
        if op and op not in HCCL_OPS:
            raise ValueError(f"HCCL_ALGO {text!r}: {op!r} is not an op of HCCL_ALGO; use one of {', '.join(HCCL_OPS)}")
        levels: dict[str, str] = {}
        for item in (i.strip() for i in levels_text.split(";")):
            if not item:
                continue
            level, colon, algo = item.partition(":")
            level = level.strip().lower()
            if not colon or level not in HCCL_LEVELS:
                raise ValueError(f"HCCL_ALGO {text!r}: {item!r} is not LEVEL:ALGO with LEVEL one of {', '.join(HCCL_LEVELS)} "
                                 "(e.g. level0:NA;level1:ring)")
            levels[level] = algo.strip()
        if op:
            result[op] = levels
        else:
            result.update(levels)
    return result


def _algo_mapping(value: object) -> object:
    return parse_hccl_algo(value) if isinstance(value, str) else value


class HcclAlgoSpec(HcclLevelsSpec):
    """HCCL_ALGO: the algorithm of each level for every op, and per op (its own levels win over the
    global ones). Written as a mapping (``hccl.algo.level1: ring``, ``hccl.algo.allreduce.level1:
    ring``) or in the environment variable's own syntax (``hccl.algo: "level0:NA;level1:ring"``).
    ``auto`` (or unset) is HCCL's own choice by product, data size and server count."""

    allreduce: HcclLevelsSpec | None = None
    allgather: HcclLevelsSpec | None = None
    reducescatter: HcclLevelsSpec | None = None
    broadcast: HcclLevelsSpec | None = None
    reduce: HcclLevelsSpec | None = None
    alltoall: HcclLevelsSpec | None = None
    scatter: HcclLevelsSpec | None = None

    def forced(self, op: str, level: str) -> str:
        """The algorithm forced for ``op`` (an HCCL_OPS name) at ``level`` (``auto``: none)."""
        per_op: HcclLevelsSpec | None = getattr(self, op) if op in HCCL_OPS else None
        for source in (per_op, self):
            value: str | None = getattr(source, level) if source is not None else None
            if value is not None:
                return value
        return "auto"


class HcclSelectionSpec(Spec):
    """The constants of HCCL's own choice of the inter-server algorithm (its alpha-beta comparison of
    ring, NHR and RHD, and when it takes the pipeline algorithm)."""

    latency: Time = Field(description="the fixed cost of one step HCCL's comparison assumes (alpha)")
    bandwidth: Rate = Field(description="the per-NPU inter-server bandwidth HCCL's comparison assumes (1 / beta)")
    pipeline_min: Size = Field(description="smallest all-gather / reduce-scatter per rank that takes the pipeline algorithm")
    pipeline_allreduce_min: Size = Field(description="smallest all-reduce slice per rank (data / ranks) that takes the pipeline algorithm")
    mesh_small_count: Size | None = Field(None, description="an all-reduce inside one server of at most this per rank of the "
                                          "communicator runs on the mesh instead of the server's own algorithm (None: never)")


class HcclSpec(Spec):
    """HCCL as it runs the collectives of a communicator (docs/collectives.md): which algorithm each
    level takes, where the ops are expanded (host, AICPU, or AIV cores that also move the data), the
    communication buffer that bounds one pass, and the cost of the notifications between ranks."""

    algo: Annotated[HcclAlgoSpec, BeforeValidator(_algo_mapping)] = Field(
        default_factory=lambda: HcclAlgoSpec.model_validate({}), description="HCCL_ALGO: the algorithm of each level, for every op or per op")
    expansion_mode: Literal["host", "ai_cpu", "aiv"] = Field(
        description="HCCL_OP_EXPANSION_MODE: host or ai_cpu expand an op into SDMA / RDMA tasks; aiv runs small ops on the AIV "
        "cores, which write into the peers' buffers themselves")
    buffer: Size = Field(description="HCCL_BUFFSIZE: the communication buffer of each rank; a larger op runs in passes of this size")
    deterministic: bool = Field(False, description="HCCL_DETERMINISTIC: reductions in a fixed order (the mesh adds peers in rank order)")
    notify: Time = Field(description="a notification between two ranks: recorded on one rank's stream, seen by the waiting "
                         "stream of its peer (each step's ready and done handshakes)")
    selection: HcclSelectionSpec
    aiv_max_bytes: Size | None = Field(None, description="with expansion_mode aiv: the largest op (bytes per rank) that runs on "
                                       "the AIV cores; a larger one runs as ai_cpu (None: every size)")
    aiv_cores: CoreCount = Field(description="AIV cores an AIV-expanded op uses (HCCL's core control)")
    aiv_sync: Time = Field(description="with AIV expansion, one step's flag exchange: a flag written into a peer's buffer "
                           "and polled there")


OpSettings = Annotated[dict[str, SerializeAsAny[Spec]], SettingsOf(OPS)]
"""``ops``: each op's settings, validated (and written out) as that op's own model."""


def _known_product(name: str) -> str:
    if name not in PRODUCTS:
        raise ValueError(PRODUCTS.unknown(name))
    return name


class SystemSpec(Spec):
    """A whole simulated machine: what ``--config`` names."""

    name: ConfigName = Field(description="short name used in output folders (a2, a3, ...): letters, digits, '.', '_', '-'")
    description: str = ""
    product: Annotated[str, AfterValidator(_known_product)] = Field(description="chip product (ascend910b, ascend910c, ascend310p ...); decides what the ops support and "
                         "which core kinds run vector and cube kernels")
    shape: SystemShape
    die: DieSpec
    fabrics: FabricsSpec = Field(description="the interconnect, level by level: package, node, pod, scale_out")
    ops: OpSettings = Field(default_factory=dict, description="per-op settings of the kernels npusim models (not hardware), "
                                  "each validated by its op's own model")
    shmem: ShmemSpec | None = Field(None, description="PyPTO's distributed (shmem) runtime; needed by npusim.launch")
    hccl: HcclSpec | None = Field(None, description="HCCL, the collective communication library: its algorithms per fabric level, "
                                  "transport and buffers (docs/collectives.md); torch.distributed's hccl backend and the MoE distribute ops need it")
    host: HostSpec | None = Field(None, description="the host thread that issues torch programs' ops (npusim.torch_npu with torch); "
                                    "None: launches cost no host time")

    @model_validator(mode="after")
    def _quantities_fit_the_engine(self) -> SystemSpec:
        """Every quantity of the system, converted to the engine's units (cycles with the die clock),
        is in range: one line per problem, each starting with its key path. Per-cycle quantities are
        not checked against a clock that is itself out of range (its own line says so)."""
        clock = self.die.clock
        clock_is_usable = clock.engine_problem(clock.hz) is None
        problems = [
            f"{path}: {problem}"
            for path, quantity in _quantities(self, "")
            if clock_is_usable or not quantity.per_cycle
            if (problem := quantity.engine_problem(clock.hz)) is not None
        ]
        if problems:
            raise ValueError("\n".join(problems))
        return self

    @model_validator(mode="after")
    def _fabrics_fit_the_shape(self) -> SystemSpec:
        for level in LEVELS:
            fabric = getattr(self.fabrics, level)
            if fabric is None:
                continue
            if level not in fabric.levels:
                raise ValueError(
                    f"the {fabric.kind} of fabrics.{level}.kind is a fabric of the {' or '.join(fabric.levels)} level, not of the "
                    f"{level} level; use one of {', '.join(fabric_kinds_at(level))}"
                )
            fabric.check(level, self)
        if self.shape.pods > 1 and self.fabrics.scale_out is None:
            raise ValueError(
                f"shape.pods is {self.shape.pods}, but fabrics.scale_out (the NICs) is missing: the pod fabric joins the nodes of "
                "one pod only, so nothing would join two pods; add fabrics.scale_out or use shape.pods=1"
            )
        if self.shape.nodes > 1 and self.fabrics.pod is None and self.fabrics.scale_out is None:
            raise ValueError(
                f"shape.nodes is {self.shape.nodes}, but neither fabrics.pod nor fabrics.scale_out joins the nodes, so the dies of "
                "one node could not reach those of another; add fabrics.scale_out (the NICs) or fabrics.pod, or use shape.nodes=1"
            )
        if self.shape.dies_per_package > 1 and self.fabrics.package is None:
            raise ValueError(
                f"shape.dies_per_package is {self.shape.dies_per_package} but fabrics.package (the die-to-die link of a package) "
                f"is missing; add it with a kind of {', '.join(fabric_kinds_at('package'))}"
            )
        return self

    @model_validator(mode="after")
    def _product_has_its_cores(self) -> SystemSpec:
        product = PRODUCTS.get(self.product)
        for role, kind, pipe in (("vector", product.vector_cores, "VECTOR"), ("cube", product.cube_cores, "CUBE")):
            if kind not in self.die.cores:
                raise ValueError(f"die.cores has no {kind!r} cores, which run the {role} kernels of {product.label}; "
                                 f"add die.cores.{kind} or use another product")
            if pipe not in self.die.cores[kind].pipes:
                raise ValueError(f"die.cores.{kind}.pipes lacks {pipe}: {product.label} runs its {role} kernels there")
        return self

    @model_validator(mode="after")
    def _op_settings_fit_the_system(self) -> SystemSpec:
        for name, settings in self.ops.items():
            OPS.get(name).check_settings(settings, self)
        return self

    @model_validator(mode="after")
    def _shmem_schedulers_fit_the_aicpus(self) -> SystemSpec:
        if self.shmem is not None and self.shmem.schedulers > self.die.aicpu.count:
            raise ValueError(
                f"shmem.schedulers is {self.shmem.schedulers}, but a die has only {self.die.aicpu.count} AICPUs "
                "(die.aicpu.count); lower shmem.schedulers"
            )
        return self


class SdmaSpec(Spec):
    """A die's system DMA engine (SDMA): ``channels`` independent queues, each keeping up to
    ``queue_depth`` copy descriptors in flight (1: a descriptor starts when the previous one has
    completed)."""

    channels: ChannelCount = Field(description=f"channels: transfers that run at once on the die, one per channel (at most {MAX_CHANNELS})")
    rate: Rate = Field(description="peak rate of one channel (one direction)")
    setup: Time = Field(description="fixed cost of one descriptor: fetch and decode, completion report")
    queue_depth: QueueDepth = Field(1, description="descriptors a channel keeps in flight: a descriptor's set-up and latency overlap "
                                    "the streaming of earlier ones")


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
    schedulers: AicpuCount = Field(description="AICPU scheduler threads per device task; each manages an equal share of the AIV cores")
    data_window: Size = Field(description="data window per PE and communication group (HCCL buffer)")
    signal_window: Size = Field(description="signal window per PE and communication group")
    max_groups: GroupCount = Field(description=f"communication groups one program may use (at most {MAX_GROUPS})")
    staging_buffer: Size = Field(description="UB buffer of one put/get tile op per ping-pong half")

