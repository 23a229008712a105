"""The enums of PyPTO's compute ops, spelled as the framework spells them (``docs/zh/api/datatype/``)."""

from __future__ import annotations

import enum


class CastMode(enum.Enum):
    """The rounding of ``pypto.cast`` (CastMode.md); CAST_NONE picks the pair's default."""

    CAST_NONE = 0
    CAST_RINT = 1
    CAST_ROUND = 2
    CAST_FLOOR = 3
    CAST_CEIL = 4
    CAST_TRUNC = 5
    CAST_ODD = 6

    @property
    def rounding(self) -> str:
        """The ISA's name of the rounding (``npusim.isa.vector.ROUNDING``)."""
        return self.name.removeprefix("CAST_").lower()


class SaturationMode(enum.Enum):
    """Overflow of a conversion to an integer (SaturationMode.md): OFF wraps an integer narrowing,
    ON saturates it; a float -> integer conversion saturates in both (pypto-cast.md 功能说明)."""

    OFF = 0
    ON = 1


class PrecisionType(enum.Enum):
    """The precision mode of div, exp, sqrt, rsqrt ... (PrecisionType.md). Atlas A2 / A3 support
    only INTRINSIC (HIGH_PRECISION is documented as unsupported there), so both run the chip's
    instruction here."""

    INTRINSIC = 0
    HIGH_PRECISION = 1
