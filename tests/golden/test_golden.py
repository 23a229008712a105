"""The identity gate: the bundled examples (small parameters) and 300 random ISA kernels give the
digests recorded in digests.json (tests/golden/cases.py says what is digested). A change that
means to move them runs ``make golden`` and says why in its commit message; any other difference
is a regression of the simulator's outputs, timing or trace bytes."""

from __future__ import annotations

import json

import pytest

from tests.golden.cases import DIGESTS, EXAMPLE_CASES, KERNEL_BATCHES, random_kernel_digests, run_case

RECORDED: dict[str, dict[str, str]] = json.loads(DIGESTS.read_text(encoding="utf-8"))


def _compare(name: str, digests: dict[str, str]) -> None:
    recorded = RECORDED.get(name)
    assert recorded is not None, f"{name}: no digests recorded; run `make golden` and commit tests/golden/digests.json"
    differ = sorted(file for file in recorded.keys() | digests.keys() if recorded.get(file) != digests.get(file))
    assert not differ, (f"{name}: {', '.join(differ)} differ from the recorded digests. If the change means to move them (a timing "
                        "model, a trace format), run `make golden` and say why in the commit message; otherwise it is a regression")


@pytest.fixture(autouse=True)
def _one_process(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NPUSIM_FORK", "never")


@pytest.mark.parametrize("case", EXAMPLE_CASES, ids=lambda case: case.name)
def test_example_outputs_are_unchanged(case) -> None:
    _compare(case.name, run_case(case))


@pytest.mark.parametrize("batch", range(KERNEL_BATCHES))
def test_random_kernels_are_unchanged(batch: int) -> None:
    _compare(f"random-kernels-{batch}", random_kernel_digests(batch))


def test_every_recorded_case_is_run() -> None:
    names = {case.name for case in EXAMPLE_CASES} | {f"random-kernels-{batch}" for batch in range(KERNEL_BATCHES)}
    assert set(RECORDED) == names, "digests.json and the cases differ: run `make golden`"
