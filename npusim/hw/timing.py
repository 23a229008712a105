"""A die's costs converted once from the config into integer picoseconds and bytes/ps.

The hot path of the engine reads these plain numbers instead of unit-carrying config values. Core
kinds are data (``die.cores``): each :class:`CoreKindTiming` holds a kind's pipes, buffers and copy
engines, and which engine makes each copy; the ISA and the cores take them from here.

Each cost also knows the config key it came from: :meth:`VectorTiming.rule`,
:meth:`ScalarTiming.rule`, :meth:`CubeTiming.rule` give the :class:`~npusim.trace.costs.CostRule` of
an instruction's time, :meth:`DmaTiming.costs` an engine's keys, :attr:`DieTiming.memory_latency`
the terms of a GM access's latency: what the recorder's cost sources are told
(:mod:`npusim.trace.costs`), so that a report can say which values a verdict rests on.
"""

from __future__ import annotations

from dataclasses import dataclass

from npusim.config.schema import CopyEngineSpec, CoreKindSpec, DieSpec
from npusim.hw.pipes import Pipe
from npusim.trace.costs import CostRule, EngineCosts, Term, constant

VECTOR, SCALAR, CUBE = "die.vector", "die.scalar", "die.cube"
"""The config sections of the die's shared units."""


@dataclass(frozen=True)
class DmaTiming:
    """One core's DMA engine: peak rate (bytes/ps) of each move it makes (``(source, destination)``
    places) and of a copy whose GM side is another die's (``remote_rate_bytes_per_ps``, None: the
    move's), set-up (ps), extra cost per burst after the first (ps), the transfer granule (bytes),
    the requests its queue keeps in flight, and ``key``, its config section
    (``die.cores.aiv.engines.MTE2``)."""

    rates_bytes_per_ps: dict[tuple[str, str], float]
    remote_rate_bytes_per_ps: float | None
    setup_ps: int
    per_burst_ps: int
    granule_bytes: int
    queue_depth: int
    rate_keys: tuple[str, ...] = ()
    key: str = ""

    @classmethod
    def from_spec(cls, spec: CopyEngineSpec, clock_hz: float, key: str = "") -> DmaTiming:
        rates = {(source, destination): spec.rates.get(move, spec.rate).bytes_per_ps(clock_hz)
                 for move in spec.moves for source, destination in [move.split("->")]}
        remote = spec.remote_rate.bytes_per_ps(clock_hz) if spec.remote_rate is not None else None
        rate_keys = tuple(dict.fromkeys(f"{key}.rates.{move}" if move in spec.rates else f"{key}.rate" for move in spec.moves))
        if remote is not None:
            rate_keys += (f"{key}.remote_rate",)
        return cls(rates, remote, spec.setup.to_ps(clock_hz), spec.per_burst.to_ps(clock_hz), spec.burst_bytes, spec.queue_depth,
                   rate_keys, key)

    def rate_bytes_per_ps(self, move: tuple[str, str], remote: bool) -> float:
        """The cap of a copy of ``move`` (bytes/ps); ``remote``: its GM side is another die's."""
        rate = self.rates_bytes_per_ps[move]
        return min(rate, self.remote_rate_bytes_per_ps) if remote and self.remote_rate_bytes_per_ps is not None else rate

    def costs(self) -> EngineCosts:
        """Its cost keys: set-up, per burst, and the rates of its moves (a copy's cap is one of them)."""
        return EngineCosts(Term((f"{self.key}.setup",), self.setup_ps), Term((f"{self.key}.per_burst",), self.per_burst_ps), self.rate_keys)


@dataclass(frozen=True)
class BufferTiming:
    """An on-chip buffer: capacity and the alignment of each allocation, in bytes."""

    capacity_bytes: int
    alignment_bytes: int


@dataclass(frozen=True)
class CoreKindTiming:
    """One kind of core of a die: ``order`` (its position among the die's kinds, which orders trace
    lanes), ``count`` cores, ``pipes``, ``buffers`` by name, copy ``engines`` by pipe, and
    ``moves``: for each (source, destination) place (``"GM"`` or a buffer) the pipe whose engine
    copies it."""

    name: str
    order: int
    count: int
    pipes: tuple[Pipe, ...]
    buffers: dict[str, BufferTiming]
    engines: dict[Pipe, DmaTiming]
    moves: dict[tuple[str, str], Pipe]

    @classmethod
    def from_spec(cls, name: str, order: int, spec: CoreKindSpec, clock_hz: float) -> CoreKindTiming:
        engines = {Pipe[pipe]: DmaTiming.from_spec(engine, clock_hz, f"die.cores.{name}.engines.{pipe}") for pipe, engine in spec.engines.items()}
        moves = {tuple(move.split("->")): Pipe[pipe] for pipe, engine in spec.engines.items() for move in engine.moves}
        buffers = {buffer: BufferTiming(b.size.bytes, b.alignment) for buffer, b in spec.buffers.items()}
        return cls(name, order, spec.count, tuple(Pipe[p] for p in spec.pipes), buffers, engines, moves)  # type: ignore[arg-type]


@dataclass(frozen=True)
class VectorTiming:
    """The vector unit: bytes per repeat, repeats per instruction, and the cost of an instruction
    = ``issue_ps + repeats * per_repeat_ps + latency_ps[kind]``."""

    repeat_bytes: int
    max_repeats: int
    issue_ps: int
    per_repeat_ps: int
    latency_ps: dict[str, int]

    def cost_ps(self, kind: str, repeats: int) -> int:
        latency = self.latency_ps.get(kind)
        if latency is None:
            latency = self.latency_ps["default"]
        return self.issue_ps + repeats * self.per_repeat_ps + latency

    def rule(self, kind: str) -> CostRule:
        """The keys of an instruction of ``kind``: its issue and its kind's latency, then its repeats."""
        latency = kind if kind in self.latency_ps else "default"
        return CostRule((Term((f"{VECTOR}.issue",), self.issue_ps), Term((f"{VECTOR}.latency.{latency}",), self.latency_ps[latency])),
                        (f"{VECTOR}.per_repeat",))


@dataclass(frozen=True)
class ScalarTiming:
    """The scalar unit's costs in ps."""

    instruction_ps: int
    ub_read_ps: int
    flag_ps: int
    barrier_ps: int

    @staticmethod
    def rule(cost: str) -> CostRule:
        """The key of a scalar cost: ``instruction``, ``ub_read``, ``flag`` or ``barrier``."""
        return constant(f"{SCALAR}.{cost}")


@dataclass(frozen=True)
class CubeTiming:
    """The cube unit: an m x n x k fp16 block in ``per_block_ps`` (``per_block_exact_ps`` before
    rounding to whole ps). The block's k spans ``k x 2`` bytes, so a block holds ``k x 2 / itemsize``
    of k for other input dtypes (32 int8, 8 fp32: A2A3.ini ``[DtypeMKN]``) in the same time."""

    m: int
    n: int
    k: int
    per_block_ps: int
    per_block_exact_ps: float = 0.0

    def block_k(self, itemsize: int) -> int:
        """The k of one block for inputs of ``itemsize`` bytes."""
        return self.k * 2 // itemsize

    def blocks(self, m: int, n: int, k: int, itemsize: int) -> int:
        """Blocks of an m x n x k multiply (each dim rounded up to whole blocks)."""
        return -(-m // self.m) * -(-n // self.n) * -(-k // self.block_k(itemsize))

    def cost_ps(self, m: int, n: int, k: int, itemsize: int) -> int:
        """Time of an m x n x k multiply-accumulate (ps): its blocks, one after the other."""
        return int(round(self.blocks(m, n, k, itemsize) * self.per_block_exact_ps))

    @staticmethod
    def rule() -> CostRule:
        """The key of a multiply's time: its blocks."""
        return constant(f"{CUBE}.per_block")


@dataclass(frozen=True)
class DieTiming:
    """Everything time-related of one die's cores: the core kinds, and the vector and cube units
    (None when no kind has the pipe) and the scalar unit they share; ``memory_latency``, the
    latency a core's access to GM pays at the memory (L2, then HBM), as terms by config key."""

    clock_hz: float
    kinds: dict[str, CoreKindTiming]
    vector: VectorTiming | None
    scalar: ScalarTiming
    cube: CubeTiming | None
    memory_latency: tuple[Term, ...] = ()
    sync_all_ps: int | None = None  # one SyncAll of a kernel's cores (die.sync_all); None when the config has none

    @property
    def memory_latency_ps(self) -> int:
        return sum(term.ps for term in self.memory_latency)

    @staticmethod
    def sync_all_rule() -> CostRule:
        """The key of a SyncAll's time on the critical path (from the last core's arrival): its cost."""
        return constant("die.sync_all")

    def cycles_to_ps(self, cycles: float) -> int:
        return int(round(cycles * 1e12 / self.clock_hz))

    @classmethod
    def from_spec(cls, die: DieSpec) -> DieTiming:
        hz = die.clock.hz
        kinds = {name: CoreKindTiming.from_spec(name, order, kind, hz) for order, (name, kind) in enumerate(die.cores.items())}
        vector = None
        if die.vector is not None:
            vector = VectorTiming(die.vector.repeat_bytes, die.vector.max_repeats, die.vector.issue.to_ps(hz),
                                  die.vector.per_repeat.to_ps(hz), {kind: q.to_ps(hz) for kind, q in die.vector.latency.items()})
        scalar = ScalarTiming(die.scalar.instruction.to_ps(hz), die.scalar.ub_read.to_ps(hz), die.scalar.flag.to_ps(hz), die.scalar.barrier.to_ps(hz))
        cube = None
        if die.cube is not None:
            per_block = die.cube.per_block
            per_block_s = per_block.value / hz if per_block.per_cycle else per_block.value
            cube = CubeTiming(die.cube.m, die.cube.n, die.cube.k, per_block.to_ps(hz), per_block_s * 1e12)
        memory = (Term(("die.l2.latency",), die.l2.latency.to_ps(hz)), Term(("die.hbm.latency",), die.hbm.latency.to_ps(hz)))
        sync_all = die.sync_all.to_ps(hz) if die.sync_all is not None else None
        return cls(hz, kinds, vector, scalar, cube, memory, sync_all)
