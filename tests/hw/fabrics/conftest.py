"""Helpers of the fabric kind tests: a timing-only system of a built-in config, the names of a route."""

import pytest

from npusim.config import load_config
from npusim.hw.system import System


@pytest.fixture
def system():
    def build(name, *overrides):
        return System(load_config(name, list(overrides)).spec, with_data=False)

    return build
