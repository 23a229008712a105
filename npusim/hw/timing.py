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
    """The cube unit: an m x n x k block in ``per_block_ps``."""

    m: int
    n: int
    k: int
    per_block_ps: int


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
        cube = CubeTiming(die.aic.cube.m, die.aic.cube.n, die.aic.cube.k, die.aic.cube.per_block.to_ps(hz))
        buffers = {
            (CoreKind.AIV, "UB"): die.aiv.ub.bytes,
            (CoreKind.AIC, "L1"): die.aic.l1.bytes,
            (CoreKind.AIC, "L0A"): die.aic.l0a.bytes,
            (CoreKind.AIC, "L0B"): die.aic.l0b.bytes,
            (CoreKind.AIC, "L0C"): die.aic.l0c.bytes,
        }
        return cls(hz, dma, vector, scalar, cube, buffers)
