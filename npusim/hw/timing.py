"""A die's costs converted once from the config into integer picoseconds and bytes/ps.

The hot path of the engine reads these plain numbers instead of unit-carrying config values.
"""

from __future__ import annotations

from dataclasses import dataclass

from npusim.config.schema import DieSpec, DmaEngineSpec
from npusim.hw.pipes import CoreKind, Pipe


@dataclass(frozen=True)
class DmaTiming:
    """One core's DMA engine: peak rate (bytes/ps), set-up (ps), extra cost per burst after the
    first (ps), and the transfer granule (bytes)."""

    rate_bytes_per_ps: float
    setup_ps: int
    per_burst_ps: int
    granule_bytes: int

    @classmethod
    def from_spec(cls, spec: DmaEngineSpec, clock_hz: float) -> "DmaTiming":
        return cls(spec.rate.bytes_per_ps(clock_hz), spec.setup.to_ps(clock_hz), spec.per_burst.to_ps(clock_hz), spec.burst_bytes)


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


@dataclass(frozen=True)
class ScalarTiming:
    """The scalar unit's costs in ps."""

    instruction_ps: int
    ub_read_ps: int
    flag_ps: int
    barrier_ps: int


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


@dataclass(frozen=True)
class DieTiming:
    """Everything time-related of one die's cores."""

    clock_hz: float
    dma: dict[tuple[CoreKind, Pipe], DmaTiming]
    vector: VectorTiming
    scalar: ScalarTiming
    cube: CubeTiming
    buffer_bytes: dict[tuple[CoreKind, str], int]

    def cycles_to_ps(self, cycles: float) -> int:
        return int(round(cycles * 1e12 / self.clock_hz))

    @classmethod
    def from_spec(cls, die: DieSpec) -> "DieTiming":
        hz = die.clock.hz
        dma = {
            (CoreKind.AIV, Pipe.MTE2): DmaTiming.from_spec(die.aiv.mte2, hz),
            (CoreKind.AIV, Pipe.MTE3): DmaTiming.from_spec(die.aiv.mte3, hz),
            (CoreKind.AIC, Pipe.MTE2): DmaTiming.from_spec(die.aic.mte2, hz),
            (CoreKind.AIC, Pipe.MTE1): DmaTiming.from_spec(die.aic.mte1, hz),
            (CoreKind.AIC, Pipe.FIXP): DmaTiming.from_spec(die.aic.fixp, hz),
        }
        vector = VectorTiming(
            die.vector.repeat_bytes,
            die.vector.max_repeats,
            die.vector.issue.to_ps(hz),
            die.vector.per_repeat.to_ps(hz),
            {kind: q.to_ps(hz) for kind, q in die.vector.latency.items()},
        )
        scalar = ScalarTiming(die.scalar.instruction.to_ps(hz), die.scalar.ub_read.to_ps(hz), die.scalar.flag.to_ps(hz), die.scalar.barrier.to_ps(hz))
        per_block = die.aic.cube.per_block
        per_block_s = per_block.value / hz if per_block.per_cycle else per_block.value
        cube = CubeTiming(die.aic.cube.m, die.aic.cube.n, die.aic.cube.k, per_block.to_ps(hz), per_block_s * 1e12)
        buffers = {
            (CoreKind.AIV, "UB"): die.aiv.ub.bytes,
            (CoreKind.AIC, "L1"): die.aic.l1.bytes,
            (CoreKind.AIC, "L0A"): die.aic.l0a.bytes,
            (CoreKind.AIC, "L0B"): die.aic.l0b.bytes,
            (CoreKind.AIC, "L0C"): die.aic.l0c.bytes,
        }
        return cls(hz, dma, vector, scalar, cube, buffers)
