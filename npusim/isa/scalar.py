"""Scalar registers and the address arithmetic built on them.

A value read from UB by the scalar unit (``read_scalar``) is only known when the program runs. Such
a register can be combined with ints (``idx * row_bytes + base``) into an expression that a later
instruction uses as a GM offset; the expression is evaluated when that instruction is issued.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Union

Operand = Union[int, "ScalarExpr"]


class ScalarExpr:
    """An integer expression over scalar registers, evaluated against a run's register values."""

    __slots__ = ("_op", "_left", "_right")

    def __init__(self, op: Callable[..., int | float] | None, left: object, right: object = None) -> None:
        self._op = op
        self._left = left
        self._right = right

    def evaluate(self, regs: dict[int, int | float]) -> int | float:
        """Its value given the run's registers ``regs`` (by register id): an int for an expression."""
        op = self._op
        assert op is not None  # only a register has none, and it evaluates itself
        left = self._left.evaluate(regs) if isinstance(self._left, ScalarExpr) else self._left
        right = self._right.evaluate(regs) if isinstance(self._right, ScalarExpr) else self._right
        return int(op(left, right))

    def _combine(self, op: Callable[..., int | float], other: object, swap: bool = False) -> ScalarExpr:
        if not isinstance(other, (int, ScalarExpr)):
            return NotImplemented  # type: ignore[no-any-return]  # Python then tries the other operand's
        return ScalarExpr(op, other, self) if swap else ScalarExpr(op, self, other)

    def __add__(self, other: Operand) -> ScalarExpr: return self._combine(operator.add, other)
    def __radd__(self, other: Operand) -> ScalarExpr: return self._combine(operator.add, other, swap=True)
    def __sub__(self, other: Operand) -> ScalarExpr: return self._combine(operator.sub, other)
    def __rsub__(self, other: Operand) -> ScalarExpr: return self._combine(operator.sub, other, swap=True)
    def __mul__(self, other: Operand) -> ScalarExpr: return self._combine(operator.mul, other)
    def __rmul__(self, other: Operand) -> ScalarExpr: return self._combine(operator.mul, other, swap=True)
    def __floordiv__(self, other: Operand) -> ScalarExpr: return self._combine(operator.floordiv, other)
    def __mod__(self, other: Operand) -> ScalarExpr: return self._combine(operator.mod, other)


class ScalarReg(ScalarExpr):
    """A scalar register of a core program (its value is set by ``read_scalar`` at run time): an
    int read from an integer buffer, a float from a float one (the scalar unit's float registers,
    e.g. a scale that a vector ``dup`` broadcasts); expressions over registers are addresses (ints)."""

    __slots__ = ("reg_id",)

    def __init__(self, reg_id: int) -> None:
        super().__init__(None, None)
        self.reg_id = reg_id

    def evaluate(self, regs: dict[int, int | float]) -> int | float:
        return regs.get(self.reg_id, 0)

    def __repr__(self) -> str:
        return f"s{self.reg_id}"


def resolve(value: Operand, regs: dict[int, int | float]) -> int | float:
    """The value of an int or an expression (an int, but for a lone register of a float buffer)."""
    return value.evaluate(regs) if isinstance(value, ScalarExpr) else value
