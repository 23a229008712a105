"""The identity of HCCL's schedules: every case of tests/golden/schedules.py plans the schedule whose
digest schedule_digests.json records. A change that means to move a schedule (an algorithm, the
staging) runs ``make golden`` and says why in its commit message; any other difference is a
regression of the planner."""

from __future__ import annotations

import json

import pytest

from tests.golden.schedules import SCHEDULE_CASES, SCHEDULE_DIGESTS, ScheduleCase, schedule_digest

RECORDED: dict[str, str] = json.loads(SCHEDULE_DIGESTS.read_text(encoding="utf-8"))


@pytest.mark.parametrize("case", SCHEDULE_CASES, ids=lambda case: case.name)
def test_schedule_is_unchanged(case: ScheduleCase) -> None:
    recorded = RECORDED.get(case.name)
    assert recorded is not None, f"{case.name}: no digest recorded; run `make golden` and commit tests/golden/schedule_digests.json"
    assert schedule_digest(case) == recorded, (f"{case.name}: the schedule differs from the recorded one. If the change means to move "
                                               "it, run `make golden` and say why in the commit message; otherwise it is a regression")


def test_every_recorded_schedule_is_planned() -> None:
    assert set(RECORDED) == {case.name for case in SCHEDULE_CASES}, "schedule_digests.json and the cases differ: run `make golden`"
