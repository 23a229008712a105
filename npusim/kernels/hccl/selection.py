"""Which algorithm HCCL runs at each level of a communicator, and over which transport.

- **Inside a server** (level 0) the topology decides (the guide: "根据硬件拓扑自动选择，用户无须配置"):
  the mesh on an A2 server's HCCS full mesh (hcomm ``GetDefaultAlgoLevel0Module``: ALG_LEVEL0_NP_MESH
  with every HCCS link up), the double ring on an A3 node (ALG_LEVEL0_NP_DOUBLE_RING with the UB
  switches and SIO); an A3 all-reduce inside one server of at most ``hccl.selection.mesh_small_count``
  per rank takes the mesh (``SelectAlgfor91093``: AllReduceMeshSmallCountExecutor). HCCL_ALGO accepts
  only NA there; npusim also lets a what-if force one of the algorithms that run inside a server.
- **Between servers** (level 1), unless HCCL_ALGO forces one: pipeline for an all-gather or
  reduce-scatter of at least ``pipeline_min`` per rank and an all-reduce of at least
  ``pipeline_allreduce_min`` per rank's slice, with several ranks per server and an inline reduce
  (A2, not deterministic); otherwise HCCL's own alpha-beta comparison of ring, NHR and RHD with its
  constants ``hccl.selection.latency`` and ``bandwidth`` (hcomm ``GetDefaultAlgoLevel1V2``,
  ``SelectAlgoTypeFor*``: ties go ring, then NHR, then RHD); A3 runs NHR where that picks RHD
  ("only support ring, NB and NHR in AlgoLevel1"); an all-to-all goes pairwise (A2) or all pairs at
  once (A3's grouped full mesh, not configurable).
- **Between SuperPoDs** (level 2, A3): ring for fewer than 8 SuperPoDs that are not a power of two,
  else RHD (the guide's HCCL_ALGO page), with the support table's fallback for an op RHD lacks.
- **Transport** (``dma`` or ``aiv``): SDMA inside a pod and RDMA between servers and SuperPoDs by default; with
  ``hccl.expansion_mode: aiv`` the ops the guide lists run on the AIV cores (mesh inside a server)
  up to ``aiv_max_bytes`` per rank, inside one SuperPoD, for the dtypes and reductions they take.

A forced algorithm the support table does not list for the op at that level is refused (HCCL itself
would quietly run its fallback; npusim says so instead, so a what-if never measures something else).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from npusim.config.products import PRODUCTS
from npusim.config.registry import COLLECTIVES
from npusim.config.schema import HcclSpec, SystemSpec
from npusim.errors import ConfigError, OpArgumentError, UsageError
from npusim.kernels.hccl.algorithm import ALL_GATHER, ALL_REDUCE, ALL_TO_ALL, BROADCAST, REDUCE_SCATTER, SCATTER, Algorithm
from npusim.kernels.hccl.hierarchy import LEVEL_NAMES, Layout
from npusim.kernels.hccl.plan import SEND, Collective
from npusim.kernels.hccl.reduce import AIV_DTYPES, inline

SERIES_LEVEL0 = {"atlas_a2": "mesh", "atlas_a3": "double_ring"}
"""The algorithm inside a server per product series (module docstring: hcomm GetDefaultAlgoLevel0Module)."""
AIV_OPS = {"atlas_a2": frozenset({BROADCAST, ALL_REDUCE, ALL_TO_ALL, ALL_GATHER, REDUCE_SCATTER}),
           "atlas_a3": frozenset({BROADCAST, ALL_REDUCE, REDUCE_SCATTER, ALL_GATHER, ALL_TO_ALL})}
"""The ops HCCL_OP_EXPANSION_MODE=AIV runs on the vector cores (the guide's HCCL_OP_EXPANSION_MODE page)."""
AIV_REDUCTIONS = frozenset({"sum", "max", "min", "avg"})


@dataclass(frozen=True)
class Choice:
    """The algorithm of each level of a communicator for one call, why, and the transport inside a pod."""

    algorithms: dict[int, Algorithm]
    reasons: dict[int, str] = field(default_factory=dict)
    transport: str = "dma"

    def describe(self) -> dict[str, str]:
        """The trace's op arguments: ``level1: nhr (HCCL's choice)`` ..."""
        described = {f"level{level}": f"{a.name} ({self.reasons[level]})" for level, a in sorted(self.algorithms.items())}
        return {**described, "transport": self.transport}


def hccl_spec(spec: SystemSpec) -> HcclSpec:
    """The config's hccl section (a ConfigError naming what to add when there is none)."""
    if spec.hccl is None:
        raise ConfigError(f"config {spec.name!r} has no hccl: section, which HCCL's collectives need (their algorithms, buffer "
                          "and notification cost); add one, as in configs/a2.yaml")
    return spec.hccl


def series_of(spec: SystemSpec) -> str:
    """The product series, one HCCL's algorithms are modelled on (a UsageError otherwise)."""
    product = PRODUCTS.get(spec.product)
    if product.series not in SERIES_LEVEL0:
        raise UsageError(f"HCCL's collectives are modelled on Atlas A2 and A3, not on {product.label} (config {spec.name!r}); "
                         "use --config a2 or a3")
    return product.series


def choose(spec: SystemSpec, layout: Layout, call: Collective, reduce_op: str | None, dtype: np.dtype) -> Choice:
    """The algorithms and transport of ``call`` on ``layout`` (module docstring)."""
    hccl, series = hccl_spec(spec), series_of(spec)
    clock = spec.die.clock.hz
    op = ALL_REDUCE if call.op == SEND else call.op
    can_inline = reduce_op is None or inline(reduce_op, dtype)
    transport = _transport(hccl, series, layout, call, reduce_op, dtype)
    algorithms: dict[int, Algorithm] = {}
    reasons: dict[int, str] = {}
    for level in layout.levels:
        forced = hccl.algo.forced(op, f"level{level}")
        if forced not in ("auto", "NA"):
            algorithms[level] = forced_algorithm(forced, op, level, spec)
            reasons[level] = f"hccl.algo level{level}"
            continue
        if level == 0:
            name, why = _level0(hccl, series, layout, call, transport)
        elif layout.flat or level == 1:
            name, why = _level1(hccl, series, layout, call, can_inline, clock)
        else:
            name, why = _level2(series, layout, op)
        algorithms[level] = COLLECTIVES.get(name)()
        reasons[level] = why
    return Choice(algorithms, reasons, transport)


def forced_algorithm(name: str, op: str, level: int, spec: SystemSpec) -> Algorithm:
    """The algorithm ``name`` forced for ``op`` at ``level``, or an OpArgumentError when HCCL's
    support table for the product does not list it (outside a server) or it does not run inside a
    server (level 0)."""
    series = series_of(spec)
    algorithm: Algorithm = COLLECTIVES.get(name)()
    if level == 0:
        if not algorithm.inside_server:
            inside = [n for n, a in COLLECTIVES if a.inside_server]
            raise OpArgumentError(f"hccl.algo.level0 = {name}: {name} does not run inside a server; HCCL accepts only NA there (the "
                                  f"topology's algorithm), and npusim's what-ifs one of {', '.join(inside)}")
        return algorithm
    supported = algorithm.support.get(series, {}).get(level, frozenset())
    if op not in supported:
        product = PRODUCTS.get(spec.product).label
        others = [n for n, a in COLLECTIVES if op in a.support.get(series, {}).get(level, frozenset())]
        instead = f"; HCCL would quietly run {algorithm.fallback} instead" if algorithm.fallback else ""
        raise OpArgumentError(
            f"hccl.algo level{level} = {algorithm.hccl_name}: HCCL's support table for {product} ({LEVEL_NAMES[level]}) does not list "
            f"{op} for {algorithm.hccl_name}{instead}. For {op} at level{level} force one of {', '.join(others) or 'none (HCCL picks it)'}, "
            f"or force it for other ops only (hccl.algo.<op>.level{level})"
        )
    return algorithm


def _transport(hccl: HcclSpec, series: str, layout: Layout, call: Collective, reduce_op: str | None, dtype: np.dtype) -> str:
    if hccl.expansion_mode != "aiv" or call.op not in AIV_OPS[series] or layout.dims[2] > 1:
        return "dma"
    if reduce_op is not None and (reduce_op not in AIV_REDUCTIONS or np.dtype(dtype).name not in AIV_DTYPES):
        return "dma"
    if hccl.aiv_max_bytes is not None and call.bytes_per_rank > hccl.aiv_max_bytes.bytes:
        return "dma"
    return "aiv"


def _level0(hccl: HcclSpec, series: str, layout: Layout, call: Collective, transport: str) -> tuple[str, str]:
    small = hccl.selection.mesh_small_count
    if transport == "aiv":
        return "mesh", "AIV expansion"
    if (call.op == ALL_REDUCE and small is not None and layout.levels == [0]
            and call.bytes_per_rank <= small.bytes * len(layout.coords)):
        return "mesh", "HCCL's choice: small count in one server"
    return SERIES_LEVEL0[series], "topology"


def _level1(hccl: HcclSpec, series: str, layout: Layout, call: Collective, can_inline: bool, clock_hz: float) -> tuple[str, str]:
    servers = layout.dims[1]
    local, ranks = layout.dims[0], len(layout.coords)
    selection = hccl.selection
    if call.op == ALL_TO_ALL:
        return ("pairwise", "HCCL's choice") if series == "atlas_a2" else ("mesh", "HCCL's grouped full mesh")
    data = min(call.bytes_per_rank, hccl.buffer.bytes)
    if series == "atlas_a2" and local > 1 and can_inline and not hccl.deterministic:
        if call.op in (ALL_GATHER, REDUCE_SCATTER) and call.bytes_per_rank >= selection.pipeline_min.bytes:
            return "pipeline", "HCCL's choice: large per rank"
        if call.op == ALL_REDUCE and call.bytes_per_rank // ranks >= selection.pipeline_allreduce_min.bytes:
            return "pipeline", "HCCL's choice: large per rank"
    name = _alpha_beta(call.op, servers, local, ranks, data, selection.latency.to_ps(clock_hz) / 1e6,
                       selection.bandwidth.bytes_per_second(clock_hz))
    if series == "atlas_a3" and name == "rhd":
        return "nhr", "HCCL's choice (A3 runs NHR for H-D_R)"
    return name, "HCCL's choice"


def _level2(series: str, layout: Layout, op: str) -> tuple[str, str]:
    if op == ALL_TO_ALL:  # the support table lists no all-to-all algorithm between SuperPoDs: the full mesh spans them
        return "mesh", "HCCL's grouped full mesh"
    pods = layout.dims[2]
    name = "ring" if pods < 8 and pods & (pods - 1) else "rhd"
    algorithm = COLLECTIVES.get(name)
    if op not in algorithm.support.get(series, {}).get(2, frozenset()) and series == "atlas_a3":
        for other in ("nhr", "ring"):
            if op in COLLECTIVES.get(other).support[series][2]:
                return other, f"HCCL's choice: {algorithm.hccl_name} lacks {op}"
    return name, "HCCL's choice"


def _alpha_beta(op: str, servers: int, local: int, ranks: int, data: int, delay_us: float, bandwidth: float) -> str:
    """HCCL's comparison of ring, NHR and RHD between ``servers`` servers (hcomm SelectAlgoTypeFor*;
    costs in us; ties: ring, then NHR, then RHD)."""
    steps = servers - 1
    log = math.ceil(math.log2(servers))
    power = servers & (servers - 1) == 0

    def seconds(nbytes: float) -> float:
        return nbytes / bandwidth * 1e6

    if op in (ALL_GATHER, REDUCE_SCATTER, SCATTER):
        ring = steps * delay_us + seconds(steps / servers * data * ranks)
        nhr = log * delay_us + seconds(steps / servers * data * ranks)
        hd = (math.log2(servers) * delay_us + seconds(steps / servers * data * ranks) if power
              else log * delay_us + seconds((2 * servers - 1) / servers * data * ranks))
    elif op == ALL_REDUCE:
        ring = 2 * steps * delay_us + seconds(2 * steps / servers * data / local)
        nhr = 2 * log * delay_us + seconds(2 * steps / servers * data / local)
        hd = (2 * math.log2(servers) * delay_us + seconds(2 * steps / servers * data / local) if power
              else 2 * log * delay_us + seconds(2 * (2 * servers - 1) / servers * data / local))
    else:  # broadcast, reduce: ring or RHD only
        ring = 2 * steps * delay_us + seconds(2 * steps / servers * data / local)
        nhr = math.inf
        hd = (2 * math.log2(servers) * delay_us + seconds(2 * steps / servers * data / local) if power
              else (1 + 2 * math.floor(math.log2(servers))) * delay_us + seconds((1 + 2 * steps / servers) * data / local))
    best = "nhr" if nhr < ring else "ring"
    return "rhd" if hd < min(ring, nhr) else best
