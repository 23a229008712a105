"""SymbolicScalar: PE-dependent integers with PyPTO's (C++) arithmetic."""

import re
from types import MappingProxyType

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from npusim.errors import WorkloadError
from npusim.runtime.symbolic import SymbolicScalar, to_int

pe = SymbolicScalar.pe("tp")


def test_offsets_depend_on_the_pe():
    offset = pe * 8
    assert [offset.concrete(p) for p in range(4)] == [0, 8, 16, 24]
    assert repr(offset + 1) == "((pe[tp] * 8) + 1)"
    assert offset.groups == frozenset({"tp"}) and not offset.is_concrete()


def test_ints_mix_in_on_both_sides():
    assert (3 + pe).concrete(2) == 5
    assert (10 - pe).concrete(2) == 8
    assert (3 * pe).concrete(2) == 6
    assert (7 // pe).concrete(2) == 3
    assert (7 % pe).concrete(4) == 3
    assert (pe - 1).concrete(0) == -1


def test_constants_fold():
    value = SymbolicScalar(6) * 7 + 0
    assert value.is_concrete() and value.concrete() == 42 and int(value) == 42
    assert repr(value) == "42"


def test_division_truncates_toward_zero_like_cpp():
    assert (SymbolicScalar(-7) / 2).concrete() == -3
    assert (SymbolicScalar(-7) // 2).concrete() == -3
    assert (SymbolicScalar(-7) % 2).concrete() == -1
    assert (SymbolicScalar(7) % -2).concrete() == 1
    assert ((pe - 9) // 2).concrete(2) == -3


@settings(derandomize=True, deadline=None)
@given(st.integers(-1000, 1000), st.integers(-50, 50).filter(lambda b: b != 0))
def test_division_identity(a, b):
    quotient = (SymbolicScalar(a) / b).concrete()
    remainder = (SymbolicScalar(a) % b).concrete()
    assert quotient * b + remainder == a
    assert abs(remainder) < abs(b) and (remainder == 0 or (remainder > 0) == (a > 0))


def test_comparisons_and_logic_give_zero_or_one():
    assert [(pe == 1).concrete(p) for p in range(3)] == [0, 1, 0]
    assert [(pe != 1).concrete(p) for p in range(3)] == [1, 0, 1]
    assert [(pe < 1).concrete(p) for p in range(3)] == [1, 0, 0]
    assert [(pe <= 1).concrete(p) for p in range(3)] == [1, 1, 0]
    assert [(pe > 1).concrete(p) for p in range(3)] == [0, 0, 1]
    assert [(pe >= 1).concrete(p) for p in range(3)] == [0, 1, 1]
    assert [((pe > 0) & (pe < 2)).concrete(p) for p in range(3)] == [0, 1, 0]
    assert [((pe == 0) | (pe == 2)).concrete(p) for p in range(3)] == [1, 0, 1]
    assert [(~pe).concrete(p) for p in range(2)] == [1, 0]
    assert (-pe).concrete(3) == -3 and (+pe) is pe


def test_min_and_max_are_binary_as_in_pypto():
    # the tail rows of the last block: (batch - i * 8).min(8)
    rows = (20 - pe * 8).min(8)
    assert [rows.concrete(p) for p in range(3)] == [8, 8, 4]
    assert (pe.max(2)).concrete(1) == 2
    assert repr(pe.min(pe * 2)) == "min(pe[tp], (pe[tp] * 2))"
    with pytest.raises(TypeError, match=r"SymbolicScalar.min takes an int or a SymbolicScalar, got 1.5"):
        pe.min(1.5)


def test_bounds_over_the_pes_of_the_group():
    offset = (pe - 2) * 8
    assert offset.min_over_pes(4) == -16
    assert offset.max_over_pes(4) == 8
    assert SymbolicScalar(5).max_over_pes(4) == 5


def test_bounds_need_a_single_group():
    mixed = pe + SymbolicScalar.pe("ep")
    with pytest.raises(WorkloadError, match=re.escape("depends on the ranks of several groups ['ep', 'tp']")):
        mixed.max_over_pes(4)
    assert mixed.concrete({"tp": 1, "ep": 3}) == 4
    assert mixed.concrete(2) == 4  # one rank used for every group
    with pytest.raises(WorkloadError, match=re.escape("needs the rank in group 'ep'; got {'tp': 1}")):
        mixed.concrete({"tp": 1})
    with pytest.raises(WorkloadError, match=re.escape("n_pes=0 must be at least 1")):
        pe.max_over_pes(0)


def test_a_pe_dependent_value_has_no_single_int():
    with pytest.raises(WorkloadError, match=re.escape("SymbolicScalar (pe[tp] * 8) depends on the rank in group(s) "
                                                      "['tp']; read it on a PE with .concrete(pe)")):
        int(pe * 8)
    with pytest.raises(WorkloadError, match="depends on the rank"):
        bool(pe == 0)
    assert bool(SymbolicScalar(0)) is False


def test_division_by_zero():
    with pytest.raises(WorkloadError, match=re.escape("SymbolicScalar pe[tp] / 0: division or modulo by zero")):
        pe / 0
    with pytest.raises(WorkloadError, match=re.escape("SymbolicScalar 5 % 0: division or modulo by zero")):
        SymbolicScalar(5) % 0
    with pytest.raises(WorkloadError, match=re.escape("SymbolicScalar (10 / pe[tp]): division or modulo by zero")):
        (10 // pe).concrete(0)


def test_values_built_on_values_read_on_a_pe_read_the_same_everywhere():
    """An operation on values already read on one ranks object knows its value there when it is
    built (a kernel's arithmetic on my_pe); it reads the same as a fresh fold there and elsewhere,
    and a division by zero it meets is refused only where the value is read."""
    rank = SymbolicScalar.pe("dp")
    ranks = MappingProxyType({"dp": 3})
    assert rank.concrete(ranks) == 3
    offset = (rank + 1) * 8 - rank % 2
    assert [offset.concrete(ranks), offset.concrete(1), offset.concrete({"dp": 0})] == [31, 15, 8]
    quotient = 6 // (rank - 3)
    with pytest.raises(WorkloadError, match=re.escape("SymbolicScalar (6 / (pe[dp] - 3)): division or modulo by zero")):
        quotient.concrete(ranks)
    assert quotient.concrete(5) == 3


def test_other_operand_types_are_refused():
    with pytest.raises(TypeError):
        pe + 1.5
    with pytest.raises(WorkloadError, match="SymbolicScalar\\(value\\) takes an int, got 'x'"):
        SymbolicScalar("x")
    with pytest.raises(TypeError, match="unhashable"):
        _ = {pe: 1}


def test_deep_expressions_evaluate_without_recursion():
    total = pe
    for _ in range(5000):
        total = total + pe
    assert total.concrete(2) == 10002
    assert repr(total).count("pe[tp]") == 5001


def test_to_int_resolves_op_arguments():
    assert to_int(5) == 5
    assert to_int(pe * 4, 3) == 12
    with pytest.raises(WorkloadError, match="expected an int or a SymbolicScalar, got 1.0"):
        to_int(1.0)
