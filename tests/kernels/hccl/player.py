"""A reference player of HCCL schedules on numpy: every step's transfers applied in order (copies,
or ``dst = op(dst, src)`` for reducing ones), to check what an algorithm computes without the
simulator (the runtime applies them when each transfer lands)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from npusim.kernels.hccl.schedule import INPUT, OUTPUT, WORK, Schedule


def play(schedule: Schedule, inputs: Sequence[np.ndarray], output_elements: Sequence[int], combine=np.add) -> list[np.ndarray]:
    """The outputs of ``schedule`` on ``inputs`` (one array per rank, one dtype)."""
    dtype = inputs[0].dtype
    size = dtype.itemsize
    work = [np.zeros(max(schedule.work_bytes, size) // size, dtype) for _ in inputs]
    outputs = [np.zeros(n, dtype) for n in output_elements]
    buffers = {INPUT: list(inputs), OUTPUT: outputs, WORK: work}
    for step in schedule.steps:
        for t in step.transfers:
            source = buffers[t.src_buffer][t.src][t.src_offset // size:(t.src_offset + t.nbytes) // size].copy()
            target = buffers[t.dst_buffer][t.dst]
            where = slice(t.dst_offset // size, (t.dst_offset + t.nbytes) // size)
            target[where] = combine(target[where], source) if t.reduce else source
    return outputs
