"""The suite's own settings: its property tests are repeatable unless asked to explore."""

import os

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

drawn: list[int] = []


@pytest.mark.skipif(os.environ.get("HYPOTHESIS_PROFILE", "repeatable") != "repeatable", reason="an exploring run draws at random")
def test_property_tests_are_seeded_from_the_test_and_keep_no_database():
    assert settings.default.derandomize is True
    assert settings.default.database is None


@pytest.mark.skipif(os.environ.get("HYPOTHESIS_PROFILE", "repeatable") != "repeatable", reason="an exploring run draws at random")
def test_the_same_examples_are_drawn_on_every_run():
    @settings(max_examples=20)
    @given(st.integers())
    def draw(value):
        drawn.append(value)

    draw()
    first = list(drawn)
    drawn.clear()
    draw()
    assert drawn == first and len(set(first)) > 1
