"""The shmem: section of the configs and the L2's atomic-add time."""

import pytest

from npusim.config import load_config
from npusim.errors import ConfigError
from npusim.kernels.shmem.layout import DATA_WINDOW_BYTES, MAX_GROUPS, SIGNAL_WINDOW_BYTES


@pytest.mark.parametrize("name", ["a2", "a3"])
def test_the_framework_constants(name):
    spec = load_config(name).spec
    shmem = spec.shmem
    assert shmem.data_window.bytes == DATA_WINDOW_BYTES == 200 * 2**20
    assert shmem.signal_window.bytes == SIGNAL_WINDOW_BYTES
    assert shmem.max_groups == MAX_GROUPS == 2
    assert shmem.staging_buffer.bytes == 16 * 1024
    assert (shmem.schedulers, shmem.core_choice) == (3, "least_loaded")
    assert str(spec.die.l2.atomic_add) == "100 cycles"


def test_schedulers_cannot_exceed_the_aicpus():
    with pytest.raises(ConfigError, match="shmem.schedulers is 7, but a die has only 6 AICPUs"):
        load_config("a2", ["shmem.schedulers=7"])


def test_core_choice_is_one_of_two_policies():
    assert load_config("a2", ["shmem.core_choice=round_robin"]).spec.shmem.core_choice == "round_robin"
    with pytest.raises(ConfigError, match="shmem.core_choice"):
        load_config("a2", ["shmem.core_choice=random"])
