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

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

import npusim
from npusim.config import load_config
from npusim.errors import ConfigError, OpArgumentError, UsageError
from npusim.frontend.session import current_session
from npusim.kernels.hccl.algorithm import ALL_GATHER, ALL_REDUCE, ALL_TO_ALL, BROADCAST, REDUCE, REDUCE_SCATTER
from npusim.kernels.hccl.selection import forced_algorithm, hccl_spec

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
    ranks: int = 0


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
    extra = [] if forced == "auto" else [f"hccl.algo.{op}.{forced}"]
    loaded = load_config(config, [*overrides, *extra])
    with npusim.session(loaded, data=data):
        point = measure_in_session(op, size, ranks=ranks, dtype=dtype)
    return dataclasses.replace(point, forced=forced)


def check_sweep(config: str, overrides: Sequence[str], op: str, level: str, names: Sequence[str]) -> None:
    """A UsageError unless each of ``names`` may be forced for ``op`` at ``level`` (``level1``) on
    the config (HCCL's support tables), before any point runs."""
    for name in names:
        try:
            spec = load_config(config, [*overrides, f"hccl.algo.{op}.{level}={name}"]).spec
            forced = hccl_spec(spec).algo.forced(op, level)
            if forced not in ("auto", "NA"):
                forced_algorithm(forced, op, int(level[-1]), spec)
        except (OpArgumentError, ConfigError) as error:
            raise UsageError(f"--sweep {level}={name}: {error}") from None


def measure_in_session(op: str, size: int, *, ranks: int | None = None, dtype: str = "float16") -> Point:
    """:func:`measure` in the running session: the collective on dies ``0 .. ranks - 1``, its time
    from the call to the end of every rank's part (the session synchronised before and after)."""
    if op not in OPS:
        raise UsageError(f"op {op!r}: benchmark one of {', '.join(OPS)}")
    session = current_session()
    np_dtype = np.dtype(_numpy(dtype))
    dies = session.system.die_count if ranks is None else ranks
    if not 1 <= dies <= session.system.die_count:
        raise UsageError(f"--ranks {dies}: the config {session.config.name!r} has {session.system.die_count} dies; use 1 to that "
                         "many (or --set shape.nodes=... for more)")
    per_rank, size = _per_rank_elements(op, size, np_dtype.itemsize, dies)
    rng = np.random.default_rng(size)
    data = session.with_data
    group = npusim.hccl.communicator(range(dies))
    inputs, outputs, expected = _tensors(op, per_rank, dies, np_dtype, rng, data)
    session.synchronize()
    start = session.now_us
    run = _call(group, op, inputs, outputs)
    session.synchronize()
    time_us = session.now_us - start
    correct = None if not data else all(np.array_equal(o.numpy(), e) for o, e in zip(outputs, expected) if e is not None)
    algbw = size / (time_us * 1e3) if time_us else 0.0
    chosen = run.choice.describe() if run.choice is not None else {}
    levels = sorted(k for k in chosen if k.startswith("level"))
    if op == ALL_TO_ALL:
        levels = levels[-1:]  # an all-to-all runs the outermost level's algorithm over every rank
    algorithms = " ".join(chosen[k].split(" (")[0] for k in levels) or "local"
    if chosen.get("transport") == "aiv":
        algorithms += " aiv"
    return Point(size, per_rank, algorithms, time_us, algbw, algbw * BUS_FACTORS[op](dies), correct=correct, ranks=dies)


def _numpy(dtype: str):
    if dtype not in DTYPES:
        raise UsageError(f"--dtype {dtype}: use one of {', '.join(DTYPES)}")
    import ml_dtypes

    return ml_dtypes.bfloat16 if dtype == "bfloat16" else dtype


def _per_rank_elements(op: str, size: int, itemsize: int, ranks: int) -> tuple[int, int]:
    """The element count ``_tensors`` takes for a collective whose size (module docstring) is
    ``size`` bytes, rounded down to whole elements on every rank (at least one per rank, or per peer
    for an all-to-all), and the size in bytes it really is (what the figures use, as nccl-tests)."""
    per = size // itemsize
    if op in (ALL_GATHER, REDUCE_SCATTER):
        count = max(per // ranks, 1)
        return count, count * ranks * itemsize
    if op == ALL_TO_ALL:
        piece = max(per // ranks, 1)
        return piece * ranks, piece * ranks * itemsize
    return max(per, 1), max(per, 1) * itemsize


def _tensors(op: str, count: int, ranks: int, dtype, rng, data: bool):
    """Inputs, outputs and (with data) the expected outputs of ``op``; timing only, no host values
    at all (a 768-rank 256 MiB all-reduce would otherwise make 192 GiB of them)."""
    if op == ALL_TO_ALL:
        sent = received = count
    elif op == ALL_GATHER:
        sent, received = count, count * ranks
    elif op == REDUCE_SCATTER:
        sent, received = count * ranks, count
    else:
        sent = received = count
    if not data:
        inputs = [npusim.empty((sent,), dtype, device=r) for r in range(ranks)]
        in_place = op in (ALL_REDUCE, BROADCAST, REDUCE)
        outputs = inputs if in_place else [npusim.empty((received,), dtype, device=r) for r in range(ranks)]
        return inputs, outputs, [None] * ranks
    xs = [rng.integers(-3, 4, sent).astype(dtype) for _ in range(ranks)]
    inputs = [npusim.tensor(x, device=r) for r, x in enumerate(xs)]
    if op in (ALL_REDUCE, BROADCAST, REDUCE):
        outputs = inputs
    else:
        outputs = [npusim.zeros((received,), dtype, device=r) for r in range(ranks)]
    if op == ALL_TO_ALL:
        piece = count // ranks
        return inputs, outputs, [np.concatenate([x[j * piece:(j + 1) * piece] for x in xs]) for j in range(ranks)]
    if op == ALL_GATHER:
        return inputs, outputs, [np.concatenate(xs)] * ranks
    if op == BROADCAST:
        return inputs, outputs, [xs[0]] * ranks
    total = _sum(xs, dtype)
    if op == REDUCE_SCATTER:
        return inputs, outputs, [total[r * count:(r + 1) * count] for r in range(ranks)]
    return inputs, outputs, ([total] * ranks if op == ALL_REDUCE else [total] + [None] * (ranks - 1))


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
