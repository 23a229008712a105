"""The flow network's max-min fair rates against a plain progressive-filling oracle."""

import math

import simpy
from hypothesis import given, settings
from hypothesis import strategies as st

from npusim.engine.flow import FlowClass, FlowNetwork, Resource


def oracle(classes, capacities):
    """Max-min fair rates by the textbook loop: scan every resource for the smallest fair share,
    freeze the classes it or the smallest cap limits, repeat (ties: the resource met first)."""
    residual = {}
    weight = {}
    for path, _, n in classes:
        for r in path:
            residual.setdefault(r, capacities[r])
            weight[r] = weight.get(r, 0) + n
    rates = [None] * len(classes)
    while any(rate is None for rate in rates):
        level, bottleneck = math.inf, None
        for r, n in weight.items():
            if n and residual[r] / n < level:
                level, bottleneck = residual[r] / n, r
        capped = min(cap for (_, cap, _), rate in zip(classes, rates) if rate is None)
        if capped <= level:
            level, freezing = capped, [i for i, (_, cap, _) in enumerate(classes) if rates[i] is None and cap <= capped]
        else:
            freezing = [i for i, (path, _, _) in enumerate(classes) if rates[i] is None and bottleneck in path]
        for i in freezing:
            rates[i] = level
            path, _, n = classes[i]
            for r in path:
                residual[r] = max(residual[r] - level * n, 0.0)
                weight[r] -= n
    return rates


instances = st.integers(2, 6).flatmap(lambda resources: st.tuples(
    st.lists(st.floats(0.01, 10.0), min_size=resources, max_size=resources),
    st.lists(st.tuples(st.lists(st.integers(0, resources - 1), min_size=1, max_size=3, unique=True),
                       st.sampled_from([math.inf, 0.5, 2.0]), st.integers(1, 3)), min_size=1, max_size=8),
))


@settings(max_examples=200, deadline=None)
@given(instances)
def test_progressive_filling_matches_the_oracle(instance):
    capacities, classes = instance
    network = FlowNetwork(simpy.Environment())
    resources = [network.add_resource(Resource(f"r{i}", c)) for i, c in enumerate(capacities)]
    busy = []
    for order, (path, cap, n) in enumerate(classes):
        flow_class = FlowClass(tuple(resources[r] for r in path), cap, order)
        flow_class.members = [(0.0, i, 1, None) for i in range(n)]
        busy.append(flow_class)
    network._busy = busy
    network._assign_rates(0)
    assert [c.rate for c in busy] == oracle([(tuple(p), cap, n) for p, cap, n in classes], capacities)
    for r in resources:
        assert r.rate <= r.capacity * (1 + 1e-9)
