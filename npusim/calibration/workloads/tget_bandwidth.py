"""pto-isa's TGET bandwidth example (hw-native-sys/pto-isa ``kernels/manual/a2a3/tget_bandwidth/``:
README.md, tget_bandwidth_kernel.cpp; the instruction in ``include/pto/comm/a2a3/TGet.hpp``), written
with npusim's ISA as the example runs it: one AIV of the root rank reads a peer's symmetric buffer
over HCCS through a UB staging tile, 2 x 910B.

The staging tile is one row of 1024 floats (``kTileElems``: 4 KiB), so ``TGET`` of ``bytes`` moves
``bytes / 4 KiB`` chunks one after another through the one buffer (``TgetTransferOnce``; a one-row
tile has no intra-tile ping-pong): a TLOAD of the chunk from the peer's GM into UB (MTE2, a remote
read: the request crosses the link and the data come back), ``set_flag`` / ``wait_flag``
MTE2 -> MTE3, ``pipe_barrier(ALL)``, a TSTORE of it into the root's own GM (MTE3), ``set_flag`` /
``wait_flag`` MTE3 -> MTE2. The benchmark times its iterations of ``TGET`` then
``pipe_barrier(ALL)`` with the system counter after warm-up iterations (``ProfileTGetBandwidthKernel``);
the row is the average of one ``TGET``: ``device avg cycles`` of the README over the counter's 50 MHz
(``GetSystemCycle``, Ascend C API: 50 MHz on Atlas A2 and A3). Here it is the time one more
iteration adds to a kernel (``T(2n) - T(n)``, over ``n``), its source warm in L2 as the warm-up
leaves it.

What the rows measure: a core's remote read round trip (the MTE2's set-up, the link's latency
both ways, the peer's L2) and its local store, per 4 KiB; they are latency-bound (4 KiB at the
link's rate is 0.15 us of the 0.73 us a chunk takes), the link's rate matters little.

The hardware: the README says "Ascend A2/A3"; its build maps both to ``Ascend910B1`` and the
asynchronous rows (SDMA, 10273.68 cycles = 205 us for 4 MiB: 20.4 GB/s) match one A2 HCCS link
(HIXL's A2 hccs rows), not an A3 die pair, so the rows are run on a2.

Parameters (``--param NAME=VALUE``): ``bytes`` (4 MiB), ``iterations`` (2).

Run: npusim run --config a2 npusim/calibration/workloads/tget_bandwidth.py --no-data
"""

from __future__ import annotations

import numpy as np

import npusim
from npusim import isa
from npusim.errors import UsageError

TILE_ELEMENTS = 1024
"""tget_bandwidth_kernel.cpp ``kTileElems``: the staging tile, one row of float32."""
ELEMENT = np.dtype(np.float32).itemsize
SYSTEM_COUNTER_HZ = 50e6
"""The system counter's frequency on Atlas A2 / A3 (Ascend C ``GetSystemCycle``)."""
MEASURED_CYCLES = {4096: 36.28, 16384: 149.98, 65536: 579.62, 262144: 2409.72, 1048576: 9317.93, 4194304: 37924.12}
"""README "Measured Performance (Reference)", ``TGET Device Avg Cycles`` by transfer size (bytes)."""


def measured_us(size: int) -> float:
    """The measured average time of one ``TGET`` of ``size`` bytes (us)."""
    return MEASURED_CYCLES[size] / SYSTEM_COUNTER_HZ * 1e6


def build(source, destination, elements: int, iterations: int) -> isa.Kernel:
    """The root's kernel: ``iterations`` TGETs of ``elements`` floats from ``source`` (the peer's
    GM) into ``destination`` (its own), each followed by ``pipe_barrier(ALL)``, on one AIV."""
    kernel = isa.Kernel("TGetBandwidthKernel", die=destination.device)
    p = kernel.aiv(0)
    staging = p.alloc(TILE_ELEMENTS, np.float32)
    for _ in range(iterations):
        for offset in range(0, elements, TILE_ELEMENTS):
            nbytes = min(TILE_ELEMENTS, elements - offset) * ELEMENT
            p.copy(staging, isa.gm(source, offset), nbytes, name="TGET TLOAD")
            p.set_flag("MTE2", "MTE3", 0)
            p.wait_flag("MTE2", "MTE3", 0)
            p.pipe_barrier("ALL")
            p.copy(isa.gm(destination, offset), staging, nbytes, name="TGET TSTORE")
            p.set_flag("MTE3", "MTE2", 0)
            p.wait_flag("MTE3", "MTE2", 0)
        p.pipe_barrier("ALL")
    return kernel


def kernel_us(source, destination, elements: int, iterations: int) -> float:
    """Launch ``build(...)`` in the current session, wait for it, and give its span (us)."""
    from npusim.trace.summary import ops, records

    session = npusim.current_session()
    build(source, destination, elements, iterations).launch()
    npusim.synchronize()
    span = [op for op in records(ops(session.system.record())) if op["name"] == "TGetBandwidthKernel"][-1]
    return span["end_us"] - span["start_us"]


def run(bytes: int = 4 << 20, iterations: int = 2) -> dict:  # noqa: A002  (the README's name for the transfer size)
    """One TGET of ``bytes`` from die 1 into die 0 in the current session: its time (us, one more
    iteration's share of a kernel, source warm in L2), the measurement where the README gives one,
    and the bandwidth (GB/s)."""
    if bytes <= 0 or bytes % ELEMENT:
        raise UsageError(f"bytes={bytes}: a TGET moves whole float32 elements; give a positive multiple of {ELEMENT}")
    elements = bytes // ELEMENT
    source = npusim.empty(elements, np.float32, device=1)
    destination = npusim.empty(elements, np.float32, device=0)
    kernel_us(source, destination, elements, 1)  # warm-up: the source's lines in the peer's L2
    once = kernel_us(source, destination, elements, iterations)
    twice = kernel_us(source, destination, elements, 2 * iterations)
    per_tget = (twice - once) / iterations
    figures = {"tget_us": per_tget, "gbps": bytes / (per_tget * 1e3)}
    if bytes in MEASURED_CYCLES:
        figures["measured_us"] = measured_us(bytes)
        figures["error"] = per_tget / figures["measured_us"] - 1
    return figures


def main() -> None:
    size = npusim.param("bytes", 4 << 20, "transfer size (bytes)")
    figures = run(size, npusim.param("iterations", 2, "timed iterations"))
    measured = f"; measured {figures['measured_us']:.3f} us ({figures['error']:+.1%})" if "measured_us" in figures else ""
    print(f"TGET of {size} B (2 x 910B, one AIV, 4 KiB UB staging): {figures['tget_us']:.3f} us, {figures['gbps']:.2f} GB/s{measured}")


if __name__ == "__main__":
    main()
