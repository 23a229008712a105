"""``npusim bench collectives``: HCCL's collectives over a range of sizes, in the shape of hccl_test
and nccl-tests, each size (and each algorithm of a sweep) one fresh simulated session of that
collective alone, timing only unless asked for data.

The figures are nccl-tests' (its doc/PERFORMANCE.md): ``size`` is the bytes of the op's largest
buffer on one rank (all-reduce, broadcast, reduce: the tensor; all-gather: the gathered output;
reduce-scatter: the input; all-to-all: what one rank sends), ``time`` the simulated time from the first
rank's start to the last rank's end, ``algbw = size / time`` and the bus bandwidth ``busbw = algbw x
factor``, the factor that makes it comparable with the hardware's link rate whatever the rank count
``n``: ``2(n - 1) / n`` for an all-reduce, ``(n - 1) / n`` for an all-gather, a reduce-scatter and an
all-to-all, 1 for a broadcast and a reduce. hccl_test reports ``alg_bandwidth`` the same way
(data size / time). Bandwidths are in GB/s (10^9 bytes per second).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

import npusim
from npusim.config import load_config
from npusim.errors import UsageError
from npusim.kernels.hccl.algorithm import ALL_GATHER, ALL_REDUCE, ALL_TO_ALL, BROADCAST, REDUCE, REDUCE_SCATTER

OPS = (ALL_REDUCE, ALL_GATHER, REDUCE_SCATTER, ALL_TO_ALL, BROADCAST, REDUCE)
BUS_FACTORS = {ALL_REDUCE: lambda n: 2 * (n - 1) / n, ALL_GATHER: lambda n: (n - 1) / n, REDUCE_SCATTER: lambda n: (n - 1) / n,
               ALL_TO_ALL: lambda n: (n - 1) / n, BROADCAST: lambda n: 1.0, REDUCE: lambda n: 1.0}
"""nccl-tests' bus bandwidth factors (module docstring)."""
DTYPES = ("float16", "bfloat16", "float32", "int8", "int32")


@dataclass(frozen=True)
class Point:
    """One measured size: the op's size in bytes (module docstring), elements per rank, the algorithm
    of each level, simulated microseconds, algbw and busbw in GB/s, the forced algorithm it ran with
    (``auto``: HCCL's choice) and, with data, whether the result was right."""

    size: int
    count: int
    algorithms: str
    time_us: float
    algbw: float
    busbw: float
    forced: str = "auto"
    correct: bool | None = None


def sizes(begin: int, end: int, factor: int) -> list[int]:
    """``begin, begin x factor, ...`` up to ``end`` (nccl-tests' -b -e -f)."""
    if begin < 1 or end < begin or factor < 2:
        raise UsageError(f"sizes from {begin} to {end} by x{factor}: give 1 <= begin <= end and a factor of at least 2")
    out, size = [], begin
    while size <= end:
        out.append(size)
        size *= factor
    return out


def measure(config: str, op: str, size: int, *, ranks: int | None = None, dtype: str = "float16",
            overrides: Sequence[str] = (), forced: str = "auto", data: bool = False) -> Point:
    """One collective of ``size`` bytes (module docstring) on ``ranks`` dies (default: every die of
    the config) in a fresh session; ``forced``: ``level1=ring`` style, applied as hccl.algo.<op>."""
    if op not in OPS:
        raise UsageError(f"op {op!r}: benchmark one of {', '.join(OPS)}")
    itemsize = np.dtype(_numpy(dtype)).itemsize
    extra = [] if forced == "auto" else [f"hccl.algo.{op}.{forced}"]
    loaded = load_config(config, [*overrides, *extra])
    dies = loaded.spec.shape.dies if ranks is None else ranks
    if not 1 <= dies <= loaded.spec.shape.dies:
        raise UsageError(f"--ranks {dies}: the config {loaded.name!r} has {loaded.spec.shape.dies} dies; use 1 to that many "
                         "(or --set shape.nodes=... for more)")
    per_rank = _per_rank_elements(op, size, itemsize, dies)
    rng = np.random.default_rng(size)
    np_dtype = np.dtype(_numpy(dtype))
    with npusim.session(loaded, data=data) as session:
        group = npusim.hccl.communicator(range(dies))
        inputs, outputs, expected = _tensors(op, per_rank, dies, np_dtype, rng, data)
        run = _call(group, op, inputs, outputs)
        session.synchronize()
        correct = None if not data else all(np.array_equal(o.numpy(), e) for o, e in zip(outputs, expected) if e is not None)
    time_us = session.result.simulated_ps / 1e6 if session.result is not None else 0.0
    algbw = size / (time_us * 1e3) if time_us else 0.0
    chosen = run.choice.describe() if run.choice is not None else {}
    algorithms = " ".join(v.split(" (")[0] for k, v in sorted(chosen.items()) if k.startswith("level")) or "local"
    if chosen.get("transport") == "aiv":
        algorithms += " aiv"
    return Point(size, per_rank, algorithms, time_us, algbw, algbw * BUS_FACTORS[op](dies), forced, correct)


def _numpy(dtype: str):
    if dtype not in DTYPES:
        raise UsageError(f"--dtype {dtype}: use one of {', '.join(DTYPES)}")
    import ml_dtypes

    return ml_dtypes.bfloat16 if dtype == "bfloat16" else dtype


def _per_rank_elements(op: str, size: int, itemsize: int, ranks: int) -> int:
    """Elements per rank of a collective whose size (module docstring) is ``size`` bytes (rounded down
    to whole elements on every rank; at least one)."""
    per = size // itemsize
    if op in (ALL_GATHER, REDUCE_SCATTER, ALL_TO_ALL):
        per //= ranks
    return max(per, 1)


def _tensors(op: str, count: int, ranks: int, dtype, rng, data: bool):
    """Inputs, outputs and (with data) the expected outputs of ``op``."""
    def values(n):
        return rng.integers(-3, 4, n).astype(dtype)

    if op == ALL_TO_ALL:
        piece = count // ranks if count >= ranks else count
        xs = [values(piece * ranks) for _ in range(ranks)]
        expected = [np.concatenate([x[j * piece:(j + 1) * piece] for x in xs]) for j in range(ranks)] if data else [None] * ranks
        return ([npusim.tensor(x, device=r) for r, x in enumerate(xs)], [npusim.zeros((piece * ranks,), dtype, device=r) for r in range(ranks)],
                expected)
    if op == ALL_GATHER:
        xs = [values(count) for _ in range(ranks)]
        return ([npusim.tensor(x, device=r) for r, x in enumerate(xs)], [npusim.zeros((count * ranks,), dtype, device=r) for r in range(ranks)],
                [np.concatenate(xs)] * ranks if data else [None] * ranks)
    if op == REDUCE_SCATTER:
        xs = [values(count * ranks) for _ in range(ranks)]
        total = _sum(xs, dtype) if data else None
        return ([npusim.tensor(x, device=r) for r, x in enumerate(xs)], [npusim.zeros((count,), dtype, device=r) for r in range(ranks)],
                [total[r * count:(r + 1) * count] if total is not None else None for r in range(ranks)])
    xs = [values(count) for _ in range(ranks)]
    tensors = [npusim.tensor(x, device=r) for r, x in enumerate(xs)]
    if op == BROADCAST:
        return tensors, tensors, [xs[0]] * ranks if data else [None] * ranks
    total = _sum(xs, dtype) if data else None
    return tensors, tensors, ([total] * ranks if op == ALL_REDUCE else [total] + [None] * (ranks - 1))


def _sum(xs, dtype) -> np.ndarray:
    """The exact sum of small integer values: integers wrap in their dtype, floats are exact (the
    benchmark's values are small integers, so every order of summation gives it)."""
    if np.issubdtype(dtype, np.integer):
        return np.sum(xs, axis=0, dtype=dtype)
    return np.sum(xs, axis=0, dtype=np.float64).astype(dtype)


def _call(group, op: str, inputs, outputs):
    if op == ALL_REDUCE:
        return group.all_reduce(inputs)
    if op == ALL_GATHER:
        return group.all_gather(outputs, inputs)
    if op == REDUCE_SCATTER:
        return group.reduce_scatter(outputs, inputs)
    if op == ALL_TO_ALL:
        return group.all_to_all(outputs, inputs)
    if op == BROADCAST:
        return group.broadcast(inputs, root=0)
    return group.reduce(inputs, root=0)
