"""The pipe-race checker: the README's kernel and the examples report nothing; each racy variant is
caught, naming both instructions, their pipes and times; flags pair first in first out, barriers
and the scalar issue order order pipes; GM bytes two cores of a launch touch race; warn, error, off."""

import re
import warnings
from pathlib import Path

import numpy as np
import pytest

import npusim
from npusim import isa
from npusim.errors import RaceError, UsageError
from npusim.isa.racecheck import PipeRaceWarning

ROOT = Path(__file__).resolve().parents[2]
N = 4096  # fp16 elements per core


def scale_kernel(x, cores: int = 4, *, drop: tuple[str, ...] = ()):
    """The README's kernel (load, scale, store per core), without the flags named in ``drop``."""
    kernel = isa.Kernel("scale", die=0)
    for core in range(cores):
        p = kernel.aiv(core)
        ub = p.alloc(N, np.float16)
        p.copy(ub, isa.gm(x, core * N))
        if "MTE2->VECTOR" not in drop:
            p.set_flag("MTE2", "VECTOR", 0)
            p.wait_flag("MTE2", "VECTOR", 0)
        p.muls(ub, ub, 2.0)
        if "VECTOR->MTE3" not in drop:
            p.set_flag("VECTOR", "MTE3", 0)
            p.wait_flag("VECTOR", "MTE3", 0)
        p.copy(isa.gm(x, core * N), ub)
    return kernel


def races_of(build, races: str = "warn") -> list[str]:
    """The race reports of the kernels ``build(x)`` launches (x: a tensor of 48 x N fp16 ones)."""
    with warnings.catch_warnings(record=True) as caught, npusim.session("a2", races=races) as s:
        warnings.simplefilter("always")
        x = npusim.tensor(np.ones(48 * N, np.float16))
        build(x).launch()
    reports = [str(w.message) for w in caught if issubclass(w.category, PipeRaceWarning)]
    assert reports == [w["message"] for w in s.result.summary["warnings"] if w["name"] == "pipe race"]  # in the trace and summary too
    return reports


def test_the_readme_kernel_reports_nothing():
    assert races_of(lambda x: scale_kernel(x, cores=48)) == []


@pytest.mark.parametrize("example", ["vector_add.py", "kv_cache_quant_scatter.py", "shmem_allgather.py", "pypto_matmul_add.py"])
def test_the_examples_report_nothing(example):
    npusim.simulate("a2", ROOT / "examples" / example, data=False, races="error")  # a race would raise


def test_a_read_before_its_load_is_flagged_is_caught_with_both_instructions_pipes_and_times():
    report, gm = races_of(lambda x: scale_kernel(x, cores=1, drop=("MTE2->VECTOR",)))
    assert "write after read on GM tensor" in gm and "MTE3 `copy UB->GM`" in gm  # the store may now overtake the load too
    assert re.fullmatch(
        r"pipe race in kernel 'scale' on die 0 aiv0: read after write on UB bytes 0\.\.8192: "
        r"MTE2 `copy GM->UB` \(instruction #0, 0\.000-(\d\.\d{3}) us\), then VECTOR `muls` \(instruction #1, 0\.000-\d\.\d{3} us\), "
        r"and no flag, barrier or scalar issue order puts the first before the second; "
        r"add set_flag\(MTE2, VECTOR\) after the first and wait_flag\(MTE2, VECTOR\) before the second", report)


def test_a_store_before_the_compute_is_flagged_is_caught():
    report, _ = sorted(races_of(lambda x: scale_kernel(x, cores=1, drop=("VECTOR->MTE3",))), key=lambda r: "UB bytes" not in r)
    assert "read after write on UB bytes 0..8192: VECTOR `muls` (instruction #3" in report and "then MTE3 `copy UB->GM` (instruction #4" in report


@pytest.mark.parametrize(("freed", "races"), [(True, 0), (False, 1)])
def test_reusing_a_buffer_before_the_store_has_read_it_is_a_write_after_read(freed, races):
    def build(x):
        kernel = isa.Kernel("reuse", die=0)
        p = kernel.aiv(0)
        ub = p.alloc(N, np.float16)
        for tile in range(2):
            if tile and freed:
                p.wait_flag("MTE3", "MTE2", 0)  # the store of tile 0 has read the buffer
            p.copy(ub, isa.gm(x, tile * N))
            p.set_flag("MTE2", "MTE3", 0)
            p.wait_flag("MTE2", "MTE3", 0)
            p.copy(isa.gm(x, (2 + tile) * N), ub)
            if tile == 0 and freed:
                p.set_flag("MTE3", "MTE2", 0)
        return kernel

    reports = races_of(build)
    assert len(reports) == races
    if races:
        assert "write after read on UB bytes 0..8192: MTE3 `copy UB->GM` (instruction #3" in reports[0]
        assert "then MTE2 `copy GM->UB` (instruction #4" in reports[0]


def test_flags_pair_first_in_first_out_so_the_first_wait_does_not_cover_the_second_load():
    def build(x):
        kernel = isa.Kernel("fifo", die=0)
        p = kernel.aiv(0)
        a, b = p.alloc(N, np.float16), p.alloc(N, np.float16)
        p.copy(a, isa.gm(x))
        p.set_flag("MTE2", "VECTOR", 0)
        p.copy(b, isa.gm(x, N))
        p.set_flag("MTE2", "VECTOR", 0)
        p.wait_flag("MTE2", "VECTOR", 0)  # takes the first set: only a is loaded
        p.adds(b, b, 1.0)
        p.wait_flag("MTE2", "VECTOR", 0)
        return kernel

    (report,) = races_of(build)
    assert "read after write on UB bytes 8192..16384: MTE2 `copy GM->UB` (instruction #2" in report and "VECTOR `adds`" in report


@pytest.mark.parametrize(("barrier", "races"), [("ALL", 0), ("VECTOR", 1)])
def test_pipe_barrier_all_orders_every_pipe_and_a_one_pipe_barrier_does_not(barrier, races):
    def build(x):
        kernel = isa.Kernel("barrier", die=0)
        p = kernel.aiv(0)
        ub = p.alloc(N, np.float16)
        p.copy(ub, isa.gm(x))
        p.pipe_barrier(barrier)
        p.muls(ub, ub, 2.0)
        return kernel

    assert len(races_of(build)) == races


@pytest.mark.parametrize(("flagged", "races"), [(True, 0), (False, 3)])
def test_a_scalar_read_of_a_load_needs_its_flag_and_the_scalar_issue_order_orders_a_scalar_write(flagged, races):
    def build(x):
        kernel = isa.Kernel("scalar", die=0)
        p = kernel.aiv(0)
        ub = p.alloc(N, np.float16)
        p.copy(ub, isa.gm(x))
        if flagged:
            p.set_flag("MTE2", "SCALAR", 0)
            p.wait_flag("MTE2", "SCALAR", 0)
        p.read_scalar(ub, 5)
        p.write_scalar(ub, 7.0, index=0)  # issued by the scalar unit: the store below starts after it
        p.copy(isa.gm(x, N), ub[0:16])
        return kernel

    reports = races_of(build)
    assert len(reports) == races
    if races:  # the scalar read, the scalar write, and the store of the bytes the scalar unit did not write
        assert any("read after write on UB bytes 10..12: MTE2 `copy GM->UB` (instruction #0" in r and "SCALAR `read_scalar`" in r for r in reports)
        assert any("write after write on UB bytes 0..2: MTE2 `copy GM->UB` (instruction #0" in r and "SCALAR `write_scalar`" in r for r in reports)
        assert any("read after write on UB bytes 2..32: MTE2 `copy GM->UB` (instruction #0" in r and "MTE3 `copy UB->GM`" in r for r in reports)


def test_gm_written_by_one_pipe_and_read_back_by_another_without_a_flag_is_caught():
    def build(x):
        kernel = isa.Kernel("gm", die=0)
        p = kernel.aiv(0)
        a, b = p.alloc(N, np.float16), p.alloc(N, np.float16)
        p.copy(isa.gm(x), a)  # MTE3 stores ...
        p.copy(b, isa.gm(x))  # ... and MTE2 loads the same bytes back, unordered
        return kernel

    (report,) = races_of(build)
    assert "read after write on GM tensor 'tensor[196608]<float16>' (die 0) bytes 0..8192: MTE3 `copy UB->GM`" in report


def test_the_cube_path_is_checked_too():
    def build(x):
        kernel = isa.Kernel("cube", die=0)
        p = kernel.aic(0)
        l1, l0a = p.alloc(16 * 16, np.float16, "L1"), p.alloc(16 * 16, np.float16, "L0A")
        p.copy(l1, isa.gm(x))
        p.load_nz(l0a, l1, 16, 16)  # MTE1 reads L1 before MTE2 has filled it
        return kernel

    (report,) = races_of(build)
    assert "read after write on L1 bytes 0..512: MTE2 `copy GM->L1`" in report and "MTE1 `load_nz L1->L0A`" in report


def test_gm_bytes_two_cores_of_a_launch_touch_race_unless_disjoint_or_atomic_adds():
    def overlapping(x):
        kernel = isa.Kernel("two", die=0)
        for core in range(2):
            p = kernel.aiv(core)
            ub = p.alloc(N, np.float16)
            p.copy(isa.gm(x, core * N // 2), ub)  # core 1 writes the second half of core 0's bytes
        return kernel

    (report,) = races_of(overlapping)
    assert re.fullmatch(r"GM race in kernel 'two' on die 0: write and write on two cores: aiv0 MTE3 `copy UB->GM` \(instruction #0, "
                        r"[\d.]+-[\d.]+ us\) and aiv1 MTE3 `copy UB->GM` \(instruction #0, [\d.]+-[\d.]+ us\) touch GM tensor "
                        r"'tensor\[196608\]<float16>' \(die 0\) bytes 4096\.\.8192, and nothing orders the cores of one launch; give each "
                        r"core its own bytes, or move one side to a later launch", report)

    def interleaved_rows(x):  # each core stores every other 256-byte row of the same region
        kernel = isa.Kernel("rows", die=0)
        for core in range(2):
            p = kernel.aiv(core)
            ub = p.alloc(8 * 128, np.float16)
            p.copy(isa.gm(x, core * 128), ub, burst_count=8, burst_bytes=256, dst_gap=256)
        return kernel

    def atomic_adds(x):
        kernel = isa.Kernel("sum", die=0)
        for core in range(4):
            p = kernel.aiv(core)
            ub = p.alloc(N, np.float16)
            p.copy(isa.gm(x), ub, atomic="add")
        return kernel

    assert races_of(interleaved_rows) == [] and races_of(atomic_adds) == []


def test_reports_per_launch_are_bounded_and_count_the_rest():
    reports = races_of(lambda x: scale_kernel(x, cores=48, drop=("MTE2->VECTOR",)))
    assert len(reports) == 3 and reports[-1].endswith("(93 more races in this launch not shown)")  # a UB and a GM race per core


def test_races_error_ends_the_run_at_the_first_and_off_checks_nothing():
    with pytest.raises(RaceError, match=r"^pipe race in kernel 'scale' .* \(races='error' is set\)$"):
        races_of(lambda x: scale_kernel(x, cores=1, drop=("MTE2->VECTOR",)), races="error")
    assert races_of(lambda x: scale_kernel(x, cores=1, drop=("MTE2->VECTOR",)), races="off") == []
    with pytest.raises(UsageError, match="races='loud': give one of warn, error, off"):
        npusim.session("a2", races="loud").__enter__()


def test_a_program_that_deadlocks_is_left_to_the_deadlock_report():
    from npusim.errors import DeadlockError

    def build(x):
        kernel = isa.Kernel("stuck", die=0)
        p = kernel.aiv(0)
        ub = p.alloc(N, np.float16)
        p.wait_flag("VECTOR", "MTE2", 0)  # never set
        p.copy(ub, isa.gm(x))
        p.muls(ub, ub, 2.0)
        return kernel

    with pytest.raises(DeadlockError):
        races_of(build)


def test_one_racy_core_among_clean_copies_of_its_program_is_caught():
    def build(x):  # 47 cores run the README's kernel; the last one drops a flag
        kernel = scale_kernel(x, cores=47)
        p = kernel.aiv(47)
        ub = p.alloc(N, np.float16)
        p.copy(ub, isa.gm(x, 47 * N))
        p.muls(ub, ub, 2.0)
        p.set_flag("VECTOR", "MTE3", 0)
        p.wait_flag("VECTOR", "MTE3", 0)
        p.copy(isa.gm(x, 47 * N), ub)
        return kernel

    reports = races_of(build)
    assert len(reports) == 2 and all(" aiv47: " in report for report in reports)


def test_reports_name_each_sides_program_line_and_an_error_blames_the_racing_one():
    """A kernel issued by a line of the user's program (``source``, a frontend Callsite), whose
    instructions come from two lines (``note_source``, as a PyPTO tile op's store of another op):
    each side is named with its line; the RaceError blames the second access (the one that races), not
    the synchronisation that ran the simulation; the warning is shown at that line."""
    from npusim.callsite import Callsite, blamed

    load_line, store_line = Callsite(__file__, 10, "kernel"), Callsite(__file__, 20, "kernel")

    def build(x):
        kernel = scale_kernel(x, cores=1, drop=("VECTOR->MTE3",))
        kernel.source = load_line
        program = kernel.aiv(0)
        program.sources.append((len(program.instructions) - 1, store_line))  # the last instruction: the store
        return kernel

    with warnings.catch_warnings(record=True) as caught, npusim.session("a2") as s:
        warnings.simplefilter("always")
        build(npusim.tensor(np.ones(48 * N, np.float16))).launch()
        npusim.synchronize()
    race = next(w for w in caught if issubclass(w.category, PipeRaceWarning))
    assert re.search(r"\(instruction #\d+, from \S*test_racecheck.py:10, .*MTE3 `copy UB->GM` \(instruction #\d+, from "
                     r"\S*test_racecheck.py:20, ", str(race.message)), str(race.message)
    assert (race.filename, race.lineno) == (__file__, 20)
    assert s.result.summary["warnings"]
    with pytest.raises(RaceError) as error:
        races_of(build, races="error")
    assert blamed(error.value) is store_line  # on the RaceError the simulation loop raises (a copy, the original its cause)
