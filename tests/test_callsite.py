"""npusim.callsite: the line of the user's program that called npusim."""

import sys

from npusim import callsite as callsites
from npusim.callsite import Callsite, callsite


def _line() -> int:
    return sys._getframe(1).f_lineno


def test_each_call_names_its_own_line_however_often_asked(monkeypatch):
    repeated = [callsite() for _ in range(3)]; line = _line()
    other = callsite(); other_line = _line()
    assert repeated == [Callsite(__file__, line, "<listcomp>")] * 3
    assert other == Callsite(__file__, other_line, "test_each_call_names_its_own_line_however_often_asked")
    monkeypatch.setattr(callsites, "MAX_SITES", 1)  # the instructions kept are forgotten at every new one
    assert [callsite(), callsite()] == [Callsite(__file__, _line(), "test_each_call_names_its_own_line_however_often_asked")] * 2
    assert len(callsites._SITES) == 1
