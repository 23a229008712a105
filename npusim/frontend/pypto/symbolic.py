"""``SymbolicScalar``: PyPTO's runtime integer, here a value that depends on the PE it is read on.

In PyPTO every rank traces the same kernel; ``pypto.distributed.my_symbolic_pe(group)`` returns the
rank as a symbolic integer, and arithmetic on it (offsets such as ``my_pe * rows``, tail sizes such as
``(n - i * 8).min(8)``) builds an expression that each rank evaluates to its own value. This class is
that expression: a tree over ``pe`` symbols (one per communication group) and integer constants.

Semantics follow PyPTO's binding (``python/src/bindings/symbolic_scalar.cpp``), which maps the Python
operators onto C++ int64 arithmetic:

- ``+ - *``, unary ``-``; ``/`` and ``//`` are both integer division truncating toward zero, and ``%``
  takes the sign of the dividend (C semantics, not Python's floor semantics);
- ``== != < <= > >=`` return a SymbolicScalar worth 1 or 0; ``&`` / ``|`` are logical and / or, ``~``
  logical not;
- ``a.min(b)`` / ``a.max(b)`` are the element-wise min / max of two values;
- plain ``int`` operands mix in on either side; dividing by the constant 0 is refused at once;
- ``int()`` and ``bool()`` work only on a value that does not depend on the PE, except inside a
  kernel, where they give the value on the PE whose kernel function runs (``if my_pe == 0:``).

A value may also depend on device memory: ``t[i, j]`` in a kernel reads one int32 element on the
device (:meth:`SymbolicScalar.read`, the framework's GetTensorData). Such a value is never folded
into a constant when an expression is built; evaluating it (``concrete``, ``int()``, ``bool()``, an
op argument, an ``if``) waits until the device has read it.

Beyond PyPTO, the simulator evaluates a value on a given PE with :meth:`SymbolicScalar.concrete`, and
bounds it over all PEs of a group with :meth:`min_over_pes` / :meth:`max_over_pes`.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Mapping, MutableMapping
from typing import TypeVar

from npusim.errors import WorkloadError

PeRanks = int | Mapping[str, int]
"""The PE a value is read on: one rank used for every group, or a rank per group name."""
T = TypeVar("T")


def _c_div(a: int, b: int) -> int:
    """Integer division truncating toward zero, as C++ ``/`` on int64."""
    quotient = abs(a) // abs(b)
    return -quotient if (a < 0) != (b < 0) else quotient


def _c_mod(a: int, b: int) -> int:
    """Remainder with the sign of the dividend, as C++ ``%`` on int64."""
    return a - b * _c_div(a, b)


# op name -> (how it prints, how it computes)
_BINARY: dict[str, tuple[str, Callable[[int, int], int]]] = {
    "add": ("+", operator.add),
    "sub": ("-", operator.sub),
    "mul": ("*", operator.mul),
    "div": ("/", _c_div),
    "mod": ("%", _c_mod),
    "eq": ("==", lambda a, b: int(a == b)),
    "ne": ("!=", lambda a, b: int(a != b)),
    "lt": ("<", lambda a, b: int(a < b)),
    "le": ("<=", lambda a, b: int(a <= b)),
    "gt": (">", lambda a, b: int(a > b)),
    "ge": (">=", lambda a, b: int(a >= b)),
    "and": ("&&", lambda a, b: int(bool(a) and bool(b))),
    "or": ("||", lambda a, b: int(bool(a) or bool(b))),
    "min": ("min", min),
    "max": ("max", max),
}
_UNARY: dict[str, tuple[str, Callable[[int], int]]] = {
    "neg": ("-", operator.neg),
    "not": ("!", lambda a: int(not a)),
}
_COMPUTE: dict[str, Callable[..., int]] = {op: compute for op, (_, compute) in (_BINARY | _UNARY).items()}
"""op name -> how it computes, unary or binary."""
_DIVISIONS = ("div", "mod")
_LEAVES = ("const", "pe", "read")
_NO_GROUPS: frozenset[str] = frozenset()


def _computed(op: str, operands: list[int]) -> int | None:
    """Operation ``op`` on the values ``operands``; None for a division or modulo by zero."""
    if op in _DIVISIONS and operands[1] == 0:
        return None
    return _COMPUTE[op](*operands)


class SymbolicScalar:
    """An integer that may depend on the PE: a constant, a group's ``pe`` symbol, or an operation."""

    __slots__ = ("_op", "_args", "_groups", "_reads", "_at")
    __hash__ = None  # == builds an expression, so instances cannot be dict keys

    def __init__(self, value: int) -> None:
        if not isinstance(value, int):
            raise WorkloadError(f"SymbolicScalar(value) takes an int, got {value!r}")
        self._op = "const"
        self._args: tuple = (int(value),)
        self._groups: frozenset[str] = _NO_GROUPS
        self._reads = False
        self._at: tuple[PeRanks | None, int] | None = None  # the ranks it was last evaluated on and its value there (see _evaluate)

    @classmethod
    def read(cls, source) -> SymbolicScalar:
        """A value read from device memory: ``source.value()`` gives it (waiting until it is read)."""
        return cls._node("read", (source,), _NO_GROUPS, reads=True)

    @classmethod
    def pe(cls, group_name: str) -> SymbolicScalar:
        """This PE's rank in the communication group ``group_name`` (``my_symbolic_pe``)."""
        return cls._node("pe", (group_name,), frozenset((group_name,)), reads=False)

    @classmethod
    def _node(cls, op: str, args: tuple, groups: frozenset[str], *, reads: bool) -> SymbolicScalar:
        """A node ``op`` of ``args`` that depends on the ranks of ``groups`` and, if ``reads``, on device memory."""
        node = object.__new__(cls)
        node._op = op
        node._args = args
        node._groups = groups
        node._reads = reads
        node._at = None
        return node

    # -- reading the value ---------------------------------------------------------------------

    @property
    def groups(self) -> frozenset[str]:
        """The groups whose rank this value depends on (empty for a constant)."""
        return self._groups

    def is_concrete(self) -> bool:
        """True if the value is known without running anything: the same on every PE, read from no device memory."""
        return not self._groups and not self._reads

    def concrete(self, pe: PeRanks | None = None) -> int:
        """The value on PE ``pe``: a rank used for every group, or ``{group_name: rank}``.

        Without ``pe`` (as in PyPTO) only a value that does not depend on the PE can be read.
        """
        if pe is None and self._groups:
            raise WorkloadError(
                f"SymbolicScalar {self!r} depends on the rank in group(s) {sorted(self._groups)}; "
                "read it on a PE with .concrete(pe)"
            )
        return self._evaluate(pe)

    def min_over_pes(self, n_pes: int) -> int:
        """The smallest value over the ranks ``0 .. n_pes-1`` of the one group it depends on."""
        return min(self._values_over_pes(n_pes))

    def max_over_pes(self, n_pes: int) -> int:
        """The largest value over the ranks ``0 .. n_pes-1`` of the one group it depends on."""
        return max(self._values_over_pes(n_pes))

    def _values_over_pes(self, n_pes: int) -> list[int]:
        if len(self._groups) > 1:
            raise WorkloadError(
                f"SymbolicScalar {self!r} depends on the ranks of several groups {sorted(self._groups)}; "
                "bound it with .concrete({group: rank, ...}) instead"
            )
        if n_pes < 1:
            raise WorkloadError(f"n_pes={n_pes} must be at least 1 to bound {self!r} over the PEs")
        return [self._evaluate(rank) for rank in range(n_pes)]

    def _evaluate(self, pe: PeRanks | None) -> int:
        """The value with each group's ``pe`` symbol replaced by its rank (``pe`` None: no symbols).

        A fold of its own, not :meth:`_post_order`'s (kernels evaluate their op arguments by the
        hundred thousand): bottom-up with an explicit stack, so deep expressions hit no recursion
        limit, each shared operand once; a constant operand is read where it is used. A ``pe``
        symbol or an operation keeps its value with the ranks it was computed on, unless those can
        change (a mutable mapping) or it reads device memory: the next evaluation on the same ranks
        object takes it, and so does an operation built on it later (:meth:`_operation`)."""
        at = self._at
        if at is not None and at[0] is pe:
            return at[1]
        keep = not isinstance(pe, MutableMapping)
        values: dict[int, int] = {}  # id(node) -> its value, during this fold only
        stack = [self]
        while stack:
            node = stack[-1]
            op, args = node._op, node._args
            if op in _LEAVES:
                value = values[id(node)] = args[0] if op == "const" else args[0].value() if op == "read" else self._rank(pe, args[0])
                if keep and op == "pe":
                    node._at = (pe, value)
                stack.pop()
                continue
            operands = []
            for arg in args:
                at = arg._at
                if arg._op == "const":
                    operands.append(arg._args[0])
                elif at is not None and at[0] is pe:
                    operands.append(at[1])
                elif id(arg) in values:
                    operands.append(values[id(arg)])
                else:
                    stack.append(arg)
            if len(operands) == len(args):
                value = values[id(node)] = node._apply(operands)
                if keep and not node._reads:
                    node._at = (pe, value)
                stack.pop()
        return values[id(self)]

    def _rank(self, pe: PeRanks | None, group: str) -> int:
        """The rank ``pe`` gives in group ``group``."""
        if isinstance(pe, int):
            return int(pe)
        assert pe is not None  # None only for a value of no group, which has no pe symbol
        try:
            return int(pe[group])
        except KeyError:
            raise WorkloadError(f"SymbolicScalar {self!r} needs the rank in group {group!r}; got {dict(pe)}") from None

    def _post_order(self, leaf: Callable[[SymbolicScalar], T], combine: Callable[[SymbolicScalar, list[T]], T]) -> T:
        """Fold the tree bottom-up with an explicit stack, so deep expressions hit no recursion limit."""
        results: dict[int, T] = {}  # id(node) -> result, a memo valid during this fold only
        stack: list[tuple[SymbolicScalar, bool]] = [(self, False)]
        while stack:
            node, operands_ready = stack.pop()
            if id(node) in results:
                continue
            if node._op in _LEAVES:
                results[id(node)] = leaf(node)
            elif not operands_ready:
                stack.append((node, True))
                stack.extend((arg, False) for arg in node._args)
            else:
                results[id(node)] = combine(node, [results[id(arg)] for arg in node._args])
        return results[id(self)]

    def _apply(self, operands: list[int]) -> int:
        value = _computed(self._op, operands)
        if value is None:
            raise WorkloadError(f"SymbolicScalar {self!r}: division or modulo by zero")
        return value

    def __int__(self) -> int:
        return self._here()

    def __bool__(self) -> bool:
        return self._here() != 0

    def _here(self) -> int:
        """The value where Python needs one (``int()``, ``if``): on the PE whose kernel function is
        running, if any (a kernel's control flow runs per PE), else only a PE-independent value."""
        from npusim.frontend.pypto.runtime import building_program

        program = building_program()
        return self.concrete(program.ranks if program is not None else None)

    # -- building expressions ------------------------------------------------------------------

    @staticmethod
    def _coerce(value: object) -> SymbolicScalar | None:
        if isinstance(value, SymbolicScalar):
            return value
        if isinstance(value, int):
            return SymbolicScalar(value)
        return None

    def _binary(self, op: str, other: object, *, reflected: bool = False) -> SymbolicScalar:
        rhs = self._coerce(other)
        if rhs is None:
            return NotImplemented
        lhs, rhs = (rhs, self) if reflected else (self, rhs)
        if op in _DIVISIONS and rhs._op == "const" and rhs._args[0] == 0:
            raise WorkloadError(f"SymbolicScalar {lhs!r} {_BINARY[op][0]} 0: division or modulo by zero")
        return self._operation(op, (lhs, rhs), lhs._groups | rhs._groups, reads=lhs._reads or rhs._reads)

    def _unary(self, op: str) -> SymbolicScalar:
        return self._operation(op, (self,), self._groups, reads=self._reads)

    @classmethod
    def _operation(cls, op: str, operands: tuple[SymbolicScalar, ...], groups: frozenset[str], *, reads: bool) -> SymbolicScalar:
        """``op`` of ``operands``: a constant if it depends on no rank and no device memory, else a
        node that already knows its value on the ranks its operands were last evaluated on, if they
        all were on the same ranks object (a kernel's ``node * block``, once ``node`` was read on its
        PE, is read there with one look-up, whatever else reads it later)."""
        node = cls._node(op, operands, groups, reads=reads)
        if not groups and not reads:
            return SymbolicScalar(node._evaluate(0))
        ranks, values = None, []
        for operand in operands:
            if operand._op == "const":
                values.append(operand._args[0])
                continue
            at = operand._at
            if at is None or (ranks is not None and at[0] is not ranks):
                return node
            ranks = at[0]
            values.append(at[1])
        value = _computed(op, values)
        if value is not None:  # a division by zero is refused where the value is read
            node._at = (ranks, value)
        return node

    def as_variable(self) -> None:
        """The framework's hint that the scalar is an intermediate variable of its compiled code
        (symbolic_scalar.cpp AsIntermediateVariable); npusim evaluates scalars while it builds: nothing to do."""

    def min(self, other: int | SymbolicScalar) -> SymbolicScalar:
        """The smaller of this value and ``other`` (PyPTO's ``SymbolicScalar.min``)."""
        return self._binary_or_type_error("min", other)

    def max(self, other: int | SymbolicScalar) -> SymbolicScalar:
        """The larger of this value and ``other`` (PyPTO's ``SymbolicScalar.max``)."""
        return self._binary_or_type_error("max", other)

    def _binary_or_type_error(self, op: str, other: object) -> SymbolicScalar:
        result = self._binary(op, other)
        if result is NotImplemented:
            raise TypeError(f"SymbolicScalar.{op} takes an int or a SymbolicScalar, got {other!r}")
        return result

    def __add__(self, other): return self._binary("add", other)
    def __radd__(self, other): return self._binary("add", other, reflected=True)
    def __sub__(self, other): return self._binary("sub", other)
    def __rsub__(self, other): return self._binary("sub", other, reflected=True)
    def __mul__(self, other): return self._binary("mul", other)
    def __rmul__(self, other): return self._binary("mul", other, reflected=True)
    def __truediv__(self, other): return self._binary("div", other)
    def __rtruediv__(self, other): return self._binary("div", other, reflected=True)
    def __floordiv__(self, other): return self._binary("div", other)
    def __rfloordiv__(self, other): return self._binary("div", other, reflected=True)
    def __mod__(self, other): return self._binary("mod", other)
    def __rmod__(self, other): return self._binary("mod", other, reflected=True)
    def __eq__(self, other): return self._binary("eq", other)
    def __ne__(self, other): return self._binary("ne", other)
    def __lt__(self, other): return self._binary("lt", other)
    def __le__(self, other): return self._binary("le", other)
    def __gt__(self, other): return self._binary("gt", other)
    def __ge__(self, other): return self._binary("ge", other)
    def __and__(self, other): return self._binary("and", other)
    def __rand__(self, other): return self._binary("and", other, reflected=True)
    def __or__(self, other): return self._binary("or", other)
    def __ror__(self, other): return self._binary("or", other, reflected=True)
    def __neg__(self): return self._unary("neg")
    def __pos__(self): return self
    def __invert__(self): return self._unary("not")

    def __repr__(self) -> str:
        def leaf(node: SymbolicScalar) -> str:
            if node._op == "read":
                return f"read({node._args[0].what})"
            return str(node._args[0]) if node._op == "const" else f"pe[{node._args[0]}]"

        def combine(node: SymbolicScalar, operands: list[str]) -> str:
            if node._op in _UNARY:
                return f"{_UNARY[node._op][0]}{operands[0]}"
            symbol = _BINARY[node._op][0]
            if node._op in ("min", "max"):
                return f"{symbol}({operands[0]}, {operands[1]})"
            return f"({operands[0]} {symbol} {operands[1]})"

        return self._post_order(leaf, combine)


def to_int(value: int | SymbolicScalar, pe: PeRanks | None = None) -> int:
    """An op argument (int or SymbolicScalar) as the int it is on PE ``pe``."""
    if isinstance(value, SymbolicScalar):
        return value.concrete(pe)
    if isinstance(value, int):
        return int(value)
    raise WorkloadError(f"expected an int or a SymbolicScalar, got {value!r}")
