"""The hardware a kernel's host tiling is written against (vector or cube cores), read from the die spec.

A real kernel's tiling asks the platform for these (UB size, the vector unit's repeat width, the
MTE granule); taking them from the config, never from constants in the kernel, lets a what-if
(a larger UB, another chip) change the tiling as it would on the device.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from npusim import formats
from npusim.config.products import PRODUCTS
from npusim.config.schema import GM
from npusim.errors import ConfigError

if TYPE_CHECKING:
    from npusim.hw.system import System


@dataclass(frozen=True)
class VectorTarget:
    """The vector cores of one die as a kernel sees them.

    ``core_kind`` names the kind of core vector kernels run on and ``cores`` how many a die has;
    each has ``ub_bytes`` of UB (allocations aligned to ``ub_alignment`` bytes); DMAs move whole
    granules of ``block_bytes``; one vector repeat covers ``repeat_bytes`` of its widest operand and
    one instruction at most ``max_repeats`` repeats.
    """

    product: str
    core_kind: str
    cores: int
    ub_bytes: int
    ub_alignment: int
    block_bytes: int
    repeat_bytes: int
    max_repeats: int

    @classmethod
    def of(cls, system: System) -> VectorTarget:
        """The vector cores of ``system``'s dies (every die of a system is the same): the core kind
        its product runs vector kernels on, with its UB and the engine that loads UB from GM."""
        spec, timing = system.spec, system.timing
        kind = timing.kinds[PRODUCTS.get(spec.product).vector_cores]
        ub = kind.buffers.get("UB")
        load = kind.moves.get((GM, "UB"))
        if ub is None or load is None or timing.vector is None:
            raise ConfigError(f"die.cores.{kind.name} runs the vector kernels of {spec.product}, so it needs a UB buffer, "
                              "an engine that moves GM->UB and die.vector; add them")
        return cls(spec.product, kind.name, kind.count, ub.capacity_bytes, ub.alignment_bytes,
                   kind.engines[load].granule_bytes, timing.vector.repeat_bytes, timing.vector.max_repeats)

    def lanes(self, *dtypes: npt.DTypeLike) -> int:
        """Elements one repeat covers when its widest operand has one of ``dtypes`` (dtypes or format names: ``hifloat8``)."""
        return self.repeat_bytes // max(formats.dtype_named(d).itemsize if isinstance(d, str) else np.dtype(d).itemsize for d in dtypes)

    def blocks(self, nbytes: int) -> int:
        """Granules one contiguous transfer of ``nbytes`` moves."""
        return -(-nbytes // self.block_bytes)

    def ub_aligned(self, nbytes: int) -> int:
        """``nbytes`` rounded up to the UB alignment (what one allocation of it takes)."""
        return -(-nbytes // self.ub_alignment) * self.ub_alignment


@dataclass(frozen=True)
class CubeTarget:
    """The cube cores of one die as a cube kernel's host tiling sees them (what Ascend C's
    ``PlatformAscendC`` answers: ``GetCoreNumAic``, ``GetCoreMemSize`` of L1 / L0A / L0B / L0C).

    ``core_kind`` names the kind of core cube kernels run on and ``cores`` how many a die has; each
    has ``l1_bytes``, ``l0a_bytes``, ``l0b_bytes`` and ``l0c_bytes`` of its buffers; the cube unit
    multiplies blocks of ``block_m`` x ``block_n`` x (32 bytes of k) per step."""

    product: str
    core_kind: str
    cores: int
    l1_bytes: int
    l0a_bytes: int
    l0b_bytes: int
    l0c_bytes: int
    block_m: int
    block_n: int

    @classmethod
    def of(cls, system: System) -> CubeTarget:
        """The cube cores of ``system``'s dies: the core kind its product runs cube kernels on, with
        its L1 and L0 buffers, which need engines GM -> L1, L1 -> L0A / L0B and L0C -> GM (FixPipe)."""
        spec, timing = system.spec, system.timing
        kind = timing.kinds[PRODUCTS.get(spec.product).cube_cores]
        buffers = kind.buffers
        moves = ((GM, "L1"), ("L1", "L0A"), ("L1", "L0B"), ("L0C", GM))
        if timing.cube is None or any(b not in buffers for b in ("L1", "L0A", "L0B", "L0C")) or any(m not in kind.moves for m in moves):
            raise ConfigError(f"die.cores.{kind.name} runs the cube kernels of {spec.product}, so it needs the buffers L1, L0A, L0B, "
                              "L0C, engines that move GM->L1, L1->L0A, L1->L0B and L0C->GM (FixPipe), and die.cube; add them")
        return cls(spec.product, kind.name, kind.count, buffers["L1"].capacity_bytes, buffers["L0A"].capacity_bytes,
                   buffers["L0B"].capacity_bytes, buffers["L0C"].capacity_bytes, timing.cube.m, timing.cube.n)
