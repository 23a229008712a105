"""The runs whose outputs must not change unless a change means them to: the identity gate.

Each :class:`ExampleCase` runs one bundled example (small parameters, so the whole gate takes
seconds) as ``npusim run`` would, and digests what a run folder holds: ``trace.json`` at the
case's trace level, ``summary.json`` without its wall time (with the hash of the resolved config's
values) and the profiler's tables (not ``config.yaml``, whose comments are the configs' sources). :func:`random_kernel_digests` adds ISA kernels drawn at random (loads,
vector ops and stores in double-buffered tiles with their flags and barriers, on several cores)
whose events and outputs are digested batch by batch.

A digest that differs names its case and file; a change that means to move timing or bytes
regenerates the digests with ``make golden`` (``python -m tests.golden.update``) and says why in
its commit message.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
DIGESTS = Path(__file__).with_name("digests.json")


@dataclass(frozen=True)
class ExampleCase:
    """One run of ``examples/<example>`` on ``config`` with ``--set`` ``overrides``, ``--param``
    ``params``, data on or off and a trace level."""

    name: str
    config: str
    example: str
    params: dict[str, object] = field(default_factory=dict)
    overrides: tuple[str, ...] = ()
    data: bool = True
    trace: str = "all"


EXAMPLE_CASES = (
    ExampleCase("vector_add-a2", "a2", "vector_add.py", {"elements": 48 * 3 * 1024, "tile": 1024}),
    ExampleCase("vector_add-a2-single-buffer", "a2", "vector_add.py", {"elements": 8 * 3 * 2048, "tile": 2048, "cores": 8,
                                                                       "double_buffer": False}),
    ExampleCase("vector_add-a3-nodata", "a3", "vector_add.py", {"elements": 48 * 4 * 2048, "tile": 2048}, data=False),
    ExampleCase("shmem_allgather-a2", "a2", "shmem_allgather.py", {"rows": 64, "cols": 1024, "tile_rows": 32}),
    ExampleCase("shmem_allgather-a3-nodata", "a3", "shmem_allgather.py", {"n_pes": 8, "rows": 32, "cols": 1024, "tile_rows": 16}, data=False),
    ExampleCase("shmem_allgather-a3-ops", "a3", "shmem_allgather.py", {"n_pes": 4, "rows": 64, "cols": 1024, "tile_rows": 32}, trace="ops"),
    ExampleCase("shmem_allreduce-a2", "a2", "shmem_allreduce.py"),
    ExampleCase("hierarchical_allgather-a3-2nodes", "a3", "hierarchical_allgather.py", {"n_pes": 32, "rows": 8, "cols": 256},
                overrides=("shape.nodes=2",), data=False, trace="ops"),
    ExampleCase("moe_dispatch-a3", "a3", "moe_dispatch.py", {"ep": 4, "groups": 2, "tokens": 4}),
    ExampleCase("moe_dispatch_combine-a2", "a2", "moe_dispatch_combine.py", {"ranks": 4, "batch": 4, "hidden": 256, "experts": 8, "topk": 2}),
    ExampleCase("pypto_matmul_add-a2", "a2", "pypto_matmul_add.py", {"m": 96, "k": 192, "n": 160, "tile_m": 64, "tile_n": 64, "tile_k": 64}),
    ExampleCase("allgather_matmul-a2", "a2", "allgather_matmul.py", {"n_pes": 4, "rows": 32, "k": 128, "n": 64}),
    ExampleCase("quant_scatter_doc_example2-a3", "a3", "quant_scatter_doc_example2.py"),
    ExampleCase("atlas_300i_duo", "atlas-300i-duo", "atlas_300i_duo.py", {"elements": 8 * 2048, "tile": 2048}),
    # HCCL's collectives end to end: each op on two A3 nodes (double ring inside, ring between), NHR
    # between four and eight nodes, RHD between SuperPoDs, A2's mesh and pipeline in passes
    *(ExampleCase(f"hccl_{op}-a3-2nodes", "a3", "hccl_allreduce.py", params, overrides=("shape.nodes=2",))
      for op, params in (("allreduce", {"op": "allreduce", "mib": 4.0}), ("allgather", {"op": "allgather", "mib": 4.0}),
                         ("reducescatter", {"op": "reducescatter", "mib": 4.0, "dtype": "float32"}),
                         ("alltoall", {"op": "alltoall", "mib": 0.0625}), ("broadcast", {"op": "broadcast", "mib": 1.0}),
                         ("reduce", {"op": "reduce", "mib": 1.0}))),
    ExampleCase("hccl_allreduce-a3-4nodes", "a3", "hccl_allreduce.py", {"op": "allreduce", "mib": 1.0}, overrides=("shape.nodes=4",)),
    ExampleCase("hccl_allreduce-a3-8nodes-nodata", "a3", "hccl_allreduce.py", {"op": "allreduce", "mib": 64.0}, overrides=("shape.nodes=8",),
                data=False, trace="ops"),
    ExampleCase("hccl_allreduce-a3-2pods-nodata", "a3", "hccl_allreduce.py", {"op": "allreduce", "mib": 4.0},
                overrides=("shape.nodes=2", "shape.pods=2"), data=False, trace="ops"),
    ExampleCase("hccl_allgather-a2-4nodes-passes", "a2", "hccl_allreduce.py", {"op": "allgather", "mib": 2.0, "dtype": "float32"},
                overrides=("shape.nodes=4", "hccl.buffer=256 KiB")),
    ExampleCase("hccl_allreduce-a2-4nodes-passes", "a2", "hccl_allreduce.py", {"op": "allreduce", "mib": 1.0, "dtype": "int32"},
                overrides=("shape.nodes=4", "hccl.buffer=256 KiB")),
)


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


CONFIG_PROSE = ("basis", "source", "where")
"""What the bottlenecks' ``rests_on`` entries quote of the config's lines: their comments and
``FILE:LINE``, which move whenever a config's comments are edited (edited freely, as config.yaml's)."""


def _summary_bytes(summary: dict) -> bytes:
    """summary.json's content without what differs between two runs of the same inputs (the wall time)
    or with the configs' comments (:data:`CONFIG_PROSE`). Its tables are digested as lists of rows
    (``npusim.trace.summary.records``), the form they had when the digests were taken: a change of
    their layout alone leaves the digests as they are."""
    from npusim.trace.summary import records, with_tables

    kept = with_tables({key: value for key, value in summary.items() if key != "wall_time_s"}, records)
    bottlenecks = kept.get("bottlenecks")
    if isinstance(bottlenecks, dict) and "rests_on" in bottlenecks:
        entries = [{key: value for key, value in entry.items() if key not in CONFIG_PROSE} for entry in bottlenecks["rests_on"]]
        kept["bottlenecks"] = {**bottlenecks, "rests_on": entries}
    return json.dumps(kept, sort_keys=True).encode()


def run_case(case: ExampleCase) -> dict[str, str]:
    """File name -> SHA-256 of what ``npusim run`` writes for ``case`` (see the module)."""
    from npusim.analysis.outputs import CONFIG_FILE, run_folder_files
    from npusim.frontend.simulate import simulate
    from npusim.trace.chrome import write_chrome_trace
    from npusim.trace.selection import trace_selection

    result = simulate(case.config, EXAMPLES / case.example, overrides=list(case.overrides), params=case.params, data=case.data)
    digests = {"summary.json": _sha(_summary_bytes(result.summary))}
    if case.trace != "none":
        selection = trace_selection(case.trace, die_count=result.config.spec.shape.dies)
        metadata = {"config": result.config.name, "workload": case.example, "status": result.status, "params": result.params}
        with tempfile.TemporaryDirectory() as folder:
            path = Path(folder) / "trace.json"
            write_chrome_trace(result.record, path, metadata=metadata, selection=selection)
            digests["trace.json"] = _sha(path.read_bytes())
    for name, data in run_folder_files(result.record, result.config, result.summary["ops"]).items():
        if name != CONFIG_FILE:  # its comments are the configs' sources, edited freely; its values are in summary.json's config_sha256
            digests[name] = _sha(data)
    return digests


# -- random kernels ---------------------------------------------------------------------------------

KERNEL_BATCHES = 12
KERNELS_PER_BATCH = 25
VECTOR_KINDS = ("add", "sub", "mul", "max", "min", "adds", "muls", "abs", "exp", "neg")


def _random_kernel(isa, rng: np.random.Generator, x, out, index: int):
    """One kernel of random shape on die 0's vector cores: tiles of loads, vector ops and a store,
    single or double buffered, ordered by flags (and, at random, barriers and scalar work). Each
    core stores into its own rows of ``out``, so no two cores race on GM."""
    kernel = isa.Kernel(f"random{index}", die=0)
    cores = int(rng.integers(1, 5))
    rows = out.shape[0] // 4
    for core in range(cores):
        p = kernel.aiv(core)
        tile = int(rng.choice([256, 512, 1024, 2048]))
        depth = int(rng.integers(1, 3))
        tiles = int(rng.integers(1, 5))
        buffers = [[p.alloc(tile, np.float16) for _ in range(2)] for _ in range(depth)]
        for t in range(tiles):
            a, b = buffers[t % depth]
            event = t % depth
            with p.tile(t):
                if t >= depth:
                    p.wait_flag("MTE3", "MTE2", event)
                src = int(rng.integers(0, x.size // tile)) * tile
                p.copy(a, isa.gm(x, src), name="load a")
                if rng.random() < 0.7:
                    p.copy(b, isa.gm(x, (src + tile) % x.size), name="load b")
                else:
                    p.dup(b, 0.5)
                if rng.random() < 0.2:
                    p.scalar(int(rng.integers(1, 20)))
                p.set_flag("MTE2", "VECTOR", event)
                p.wait_flag("MTE2", "VECTOR", event)
                for _ in range(int(rng.integers(1, 4))):
                    kind = str(rng.choice(VECTOR_KINDS))
                    if kind in ("adds", "muls"):
                        p.vector(kind, a, a, scalar=float(rng.choice([0.5, -1.0, 2.0])))
                    elif kind in ("abs", "exp", "neg"):
                        p.vector(kind, a, a)
                    else:
                        p.vector(kind, a, a, b)
                if rng.random() < 0.15:
                    p.pipe_barrier("ALL")
                p.set_flag("VECTOR", "MTE3", event)
                p.wait_flag("VECTOR", "MTE3", event)
                row = core * rows + t % rows
                p.copy(isa.gm(out, row * out.shape[1]), a, name="store")
                p.set_flag("MTE3", "MTE2", event)
        for event in range(min(depth, tiles)):
            p.wait_flag("MTE3", "MTE2", event)
    return kernel


def random_kernel_digests(batch: int) -> dict[str, str]:
    """The digests of batch ``batch``: its kernels run one after the other in one a2 session with
    data; the trace, the summary and the output bytes."""
    import npusim
    from npusim import isa
    from npusim.trace.chrome import write_chrome_trace

    rng = np.random.default_rng(1000 + batch)
    with npusim.session("a2") as active:
        x = npusim.tensor(np.random.default_rng(batch).standard_normal(1 << 15).astype(np.float16))
        out = npusim.zeros((16, 2048), np.float16)
        outputs = []
        for index in range(KERNELS_PER_BATCH):
            _random_kernel(isa, rng, x, out, index).launch()
            npusim.synchronize()
            outputs.append(out.numpy().tobytes())
    result = active.result
    assert result is not None
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "trace.json"
        write_chrome_trace(result.record, path, metadata={"batch": batch})
        trace = path.read_bytes()
    return {"trace.json": _sha(trace), "summary.json": _sha(_summary_bytes(result.summary)), "outputs": _sha(b"".join(outputs))}


def all_digests() -> dict[str, dict[str, str]]:
    """Every case's digests, by case name (the content of digests.json)."""
    os.environ.setdefault("NPUSIM_FORK", "never")
    digests = {case.name: run_case(case) for case in EXAMPLE_CASES}
    digests.update({f"random-kernels-{batch}": random_kernel_digests(batch) for batch in range(KERNEL_BATCHES)})
    return digests
