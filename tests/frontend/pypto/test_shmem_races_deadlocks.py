"""Race reports (both sides named; warning or error) and deadlock reports (each waiting PE, its
slot, the expected and current value), including the simulated-time bound."""

import re
import warnings

import numpy as np
import pytest
from shmem_allgather import run_allgather

import npusim
from npusim import pypto
from npusim.callsite import blamed
from npusim.errors import DeadlockError, RaceError, TimeBoundError
from npusim.kernels.shmem.races import ShmemRaceWarning

D = pypto.distributed


def test_allgather_without_its_waits_is_reported_with_both_sides():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with npusim.session("a2") as session:
            run_allgather(3, 8, 64, 4, wait=False)
    races = [w for w in caught if issubclass(w.category, ShmemRaceWarning)]
    assert races
    message = str(races[0].message)
    pattern = (r"data race on shmem tensor #0 \(group 'world'\) on PE \d, bytes \d+\.\.\d+: PE \d shmem_load#\d+ tile \d "
               r"at \S*shmem_allgather\.py:\d+ reads them \([\d.]+-[\d.]+ us\) while PE \d shmem_put#\d+ tile \d at "
               r"\S*shmem_allgather\.py:\d+ writes them \([\d.]+-[\d.]+ us\), and neither is ordered before the other")
    assert re.match(pattern, message), message
    instants = session.result.recorder.instants
    assert [i.message for i in instants if i.name == "data race"] == [str(w.message) for w in races]


def test_the_correct_allgather_reports_no_race():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with npusim.session("a2") as session:
            run_allgather(3, 8, 64, 4)
    assert not [w for w in caught if issubclass(w.category, ShmemRaceWarning)]
    assert not session.result.recorder.instants


def test_races_can_be_errors_that_blame_the_racing_access():
    with pytest.raises(RaceError, match="data race on shmem tensor #0") as error:
        with npusim.session("a2"):
            run_allgather(2, 8, 64, 8, wait=False, races="error")
    sides = re.findall(r"shmem_(?:put|load)#\d+ tile \d at \S*shmem_allgather\.py:(\d+) \w+ them \(([\d.]+)-", str(error.value))
    assert len(sides) == 2
    racing_line = max(sides, key=lambda side: float(side[1]))[0]  # the access that started last races with the earlier one
    line = blamed(error.value)  # the CLI names it, not the synchronisation that ran the simulation
    assert line.filename.endswith("shmem_allgather.py") and line.lineno == int(racing_line)


def test_a_load_before_the_puts_land_reads_stale_data():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ShmemRaceWarning)
        with npusim.session("a2"):
            inputs, outs, _ = run_allgather(2, 8, 64, 8, wait=False)
            stale = [not np.array_equal(out.numpy(), np.concatenate(inputs)) for out in outs]
    assert any(stale)


def _never_signalled(x, group, n_pes):
    pypto.set_vec_tile_shapes(1, 8)
    signal = D.create_shmem_signal(group, n_pes)
    D.shmem_wait_until(signal, 1, 3, pred=[x])


def test_a_wait_for_a_value_never_signalled_ends_in_a_deadlock_report():
    with pytest.raises(DeadlockError) as error:
        with npusim.session("a2") as session:
            xs = [npusim.tensor(np.zeros((2, 8), np.float32), device=pe) for pe in range(2)]
            npusim.launch(_never_signalled, 2, args=lambda pe: (xs[pe], "g", 2))
    stopped_at = session.env.now
    assert session.result.status == "failed"
    report = str(error.value)
    assert report.startswith("deadlock at 0.500 us: nothing more can happen")
    waits = [i for i, op in enumerate(session.result.recorder.ops) if op.name == "shmem_wait_until"]  # each PE's launch has an op record too
    for pe in range(2):
        assert (f"PE {pe} (die {pe}) shmem_wait_until#{waits[pe]} tile 0 waits for the signal slot of owner PE 1, tile at [0, 0], "
                f"of shmem tensor #0 (group 'g') on PE {pe}: expects 3, the slot holds 0") in report
    poll_ps = session.config.spec.die.aicpu.poll_interval.to_ps(session.config.spec.die.clock.hz)
    assert stopped_at == poll_ps  # the pollers park after the first pass that finds nothing can change


def test_the_time_bound_ends_a_run_with_the_same_report():
    def kernel(x, group, n_pes):
        pypto.set_vec_tile_shapes(8, 256)
        data = D.create_shmem_tensor(group, n_pes, pypto.DT_FP32, [64, 256])
        D.shmem_put(x, [0, 0], data, 1 - D.my_symbolic_pe(group))  # keeps the links busy past the bound
        D.shmem_wait_until(data, 0, 1, pred=[x])

    with pytest.raises(TimeBoundError) as error:
        with npusim.session("a2", time_limit_us=1.0):
            xs = [npusim.tensor(np.ones((64, 256), np.float32), device=pe) for pe in range(2)]
            npusim.launch(kernel, 2, args=lambda pe: (xs[pe], "g", 2))
    report = str(error.value)
    assert re.match(r"time bound reached at 0.9\d\d us: the simulated-time bound of 1 us ended the run while issued work was still running", report)
    assert re.search(r"the slowest transfer in flight: \d+ transfers limited by die0->die1 HCCS write credits, at [\d.]+ GB/s each, [\d,]+ bytes still to move", report)
    assert "expects 1, the slot holds 0" in report
    assert "more tile ops of 'kernel' have not finished" in report


def test_a_plain_isa_deadlock_is_detected_when_it_happens():
    from npusim import isa

    with pytest.raises(DeadlockError, match="nothing more can happen") as error:
        with npusim.session("a2") as session:
            kernel = isa.Kernel("stuck", die=0)
            kernel.aiv(0).scalar(100)
            kernel.aiv(0).wait_flag("MTE2", "VECTOR", 0)
            kernel.launch()
    die = session.config.spec.die
    assert session.env.now == die.scalar.instruction.to_ps(die.clock.hz) * 100  # when it stalled, not at the bound
    assert "aiv0 VECTOR (kernel 'stuck') waits in: VECTOR wait_flag MTE2->VECTOR #0" in str(error.value)
