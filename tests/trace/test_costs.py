"""The cost sources: how an event's time, a DMA's fixed part and its streaming part split among the
config keys the hardware model said they come from."""

from hypothesis import given
from hypothesis import strategies as st

from npusim.trace.costs import UNATTRIBUTED, CostRule, CostSources, EngineCosts, Term, constant

VECTOR = CostRule((Term(("die.vector.issue",), 2_000), Term(("die.vector.latency.add",), 3_000)), ("die.vector.per_repeat",))


def test_an_event_takes_its_fixed_terms_first_and_the_rest_for_its_work():
    assert VECTOR.split(10_000) == [Term(("die.vector.issue",), 2_000), Term(("die.vector.latency.add",), 3_000), Term(("die.vector.per_repeat",), 5_000)]
    assert VECTOR.split(4_000) == [Term(("die.vector.issue",), 2_000), Term(("die.vector.latency.add",), 2_000)]  # shorter than its fixed part
    assert constant("die.aicpu.control_read").split(500_000) == [Term(("die.aicpu.control_read",), 500_000)]
    assert VECTOR.split(0) == []


def test_a_rule_without_a_growing_part_scales_its_terms_to_the_event():
    complete = CostRule((Term(("die.aicpu.completion",), 240), Term(("die.aicpu.dependency",), 390)))
    assert complete.split(630) == [Term(("die.aicpu.completion",), 240), Term(("die.aicpu.dependency",), 390)]
    assert complete.split(1_260) == [Term(("die.aicpu.completion",), 480), Term(("die.aicpu.dependency",), 780)]


@given(st.lists(st.integers(0, 10**6), max_size=4), st.booleans(), st.integers(0, 10**7))
def test_the_terms_of_an_event_add_up_to_its_time(fixed, grows, duration):
    rule = CostRule(tuple(Term((f"k{i}",), ps) for i, ps in enumerate(fixed)), ("rest",) if grows else ())
    terms = rule.split(duration)
    assert sum(term.ps for term in terms) == duration  # scaled terms too: none is lost to rounding
    assert all(term.ps > 0 for term in terms)


def sources():
    costs = CostSources()
    costs.unit(0, "aiv3", "aiv")
    costs.engine("aiv", "MTE2", EngineCosts(Term(("die.cores.aiv.engines.MTE2.setup",), 600), Term(("die.cores.aiv.engines.MTE2.per_burst",), 7),
                                            ("die.cores.aiv.engines.MTE2.rate",)))
    local = (Term(("die.l2.latency",), 30), Term(("die.hbm.latency",), 80))
    remote = local + (Term(("fabrics.node.link.latency",), 300),)
    costs.route(0, "aiv", "MTE2", local)
    costs.route(0, "aiv", "MTE2", remote)
    costs.resource("die0 HBM", ("die.hbm.bandwidth",))
    return costs


def test_a_dma_fixed_part_is_its_set_up_its_routes_latency_and_its_bursts():
    costs = sources()
    setup, per_burst = ("die.cores.aiv.engines.MTE2.setup",), ("die.cores.aiv.engines.MTE2.per_burst",)
    # 600 + 110 (local) + 3 bursts of 7: only the local route leaves a whole number of bursts
    assert costs.of_fixed(0, "aiv3", "MTE2", 600 + 110 + 21) == [Term(setup, 600), Term(("die.l2.latency",), 30), Term(("die.hbm.latency",), 80),
                                                                 Term(per_burst, 21)]
    remote = costs.of_fixed(0, "aiv3", "MTE2", 600 + 410)  # one burst over the link
    assert remote[-1] == Term(("fabrics.node.link.latency",), 300) and sum(term.ps for term in remote) == 1010
    assert costs.of_fixed(1, "aiv3", "MTE2", 700) == [Term(UNATTRIBUTED, 700)]  # no core of die 1 said anything


def test_a_dma_waits_on_its_resources_keys_or_its_engines_rate():
    costs = sources()
    assert costs.of_wait(0, "aiv3", "MTE2", "die0 HBM", 900) == [Term(("die.hbm.bandwidth",), 900)]
    assert costs.of_wait(0, "aiv3", "MTE2", None, 900) == [Term(("die.cores.aiv.engines.MTE2.rate",), 900)]
    assert costs.of_wait(0, "aiv3", "MTE2", "a resource nobody named", 900) == [Term(UNATTRIBUTED, 900)]


def test_an_events_rule_is_found_by_lane_then_for_every_lane_and_the_first_stands():
    costs = CostSources()
    costs.rule("", 4, constant("die.scalar.flag"))
    costs.rule("CONTROL", 4, constant("die.aicpu.control_read"))
    costs.rule("", 4, constant("die.vector.per_repeat"))  # a later rule for the same name does not replace it
    assert costs.of_event("CONTROL", 4, 10) == [Term(("die.aicpu.control_read",), 10)]
    assert costs.of_event("VECTOR", 4, 10) == [Term(("die.scalar.flag",), 10)]
    assert costs.of_event("VECTOR", 5, 10) == [Term(UNATTRIBUTED, 10)]
