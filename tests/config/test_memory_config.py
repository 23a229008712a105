"""The memory model's config keys: an L2 that fits the memory it caches, engine queues of at least
one request, a hit rate between 0 and 1, rates only for the moves an engine makes; each error names
the key, the value and the rule."""

import pytest

from npusim.config import load_config
from tests.config.test_loader import error_of, write


def test_an_l2_larger_than_the_memory_it_caches_is_an_error_naming_the_key():
    message = error_of("a2", ["die.l2.size=128 GiB"])
    assert "die.l2.size: die.l2.size (128 GiB) is larger than the memory it caches (die.hbm.size 64 GiB)" in message
    assert "give die.l2.size at most die.hbm.size" in message
    assert load_config("a2", ["die.l2.size=64 GiB"]).spec.die.l2.size.bytes == 64 * 2**30  # as large as the memory: allowed


def test_a_line_larger_than_the_l2_is_an_error():
    assert "die.l2.line: die.l2.line (1 MiB) is larger than die.l2.size (512 KiB)" in error_of("a2", ["die.l2.size=512 KiB", "die.l2.line=1 MiB"])


@pytest.mark.parametrize("key", ["die.cores.aiv.engines.MTE2.queue_depth", "die.cores.aic.engines.FIXP.queue_depth", "die.sdma.queue_depth"])
def test_a_queue_depth_of_zero_is_an_error_naming_the_key(key):
    assert error_of("a3", [f"{key}=0"]).startswith(f"--set {key}=0: {key}: must be greater than or equal to 1, got 0; give a larger value")


@pytest.mark.parametrize("value", ["1.5", "-0.1"])
def test_a_hit_rate_outside_zero_to_one_is_an_error_naming_the_key(value):
    message = error_of("a2", [f"die.l2.initial_hit_rate={value}"])
    rule = "less than or equal to 1" if value == "1.5" else "greater than or equal to 0"
    assert message.startswith(f"--set die.l2.initial_hit_rate={value}: die.l2.initial_hit_rate: must be {rule}, got {value}")
    assert "hit rate of the first access to a line in the run" in message


def test_a_rate_for_a_move_the_engine_does_not_make_is_an_error_at_its_line(tmp_path):
    config = write(tmp_path, "c.yaml", """
        extends: a2
        die:
          cores:
            aic:
              engines:
                MTE1:
                  rates:
                    L1->UB: 128 B/cycle
        """)
    assert error_of(config) == (f"{config}:8: die.cores.aic.engines.MTE1.rates.L1->UB: the engine does not make that move "
                                "(moves: L1->L0A, L1->L0B); give rates only for moves listed in moves")


def test_the_built_in_engines_keep_several_requests_in_flight_and_the_sdma_one():
    spec = load_config("a3").spec
    assert {(kind, pipe, engine.queue_depth) for kind, core in spec.die.cores.items() for pipe, engine in core.engines.items()} == {
        ("aic", "MTE2", 4), ("aic", "MTE1", 4), ("aic", "FIXP", 4), ("aiv", "MTE2", 4), ("aiv", "MTE3", 4)}
    assert spec.die.sdma.queue_depth == 1 and spec.die.l2.initial_hit_rate == 0.0 and spec.die.l2.line.bytes == 512
