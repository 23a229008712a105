"""The shipped configs: they validate, give the expected derived numbers, and source every number."""

from importlib import resources

import pytest
import yaml

from npusim.config import builtin_configs, load_config
from npusim.config.annotated import values
from npusim.config.confidence import LEVELS, dotted

CLOCK = 1.85e9


def config_text(name: str) -> str:
    return resources.files("npusim").joinpath("configs", f"{name}.yaml").read_text(encoding="utf-8")


def test_a2_is_one_server_of_eight_910b():
    spec = load_config("a2").spec
    assert (spec.product, spec.shape.nodes, spec.shape.dies) == ("ascend910b", 1, 8)
    fabrics = spec.fabrics
    assert fabrics.node.kind == "full_mesh"
    assert fabrics.node.link.bandwidth.bytes_per_second(CLOCK) == pytest.approx(28e9)
    assert fabrics.package is None and fabrics.pod is None
    assert (fabrics.scale_out.kind, fabrics.scale_out.per, fabrics.scale_out.bandwidth.bytes_per_second(CLOCK)) == ("roce", "package", pytest.approx(25e9))


def test_a2_servers_are_joined_by_their_nics_only():
    spec = load_config("a2", ["shape.nodes=2"]).spec
    assert (spec.shape.nodes, spec.shape.dies, spec.fabrics.pod) == (2, 16, None)


def test_the_910b_die():
    die = load_config("a2").spec.die
    assert die.clock.hz == pytest.approx(CLOCK)
    aic, aiv = die.cores["aic"], die.cores["aiv"]
    assert list(die.cores) == ["aic", "aiv"]  # the order of trace lanes
    assert (aic.count, aiv.count, die.aicpu.count) == (24, 48, 6)
    assert aic.pipes == ["SCALAR", "CUBE", "MTE1", "MTE2", "FIXP"] and aiv.pipes == ["SCALAR", "VECTOR", "MTE2", "MTE3"]
    assert {name: (b.size.bytes, b.alignment) for name, b in aiv.buffers.items()} == {"UB": (192 * 1024, 32)}
    assert {name: (b.size.bytes, b.alignment) for name, b in aic.buffers.items()} == {
        "L1": (512 * 1024, 32), "L0A": (64 * 1024, 512), "L0B": (64 * 1024, 512), "L0C": (128 * 1024, 64)}
    moves = {pipe: engine.moves for kind in (aic, aiv) for pipe, engine in kind.engines.items() if kind is aiv or pipe != "MTE2"}
    assert moves == {"MTE1": ["L1->L0A", "L1->L0B"], "FIXP": ["L0C->GM", "L0C->L1"], "MTE2": ["GM->UB"], "MTE3": ["UB->GM"]}
    assert aic.engines["MTE2"].moves == ["GM->L1", "GM->L0A", "GM->L0B"]
    # the AIC's GM read and write paths are the AIV's (one anchor in the file)
    assert aic.engines["MTE2"].rate == aiv.engines["MTE2"].rate and aic.engines["FIXP"].setup == aiv.engines["MTE3"].setup
    assert (die.cube.m, die.cube.n, die.cube.k) == (16, 16, 16)
    assert die.l2.size.bytes == 192 * 2**20
    assert die.hbm.size.bytes == 64 * 2**30
    assert die.hbm.bandwidth.bytes_per_second(CLOCK) == pytest.approx(1.6e12)
    assert (die.vector.repeat_bytes, die.vector.max_repeats) == (256, 255)
    assert {kind: str(q) for kind, q in die.vector.latency.items() if kind != "default"} == {"add": "6 cycles", "mul": "7 cycles", "div": "13 cycles", "exp": "12 cycles"}
    assert "default" in die.vector.latency


def test_one_core_cannot_saturate_hbm():
    die = load_config("a2").spec.die
    hbm = die.hbm.bandwidth.bytes_per_second(CLOCK)
    aiv = die.cores["aiv"]
    gm_engines = [engine for kind in die.cores.values() for engine in kind.engines.values() if any("GM" in m for m in engine.moves)]
    assert len(gm_engines) == 4  # AIC MTE2 and FIXP, AIV MTE2 and MTE3
    for engine in gm_engines:
        assert engine.rate.bytes_per_second(CLOCK) < hbm / 4
    assert aiv.count * aiv.engines["MTE2"].rate.bytes_per_second(CLOCK) > hbm  # all cores together can


def test_a3_is_a_node_of_eight_910c_with_sixteen_dies():
    spec = load_config("a3").spec
    assert (spec.product, spec.shape.nodes, spec.shape.packages_per_node, spec.shape.dies_per_package) == ("ascend910c", 1, 8, 2)
    assert spec.shape.dies == 16
    assert spec.fabrics.package.kind == "die_to_die"
    assert spec.fabrics.pod.kind == "ub_l2_switch"
    assert spec.fabrics.scale_out.per == "die"
    assert spec.die == load_config("a2").spec.die


def test_a3_superpod_has_768_dies():
    assert load_config("a3", ["shape.nodes=48"]).spec.shape.dies == 768


def test_a3_gives_each_die_196_gb_per_s_over_the_planes():
    fabric = load_config("a3").spec.fabrics.node
    assert fabric.kind == "ub_l1_switch"
    assert fabric.planes * fabric.link.bandwidth.bytes_per_second(CLOCK) == pytest.approx(196e9)


def test_a3_crossing_nodes_adds_under_one_microsecond():
    fabrics = load_config("a3").spec.fabrics
    node = fabrics.node
    extra_ps = sum(q.to_ps(CLOCK) for q in (node.switch.latency, fabrics.pod.switch.latency, node.link.latency, node.link.latency))
    assert extra_ps < 10**6


@pytest.mark.parametrize("name", builtin_configs())
def test_every_value_states_its_source_and_confidence(name):
    """Every value of a built-in config, as the loader resolves it (through extends and YAML merge
    keys), has a stated level H, M or L from the comment of the line that set it; only the config's
    name and description, which are labels, have none."""
    loaded = load_config(name)
    unstated = [f"{loaded.confidence_of(path).where}: {dotted(path)}" for path in values(loaded.resolved)
                if loaded.confidence_of(path).level not in LEVELS]
    assert unstated == [], f"values of {name} with no [H] / [M] / [L] in their line's comment"
    assert all(loaded.confidence_of(path).source for path in values(loaded.resolved))  # and a source beside it


def test_a3_sets_no_value_it_inherits_unchanged():
    a2, a3 = (yaml.safe_load(config_text(name)) for name in ("a2", "a3"))

    def leaves(data, path=()):
        for key, value in data.items():
            yield from leaves(value, path + (key,)) if isinstance(value, dict) else [(path + (key,), value)]

    inherited = dict(leaves(a2))
    assert [path for path, value in leaves(a3) if inherited.get(path) == value] == []


def test_quant_scatter_runs_on_a_configured_number_of_vector_cores():
    for name in ("a2", "a3"):
        spec = load_config(name).spec
        assert spec.ops["quant_scatter"].vector_cores == 48 <= spec.die.cores["aiv"].count
    assert load_config("a2", ["ops.quant_scatter.vector_cores=24"]).spec.ops["quant_scatter"].vector_cores == 24
    assert load_config("a2", ["ops=null"]).spec.ops == {}


DUO_CLOCK = 1.06e9


def test_the_atlas_300i_duo_is_one_card_of_two_310p_chips_over_pcie_without_nics():
    spec = load_config("atlas-300i-duo").spec
    assert (spec.product, spec.shape.nodes, spec.shape.packages_per_node, spec.shape.dies) == ("ascend310p", 1, 2, 2)
    fabrics = spec.fabrics
    assert (fabrics.package, fabrics.pod, fabrics.scale_out) == (None, None, None)
    assert fabrics.node.kind == "pcie_switch"
    assert fabrics.node.link.bandwidth.bytes_per_second(DUO_CLOCK) == pytest.approx(31.5e9)
    assert spec.shmem is None  # PyPTO's runtime supports A2/A3 only
    assert spec.ops["quant_scatter"].vector_cores == spec.die.cores["aicore"].count == 8


def test_the_310p3_die():
    die = load_config("atlas-300i-duo").spec.die
    assert die.clock.hz == pytest.approx(DUO_CLOCK)
    assert list(die.cores) == ["aicore", "vectorcore"]  # the order of trace lanes
    aicore, vectorcore = die.cores["aicore"], die.cores["vectorcore"]
    assert (aicore.count, vectorcore.count, die.aicpu.count) == (8, 7, 7)
    assert aicore.pipes == ["SCALAR", "VECTOR", "CUBE", "MTE1", "MTE2", "MTE3"]  # cube and vector in one core, no FixPipe
    assert vectorcore.pipes == ["SCALAR", "VECTOR", "MTE2", "MTE3"]
    assert {name: (b.size.bytes, b.alignment) for name, b in aicore.buffers.items()} == {
        "UB": (256 * 1024, 32), "L1": (1024 * 1024, 512), "L0A": (64 * 1024, 512), "L0B": (64 * 1024, 512), "L0C": (256 * 1024, 1024)}
    assert {name: (b.size.bytes, b.alignment) for name, b in vectorcore.buffers.items()} == {"UB": (256 * 1024, 32)}
    assert {pipe: engine.moves for pipe, engine in aicore.engines.items()} == {
        "MTE2": ["GM->L1", "GM->L0A", "GM->L0B", "GM->UB"], "MTE1": ["L1->L0A", "L1->L0B", "L1->UB"],
        "MTE3": ["UB->GM", "UB->L1"], "VECTOR": ["L0C->UB"]}  # the cube's results reach GM through UB
    assert {pipe: engine.moves for pipe, engine in vectorcore.engines.items()} == {"MTE2": ["GM->UB"], "MTE3": ["UB->GM"]}
    # the vector cores' GM paths: their own rate (57 B per cycle of their 1000 MHz clock), the AI core's fixed costs
    assert vectorcore.engines["MTE2"].rate.bytes_per_second(DUO_CLOCK) == pytest.approx(57e9)
    assert vectorcore.engines["MTE2"].setup == aicore.engines["MTE2"].setup and vectorcore.engines["MTE3"].setup == aicore.engines["MTE3"].setup
    assert (die.cube.m, die.cube.n, die.cube.k, str(die.cube.per_block)) == (16, 16, 16, "1 cycle")
    assert (die.vector.repeat_bytes, die.vector.max_repeats) == (256, 255)
    assert die.l2.size.bytes == 16 * 2**20
    assert (die.hbm.size.bytes, die.hbm.bandwidth.bytes_per_second(DUO_CLOCK)) == (48 * 2**30, pytest.approx(204e9))


def test_the_card_gives_the_published_int8_peak_and_the_chips_share_of_408_gb_per_s():
    spec = load_config("atlas-300i-duo").spec
    die = spec.die
    cube = die.cube
    int8_macs = cube.m * cube.n * cube.k * 2  # a block spans 32 B of k: 16x32x16 int8
    tops = spec.shape.dies * die.cores["aicore"].count * int8_macs * 2 * DUO_CLOCK / 1e12
    assert tops == pytest.approx(280, rel=0.01)
    assert spec.shape.dies * die.hbm.bandwidth.bytes_per_second(DUO_CLOCK) == pytest.approx(408e9)
