"""One HCCL collective over every die (or ``ranks`` of them), as HCCL runs it: the algorithm HCCL
picks for the topology and the size (or the one forced with ``--set hccl.algo...``), each step's
transfers over the fabric, the ``hccl`` lane of each die in the trace naming every step.

Parameters (``--param NAME=VALUE``): ``op`` (allreduce, allgather, reducescatter, alltoall,
broadcast, reduce), ``mib`` (the op's size in MiB: the tensor of an all-reduce, a broadcast or a
reduce; the gathered output of an all-gather; the input of a reduce-scatter; what one rank sends in
an all-to-all), ``dtype`` and ``ranks`` (0: every die). With data on, every rank's result is checked
(small integer values, so every summation order gives the exact sum).

Run: python -m npusim run --config a2 examples/hccl_allreduce.py
     python -m npusim run --config a2 --set shape.nodes=4 --set hccl.algo.level1=ring examples/hccl_allreduce.py --no-data
     python -m npusim run --config a3 --set shape.nodes=48 examples/hccl_allreduce.py --param mib=256 --no-data --trace none
"""

import npusim
from npusim.analysis.collectives import OPS, measure_in_session
from npusim.units import format_bytes

op = npusim.param("op", "allreduce", f"the collective: {', '.join(OPS)}")
mib = npusim.param("mib", 64.0, "the op's size in MiB")
dtype = npusim.param("dtype", "float16", "float16, bfloat16, float32, int8 or int32")
ranks = npusim.param("ranks", 0, "ranks, one per die from die 0 (0: every die)")

point = measure_in_session(op, int(mib * 2**20), ranks=ranks or None, dtype=dtype)
print(f"{op} of {format_bytes(point.size)} ({dtype}) on {point.ranks} ranks: {point.algorithms}, {point.time_us:.1f} us, "
      f"algbw {point.algbw:.1f} GB/s, busbw {point.busbw:.1f} GB/s")
if point.correct is not None:
    print("every rank's result is exact" if point.correct else "WRONG RESULT")
    if not point.correct:
        raise SystemExit(1)
