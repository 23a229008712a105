"""Core kinds as data (die.cores) and products (npusim.config.products): what a config may compose,
and the error each wrong composition gets."""

from typing import get_args

import numpy as np
import pytest

import npusim
from npusim import isa
from npusim.config import load_config
from npusim.config.products import PRODUCTS
from npusim.config.schema import PipeName
from npusim.errors import ConfigError, UsageError
from npusim.hw.pipes import Pipe

FUSED_CORE = """
extends: a2
die:
  cores:
    aicore:        # cube and vector in one core, as on a 310P
      count: 2
      pipes: [SCALAR, VECTOR, CUBE, MTE1, MTE2, MTE3, FIXP]
      buffers:
        UB: {size: 64 KiB, alignment: 32}
        L1: {size: 128 KiB, alignment: 32}
        L0A: {size: 16 KiB, alignment: 512}
        L0B: {size: 16 KiB, alignment: 512}
        L0C: {size: 32 KiB, alignment: 64}
      engines:
        MTE2: {moves: [GM->UB, GM->L1], rate: 64 B/cycle, setup: 100 cycles, per_burst: 1 cycle}
        MTE1: {moves: [L1->L0A, L1->L0B], rate: 128 B/cycle, setup: 10 cycles, per_burst: 1 cycle}
        MTE3: {moves: [UB->GM], rate: 64 B/cycle, setup: 100 cycles, per_burst: 1 cycle}
        FIXP: {moves: [L0C->UB], rate: 128 B/cycle, setup: 10 cycles, per_burst: 1 cycle}
"""


def error_of(tmp_path, text, overrides=()):
    path = tmp_path / "c.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError) as caught:
        load_config(path, overrides)
    return str(caught.value)


def test_the_pipe_names_of_the_schema_are_the_hardware_models():
    assert get_args(PipeName) == tuple(pipe.name for pipe in Pipe)


def test_a_core_kind_written_only_in_a_config_runs_copies_vector_and_cube_work(tmp_path):
    path = tmp_path / "fused.yaml"
    path.write_text(FUSED_CORE)
    with npusim.session(path, races="error") as session:  # flagged as a kernel must be: no pipe race
        x = npusim.tensor(np.arange(256, dtype=np.float16))
        kernel = isa.Kernel("fused", die=0)
        p = kernel.core("aicore", 1)
        ub = p.alloc(256, np.float16)
        p.copy(ub, isa.gm(x))                      # MTE2, as the kind's engines say
        p.set_flag("MTE2", "VECTOR", 0)
        p.wait_flag("MTE2", "VECTOR", 0)
        p.muls(ub, ub, 2.0)
        p.set_flag("VECTOR", "MTE3", 0)
        p.wait_flag("VECTOR", "MTE3", 0)
        p.copy(isa.gm(x), ub)
        p.set_flag("MTE3", "FIXP", 0)              # UB is read by the store before FIXP overwrites it
        a, b, c = p.alloc(256, np.float16, "L0A"), p.alloc(256, np.float16, "L0B"), p.alloc(256, np.float32, "L0C")
        p.mmad(c, a, b, 16, 16, 16)                # CUBE on the same core
        p.set_flag("CUBE", "FIXP", 0)
        p.wait_flag("CUBE", "FIXP", 0)
        p.wait_flag("MTE3", "FIXP", 0)
        p.copy(ub.reinterpret(np.float32)[:64], c[:64])  # FIXP L0C -> UB, as this kind moves it
        kernel.launch()
        assert np.array_equal(x.numpy(), np.arange(256, dtype=np.float16) * 2)
    lanes = {track.label for track in session.result.recorder.tracks}
    assert {"aicore1 MTE2", "aicore1 VECTOR", "aicore1 CUBE", "aicore1 FIXP", "aicore1 MTE3"} <= lanes
    die = session.system.die(0)
    assert [core.name for core in die.cores] == ["aicore1"]
    assert die.core_count("aicore") == 2 and die.core_count("npu") == 0


@pytest.mark.parametrize("kind, change, message", [
    ("aiv", "pipes: [VECTOR, MTE2, MTE3]", "die.cores.aiv: pipes must include SCALAR"),
    ("aiv", "pipes: [SCALAR, VECTOR, VECTOR, MTE2, MTE3]", "names a pipe twice"),
    ("aiv", "engines: {MTE1: {moves: [GM->UB], rate: 1 B/cycle, setup: 1 cycle, per_burst: 1 cycle}}", "engines.MTE1: the core has no MTE1 pipe"),
    ("aiv", "engines: {MTE2: {moves: [GM->L1]}}", "GM->L1 names L1, which is neither GM nor a buffer of this core (UB); add it under buffers"),
    ("aiv", "engines: {MTE3: {moves: [GM->UB]}}", "GM->UB is also moved by MTE2; one engine per move"),
    ("aiv", "engines: {MTE2: {moves: [UB->UB]}}", "copies a place onto itself"),
    ("aiv", "engines: {MTE2: {moves: [gm->ub]}}", "should match pattern"),
])
def test_a_wrong_core_kind_is_a_located_error(tmp_path, kind, change, message):
    key, _, value = change.partition(": ")
    text = f"extends: a2\ndie:\n  cores:\n    {kind}:\n      {key}: {value}\n"
    error = error_of(tmp_path, text)
    assert "c.yaml:" in error and message in error, error


def test_a_pipe_needs_its_unit_and_a_product_its_core_kinds(tmp_path):
    assert "die.cores.aic has a CUBE pipe, but die.cube (the cube unit's costs) is missing; add it" in error_of(
        tmp_path, "extends: a2\ndie:\n  cube: null\n")
    assert "die.cores has no 'aiv' cores, which run the vector kernels of Atlas A2 (ascend910b)" in error_of(
        tmp_path, "extends: a2\ndie:\n  cores:\n    aiv: null\n")
    assert "c.yaml:2: product: unknown product 'ascend910x'; did you mean 'ascend910c'? use one of ascend310p, ascend910b" in error_of(
        tmp_path, "extends: a2\nproduct: ascend910x\n")
    assert "die.cores.aiv.pipes lacks VECTOR" in error_of(tmp_path, "extends: a2\ndie:\n  cores:\n    aiv:\n      pipes: [SCALAR, MTE2, MTE3]\n")


def test_products_name_the_core_kinds_of_their_kernels():
    assert [name for name, _ in PRODUCTS] == ["ascend310p", "ascend910b", "ascend910c", "ascend950dt", "ascend950pr"]
    assert {PRODUCTS.get(name).series for name in ("ascend950pr", "ascend950dt")} == {"ascend_950"}
    a2 = PRODUCTS.get("ascend910b")
    assert (a2.series, a2.vector_cores, a2.cube_cores) == ("atlas_a2", "aiv", "aic")
    assert PRODUCTS.get("ascend310p").vector_cores == "aicore"


def test_the_isa_refuses_work_a_core_kind_cannot_do():
    with npusim.session("a2"):
        kernel = isa.Kernel("k", die=0)
        aic = kernel.aic(0)
        with pytest.raises(UsageError, match=r"vector add runs on the VECTOR pipe, which an AIC core does not have"):
            aic.add(*(aic.alloc(128, np.float16, "L1") for _ in range(3)))
        with pytest.raises(UsageError, match="die 0 has no 'aicore' cores; its core kinds are aic, aiv"):
            kernel.core("aicore", 0)
        with pytest.raises(UsageError, match=r"die 0 has 48 AIV cores \(aiv0..aiv47\); aiv48 does not exist"):
            kernel.aiv(48)
        assert kernel.vector_core(3).core.name == "aiv3" and kernel.cube_core(2).core.name == "aic2"
