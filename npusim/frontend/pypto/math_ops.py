"""PyPTO's float math, comparison, selection and bitwise ops (``python/pypto/op/math.py``,
``comparison.py``, ``other.py``, ``operator.py`` of hicann/pypto): each an elementwise op of
:mod:`.compute` (tiles of the vector tile shape, numpy broadcasting), computed in float32 for 16-bit
float inputs as the framework casts them (its ops' Cast to DT_FP32 around the tile op, unary.cpp),
with one vector instruction of its kind per tile (``npusim.isa.vector``: MATH, MATH_BINARY,
COMPARE, PREDICATE, BITWISE, select).

The framework's own compositions of other ops are composed the same way here: ``sigmoid``,
``softmax``, ``rms_norm``, ``clip``, ``round`` with decimals, ``cbrt``, ``lrelu``. Numerics and timing:
docs/pypto.md (the transcendental ones are not bit-exact, and are timed as one instruction where
the framework's tile op issues a sequence).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from npusim.frontend.pypto.compute import (
    FP32,
    PrecisionType,
    _elementwise,
    _input,
    _scalar_value,
    amax,
    cast,
    div,
    exp,
    full,
    maximum,
    minimum,
    mul,
    reshape,
    sqrt,
    sub,
)
from npusim.frontend.pypto.compute import abs as _abs
from npusim.frontend.pypto.compute import add as _add
from npusim.frontend.pypto.compute import sum as _sum
from npusim.frontend.pypto.ops import _on_pe, pypto_op, register_op
from npusim.frontend.pypto.runtime import current_program
from npusim.frontend.pypto.tensors import Tensor
from npusim.kernels.compute import checks
from npusim.kernels.compute.checks import reject
from npusim.kernels.shmem.dtypes import DataType

FLOATS = ("DT_FP16", "DT_BF16", "DT_FP32")
INTS = ("DT_INT8", "DT_INT16", "DT_INT32", "DT_UINT8", "DT_UINT16", "DT_UINT32")


def _is_float(dtype: DataType) -> bool:
    return dtype.name in FLOATS


def _compute_dtype(dtype: DataType) -> np.dtype:
    """Float math runs in float32 (the framework casts fp16 / bf16 to DT_FP32 first); ints in their own."""
    return FP32 if _is_float(dtype) else dtype.numpy


def _check(op: str, x: Tensor, allowed: tuple[str, ...]) -> None:
    if x.dtype.name not in allowed:
        reject(op, "input.dtype", x.dtype.name, f"is not supported on Atlas A2 / A3; {op} takes {', '.join(allowed)}")


def _operand(op: str, like: Tensor, value, arg: str = "other") -> Tensor:
    """A tensor operand, or a Python number filled into a tensor of ``like``'s shape and dtype."""
    if isinstance(value, Tensor):
        return _input(op, arg, value, like.program)
    number = _scalar_value(op, like, value)
    fill = int(number) if np.issubdtype(like.dtype.numpy, np.integer) else float(number)
    return full(list(like.sizes), fill, like.dtype, valid_shape=list(like.valid_shape))


def _unary(op: str, kind: str, allowed: tuple[str, ...] = FLOATS, out_dtype: DataType | None = None, public: bool = True) -> Callable:
    """The elementwise op ``op`` of one operand (one vector instruction ``kind``), registered as a
    PyPTO op unless it is the inner part of a ``public=False`` op of the same name."""
    def function(input: Tensor, *args, **kwargs) -> Tensor:
        program = current_program(op)
        x = _input(op, "input", input, program)
        _check(op, x, allowed)
        return _elementwise(op, [x], kind, out_dtype=out_dtype, compute=_compute_dtype(x.dtype))

    function.__name__ = function.__qualname__ = op
    function.__doc__ = f"``pypto.{op}``: elementwise {kind} (module docstring)."
    return register_op(op, _on_pe(function)) if public else _on_pe(function)


def _binary(op: str, kind: str, allowed: tuple[str, ...] = FLOATS, out_dtype: DataType | None = None, number_input: bool = False,
            public: bool = True) -> Callable:
    """The elementwise op ``op`` of two operands (registered as :func:`_unary`); ``number_input``:
    the input may be a Python number when other is a tensor (filled like other)."""
    def function(input, other, *args, **kwargs) -> Tensor:
        program = current_program(op)
        if number_input and not isinstance(input, Tensor) and isinstance(other, Tensor):
            input = _operand(op, _input(op, "other", other, program), input, "input")
        x = _input(op, "input", input, program)
        _check(op, x, allowed)
        y = _operand(op, x, other)
        if y.dtype is not x.dtype:
            reject(op, "other.dtype", y.dtype.name, f"differs from input.dtype={x.dtype.name}; both tensors need the same dtype")
        return _elementwise(op, [x, y], kind, out_dtype=out_dtype, compute=_compute_dtype(x.dtype))

    function.__name__ = function.__qualname__ = op
    function.__doc__ = f"``pypto.{op}``: elementwise {kind} of two operands (a tensor and a tensor or a number; module docstring)."
    return register_op(op, _on_pe(function)) if public else _on_pe(function)


_exp2 = _unary("exp2", "exp2", public=False)
EXP2_INTS = ("DT_INT32", "DT_INT16", "DT_INT8", "DT_UINT8")


@pypto_op()
def exp2(input: Tensor) -> Tensor:
    """``pypto.exp2``: 2 ** input; an int input (DT_INT32 / INT16 / INT8 / UINT8) is cast to DT_FP32
    first and the result is DT_FP32 (pypto-exp2.md: values within [-2^24, 2^24] convert exactly)."""
    if isinstance(input, Tensor) and input.dtype.name in EXP2_INTS:
        if input.dtype.name in ("DT_INT8", "DT_UINT8"):  # the chip casts 8-bit ints to fp16 only (exactly)
            input = cast(input, DataType.DT_FP16)
        input = cast(input, DataType.DT_FP32)
    return _exp2(input)
expm1 = _unary("expm1", "expm1")
log1p = _unary("log1p", "log1p")
sin = _unary("sin", "sin")
cos = _unary("cos", "cos")
tan = _unary("tan", "tan")
sinh = _unary("sinh", "sinh")
cosh = _unary("cosh", "cosh")
tanh = _unary("tanh", "tanh")
asin = _unary("asin", "asin")
acos = _unary("acos", "acos")
atan = _unary("atan", "atan")
asinh = _unary("asinh", "asinh")
acosh = _unary("acosh", "acosh")
atanh = _unary("atanh", "atanh")
erf = _unary("erf", "erf")
erfc = _unary("erfc", "erfc")
sign = _unary("sign", "sign", FLOATS + ("DT_INT32", "DT_INT16"))
ceil = _unary("ceil", "ceil")
floor = _unary("floor", "floor")
trunc = _unary("trunc", "trunc")
relu = _unary("relu", "relu", FLOATS + ("DT_INT32",))
isnan = _unary("isnan", "isnan", out_dtype=DataType.DT_BOOL)
isfinite = _unary("isfinite", "isfinite", FLOATS + INTS, out_dtype=DataType.DT_BOOL)
signbit = _unary("signbit", "signbit", FLOATS + ("DT_INT32", "DT_INT16", "DT_INT8"), out_dtype=DataType.DT_BOOL)
logical_not = _unary("logical_not", "not", FLOATS + INTS + ("DT_BOOL",), out_dtype=DataType.DT_BOOL)
bitwise_not = _unary("bitwise_not", "invert", INTS)
atan2 = _binary("atan2", "atan2")
hypot = _binary("hypot", "hypot")
fmod = _binary("fmod", "fmod")
remainder = _binary("remainder", "remainder", FLOATS + ("DT_INT32", "DT_INT16"), number_input=True)
"""input - other * floor(input / other) (pypto-remainder.md: DT_FP32 / FP16 / BF16 / INT32 / INT16, input or other a number);
ints in their own dtype, where that formula is exact (numpy's remainder)."""
copysign = _binary("copysign", "copysign")
bitwise_and = _binary("bitwise_and", "and", INTS)
bitwise_or = _binary("bitwise_or", "or", INTS)
bitwise_xor = _binary("bitwise_xor", "xor", INTS)
logical_and = _binary("logical_and", "and", ("DT_BOOL",), out_dtype=DataType.DT_BOOL)
_COMPARED = FLOATS + ("DT_INT32", "DT_INT16")
eq = _binary("eq", "eq", _COMPARED, out_dtype=DataType.DT_BOOL)
ne = _binary("ne", "ne", _COMPARED, out_dtype=DataType.DT_BOOL)
lt = _binary("lt", "lt", _COMPARED, out_dtype=DataType.DT_BOOL)
le = _binary("le", "le", _COMPARED, out_dtype=DataType.DT_BOOL)
gt = _binary("gt", "gt", _COMPARED, out_dtype=DataType.DT_BOOL)
ge = _binary("ge", "ge", _COMPARED, out_dtype=DataType.DT_BOOL)
greater = register_op("greater", gt)  # the framework's alias of gt
_log = _unary("log", "ln", public=False)
_log2 = _unary("log2", "log2", public=False)
_log10 = _unary("log10", "log10", public=False)
_reciprocal = _unary("reciprocal", "reciprocal", public=False)
_pow = _binary("pow", "pow", public=False)
_rint = _unary("round", "rint", public=False)


@pypto_op()
def log(input: Tensor, precision_type: PrecisionType = PrecisionType.INTRINSIC) -> Tensor:
    """``pypto.log``: the natural logarithm."""
    return _log(input)


@pypto_op()
def log2(input: Tensor, precision_type: PrecisionType = PrecisionType.INTRINSIC) -> Tensor:
    """``pypto.log2``."""
    return _log2(input)


@pypto_op()
def log10(input: Tensor, precision_type: PrecisionType = PrecisionType.INTRINSIC) -> Tensor:
    """``pypto.log10``."""
    return _log10(input)


@pypto_op()
def reciprocal(input: Tensor, precision_type: PrecisionType = PrecisionType.HIGH_PRECISION) -> Tensor:
    """``pypto.reciprocal``: 1 / input, correctly rounded."""
    return _reciprocal(input)


@pypto_op()
def pow(input: Tensor, other) -> Tensor:  # noqa: A001 - PyPTO's name
    """``pypto.pow``: input ** other (a tensor or a number)."""
    return _pow(input, other)


@pypto_op()
def round(input: Tensor, decimals: int = 0) -> Tensor:  # noqa: A001 - PyPTO's name
    """``pypto.round``: to the nearest integer, ties to even; with ``decimals``, of input x 10^decimals
    then divided back (the framework's TRound)."""
    if not isinstance(decimals, int) or isinstance(decimals, bool):
        reject("round", "decimals", decimals, "must be an int")
    if decimals == 0:
        return _rint(input)
    scale = float(10.0 ** decimals)
    return div(_rint(mul(input, scale)), scale)


@pypto_op()
def clip(input: Tensor, min=None, max=None) -> Tensor:  # noqa: A002 - PyPTO's names
    """``pypto.clip``: input bounded below by ``min`` and above by ``max`` (tensors or numbers; either may be None)."""
    if min is None and max is None:
        reject("clip", "min, max", (min, max), "must not both be None")
    result = input
    if min is not None:
        result = maximum(result, min)
    if max is not None:
        result = minimum(result, max)
    return result


@pypto_op()
def where(condition: Tensor, input, other) -> Tensor:
    """``pypto.where``: ``input`` where ``condition`` is true, else ``other`` (tensors or numbers, broadcast)."""
    op = "where"
    program = current_program(op)
    cond = _input(op, "condition", condition, program)
    if cond.dtype is not DataType.DT_BOOL:
        reject(op, "condition.dtype", cond.dtype.name, "must be DT_BOOL (a comparison's result)")
    like = input if isinstance(input, Tensor) else other
    if isinstance(like, Tensor):
        like = _input(op, "input", like, program)
    else:  # two numbers: a float is DT_FP32, an int DT_INT32 (other.py _where_arg_dtype), of the condition's shape
        floats = isinstance(input, float) or isinstance(other, float)
        like = full(list(cond.sizes), 0.0 if floats else 0, DataType.DT_FP32 if floats else DataType.DT_INT32,
                    valid_shape=list(cond.valid_shape))
    x, y = _operand(op, like, input, "input"), _operand(op, like, other)
    if x.dtype is not y.dtype:
        reject(op, "other.dtype", y.dtype.name, f"differs from input.dtype={x.dtype.name}")
    return _elementwise(op, [cond, x, y], "select", out_dtype=x.dtype, compute=x.dtype.numpy)


@pypto_op()
def sigmoid(input: Tensor) -> Tensor:
    """``pypto.sigmoid``: 1 / (1 + exp(-x)) in float32, as the framework composes it (operator.py)."""
    dtype = input.dtype
    x = cast(input, DataType.DT_FP32) if dtype is not DataType.DT_FP32 else input
    denominator = _add(exp(mul(x, -1.0)), 1.0)
    result = div(full(list(denominator.sizes), 1.0, DataType.DT_FP32, valid_shape=list(denominator.valid_shape)), denominator,
                 PrecisionType.INTRINSIC)
    return cast(result, dtype) if dtype is not DataType.DT_FP32 else result


@pypto_op()
def softmax(input: Tensor, dim: int) -> Tensor:
    """``pypto.softmax``: exp(x - max) / sum(exp(x - max)) along ``dim`` in float32 (operator.py's composition)."""
    dtype = input.dtype
    x = cast(input, DataType.DT_FP32) if dtype is not DataType.DT_FP32 else input
    shifted = exp(sub(x, amax(x, dim, True)))
    result = div(shifted, _sum(shifted, dim, True), PrecisionType.INTRINSIC)
    return cast(result, dtype) if dtype is not DataType.DT_FP32 else result


@pypto_op()
def rms_norm(input: Tensor, gamma: Tensor | None = None, epsilon: float = 1e-6) -> Tensor:
    """``pypto.rms_norm``: x / sqrt(mean(x * x) + epsilon) along the last dim, times ``gamma``, in
    float32 (operator.py's composition)."""
    dtype = input.dtype
    x = cast(input, DataType.DT_FP32) if dtype is not DataType.DT_FP32 else input
    n = x.sizes[-1]
    y = sqrt(_add(_sum(mul(mul(x, x), 1.0 / n), -1, True), float(epsilon)))
    ones = full(list(y.sizes), 1.0, DataType.DT_FP32)
    y = div(mul(x, ones), y, PrecisionType.INTRINSIC)
    if gamma is not None:
        shape = [1] * len(input.sizes)
        shape[-1] = gamma.sizes[0]
        g = reshape(gamma, shape)
        y = mul(y, cast(g, DataType.DT_FP32) if g.dtype is not DataType.DT_FP32 else g)
    return cast(y, dtype) if dtype is not DataType.DT_FP32 else y


@pypto_op()
def var(input: Tensor, dim=None, correction: float = 1, keepdim: bool = False) -> Tensor:
    """``pypto.var``: sum((x - mean)^2) / max(0, N - correction) over ``dim`` (an int, a list, or None
    for every dim), in float32. The framework has one Var op; npusim composes it of sum, sub, mul
    and div (the same formula, not bit-exact against the framework's order)."""
    op = "var"
    x = _input(op, "input", input, current_program(op))
    _check(op, x, FLOATS)
    rank = len(x.sizes)
    dims = list(range(rank)) if dim is None or dim == [] or dim == () else [dim] if isinstance(dim, int) else list(dim)
    dims = sorted({checks.check_dim(op, d, rank) for d in dims})
    dtype = x.dtype
    wide = cast(x, DataType.DT_FP32) if dtype is not DataType.DT_FP32 else x
    count = 1
    total = wide
    for d in dims:
        count *= x.sizes[d]
        total = _sum(total, d, True)
    centred = sub(wide, mul(total, 1.0 / count))
    squares = mul(centred, centred)
    for d in dims:
        squares = _sum(squares, d, True)
    result = mul(squares, 1.0 / max(0.0, count - correction)) if count > correction else div(squares, 0.0)
    if not keepdim:
        result = reshape(result, [s for i, s in enumerate(result.sizes) if i not in dims] or [1])
    return cast(result, dtype) if dtype is not DataType.DT_FP32 else result


@pypto_op()
def cbrt(input: Tensor) -> Tensor:
    """``pypto.cbrt``: copysign(pow(abs(x), 1/3), x), as the framework composes it."""
    return copysign(pow(_abs(input), 1.0 / 3.0), input)


@pypto_op()
def lrelu(input: Tensor, negative_slope: float = 0.01) -> Tensor:
    """``pypto.lrelu``: x where x > 0, else negative_slope * x."""
    op = "lrelu"
    x = _input(op, "input", input, current_program(op))
    _check(op, x, FLOATS)
    return where(gt(x, 0.0), x, mul(x, float(negative_slope)))


__all__ = [
    "acos", "acosh", "asin", "asinh", "atan", "atan2", "atanh", "bitwise_and", "bitwise_not", "bitwise_or", "bitwise_xor", "cbrt",
    "ceil", "clip", "copysign", "cos", "cosh", "eq", "erf", "erfc", "exp2", "expm1", "floor", "fmod", "ge", "greater", "gt", "hypot",
    "isfinite", "isnan", "le", "log", "log1p", "remainder", "log2", "log10", "logical_and", "logical_not", "lrelu", "lt", "ne", "pow",
    "reciprocal", "relu", "rms_norm", "round", "sigmoid", "sign", "signbit", "sin", "sinh", "softmax", "tan", "tanh", "trunc", "var", "where",
]
