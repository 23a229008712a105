"""Which algorithm HCCL takes per level (its rules, from hcomm's selection code and the user guide),
forcing one with hccl.algo, and the support table's refusals."""

from __future__ import annotations

import numpy as np
import pytest

from npusim.config import load_config
from npusim.errors import OpArgumentError
from npusim.kernels.hccl.hierarchy import Layout
from npusim.kernels.hccl.plan import Collective
from npusim.kernels.hccl.selection import choose
from tests.kernels.hccl.test_algorithms import places

F16 = np.dtype(np.float16)


def picked(config: str, overrides, shape, op: str, nbytes: int, reduce_op: str | None = "sum", dtype=F16) -> dict[int, str]:
    spec = load_config(config, list(overrides)).spec
    layout = Layout.of(places(*shape))
    p = len(layout.coords)
    call = Collective(op, dtype.itemsize, nbytes // dtype.itemsize, counts=((nbytes // dtype.itemsize // p,) * p,) * p if op == "alltoall" else ())
    choice = choose(spec, layout, call, reduce_op if op in ("allreduce", "reducescatter", "reduce") else None, dtype)
    return {level: a.name for level, a in choice.algorithms.items()} | {"transport": choice.transport}  # type: ignore[dict-item]


def test_inside_a_server_the_topology_decides() -> None:
    assert picked("a2", [], (1, 1, 8), "allreduce", 1 << 20) == {0: "mesh", "transport": "dma"}
    assert picked("a3", [], (1, 1, 16), "allgather", 1 << 20)[0] == "double_ring"
    # A3: an all-reduce in one server of up to 512 KiB x ranks runs on the mesh (AllReduceMeshSmallCountExecutor)
    assert picked("a3", [], (1, 1, 16), "allreduce", 16 * 512 * 1024)[0] == "mesh"
    assert picked("a3", [], (1, 1, 16), "allreduce", 16 * 512 * 1024 + 2)[0] == "double_ring"


@pytest.mark.parametrize("servers,op,nbytes,expected", [
    (2, "allreduce", 1024, "ring"),            # equal alpha-beta costs: ring first
    (4, "allreduce", 1024, "nhr"),             # ceil(log2 4) steps beat 3; RHD ties NHR, NHR wins the tie
    (4, "allreduce", 256 << 20, "pipeline"),   # 8 MiB per rank's slice >= 1 MiB
    (4, "allreduce", 16 << 20, "nhr"),         # 512 KiB per slice < 1 MiB
    (4, "allgather", 32 << 10, "pipeline"),    # >= 32 KiB per rank
    (4, "allgather", 16 << 10, "nhr"),
    (4, "broadcast", 1 << 20, "rhd"),          # broadcast and reduce: ring or RHD only
    (3, "broadcast", 1 << 20, "rhd"),          # off a power of two RHD folds: fewer latencies, more bytes
    (3, "broadcast", 256 << 20, "ring"),
    (4, "alltoall", 1 << 20, "pairwise"),
])
def test_between_a2_servers_hccl_compares_costs(servers: int, op: str, nbytes: int, expected: str) -> None:
    assert picked("a2", [f"shape.nodes={servers}"], (1, servers, 8), op, nbytes)[1] == expected


def test_deterministic_and_prod_avoid_the_pipeline() -> None:
    assert picked("a2", ["shape.nodes=4", "hccl.deterministic=true"], (1, 4, 8), "allreduce", 256 << 20)[1] == "nhr"
    assert picked("a2", ["shape.nodes=4"], (1, 4, 8), "allreduce", 256 << 20, "prod")[1] == "nhr"


def test_a3_runs_nhr_where_hccl_would_take_rhd_and_picks_level2_by_pod_count() -> None:
    assert picked("a3", ["shape.nodes=4"], (1, 4, 16), "broadcast", 1 << 20)[1] == "nhr"
    assert picked("a3", ["shape.pods=2"], (2, 1, 16), "allreduce", 1 << 20)[2] == "rhd"
    assert picked("a3", ["shape.pods=3"], (3, 1, 16), "allreduce", 1 << 20)[2] == "ring"
    assert picked("a3", ["shape.pods=2"], (2, 1, 16), "allgather", 1 << 20)[2] == "nhr"  # RHD lacks AllGather at level 2
    assert picked("a3", ["shape.pods=2"], (2, 1, 16), "alltoall", 1 << 20)[2] == "mesh"  # no all-to-all algorithm there: the full mesh spans the pods


def test_forcing_an_algorithm() -> None:
    assert picked("a2", ["shape.nodes=4", "hccl.algo.level1=ring"], (1, 4, 8), "allreduce", 1 << 20)[1] == "ring"
    assert picked("a2", ["shape.nodes=4", "hccl.algo=level0:NA;level1:H-D_R"], (1, 4, 8), "allgather", 1 << 20)[1] == "rhd"
    assert picked("a2", ["shape.nodes=4", "hccl.algo=allreduce=level1:NB"], (1, 4, 8), "allreduce", 1 << 20)[1] == "nb"
    assert picked("a2", ["shape.nodes=4", "hccl.algo=allreduce=level1:NB"], (1, 4, 8), "allgather", 1 << 10)[1] == "nhr"
    assert picked("a2", ["hccl.algo.level0=ring"], (1, 1, 8), "allreduce", 1 << 20)[0] == "ring"  # a what-if: HCCL takes only NA


@pytest.mark.parametrize("overrides,shape,op,message", [
    (["shape.nodes=4", "hccl.algo.level1=pairwise"], (1, 4, 8), "allreduce", "does not list allreduce for pairwise"),
    (["shape.nodes=4", "hccl.algo.level1=ring"], (1, 4, 8), "broadcast", "HCCL would quietly run NHR or H-D_R instead"),
    (["shape.nodes=4", "hccl.algo.level1=rhd"], (1, 4, 8), "scatter", "force one of nb, nhr, ring"),
    (["hccl.algo.level0=pipeline"], (1, 1, 8), "allreduce", "does not run inside a server"),
])
def test_an_unsupported_forced_algorithm_is_refused(overrides, shape, op: str, message: str) -> None:
    with pytest.raises(OpArgumentError, match=message):
        picked("a2", overrides, shape, op, 1 << 20)


def test_a3_support_table_differs() -> None:
    with pytest.raises(OpArgumentError, match=r"Atlas A3 .*inter-server.*does not list allreduce for H-D_R"):
        picked("a3", ["shape.nodes=2", "hccl.algo.level1=rhd"], (1, 2, 16), "allreduce", 1 << 20)
    assert picked("a3", ["shape.pods=2", "hccl.algo.level2=rhd"], (2, 1, 16), "allreduce", 1 << 20)[2] == "rhd"


def test_aiv_expansion() -> None:
    aiv = ["hccl.expansion_mode=aiv"]
    assert picked("a3", aiv, (1, 1, 16), "allreduce", 1 << 20)["transport"] == "aiv"
    assert picked("a3", aiv, (1, 1, 16), "allreduce", (1 << 20) + 2)["transport"] == "dma"   # above AIV_ALL_REDUCE_A3_ENTRY_SIZE
    assert picked("a3", aiv, (1, 1, 16), "allreduce", 1024, "prod")["transport"] == "dma"    # AIV reduces sum, max, min
    assert picked("a3", aiv + ["shape.pods=2"], (2, 1, 16), "allreduce", 1024)["transport"] == "dma"  # not across SuperPoDs
    assert picked("a2", aiv, (1, 1, 8), "allreduce", 64 << 20) == {0: "mesh", "transport": "aiv"}
    assert picked("a2", [], (1, 1, 8), "allreduce", 1024)["transport"] == "dma"
