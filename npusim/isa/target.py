"""The hardware a vector kernel's host tiling is written against, read from the die spec.

A real kernel's tiling asks the platform for these (UB size, the vector unit's repeat width, the
MTE granule); taking them from the config, never from constants in the kernel, lets a what-if
(a larger UB, another chip) change the tiling as it would on the device.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from npusim import formats
from npusim.config.products import PRODUCTS
from npusim.config.schema import GM
from npusim.errors import ConfigError


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
    def of(cls, system) -> VectorTarget:
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

    def lanes(self, *dtypes) -> int:
        """Elements one repeat covers when its widest operand has one of ``dtypes`` (dtypes or format names: ``hifloat8``)."""
        return self.repeat_bytes // max(formats.dtype_named(d).itemsize if isinstance(d, str) else np.dtype(d).itemsize for d in dtypes)

    def blocks(self, nbytes: int) -> int:
        """Granules one contiguous transfer of ``nbytes`` moves."""
        return -(-nbytes // self.block_bytes)

    def ub_aligned(self, nbytes: int) -> int:
        """``nbytes`` rounded up to the UB alignment (what one allocation of it takes)."""
        return -(-nbytes // self.ub_alignment) * self.ub_alignment
