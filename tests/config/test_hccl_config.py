"""The hccl section (HCCL_ALGO in both its forms, the transport) and SuperPoDs (shape.pods)."""

from __future__ import annotations

import pytest

from npusim.config import load_config
from npusim.config.schema import parse_hccl_algo
from npusim.errors import ConfigError


def test_the_builtin_configs_carry_hccls_defaults() -> None:
    a2, a3 = load_config("a2").spec, load_config("a3").spec
    assert a2.hccl is not None and a3.hccl is not None
    assert (a2.hccl.expansion_mode, a3.hccl.expansion_mode) == ("host", "ai_cpu")  # HCCL_OP_EXPANSION_MODE's defaults
    assert a2.hccl.buffer.bytes == 200 << 20                                        # HCCL_BUFFSIZE 200 MB
    assert a2.hccl.selection.latency.text == "60 us" and a2.hccl.selection.bandwidth.text == "20 GiB/s"
    assert a3.hccl.aiv_max_bytes is not None and a3.hccl.aiv_max_bytes.bytes == 1 << 20
    assert a2.hccl.algo.forced("allreduce", "level1") == "auto"
    assert load_config("atlas-300i-duo").spec.hccl is None


@pytest.mark.parametrize("text,expected", [
    ("level0:NA;level1:ring", {"level0": "NA", "level1": "ring"}),
    ("level0:NA;level1:H-D_R;level2:NHR", {"level0": "NA", "level1": "H-D_R", "level2": "NHR"}),
    ("allreduce=level0:NA;level1:ring/allgather=level0:NA;level1:H-D_R",
     {"allreduce": {"level0": "NA", "level1": "ring"}, "allgather": {"level0": "NA", "level1": "H-D_R"}}),
])
def test_hccl_algo_syntax(text: str, expected: dict) -> None:
    """The forms of the guide's HCCL_ALGO page."""
    assert parse_hccl_algo(text) == expected


def test_forced_algorithms_resolve_per_op_first() -> None:
    algo = load_config("a2", ["hccl.algo=level1:NB/allreduce=level1:ring"]).spec.hccl.algo
    assert (algo.forced("allreduce", "level1"), algo.forced("allgather", "level1"), algo.forced("allgather", "level2")) == ("ring", "nb", "auto")
    assert load_config("a2", ["hccl.algo.reducescatter.level1=H-D_R"]).spec.hccl.algo.forced("reducescatter", "level1") == "rhd"


@pytest.mark.parametrize("override,message", [
    ("hccl.algo.level1=rings", "hccl.algo.level1: unknown collective algorithm 'rings'; did you mean 'ring'?"),
    ("hccl.algo=level1:AHC", "AHC (asymmetric hierarchical concatenation) is not modelled"),
    ("hccl.algo=gather=level1:ring", "'gather' is not an op of HCCL_ALGO"),
    ("hccl.algo=level3:ring", "'level3:ring' is not LEVEL:ALGO"),
    ("hccl.expansion_mode=ccu", "hccl.expansion_mode"),
])
def test_bad_hccl_settings_are_located(override: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace(")", r"\)")):
        load_config("a2", [override])


def test_pods_multiply_the_dies_and_need_nics() -> None:
    shape = load_config("a3", ["shape.pods=2", "shape.nodes=3"]).spec.shape
    assert shape.dies == 2 * 3 * 16
    assert [shape.pod_of(d) for d in (0, 47, 48, 95)] == [0, 0, 1, 1]
    assert [shape.node_of(d) for d in (0, 16, 48, 64)] == [0, 1, 3, 4]
    with pytest.raises(ConfigError, match="shape.pods is 2, but fabrics.scale_out"):
        load_config("a3", ["shape.pods=2", "fabrics.scale_out=null"])
