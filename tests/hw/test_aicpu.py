"""The AICPU scheduler on dummy tasks: dispatch and completion costs, core choice, polling."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import npusim
from npusim.errors import ConfigError, UsageError
from npusim.hw.aicpu import AicpuScheduler


class Work:
    """A core task that keeps its core busy for ``busy_ps``."""

    on_core, on_control = True, False  # hw.device_task.CoreWork
    core_kind = "aiv"

    def __init__(self, env, busy_ps, name):
        self.env, self.busy_ps, self.tile, self.trace_op = env, busy_ps, 0, -1
        self.pending, self.successors, self.cores, self.started = 0, [], [], None
        self.first_event = self.last_event = -1  # records no events
        self.name = name

    def start(self, core):
        self.cores.append(core)
        self.started = self.env.now
        return self.env.timeout(self.busy_ps)


class Poll:
    """An AICPU task that matches once ``flag['set']`` is true (whoever sets it tells the scheduler:
    :meth:`AicpuScheduler.may_match`)."""

    on_core = on_control = False  # hw.device_task.AicpuWait

    def __init__(self, flag):
        self.flag, self.tile, self.trace_op = flag, 0, -1
        self.pending, self.successors, self.satisfied_calls = 0, [], 0

    def matches(self):
        return self.flag["set"]

    def satisfied(self):
        self.satisfied_calls += 1

    def polled(self, event):
        self.polled_event = event


def costs(session):
    die = session.config.spec.die
    hz = die.clock.hz
    return die.aicpu.schedule.to_ps(hz), die.aicpu.completion.to_ps(hz) + die.aicpu.dependency.to_ps(hz)


def test_a_chain_pays_dispatch_and_completion_per_task():
    first, second = Work(None, 1000, "a"), Work(None, 1000, "b")
    first.successors, second.pending = [second], 1

    with npusim.session("a2") as session:
        for task in (first, second):
            task.env = session.env
        scheduler = AicpuScheduler(session.system.die(0), [first, second], threads=1, core_choice="round_robin", name="chain")
        session.track(session.system.stream(0).submit(scheduler.run))
    schedule, completion = costs(session)
    assert first.started == schedule
    assert second.started == schedule + 1000 + completion + schedule
    assert session.result.simulated_ps == second.started + 1000 + completion


def test_round_robin_walks_the_first_core_of_each_thread_first():
    with npusim.session("a2") as session:
        env = session.env
        tasks = [Work(env, 10**6, str(i)) for i in range(4)]
        scheduler = AicpuScheduler(session.system.die(0), tasks, threads=3, core_choice="round_robin", name="rr")
        session.track(session.system.stream(0).submit(scheduler.run))
    assert [t.cores[0] for t in tasks] == [0, 16, 32, 1]  # the first core of each thread, then the second


def test_least_loaded_skips_busy_cores():
    with npusim.session("a2", ["die.cores.aiv.count=2", "ops.quant_scatter.vector_cores=2"]) as session:
        env = session.env
        long, short, third = Work(env, 10**7, "long"), Work(env, 10, "short"), Work(env, 10, "third")
        short.successors, third.pending = [third], 1
        scheduler = AicpuScheduler(session.system.die(0), [long, short, third], threads=1, core_choice="least_loaded", name="ll")
        session.track(session.system.stream(0).submit(scheduler.run))
    assert (long.cores, short.cores, third.cores) == ([0], [1], [1])  # core 0 is still busy with the long task


def test_a_poll_matches_one_pass_after_the_flag_is_set():
    flag = {"set": False}
    poll = Poll(flag)
    with npusim.session("a2") as session:
        env = session.env

        def raise_flag(_event):
            flag["set"] = True
            scheduler.may_match(poll)

        scheduler = AicpuScheduler(session.system.die(0), [poll], threads=1, core_choice="least_loaded", name="poll")
        session.track(session.system.stream(0).submit(scheduler.run))
        env.timeout(1_200_000).callbacks.append(raise_flag)  # 1.2 us: during the third pass
    _, completion = costs(session)
    poll_ps = session.config.spec.die.aicpu.poll_interval.to_ps(session.config.spec.die.clock.hz)
    assert session.result.simulated_ps == 4 * poll_ps + completion  # seen by the pass that starts at 1.5 us
    assert poll.satisfied_calls == 1
    recorder = session.result.recorder
    seen = poll.polled_event  # the task learns which pass saw it match
    columns = recorder.columns()
    assert (recorder.names[columns["name"][seen]], columns["start_ps"][seen]) == ("poll", 3 * poll_ps)


def test_the_scheduler_records_ready_dispatch_and_complete_flows():
    """A chain of two core tasks whose programs are single recorded events: the first's complete
    makes the second ready (``ready`` -> its dispatch); each dispatch flows to its program's first
    event, each program's last event to its complete."""

    class Program(Work):
        """A core task whose program records one event, named after the task."""

        def __init__(self, env, busy_ps, name, recorder):
            super().__init__(env, busy_ps, name)
            self.recorder = recorder

        def start(self, core):
            event = super().start(core)
            recorder = self.recorder
            track = recorder.track(0, f"aiv{core}", "VECTOR")

            def ran(_event):
                self.first_event = self.last_event = recorder.record(track, recorder.name_id(self.name), self.started,
                                                                      self.env.now, 0, -1, 0)

            event.callbacks.append(ran)
            return event

    with npusim.session("a2") as session:
        first, second = (Program(session.env, 1000, name, session.system.recorder) for name in "ab")
        first.successors, second.pending = [second], 1
        scheduler = AicpuScheduler(session.system.die(0), [first, second], threads=1, core_choice="round_robin", name="chain")
        session.track(session.system.stream(0).submit(scheduler.run))
    recorder = session.result.recorder
    names = [recorder.names[n] for n in recorder.columns()["name"]]
    flows = recorder.flows()
    pairs = [(recorder.names[n], names[a], names[b]) for a, b, n in zip(flows["from"], flows["to"], flows["name"])]
    assert pairs == [("dispatch", "dispatch", "a"), ("complete", "a", "complete"), ("ready", "complete", "dispatch"),
                     ("dispatch", "dispatch", "b"), ("complete", "b", "complete")]


def test_scheduler_thread_counts_are_checked():
    with npusim.session("a2") as session:
        with pytest.raises(ConfigError, match="shmem.schedulers=7: a die has 6 AICPUs"):
            AicpuScheduler(session.system.die(0), [], threads=7, core_choice="least_loaded", name="x")
        with pytest.raises(ConfigError, match="shmem.core_choice='random' is not one of round_robin, least_loaded"):
            AicpuScheduler(session.system.die(0), [], threads=1, core_choice="random", name="x")


def test_a_pass_that_matched_keeps_the_other_pollers_awake():
    """Die 1 polls for a flag that die 0's work raises once die 0's poll has matched. Both passes
    end at the same instant, die 1's first: die 0's pending timer is not just a poller (its pass
    matched and goes on with that work), so die 1 must not park for good."""
    first_flag, second_flag = {"set": True}, {"set": False}
    with npusim.session("a2") as session:
        env = session.env
        waiting, raiser = Poll(second_flag), Poll(first_flag)
        work = Work(env, 1000, "raise")
        start = work.start
        schedulers = {}

        def raise_second_flag():
            second_flag["set"] = True
            schedulers[1].may_match(waiting)

        work.start = lambda core: (raise_second_flag(), start(core))[1]
        raiser.successors, work.pending = [work], 1
        for die, tasks in ((1, [waiting]), (0, [raiser, work])):  # die 1's process first: its timer fires first
            scheduler = schedulers[die] = AicpuScheduler(session.system.die(die), tasks, threads=1, core_choice="round_robin", name=f"die{die}")
            session.track(session.system.stream(die).submit(scheduler.run))
    assert waiting.satisfied_calls == 1 and session.result.status == "ok"


class SlotWait:
    """An AICPU task that waits until ``slot['value'] == expected`` (clearing it with ``clear``),
    telling the scheduler of the other waits of the slot when it clears it; counts its reads."""

    on_core = on_control = False  # hw.device_task.AicpuWait

    def __init__(self, slot, expected, clear, name):
        self.slot, self.expected, self.clear, self.name = slot, expected, clear, name
        self.tile, self.trace_op, self.pending, self.successors, self.reads = 0, -1, 0, [], 0

    def matches(self):
        self.reads += 1
        return self.slot["value"] == self.expected

    def satisfied(self):
        self.slot["waits"].remove(self)
        if self.clear:
            self.slot["value"] = 0
            for other in self.slot["waits"]:
                self.slot["scheduler"].may_match(other)

    def polled(self, event):
        self.polled_at = self.slot["scheduler"].env.now


def test_a_pass_reads_the_waits_in_turn_and_a_wait_again_only_once_told_its_slot_changed():
    """``before`` (queued first) reads the set slot, then ``clearer`` matches and clears it: ``after``,
    read later in the same pass, sees 0 at once; ``before`` sees it at the next pass. ``idle``, whose
    slot is set at 10 us, is read when queued and after the change (by the check of the pass that
    ends then, whether only pollers are left, and by the next pass), not at each of the passes between."""
    slot = {"value": 1}
    idle_slot = {"value": 5}
    with npusim.session("a2") as session:
        before, clearer, after = SlotWait(slot, 0, False, "before"), SlotWait(slot, 1, True, "clearer"), SlotWait(slot, 0, False, "after")
        idle = SlotWait(idle_slot, 0, False, "idle")
        slot["waits"], idle_slot["waits"] = [before, clearer, after], [idle]
        scheduler = AicpuScheduler(session.system.die(0), [before, clearer, after, idle], threads=1, core_choice="round_robin", name="slots")
        slot["scheduler"] = idle_slot["scheduler"] = scheduler
        session.track(session.system.stream(0).submit(scheduler.run))

        def set_idle_slot(_event):
            idle_slot["value"] = 0
            scheduler.may_match(idle)

        session.env.timeout(10**7).callbacks.append(set_idle_slot)
    poll_ps = session.config.spec.die.aicpu.poll_interval.to_ps(session.config.spec.die.clock.hz)
    _, completion = costs(session)
    # the second pass starts once the thread has handled the two completions of the first
    assert (clearer.polled_at, after.polled_at, before.polled_at) == (poll_ps, poll_ps, poll_ps + 2 * completion + poll_ps)
    assert idle.polled_at - 2 * poll_ps < 10**7 <= idle.polled_at - poll_ps  # the first pass that starts after the change
    assert (before.reads, clearer.reads, after.reads, idle.reads) == (2, 1, 1, 3)


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_least_loaded_takes_the_first_core_in_turn_among_the_least_loaded(data):
    with npusim.session("a2", data=False) as session:
        scheduler = AicpuScheduler(session.system.die(0), [], threads=3, core_choice="least_loaded", name="ll")
        pool = scheduler.pools["aiv"]
        pool.outstanding = data.draw(st.lists(st.integers(0, 3), min_size=pool.count, max_size=pool.count))
        pool.next_core = start = data.draw(st.integers(0, pool.count - 1))
        in_turn = [pool.core_order[(start + i) % pool.count] for i in range(pool.count)]
        least = min(pool.outstanding)
        expected = next(i for i, core in enumerate(in_turn) if pool.outstanding[core] == least)
        assert scheduler._choose_core(pool) == in_turn[expected]
        assert pool.next_core == (start + expected + 1) % pool.count


def test_a_core_index_is_checked_even_once_the_core_exists():
    with npusim.session("a2", data=False) as session:
        die = session.system.die(0)
        core = die.core("aiv", 1)
        assert die.core("aiv", 1) is core and session.system.die(0) is die
        with pytest.raises(UsageError, match="aiv1.0 does not exist"):
            die.core("aiv", 1.0)
        with pytest.raises(UsageError, match="device 0.0 does not exist"):
            session.system.die(0.0)
