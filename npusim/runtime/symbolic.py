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
bounds it over all PEs of a group with :meth:`min_over_pes` / :meth:`max_over_pes`. A loop's index
(``pypto.loop``) is a :class:`LoopIndex`: a constant that knows its loop's bounds.

Every op argument a kernel computes from its PE is one of these, built and read by the hundred
thousand on a SuperPoD, so the module is typed to mypy's strict level and runs compiled with the
engine (setup.py: mypyc), or as Python with it: the same code. Compiled, its classes are native.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, MutableMapping
from typing import Any, Final, Protocol, TypeVar

from npusim.errors import WorkloadError
from npusim.runtime.program import PeProgram, building_program

PeRanks = int | Mapping[str, int]
"""The PE a value is read on: one rank used for every group, or a rank per group name."""
T = TypeVar("T")


class DeviceRead(Protocol):
    """What a device-valued SymbolicScalar reads (the runtime's ``ControlRead``): ``value()`` gives
    it, waiting until the device has read it; ``what`` says how the kernel wrote it."""

    @property
    def what(self) -> str: ...

    def value(self) -> int: ...


SYMBOLS: Final = {"add": "+", "sub": "-", "mul": "*", "div": "/", "mod": "%", "eq": "==", "ne": "!=", "lt": "<", "le": "<=",
                  "gt": ">", "ge": ">=", "and": "&&", "or": "||", "min": "min", "max": "max", "neg": "-", "not": "!"}
"""Operation name -> how it prints (how each computes: :func:`_compute`)."""
UNARY: Final = ("neg", "not")
DIVISIONS: Final = ("div", "mod")
LEAVES: Final = ("const", "pe", "read")
_NO_GROUPS: Final[frozenset[str]] = frozenset()


def _c_div(a: int, b: int) -> int:
    """Integer division truncating toward zero, as C++ ``/`` on int64."""
    quotient = abs(a) // abs(b)
    return -quotient if (a < 0) != (b < 0) else quotient


def _compute(op: str, a: int, b: int) -> int:
    """Operation ``op`` of :data:`SYMBOLS` on ``a`` and ``b`` (``b`` unused by a unary one; not 0 for a division)."""
    if op == "add":
        return a + b
    if op == "sub":
        return a - b
    if op == "mul":
        return a * b
    if op == "div":
        return _c_div(a, b)
    if op == "mod":  # the remainder with the sign of the dividend, as C++ % on int64
        return a - b * _c_div(a, b)
    if op == "min":
        return min(a, b)
    if op == "max":
        return max(a, b)
    if op == "neg":
        return -a
    if op == "not":
        return int(not a)
    if op == "and":
        return int(a != 0 and b != 0)
    if op == "or":
        return int(a != 0 or b != 0)
    if op == "eq":
        return int(a == b)
    if op == "ne":
        return int(a != b)
    if op == "lt":
        return int(a < b)
    if op == "le":
        return int(a <= b)
    if op == "gt":
        return int(a > b)
    if op == "ge":
        return int(a >= b)
    raise ValueError(f"unknown SymbolicScalar operation {op!r}")


def _computed(op: str, operands: list[int]) -> int | None:
    """Operation ``op`` on the values ``operands`` (one or two); None for a division or modulo by zero."""
    if op in DIVISIONS and operands[1] == 0:
        return None
    return _compute(op, operands[0], operands[-1])


class SymbolicScalar:
    """An integer that may depend on the PE: a constant, a group's ``pe`` symbol, a value read from
    device memory, or an operation on other values. A value other than a constant keeps where it
    was last evaluated and its value there (``_at``: the ranks object and the value), so that
    reading it again there, or an operation built on it later, needs no fold (:meth:`_evaluate`)."""

    __slots__ = ("_op", "_value", "_group", "_source", "_operands", "_groups", "_reads", "_at")

    def __init__(self, value: object) -> None:
        """The constant ``value`` (an int)."""
        if not isinstance(value, int):
            raise WorkloadError(f"SymbolicScalar(value) takes an int, got {value!r}")
        self._op = "const"  # or "pe", "read", or an operation of SYMBOLS
        self._value = int(value)  # a constant's value
        self._group = ""  # a pe symbol's group
        self._source: DeviceRead | None = None  # what a read reads
        self._operands: tuple[SymbolicScalar, ...] = ()  # an operation's, one or two
        self._groups = _NO_GROUPS
        self._reads = False
        self._at: tuple[object, int] | None = None  # the ranks it was last evaluated on and its value there (see _evaluate)

    @staticmethod
    def read(source: DeviceRead) -> SymbolicScalar:
        """A value read from device memory: ``source.value()`` gives it (waiting until it is read)."""
        return _node("read", (), _NO_GROUPS, True, source=source)

    @staticmethod
    def pe(group_name: str) -> SymbolicScalar:
        """This PE's rank in the communication group ``group_name`` (``my_symbolic_pe``)."""
        return _node("pe", (), frozenset((group_name,)), False, group=group_name)

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
        object takes it, and so does an operation built on it later (:func:`_operation`)."""
        if self._op == "const":
            return self._value
        at = self._at
        if at is not None and at[0] is pe:
            return at[1]
        keep = not isinstance(pe, MutableMapping)
        values: dict[int, int] = {}  # id(node) -> its value, during this fold only
        stack: list[SymbolicScalar] = [self]
        while stack:
            node = stack[-1]
            op = node._op
            if op in LEAVES:
                if op == "const":
                    value = node._value
                elif op == "read":
                    assert node._source is not None  # a read has what it reads
                    value = node._source.value()
                else:
                    value = self._rank(pe, node._group)
                    if keep:
                        node._at = (pe, value)
                values[id(node)] = value
                stack.pop()
                continue
            operands: list[int] = []
            for operand in node._operands:
                at = operand._at
                if operand._op == "const":
                    operands.append(operand._value)
                elif at is not None and at[0] is pe:
                    operands.append(at[1])
                elif id(operand) in values:
                    operands.append(values[id(operand)])
                else:
                    stack.append(operand)
            if len(operands) == len(node._operands):
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
            if node._op in LEAVES:
                results[id(node)] = leaf(node)
            elif not operands_ready:
                stack.append((node, True))
                stack.extend((operand, False) for operand in node._operands)
            else:
                results[id(node)] = combine(node, [results[id(operand)] for operand in node._operands])
        return results[id(self)]

    def _apply(self, operands: list[int]) -> int:
        """This operation on the values of its operands (a WorkloadError for a division by zero)."""
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
        running in this thread, if any (a kernel's control flow runs per PE), else only a
        PE-independent value."""
        program = building_program()
        return self.concrete(program.ranks if program is not None else None)

    # -- building expressions ------------------------------------------------------------------

    def _binary(self, op: str, other: object, reflected: bool = False) -> Any:
        """``op`` of this value and ``other`` (this value on the right if ``reflected``); NotImplemented
        when ``other`` is neither an int nor a SymbolicScalar (Python then asks ``other``)."""
        if isinstance(other, SymbolicScalar):
            operand = other
        elif isinstance(other, int):
            operand = SymbolicScalar(other)
        else:
            return NotImplemented
        lhs, rhs = (operand, self) if reflected else (self, operand)
        if op in DIVISIONS and rhs._op == "const" and rhs._value == 0:
            raise WorkloadError(f"SymbolicScalar {lhs!r} {SYMBOLS[op]} 0: division or modulo by zero")
        return _operation(op, (lhs, rhs), lhs._groups | rhs._groups, lhs._reads or rhs._reads)

    def as_variable(self) -> None:
        """The framework's hint that the scalar is an intermediate variable of its compiled code
        (symbolic_scalar.cpp AsIntermediateVariable); npusim evaluates scalars while it builds: nothing to do."""

    def min(self, other: object) -> SymbolicScalar:
        """The smaller of this value and ``other``, an int or a SymbolicScalar (PyPTO's ``SymbolicScalar.min``)."""
        return self._binary_or_type_error("min", other)

    def max(self, other: object) -> SymbolicScalar:
        """The larger of this value and ``other``, an int or a SymbolicScalar (PyPTO's ``SymbolicScalar.max``)."""
        return self._binary_or_type_error("max", other)

    def _binary_or_type_error(self, op: str, other: object) -> SymbolicScalar:
        result = self._binary(op, other)
        if result is NotImplemented:
            raise TypeError(f"SymbolicScalar.{op} takes an int or a SymbolicScalar, got {other!r}")
        assert isinstance(result, SymbolicScalar)
        return result

    # The binary operators return Any: NotImplemented for an operand of another type (Python then
    # asks that operand), which a method typed to return a SymbolicScalar would refuse compiled.
    def __add__(self, other: object) -> Any: return self._binary("add", other)
    def __radd__(self, other: object) -> Any: return self._binary("add", other, True)
    def __sub__(self, other: object) -> Any: return self._binary("sub", other)
    def __rsub__(self, other: object) -> Any: return self._binary("sub", other, True)
    def __mul__(self, other: object) -> Any: return self._binary("mul", other)
    def __rmul__(self, other: object) -> Any: return self._binary("mul", other, True)
    def __truediv__(self, other: object) -> Any: return self._binary("div", other)
    def __rtruediv__(self, other: object) -> Any: return self._binary("div", other, True)
    def __floordiv__(self, other: object) -> Any: return self._binary("div", other)
    def __rfloordiv__(self, other: object) -> Any: return self._binary("div", other, True)
    def __mod__(self, other: object) -> Any: return self._binary("mod", other)
    def __rmod__(self, other: object) -> Any: return self._binary("mod", other, True)
    def __eq__(self, other: object) -> Any: return self._binary("eq", other)
    def __ne__(self, other: object) -> Any: return self._binary("ne", other)
    def __lt__(self, other: object) -> Any: return self._binary("lt", other)
    def __le__(self, other: object) -> Any: return self._binary("le", other)
    def __gt__(self, other: object) -> Any: return self._binary("gt", other)
    def __ge__(self, other: object) -> Any: return self._binary("ge", other)
    def __and__(self, other: object) -> Any: return self._binary("and", other)
    def __rand__(self, other: object) -> Any: return self._binary("and", other, True)
    def __or__(self, other: object) -> Any: return self._binary("or", other)
    def __ror__(self, other: object) -> Any: return self._binary("or", other, True)
    def __neg__(self) -> SymbolicScalar: return _operation("neg", (self,), self._groups, self._reads)
    def __pos__(self) -> SymbolicScalar: return self
    def __invert__(self) -> SymbolicScalar: return _operation("not", (self,), self._groups, self._reads)

    __hash__ = None  # type: ignore[assignment]  # == builds an expression, so instances cannot be dict keys

    def __repr__(self) -> str:
        def leaf(node: SymbolicScalar) -> str:
            if node._op == "read":
                assert node._source is not None
                return f"read({node._source.what})"
            return str(node._value) if node._op == "const" else f"pe[{node._group}]"

        def combine(node: SymbolicScalar, operands: list[str]) -> str:
            symbol = SYMBOLS[node._op]
            if node._op in UNARY:
                return f"{symbol}{operands[0]}"
            if node._op in ("min", "max"):
                return f"{symbol}({operands[0]}, {operands[1]})"
            return f"({operands[0]} {symbol} {operands[1]})"

        return self._post_order(leaf, combine)


def _node(op: str, operands: tuple[SymbolicScalar, ...], groups: frozenset[str], reads: bool, *, group: str = "",
          source: DeviceRead | None = None) -> SymbolicScalar:
    """A SymbolicScalar other than a constant: a group's ``pe`` symbol (``group``), a read of device
    memory (``source``), or the operation ``op`` of ``operands``; it depends on the ranks of
    ``groups`` and, if ``reads``, on device memory."""
    node = SymbolicScalar(0)
    node._op = op
    node._group = group
    node._source = source
    node._operands = operands
    node._groups = groups
    node._reads = reads
    return node


class LoopIndex(SymbolicScalar):
    """A loop's index in one iteration (``pypto.loop``): a constant that knows its loop's bounds."""

    __slots__ = ("loop_begin", "loop_end")

    def __init__(self, value: int, begin: int, end: int) -> None:
        super().__init__(value)
        self.loop_begin = begin
        self.loop_end = end


def _operation(op: str, operands: tuple[SymbolicScalar, ...], groups: frozenset[str], reads: bool) -> SymbolicScalar:
    """``op`` of ``operands``: a constant if it depends on no rank and no device memory, else an
    expression that already knows its value on the ranks its operands were last evaluated on, if
    they all were on the same ranks object (a kernel's ``node * block``, once ``node`` was read on
    its PE, is read there with one look-up, whatever else reads it later). A division by zero met
    so is refused only where the value is read."""
    node = _node(op, operands, groups, reads)
    if not groups and not reads:
        return SymbolicScalar(node._evaluate(0))
    ranks: object = None
    values: list[int] = []
    for operand in operands:
        if operand._op == "const":
            values.append(operand._value)
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


def to_int(value: object, pe: PeRanks | None = None) -> int:
    """An op argument (int or SymbolicScalar) as the int it is on PE ``pe``."""
    if isinstance(value, SymbolicScalar):
        return value.concrete(pe)
    if isinstance(value, int):
        return int(value)
    raise WorkloadError(f"expected an int or a SymbolicScalar, got {value!r}")


def value_of(program: PeProgram, value: Any) -> Any:
    """An op argument as its value on ``program``'s PE: a SymbolicScalar evaluated with the PE's
    ranks (and its device-valued reads, waiting for them), anything else as it is (for the op's
    checks to refuse or accept)."""
    return value.concrete(program.ranks) if isinstance(value, SymbolicScalar) else value
