"""The fluid network against closed forms (equal sharing, max-min fair shares, caps, fixed costs),
its progressive filling against a plain textbook oracle (to the bit, after every incremental
recomputation), and its finish times against a per-flow reference in exact arithmetic."""

import math
from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from npusim.engine.flow import FlowClass, FlowNetwork, Resource
from npusim.engine.loop import Environment

GBPS = 1e-3  # 1 GB/s in bytes per picosecond


def run_flows(specs, resources):
    """Start flows (size, path, cap, delay) at t=0; return each one's finish time in ps."""
    env = Environment()
    network = FlowNetwork(env)
    for resource in resources:
        network.add_resource(resource)
    finish = {}
    for i, (size, path, cap, delay) in enumerate(specs):
        done = network.transfer(size, path, cap=cap, delay_ps=delay)
        done.callbacks.append(lambda _e, i=i: finish.__setitem__(i, env.now))
    env.run()
    return finish, network


def test_one_flow_takes_size_over_capacity():
    link = Resource("link", 10 * GBPS)
    finish, _ = run_flows([(10_000, (link,), math.inf, 0)], [link])
    assert finish[0] == 1_000_000  # 10 kB at 10 GB/s = 1 us


def test_two_equal_flows_on_one_link_take_twice_as_long():
    link = Resource("link", 10 * GBPS)
    finish, _ = run_flows([(10_000, (link,), math.inf, 0)] * 2, [link])
    assert finish == {0: 2_000_000, 1: 2_000_000}


def test_fixed_cost_is_paid_before_the_bytes_flow():
    link = Resource("link", 10 * GBPS)
    finish, _ = run_flows([(10_000, (link,), math.inf, 500_000)], [link])
    assert finish[0] == 1_500_000  # DMA time = fixed + bytes / bottleneck rate


def test_engine_cap_limits_a_single_flow():
    hbm = Resource("hbm", 1600 * GBPS)
    finish, _ = run_flows([(100_000, (hbm,), 100 * GBPS, 0)], [hbm])
    assert finish[0] == 1_000_000  # capped at 100 GB/s although HBM offers 1.6 TB/s


def test_max_min_fair_shares_with_different_bottlenecks():
    # Flow A crosses links 1 and 2, flow B only link 2, flow C only link 1.
    # link1 = 10 GB/s shared by A and C; link2 = 30 GB/s shared by A and B.
    # Max-min: A and C get 5 each (link1 saturates), B gets the rest of link2 = 25.
    link1, link2 = Resource("l1", 10 * GBPS), Resource("l2", 30 * GBPS)
    size = 1_000_000
    specs = [(size, (link1, link2), math.inf, 0), (size, (link2,), math.inf, 0), (size, (link1,), math.inf, 0)]
    finish, _ = run_flows(specs, [link1, link2])
    assert finish[1] == pytest.approx(size / (25 * GBPS), rel=1e-6)  # B alone at first at 25
    # B finishes at 40 us; A and C had 200 kB each at 5 GB/s; then link1 gives them 5 GB/s still
    assert finish[0] == finish[2] == pytest.approx(size / (5 * GBPS), rel=1e-6)


def test_rates_are_recomputed_when_a_flow_ends():
    link = Resource("link", 10 * GBPS)
    # small flow ends at 2 us (both at 5 GB/s for 10 kB); the big one then runs alone at 10 GB/s
    finish, _ = run_flows([(10_000, (link,), math.inf, 0), (30_000, (link,), math.inf, 0)], [link])
    assert finish[0] == 2_000_000
    assert finish[1] == 2_000_000 + 2_000_000  # 20 kB left at 10 GB/s


def test_bytes_and_rate_log_are_accounted():
    link = Resource("link", 10 * GBPS)
    _, network = run_flows([(10_000, (link,), math.inf, 0)] * 2, [link])
    assert link.bytes_moved == 20_000 and link.flows_done == 2
    assert list(link.rate_log) == [(0, pytest.approx(10 * GBPS)), (2_000_000, 0.0)]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 10**6), st.integers(0, 2), st.floats(1.0, 50.0), st.integers(0, 10**6)), min_size=1, max_size=12))
def test_no_flow_beats_its_bottleneck_and_work_is_conserved(flows):
    links = [Resource(f"r{i}", (i + 1) * 5 * GBPS) for i in range(3)]
    specs = [(size, (links[which],), cap * GBPS, delay) for size, which, cap, delay in flows]
    finish, _ = run_flows(specs, links)
    for i, (size, path, cap, delay) in enumerate(specs):
        fastest = delay + size / min(cap, path[0].capacity)
        assert finish[i] >= math.floor(fastest)  # never faster than alone on its bottleneck
    for link in links:
        mine = [(size, delay) for size, path, cap, delay in specs if path[0] is link]
        if mine:
            last = max(finish[i] for i, s in enumerate(specs) if s[1][0] is link)
            # the link can never have moved its bytes faster than its capacity allows
            assert last >= min(d for _, d in mine) + sum(s for s, _ in mine) / link.capacity - len(mine)


def oracle(classes, capacities):
    """Max-min fair rates of ``classes`` ((path, cap, members), in creation order) by the textbook
    loop: scan every resource for the smallest fair share, freeze the classes it or the smallest
    cap limits, repeat (ties: the resource met first, a cap before a resource)."""
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
    capacities, specs = instance
    classes = {}  # flows of one path and cap form one class, created in order of first use
    for path, cap, n in specs:
        key = (tuple(path), cap)
        classes[key] = classes.get(key, 0) + n
    env = Environment()
    network = FlowNetwork(env)
    resources = [network.add_resource(Resource(f"r{i}", c)) for i, c in enumerate(capacities)]
    for (path, cap), n in classes.items():
        for _ in range(n):
            network.transfer(10**12, tuple(resources[r] for r in path), cap=cap)
    env.run(until=1)  # the flows start at 0: one filling from scratch
    expected = oracle([(tuple(resources[r] for r in path), cap, n) for (path, cap), n in classes.items()],
                      {r: r.capacity for r in resources})
    assert [network._classes[(tuple(resources[r] for r in path), cap)].rate for path, cap in classes] == expected
    for r in resources:
        assert r.rate <= r.capacity * (1 + 1e-9)


def outcomes(specs, resources):
    """Start flows (size, path, cap, delay) at t=0; return each one's (bottleneck, flowing since)."""
    env = Environment()
    network = FlowNetwork(env)
    for resource in resources:
        network.add_resource(resource)
    done = [network.transfer(size, path, cap=cap, delay_ps=delay) for size, path, cap, delay in specs]
    env.run()
    return [event.value for event in done]


def test_a_finished_flow_reports_its_bottleneck_and_when_its_bytes_started():
    hbm, link = Resource("hbm", 1600 * GBPS), Resource("link", 25 * GBPS)
    capped, linked = outcomes([(10_000, (hbm,), 100 * GBPS, 7), (10_000, (link, hbm), 100 * GBPS, 0)], [hbm, link])
    assert capped == (-1, 7)  # its own cap (the engine) limited it; the bytes flowed after the fixed cost
    assert linked == (1, 0)  # the link, registered second


def test_the_bottleneck_is_the_one_that_carried_most_of_the_bytes():
    """A long flow shares a 100 GB/s link with three short ones (link-bound), then runs alone at
    its 60 GB/s cap for longer: its cap carried most of its bytes."""
    link = Resource("link", 100 * GBPS)
    long_flow = (1_000_000, (link,), 60 * GBPS, 0)
    short = (10_000, (link,), 100 * GBPS, 0)
    results = outcomes([long_flow, short, short, short], [link])
    assert results[0][0] == -1 and results[1][0] == 0


def main_bottleneck_reference(changes, joined, finished):
    """FlowClass.main_bottleneck as first written: the changes ``(virtual bytes, new bottleneck)``
    walked back from the member's end (an iterator, ``in``, ``index`` and ``max``)."""
    bottlenecks, got = [], []
    until = finished
    for since, bottleneck in reversed(changes):
        if bottleneck in bottlenecks:
            i = bottlenecks.index(bottleneck)
            got[i] = got[i] + until - max(since, joined)
        else:
            bottlenecks.append(bottleneck)
            got.append(0.0 + until - max(since, joined))
        if since <= joined:
            break
        until = since
    most = 0
    for i in range(1, len(got)):
        if got[i] > got[most]:
            most = i
    return bottlenecks[most]


virtual_bytes = st.integers(0, 20).map(float) | st.just(-0.0)


@settings(max_examples=500, deadline=None)
@given(st.lists(st.tuples(virtual_bytes, st.integers(-2, 3)), min_size=1, max_size=12), virtual_bytes,
       st.integers(0, 10).map(float))
def test_the_main_bottleneck_is_the_first_written_one(steps, joined, extra):
    """Changes at non-decreasing virtual bytes (ties and signed zeros included), a member that
    joined anywhere among them (after those at its virtual bytes) and finished after the last: the
    running totals give the same bottleneck as the first written way of counting (the bytes are
    whole numbers here, so both sums are exact and only the rule for equals tells them apart)."""
    changes, since = [], -1.0
    for offset, bottleneck in steps:
        since = max(since, offset)
        changes.append((since, bottleneck))
    flow_class = FlowClass((), math.inf, 0)
    spent_before = None
    for since, bottleneck in changes:
        if spent_before is None and since > joined:
            spent_before = flow_class.spent_until(joined)
        flow_class.note_bottleneck(since, bottleneck)
    if spent_before is None:
        spent_before = flow_class.spent_until(joined)
    finished = max(changes[-1][0], joined) + extra
    assert flow_class.main_bottleneck(spent_before, finished) == main_bottleneck_reference(changes, joined, finished)


def test_an_unregistered_resource_is_reported_as_such():
    stray = Resource("stray", 10 * GBPS)
    assert outcomes([(1000, (stray,), math.inf, 0)], [])[0][0] == -2


def frozen_by(step):
    """The classes ``step`` froze, in the order of its chain."""
    classes = []
    flow_class = step.first
    while flow_class is not None:
        classes.append(flow_class)
        flow_class = flow_class.next_frozen
    return classes


def filling(component):
    """The steps of ``component``'s last filling: (level, key, classes frozen, serial) each."""
    return [(step.level, step.key, frozen_by(step), step.serial) for step in component.steps[:component.count]]


def check_against_oracle(network, now):
    """After an incremental recomputation, the steps kept and refilled must be those of a filling
    from scratch, and the rates of the busy classes, to the bit, those of the oracle."""
    busy = sorted((c for c in network._classes.values() if c.members), key=lambda c: c.order)
    components = {id(c.component): c.component for c in busy}.values()
    for component in components:  # each one is a connected component of the busy classes
        assert component.classes.keys() == {c for c in busy if c.component is component}
        assert all(r.component is component for c in component.classes for r in c.bounds)
        incremental = [step[:3] for step in filling(component)]
        network._fill(component, network._undo_steps(component, 0))
        assert [step[:3] for step in filling(component)] == incremental, f"steps differ at {now} ps"
    expected = oracle([(c.path, c.cap, len(c.members)) for c in busy], {r: r.capacity for r in network.resources})
    assert [c.rate for c in busy] == expected, f"rates differ at {now} ps"


def oracle_checked_network(quantum_ps=0):
    """An environment and a network checked against the oracle after every step that recomputed
    its rates (a step is one wake-up of the network at most, and a wake-up recomputes once at
    most): the environment's ``step``, which its ``run`` calls, wrapped."""
    env = Environment()
    network = FlowNetwork(env, quantum_ps=quantum_ps)
    step = env.step

    def checked_step():
        before = network.recomputations
        step()
        if network.recomputations != before:
            check_against_oracle(network, env.now)

    env.step = checked_step
    return env, network


def checked_network(*capacities):
    env, network = oracle_checked_network()
    return env, network, [network.add_resource(Resource(f"r{i}", c)) for i, c in enumerate(capacities)]


def test_a_new_class_capped_below_a_kept_level_is_frozen_first():
    # A on r0 and r1 froze at 0.3 (r1), C at 0.7 (r0). X (cap 0.1) joins r0: from scratch its cap
    # step comes first, so r0's residual is (1.0 - 0.1) - 0.3, not (1.0 - 0.3) - 0.1, to the bit.
    env, network, (r0, r1) = checked_network(1.0, 0.3)
    network.transfer(10**9, (r0, r1))
    network.transfer(10**9, (r0,))
    network.transfer(10**9, (r0,), cap=0.1, delay_ps=10)
    env.run(until=11)
    assert network._classes[((r0,), math.inf)].rate == (1.0 - 0.1) - 0.3 != (1.0 - 0.3) - 0.1


def test_a_tie_won_by_an_affected_resource_refills_from_there():
    # r0 (0.6) limits A, r1 (0.3) limits B, C takes the rest of r2. A second member of A makes
    # r0's share 0.3, tied with r1's step, and r0 is met first (A was created first): from scratch
    # r0's step comes first and r2 keeps (2.0 - 0.6) - 0.3 for C.
    env, network, (r0, r1, r2) = checked_network(0.6, 0.3, 2.0)
    network.transfer(10**9, (r0, r2))
    network.transfer(10**9, (r1, r2))
    network.transfer(10**9, (r2,))
    network.transfer(10**9, (r0, r2), delay_ps=10)
    env.run(until=11)
    assert network._classes[((r2,), math.inf)].rate == (2.0 - 0.6) - 0.3 != (2.0 - 0.3) - 0.6


def test_a_port_shadowed_by_its_credits_limits_again_once_a_read_crosses_it_alone():
    # Writes cross a port (2 bytes/ps) and its write credits (1 byte/ps): the credits always
    # saturate first, so the port is left out of the filling. A read issued later crosses the port
    # alone; from then on the port can limit rates and the filling starts again from scratch:
    # the 2 writes keep 0.5 each, the read gets the 1.0 left on the port.
    env, network, (port, credits) = checked_network(2.0, 1.0)
    finish = {}

    def issue(name, size, path, at):
        yield env.timeout(at)
        yield network.transfer(size, path)
        finish[name] = env.now

    env.process(issue("w1", 10_000, (port, credits), 0))
    env.process(issue("w2", 10_000, (port, credits), 0))
    env.process(issue("read", 10_000, (port,), 1_000))
    env.run(until=500)
    assert (port.limiting, credits.limiting) == (False, True)
    env.run()
    assert (port.limiting, credits.limiting) == (True, True)
    assert finish == {"w1": 20_000, "w2": 20_000, "read": 1_000 + 10_000}
    assert max(rate for _, rate in port.rate_log) == port.capacity


def test_a_member_within_tolerance_ends_at_an_earlier_wake_up():
    # A's last byte lands 1e-6 ps after 1 us (left: 1e-6 bytes, within its 1e-3-byte tolerance);
    # B ends exactly at 1 us, so A ends at that wake-up instead of rounding up to 1 us + 1 ps.
    env = Environment()
    network = FlowNetwork(env)
    slow, exact = Resource("slow", 1e6 / (1e6 + 1e-6)), Resource("exact", 1.0)
    finish = {}
    for name, resource in (("A", slow), ("B", exact)):
        network.transfer(10**6, (resource,)).callbacks.append(lambda _e, name=name: finish.__setitem__(name, env.now))
    env.run()
    assert finish == {"A": 1_000_000, "B": 1_000_000}


@pytest.mark.parametrize("cap", [0.0, -1.0, math.nan])
def test_a_cap_that_is_not_a_positive_rate_is_refused(cap):
    network = FlowNetwork(Environment())
    with pytest.raises(ValueError, match="cap must be a positive rate in bytes/ps, got"):
        network.transfer(64, (Resource("link", 1.0),), cap=cap)


def test_a_path_crossing_a_resource_twice_is_refused():
    network = FlowNetwork(Environment())
    hbm = Resource("die0 HBM", 1.0)
    with pytest.raises(ValueError, match="crosses resource 'die0 HBM' twice"):
        network.transfer(64, (hbm, Resource("die0 L2", 2.0), hbm))


TOLERANCE = Fraction(1, 10**9)  # the network's finish tolerance (of a size; of a picosecond when rounding up)


def reference_max_min(flows, capacities):
    """Per-flow max-min fair rates in exact arithmetic: raise every unfrozen rate to the smallest
    fair share of a resource or cap, freeze the flows it limits, repeat."""
    residual = dict(capacities)
    rates = {}
    unfrozen = set(flows)
    while unfrozen:
        crossing = {}
        for i in unfrozen:
            for r in flows[i][0]:
                crossing[r] = crossing.get(r, 0) + 1
        shares = {r: residual[r] / n for r, n in crossing.items()}
        level = min([*shares.values(), *(flows[i][1] for i in unfrozen)])
        limited = {i for i in unfrozen if flows[i][1] == level or any(shares[r] == level for r in flows[i][0])}
        for i in limited:
            rates[i] = level
            for r in flows[i][0]:
                residual[r] -= level
        unfrozen -= limited
    return rates


def reference_finish_times(capacities, specs):
    """Finish time (ps) of each flow (size, path, cap, delay), each flow on its own, every rate
    recomputed from scratch at every change, in exact rational arithmetic, with the network's
    rounding rules: a wake-up at the next whole picosecond where a flow ends or starts; a flow
    ends at a wake-up once its bytes left are within TOLERANCE of its size."""
    exact = {r: Fraction(c) for r, c in capacities.items()}
    finish, left, flows, starts = {}, {}, {}, []
    for i, (_size, path, cap, delay) in enumerate(specs):
        if not path and cap == math.inf:
            finish[i] = delay
        else:
            starts.append((delay, i))
    starts.sort()
    now = 0
    while starts or left:
        while starts and starts[0][0] <= now:
            _, i = starts.pop(0)
            size, path, cap, _ = specs[i]
            left[i] = Fraction(size)
            flows[i] = (path, Fraction(cap) if cap != math.inf else math.inf)
        rates = reference_max_min({i: flows[i] for i in left}, exact)
        wakeups = [starts[0][0]] if starts else []
        wakeups += [now + max(1, math.ceil(left[i] / rates[i] - TOLERANCE)) for i in left]
        later = min(wakeups)
        for i in sorted(left):
            left[i] -= rates[i] * (later - now)
        now = later
        for i in sorted(left):
            if left[i] <= specs[i][0] * TOLERANCE:
                finish[i] = now
                del left[i]
    return finish


flows = st.integers(2, 5).flatmap(lambda resources: st.tuples(
    st.lists(st.sampled_from([1.0, 0.5, 0.25, 3.0]) | st.floats(0.01, 4.0), min_size=resources, max_size=resources),
    st.lists(st.tuples(st.integers(1, 10**6), st.lists(st.integers(0, resources - 1), max_size=3, unique=True),
                       st.sampled_from([math.inf, 0.125, 0.75]) | st.floats(0.05, 2.0), st.integers(0, 3) | st.integers(0, 10**6),
                       st.booleans()),
             min_size=1, max_size=12),
))


@settings(max_examples=150, deadline=None)
@given(flows)
def test_finish_times_match_a_per_flow_reference(instance):
    """Random paths, sizes, caps and start delays: every finish time equals the reference's, and
    every incremental recomputation gives the oracle's rates to the bit. A flow is issued at 0 with
    its delay as fixed cost, or issued at its start time (paths then appear while others flow)."""
    capacities, specs = instance
    env, network = oracle_checked_network()
    resources = [network.add_resource(Resource(f"r{i}", c)) for i, c in enumerate(capacities)]
    finish = {}

    def issue(i, size, path, cap, delay, late):
        if late:
            yield env.timeout(delay)
        yield network.transfer(size, path, cap=cap, delay_ps=0 if late else delay)
        finish[i] = env.now

    for i, (size, path, cap, delay, late) in enumerate(specs):
        env.process(issue(i, size, tuple(resources[r] for r in path), cap, delay, late))
    env.run()
    reference = reference_finish_times({r: r.capacity for r in resources},
                                       [(size, tuple(resources[r] for r in path), cap, delay) for size, path, cap, delay, _ in specs])
    assert finish == reference


def test_a_kept_flow_class_moves_transfers_as_transfer_does():
    """A caller may resolve a path's class once (flow_class) and start transfers on it: same
    finish times and outcomes as transfer(); one class per (path, cap); None when nothing limits."""
    link = Resource("link", 10 * GBPS)
    env = Environment()
    network = FlowNetwork(env)
    network.add_resource(link)
    kept = network.flow_class((link,), 4 * GBPS)
    assert network.flow_class((link,), 4 * GBPS) is kept
    assert network.flow_class((), math.inf) is None
    started = [network.start(kept, 8_000, delay_ps=100), network.transfer(8_000, (link,), cap=4 * GBPS, delay_ps=100)]
    unlimited = network.start(None, 8_000, delay_ps=50)
    env.run()
    # two flows of one class share the 10 GB/s link: 5 GB/s each, above their 4 GB/s cap
    assert [event.value for event in started] == [(-1, 100)] * 2
    assert [link.flows_done, link.bytes_moved, env.now] == [2, 16_000, 100 + 2_000_000]
    assert unlimited.value == (-1, 50)


def test_a_zero_byte_transfer_creates_no_class_and_ends_after_its_fixed_cost():
    link = Resource("link", 10 * GBPS)
    env = Environment()
    network = FlowNetwork(env)
    done = network.transfer(0, (link,), cap=0.0, delay_ps=30)  # a cap no class would accept: never looked at
    env.run()
    assert (env.now, done.value, network.active_flows) == (30, (-1, 30), 0)


def finish_times(capacities, specs, quantum_ps=0):
    """Issue flows (size, path, cap, delay, late) as test_finish_times_match_a_per_flow_reference
    does, on a network with ``quantum_ps`` (rates checked against the oracle at every change); each
    one's finish time in ps."""
    env, network = oracle_checked_network(quantum_ps)
    resources = [network.add_resource(Resource(f"r{i}", c)) for i, c in enumerate(capacities)]
    finish = {}

    def issue(i, size, path, cap, delay, late):
        if late:
            yield env.timeout(delay)
        yield network.transfer(size, tuple(resources[r] for r in path), cap=cap, delay_ps=0 if late else delay)
        finish[i] = env.now

    for i, spec in enumerate(specs):
        env.process(issue(i, *spec))
    env.run()
    return finish


@settings(max_examples=300, deadline=None)
@given(flows, st.sampled_from([1, 100, 1000, 10_000]))
def test_a_time_quantum_moves_each_finish_by_at_most_two_quanta_per_transfer(instance, quantum_ps):
    """With a quantum, flows start and end at its multiples only; on random networks every finish
    time stays within 2 x quantum x (number of transfers) of the exact one (each transfer starts up
    to one quantum late and holds its bandwidth up to one quantum after its last byte)."""
    capacities, specs = instance
    exact = finish_times(capacities, specs)
    approximate = finish_times(capacities, specs, quantum_ps)
    limited = [i for i, (_, path, cap, _, _) in enumerate(specs) if path or cap != math.inf]
    assert all(approximate[i] % quantum_ps == 0 for i in limited)
    assert all(abs(approximate[i] - exact[i]) <= 2 * quantum_ps * len(specs) for i in exact)


def test_a_quantum_of_one_picosecond_is_the_exact_network():
    specs = [(10_000, [0], math.inf, 0, False), (30_000, [0, 1], 0.75, 7, True), (5_000, [1], math.inf, 3, False)]
    assert finish_times([1.0, 0.5], specs, 1) == finish_times([1.0, 0.5], specs)


def test_a_negative_quantum_is_refused():
    with pytest.raises(ValueError, match="time quantum must be 0 .exact. or a positive number of ps, got -5"):
        FlowNetwork(Environment(), quantum_ps=-5)


def test_independent_groups_are_components_and_a_change_refills_only_its_own():
    # Two groups of links never shared: each is one component with its own steps; a flow starting
    # in group B refills nothing of group A's steps, and rates match the oracle (checked network).
    env, network, (a0, a1, b0, b1) = checked_network(1.0, 0.5, 2.0, 0.25)
    for path in ((a0, a1), (a0,), (b0, b1), (b0,)):
        network.transfer(10**9, path)
    env.run(until=1)
    component_a, component_b = network._classes[((a0,), math.inf)].component, network._classes[((b0,), math.inf)].component
    assert component_a is not component_b
    steps_a = filling(component_a)
    network.transfer(10**9, (b1,), delay_ps=10)
    env.run(until=11)
    assert filling(component_a) == steps_a  # the same steps, not filled again (the same serials)
    # a flow across both groups merges them into one component
    network.transfer(10**9, (a1, b1), delay_ps=10)
    env.run(until=22)
    assert network._classes[((a0,), math.inf)].component is network._classes[((b0,), math.inf)].component


def test_a_component_that_lost_half_its_classes_is_split_into_its_parts():
    env, network, (a, b, c) = checked_network(1.0, 1.0, 1.0)
    network.transfer(10**6, (a,))
    network.transfer(10**6, (b,))
    network.transfer(1_000, (a, b))  # joins a and b: one component, until it ends
    network.transfer(1_000, (a, c))
    env.run(until=10)
    assert network._classes[((a,), math.inf)].component is network._classes[((b,), math.inf)].component
    env.run(until=100_000)  # the short flows ended: the component lost half its classes
    assert network._classes[((a,), math.inf)].component is not network._classes[((b,), math.inf)].component


def test_a_class_joining_through_a_resource_another_class_just_left_sees_it_fresh():
    # X alone on r0 ends at 10 ps, the instant Y starts on r0 and r1, where Z runs: Y joins Z's
    # component through r1 while r0's state from X's component is undone in the same recomputation.
    # W, on r1 too and created first, ends at the same instant: Z's component is refilled first.
    env, network, (r0, r1) = checked_network(1.0, 4.0)
    network.transfer(20, (r1,), cap=4.0)  # W: 2 bytes/ps beside Z, ends at 10 ps
    network.transfer(10, (r0,))  # X
    network.transfer(10**6, (r1,))  # Z
    late = network.transfer(1_000, (r0, r1), delay_ps=10)  # Y
    env.run(until=11)
    assert network._classes[((r0, r1), math.inf)].rate == 1.0
    env.run(late)


def test_a_member_ending_as_another_starts_in_its_class_needs_no_refill():
    # At 10 ps one flow of class (r0,) ends and another of it starts: the member counts, all the
    # filling depends on, are unchanged, so no recomputation; finish times are the reference's.
    env, network, (r0, r1) = checked_network(1.0, 2.0)
    specs = [(5, (r0,), math.inf, 0), (1_000, (r0, r1), math.inf, 0), (500, (r0,), math.inf, 10), (300, (r1,), math.inf, 0)]
    finish = {}
    for i, (size, path, cap, delay) in enumerate(specs):
        network.transfer(size, path, cap=cap, delay_ps=delay).callbacks.append(lambda _e, i=i: finish.__setitem__(i, env.now))
    env.run(until=10)
    before = network.recomputations
    env.run(until=11)
    assert finish[0] == 10 and network.recomputations == before
    env.run()
    assert finish == reference_finish_times({r0: 1.0, r1: 2.0}, specs)


def test_undone_steps_leave_a_resource_its_state_until_the_filling_reads_it_again():
    # A on r0 and r1 froze at 0.25 (r1), B at 0.75 (r0). Undoing the steps only unfreezes the
    # classes: r0 keeps its entries (their steps' records no longer have their serials) until it
    # is read, and then it is back at its capacity; a refill numbers its steps anew.
    env, network, (r0, r1) = checked_network(1.0, 0.25)
    network.transfer(10**9, (r0, r1))
    network.transfer(10**9, (r0,))
    env.run(until=1)
    component = r0.component
    before = filling(component)
    assert [step[:2] for step in before] == [(0.25, r1.key), (0.75, r0.key)] and r0.depth == 2
    unfrozen = network._undo_steps(component, 0)
    chained = [unfrozen, unfrozen.next_refill]  # the two classes, chained
    assert component.count == 0 and {c.order for c in chained} == {0, 1} and all(c.step == -1 for c in chained)
    assert r0.depth == 2
    network._restore(r0)
    assert (r0.depth, r0.residual, r0.frozen) == (0, r0.capacity, 0)
    network._fill(component, unfrozen)
    after = filling(component)
    assert [step[:3] for step in after] == [step[:3] for step in before]
    assert all(new[3] > old[3] for new, old in zip(after, before, strict=True))  # new serials: the old entries are stale
