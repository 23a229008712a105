"""Tile ops reuse their programs: every replay of a template is the program a build would make
(shmem put, get, load, store, assemble, signal and barrier tile ops, valid regions, dtypes that
cast, groups), shapes that differ get templates of their own, and nothing racy is vouched for.
The tests that watch the runtime's calls by replacing methods (``CoreTask.start``, ``Kernel.launch``
...) or a tile op's functions (``tile_ops._sync``) are marked ``interpreted``: compiled, the runtime
calls them directly (tests/conftest.py)."""

import sys

import pytest
from pypto_collectives import run_case
from shmem_allgather import run_allgather

import npusim
from npusim import isa
from npusim.isa import program
from npusim.kernels.shmem.races import ShmemRaceWarning
from npusim.runtime import tasks, templates
from tests.isa.test_program import describe_program


@pytest.fixture
def checked(monkeypatch):
    """Every tile op's program checked against a fresh build of its pieces; yields the counts of
    tile ops that replayed a template and that were built."""
    launched: list[list] = []  # the programs of each launched kernel or replay (a tile op's kernel lets go of its program once launched)
    counts = {"replayed": 0, "built": 0}
    launch, launch_replay, start, replay = isa.Kernel.launch, program.Replay.launch, tasks.CoreTask.start, program.ProgramTemplate.replay

    def recording_launch(self, stream=None, **options):
        launched.append(list(self.programs.values()))
        return launch(self, stream, **options)

    def recording_launch_replay(self, stream, op):
        launched.append([self])
        return launch_replay(self, stream, op)

    def counting_replay(self, *args):
        done = replay(self, *args)
        counts["replayed"] += done is not None
        return done

    def checked_start(self, core):
        replayed = counts["replayed"]
        process = start(self, core)
        if isinstance(self.build, templates.ProgramPiece):
            counts["built"] += counts["replayed"] == replayed
            (program,) = launched[-1]
            fresh = isa.Kernel(self.op.name, die=self.op.program.die, system=self.op.program.launch.system).core(self.core_kind, core)
            gms = [piece.gm() for piece in (self.build, *self.consumers)]
            with fresh.tile(self.tile):
                loaded, _ = self.build.build(fresh, None, *gms[0])
                for piece, gm in zip(self.consumers, gms[1:]):
                    piece.build(fresh, loaded, *gm)
            fresh.by_pipe()
            assert describe_program(program.instructions) == describe_program(fresh.instructions), self
        return process

    monkeypatch.setattr(isa.Kernel, "launch", recording_launch)
    monkeypatch.setattr(program.Replay, "launch", recording_launch_replay)
    monkeypatch.setattr(program.ProgramTemplate, "replay", counting_replay)
    monkeypatch.setattr(tasks.CoreTask, "start", checked_start)
    return counts


@pytest.mark.parametrize("case", ["all_gather", "all_reduce_two_shot", "all_reduce_one_shot", "reduce_scatter_bf16", "two_group_all_gather",
                                  "cascading_all_reduce"])
@pytest.mark.interpreted
def test_every_replay_is_the_program_its_pieces_build(checked, case):
    with npusim.session("a3"):
        assert run_case(case, small=True)
    assert checked["replayed"] > checked["built"] > 0


def _templates(**params):
    with npusim.session("a2", data=False):
        _, _, launch = run_allgather(**params)
    return {key[1][0][0]: key for key in launch.templates}, launch


@pytest.mark.interpreted
def test_one_template_per_shape_of_tile_op(checked):
    names, launch = _templates(n_pes=4, rows=16, cols=256, tile_rows=4)
    assert sorted(names) == ["shmem_barrier_all", "shmem_load", "shmem_put", "shmem_signal"]
    assert checked["built"] == 4  # the first tile op of each shape; the others replay it
    core_tasks = {id(task) for p in launch.programs for op in p.ops for task in op.tasks if task.on_core}  # assemble ops hold their loads'
    assert checked["replayed"] == len(core_tasks) - 4
    other, _ = _templates(n_pes=4, rows=16, cols=256, tile_rows=8)
    assert other["shmem_put"] != names["shmem_put"]  # another tile shape: another template


def test_a_racy_all_gather_is_still_reported_after_a_clean_one():
    with npusim.session("a2", data=False):
        run_allgather(n_pes=4, rows=16, cols=256, tile_rows=4)
        with pytest.warns(ShmemRaceWarning, match="data race on shmem tensor"):
            run_allgather(n_pes=4, rows=16, cols=256, tile_rows=4, wait=False)


@pytest.mark.interpreted
def test_a_racy_put_program_is_reported_on_every_tile_op_that_replays_it(monkeypatch):
    """A program whose template is racy (here: the put's load is not flagged before its store) is
    checked again on each replay: every put tile op's race is reported."""
    from npusim.kernels.shmem import tile_ops

    sync = tile_ops._sync
    monkeypatch.setattr(tile_ops, "_sync", lambda p, src, dst, event=0: None if (src, dst) == ("MTE2", "MTE3") else sync(p, src, dst, event))
    with npusim.session("a2", data=False), pytest.warns(isa.racecheck.PipeRaceWarning) as caught:
        _, _, launch = run_allgather(n_pes=2, rows=8, cols=256, tile_rows=4)
    puts = {id(task) for p in launch.programs for op in p.ops if op.name == "shmem_put" for task in op.tasks}
    reported = [w for w in caught if "pipe race in kernel 'shmem_put'" in str(w.message) and "read after write on UB" in str(w.message)]
    assert len(puts) == 8 and len(reported) == len(puts)  # one chunk per tile: one race per tile op


@pytest.mark.interpreted
def test_a_tile_op_runs_in_its_stream_tasks_own_process(monkeypatch):
    """The AICPU dispatches a tile op as the last thing its timer's event schedules, so its kernel
    is launched inline (Kernel.launch: its run's process would start as the next event)."""
    options = []
    launch = isa.Kernel.launch

    def recording_launch(self, stream=None, **given):
        options.append(given)
        return launch(self, stream, **given)

    monkeypatch.setattr(isa.Kernel, "launch", recording_launch)
    with npusim.session("a2", data=False):
        run_allgather(n_pes=2, rows=8, cols=256, tile_rows=4)
    assert options and all(given == {"inline": True} for given in options)


@pytest.mark.interpreted
def test_a_tile_op_lets_go_of_its_kernel_and_program_once_launched(monkeypatch):
    """A tile op's kernel and program refer to each other; once launched, its core runs the placed
    program: both are freed as the tile op starts (no cycle left for the collector, nothing kept
    while the tile op waits for its core)."""
    launched = []
    launch, start = isa.Kernel.launch, tasks.CoreTask.start

    def recording_launch(self, stream=None, **options):
        launched.append([self, *self.programs.values()])  # held by the test (compiled, they take no weak reference)
        return launch(self, stream, **options)

    def checked_start(self, core):
        process = start(self, core)
        held = launched[-1]
        # no reference but the test's list, the loop's name and the call's argument, and each program's to its kernel: freed once the
        # test lets go
        assert [sys.getrefcount(obj) for obj in held] == [3 + len(held) - 1] + [3] * (len(held) - 1), self
        return process

    monkeypatch.setattr(isa.Kernel, "launch", recording_launch)
    monkeypatch.setattr(tasks.CoreTask, "start", checked_start)
    with npusim.session("a2", data=False):
        run_allgather(n_pes=4, rows=16, cols=256, tile_rows=4)
    assert len(launched) == 4  # the first tile op of each shape; the others launch replays, without a kernel (Replay.launch)


@pytest.mark.interpreted
@pytest.mark.parametrize("data", [False, True])
def test_a_replay_launched_alone_runs_as_the_kernel_of_its_program(monkeypatch, data):
    """Replays that are not race-checked are launched without a kernel and its program
    (Replay.launch): the run records the same events, flows and simulated time as when every tile
    op launches a kernel (here: every replay race-checked again, finding nothing)."""
    def run():
        with npusim.session("a2", data=data) as session:
            run_allgather(n_pes=4, rows=16, cols=256, tile_rows=4)
            recorder = session.system.recorder
            return session.env.now, bytes(recorder.rows.buffer[:len(recorder) * 40]), list(recorder.flow_from), list(recorder.flow_to)

    alone = run()
    kernels = []
    launch = isa.Kernel.launch
    monkeypatch.setattr(program.ProgramTemplate, "unchecked", lambda self, system: False)
    monkeypatch.setattr(isa.Kernel, "launch", lambda self, stream=None, **options: kernels.append(self) or launch(self, stream, **options))
    assert run() == alone
    assert len(kernels) > 4  # every tile op launched a kernel
