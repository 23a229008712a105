"""Output files and folders under faults: a folder is swapped in whole or not at all, whatever fails
at any step of writing it (an OSError, a full disk, a killed writer, a concurrent writer), and no
temporary is left behind; default output folder names stay one safe path component."""

import errno
import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

import npusim.files as files
from npusim.errors import UsageError
from npusim.files import (
    FORK,
    MARKER,
    PARTIAL,
    Forked,
    Output,
    StagedFolder,
    TwoEnds,
    atomic_path,
    busy_cores,
    can_fork,
    default_folder_name,
    exchange,
    json_bytes,
    remove_stale_temporaries,
)

ROOT = Path(__file__).resolve().parents[1]
NAMES = ("trace.json", "summary.json", "manifest.json")


@pytest.mark.parametrize(
    ("workload", "config", "folder"),
    [("examples/vector_add.py", "a3", "vector_add-a3"), ("x.py", "/../../../../tmp/escape", "x-_.._.._.._.._tmp_escape"),
     ("..py", "a2", "_-a2"), (".hidden.py", "a2", "_hidden-a2"), ("a b;$(rm).py", "a2", "a_b___rm_-a2"), ("matmul_测试.py", "a3", "matmul_测试-a3"),
     ("x.py", "a\\b\x00c", "x-a_b_c")],
)
def test_the_default_folder_name_is_one_safe_path_component(workload, config, folder):
    name = default_folder_name(Path(workload), config)
    assert name == folder
    assert (Path("traces") / name).resolve().parent == Path("traces").resolve()


def outputs(token: str) -> list[Output]:
    """A run folder's files, each holding ``token`` (which run wrote it)."""
    return [Output.json(name, {"run": token, "status": "ok", "simulated_time_us": 1, "events": 0, "wall_time_s": 0.0, "ops": [], "pipes": [], "bandwidth": []}) for name in NAMES]


def tokens(folder: Path) -> set[str]:
    """The runs the files of ``folder`` come from (one when the folder is whole, marked as npusim's)."""
    assert sorted(p.name for p in folder.iterdir()) == sorted([*NAMES, MARKER])
    assert files.folder_mark(folder).files == NAMES
    return {json.loads((folder / name).read_text())["run"] for name in NAMES}


def write_run(destination: Path, token: str) -> None:
    with StagedFolder(destination) as folder:
        folder.write(outputs(token))
        folder.commit(destination, previous=destination.with_name(destination.name + ".prev"))


def leftovers(parent: Path) -> list[str]:
    return sorted(p.name for p in parent.iterdir() if PARTIAL in p.name)


def test_a_folder_is_swapped_in_whole_and_the_one_it_replaces_kept(tmp_path):
    out = tmp_path / "run"
    for token in ("first", "second", "third"):
        write_run(out, token)
    assert tokens(out) == {"third"} and tokens(tmp_path / "run.prev") == {"second"}
    assert leftovers(tmp_path) == []


@pytest.mark.parametrize("failing", range(len(NAMES)))
def test_an_oserror_at_any_output_leaves_the_destination_as_it_was_and_no_temporary(tmp_path, failing):
    out = tmp_path / "run"
    write_run(out, "good")

    def full_disk(path):
        path.write_bytes(b"half")
        raise OSError(errno.ENOSPC, "No space left on device")

    broken = outputs("bad")
    broken[failing] = Output(broken[failing].name, full_disk)
    with pytest.raises(OSError, match="No space left"), StagedFolder(out) as folder:
        folder.write(broken)
        folder.commit(out, previous=tmp_path / "run.prev")
    assert tokens(out) == {"good"} and not (tmp_path / "run.prev").exists()
    assert leftovers(tmp_path) == []


def test_an_atomic_file_is_removed_when_writing_it_fails(tmp_path):
    target = tmp_path / "summary.json"
    target.write_text("before")
    with pytest.raises(KeyboardInterrupt), atomic_path(target) as temporary:
        temporary.write_text("half")
        raise KeyboardInterrupt
    assert target.read_text() == "before" and leftovers(tmp_path) == []


@pytest.fixture
def small_disk(tmp_path):
    """A 64 KiB tmpfs (skipped where this user cannot mount one)."""
    mount = tmp_path / "disk"
    mount.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mount)], capture_output=True).returncode != 0:
        pytest.skip("cannot mount a tmpfs here (needs root)")
    yield mount
    subprocess.run(["umount", str(mount)], check=True)


def test_a_full_disk_leaves_the_destination_as_it_was_and_no_temporary(small_disk):
    out = small_disk / "run"
    write_run(out, "good")
    big = [Output.made("trace.json", lambda: bytes(1 << 20)), *outputs("bad")[1:]]
    with pytest.raises(OSError) as error, StagedFolder(out) as folder:
        folder.write(big)
        folder.commit(out, previous=small_disk / "run.prev")
    assert error.value.errno == errno.ENOSPC
    assert tokens(out) == {"good"} and leftovers(small_disk) == []
    write_run(out, "after")  # the space was given back
    assert tokens(out) == {"after"}


# The child writes a run "new" over the run "old" in DEST and kills itself (SIGKILL: no clean-up
# runs) at the step named STEP: while writing an output, after all outputs, or inside the commit
# after the swap and before the old run is moved to <out>.prev.
KILLED_WRITER = textwrap.dedent("""
    import json, os, signal, sys
    from pathlib import Path
    import npusim.files as files

    dest, step = Path(sys.argv[1]), sys.argv[2]
    def die(*args, **kwargs):
        os.kill(os.getpid(), signal.SIGKILL)
    def half_then_die(path):
        path.write_text('{"run": "ne')
        die()
    outputs = [files.Output.json(name, {"run": "new", "status": "ok"}) for name in ("trace.json", "summary.json", "manifest.json")]
    if step.startswith("output"):
        index = int(step[len("output"):])
        outputs[index] = files.Output(outputs[index].name, half_then_die)
    if step == "commit":
        files.replace_folder = die
    folder = files.StagedFolder(dest)
    folder.write(outputs)
    if step == "written":
        die()
    folder.commit(dest, previous=dest.with_name(dest.name + ".prev"))
""")


@pytest.mark.parametrize("step", ["output0", "output1", "output2", "written", "commit"])
def test_a_killed_writer_leaves_a_whole_run_and_the_next_writer_removes_its_temporary(tmp_path, step):
    out = tmp_path / "run"
    write_run(out, "old")
    killed = subprocess.run([sys.executable, "-c", KILLED_WRITER, str(out), step], env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert killed.returncode == -signal.SIGKILL
    assert tokens(out) == ({"new"} if step == "commit" else {"old"})  # after the swap the new run is in place
    assert len(leftovers(tmp_path)) == 1  # the killed writer's temporary (at "commit": the old run it was moving)
    write_run(out, "next")
    assert tokens(out) == {"next"} and leftovers(tmp_path) == []


# Each writer commits ROUNDS runs of its own into DEST while readers load it as `npusim report` does.
CONCURRENT_WRITER = textwrap.dedent("""
    import sys
    from pathlib import Path
    import npusim.files as files

    dest, who, rounds = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3])
    for n in range(rounds):
        with files.StagedFolder(dest) as folder:
            folder.write([files.Output.json(name, {"run": f"{who}-{n}", "status": "ok", "simulated_time_us": 1, "events": 0, "wall_time_s": 0.0, "ops": {}, "pipes": {},
                                                   "bandwidth": {}}) for name in ("trace.json", "summary.json", "manifest.json")])
            folder.commit(dest, previous=dest.with_name(dest.name + ".prev"))
""")


def test_two_concurrent_writers_leave_one_whole_run_and_readers_never_see_a_mix(tmp_path, started):
    from npusim.analysis.report import load_run

    out = tmp_path / "run"
    write_run(out, "start")
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    writers = [started([sys.executable, "-c", CONCURRENT_WRITER, str(out), who, "40"], env=env) for who in ("a", "b")]
    reads = 0
    while any(writer.poll() is None for writer in writers):
        run = load_run(out)  # the folder is always there and whole
        assert run.summary["run"] == run.manifest["run"]
        reads += 1
    assert [writer.returncode for writer in writers] == [0, 0] and reads > 0
    (last,) = tokens(out)
    assert last in ("a-39", "b-39")
    assert len(tokens(tmp_path / "run.prev")) == 1 and leftovers(tmp_path) == []


def test_only_npusim_output_folders_are_replaced(tmp_path):
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "mine.txt").write_text("keep")
    with pytest.raises(UsageError, match="not an npusim output folder"):
        StagedFolder(tmp_path / "notes")
    (tmp_path / "file").write_text("x")
    with pytest.raises(UsageError, match="exists and is not a folder"):
        StagedFolder(tmp_path / "file")
    with pytest.raises(UsageError, match="'.*file' is a file, not a folder"):
        StagedFolder(tmp_path / "file" / "sub")
    (tmp_path / "empty").mkdir()
    write_run(tmp_path / "empty", "ok")
    assert tokens(tmp_path / "empty") == {"ok"} and (tmp_path / "notes" / "mine.txt").read_text() == "keep"
    assert leftovers(tmp_path) == []


def test_what_a_commit_replaces_is_decided_when_it_commits_so_two_runs_begun_on_a_fresh_out_lose_neither(tmp_path):
    out, prev = tmp_path / "run", tmp_path / "run.prev"
    first, second = StagedFolder(out), StagedFolder(out)  # both begin while out is absent
    for folder, token in ((first, "first"), (second, "second")):
        folder.write(outputs(token))
    first.commit(out, previous=prev)
    second.commit(out, previous=prev)
    assert tokens(out) == {"second"} and tokens(prev) == {"first"} and leftovers(tmp_path) == []
    failed = StagedFolder(out)
    failed.write(outputs("failed"), ok=False)
    failed.commit(out, previous=prev)
    after = StagedFolder(out)
    after.write(outputs("after"))
    after.commit(out, previous=prev)  # the failed run it replaces is deleted, the good one it replaced kept in prev
    assert tokens(out) == {"after"} and tokens(prev) == {"second"} and leftovers(tmp_path) == []


def test_a_folder_of_the_users_that_appears_while_a_run_simulates_is_left_as_it_is(tmp_path):
    out = tmp_path / "run"
    folder = StagedFolder(out)
    folder.write(outputs("late"))
    out.mkdir()
    (out / "mine.txt").write_text("keep")
    with pytest.raises(files.OutputError, match="became a folder that is not npusim's"), folder:
        folder.commit(out, previous=tmp_path / "run.prev")
    assert sorted(p.name for p in out.iterdir()) == ["mine.txt"] and leftovers(tmp_path) == []


@pytest.mark.parametrize("change", ["added file", "bad id", "not json", "no marker, a manifest"])
def test_only_a_folder_with_a_valid_marker_listing_everything_in_it_is_npusims(tmp_path, change):
    out = tmp_path / "run"
    write_run(out, "ok")
    assert files.folder_mark(out).ok
    if change == "added file":
        (out / "notes.txt").write_text("mine")
    elif change == "bad id":
        marker = json.loads((out / MARKER).read_text())
        (out / MARKER).write_text(json.dumps({**marker, "id": "x"}))
    elif change == "not json":
        (out / MARKER).write_text("[")
    else:
        (out / MARKER).unlink()
    assert files.folder_mark(out) is None
    with pytest.raises(UsageError, match="npusim replaces only its own output folders"):
        StagedFolder(out)


def test_an_output_path_is_absolute_and_never_the_working_folder_or_above(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert files.output_path(Path("a/b")) == tmp_path / "a" / "b"
    for out in (".", "..", "/", "a/..", str(tmp_path)):
        with pytest.raises(UsageError, match="npusim replaces the whole --out folder"):
            files.output_path(Path(out))


def test_the_default_folder_name_holds_a_hash_of_the_settings_when_there_are_any():
    plain = default_folder_name(Path("w.py"), "a2")
    one, other = (default_folder_name(Path("w.py"), "a2", [setting]) for setting in ("--set shape.nodes=2", "--no-data"))
    assert plain == "w-a2" and one.startswith("w-a2-") and len(one) == len("w-a2-") + 8 and len({plain, one, other}) == 3
    assert default_folder_name(Path("w.py"), "a2", ["--set shape.nodes=2"]) == one


def test_a_read_only_place_is_refused_before_anything_is_written(tmp_path):
    mount = tmp_path / "ro"
    mount.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "ro,size=64k", "tmpfs", str(mount)], capture_output=True).returncode != 0:
        os.chmod(mount, 0o555)
        if os.access(mount, os.W_OK):
            pytest.skip("cannot make a read-only folder here")
    try:
        with pytest.raises(UsageError, match=r"cannot write the output folder .*(Read-only|Permission denied)"):
            StagedFolder(mount / "run")
    finally:
        subprocess.run(["umount", str(mount)], capture_output=True)


def test_only_the_temporaries_of_writers_that_no_longer_run_are_removed(tmp_path):
    out = tmp_path / "run"
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True).stdout.strip()
    stale, live = tmp_path / f".run{PARTIAL}{gone}-0000", tmp_path / f".run{PARTIAL}{os.getpid()}-0000"
    other = tmp_path / f".runs{PARTIAL}{gone}-0000"  # another destination's
    for folder in (stale, live, other):
        folder.mkdir()
    remove_stale_temporaries(out)
    assert not stale.exists() and live.exists() and other.exists()


def test_exchange_swaps_two_folders_or_says_it_cannot(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    (a / "x").write_text("a")
    if not exchange(a, b):
        pytest.skip("this system cannot swap two folders (the writer then moves the old one away first)")
    assert (b / "x").read_text() == "a" and not (a / "x").exists()
    with pytest.raises(OSError):
        exchange(a, tmp_path / "missing")


PLAIN = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), st.text(max_size=8))
KEYS = st.one_of(st.text(max_size=6), st.integers(-9, 9), st.floats(-1, 1), st.booleans(), st.none())
DOCUMENTS = st.recursive(PLAIN, lambda inner: st.lists(inner, max_size=4) | st.tuples(inner, inner)
                         | st.dictionaries(st.text(max_size=6), inner, max_size=4) | st.dictionaries(KEYS, PLAIN, max_size=4), max_leaves=24)


@given(DOCUMENTS)
def test_json_files_are_the_json_modules_indented_sorted_form(document):
    try:
        expected = (json.dumps(document, indent=2, sort_keys=True) + "\n").encode()
    except TypeError as error:  # keys of several types do not sort: refused the same way
        with pytest.raises(TypeError, match=str(error).split(":")[0]):
            json_bytes(document)
        return
    assert json_bytes(document) == expected


def test_a_json_file_of_unusual_values_is_written_by_the_json_module():
    class Count(int):
        def __repr__(self) -> str:
            return "many"

    cyclic: list = []
    cyclic.append([cyclic])
    assert json_bytes({"n": [Count(3), {1: [2]}]}) == (json.dumps({"n": [Count(3), {1: [2]}]}, indent=2, sort_keys=True) + "\n").encode()
    with pytest.raises(ValueError, match="Circular reference"):
        json_bytes({"a": cyclic})


# -- work on another core: a forked copy of the process ---------------------------------------------


def running(pid: int) -> bool:
    """Whether ``pid`` is a process that has not ended (a zombie has ended)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def reaped(pid: int) -> bool:
    """Whether ``pid`` is no child of this process any more (ended and waited for)."""
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        return True
    return False


def test_forked_work_returns_its_value_and_its_changes_stay_in_the_copy():
    seen = {"n": 1}

    def work():
        seen["n"] = 2
        return os.getpid(), seen["n"]

    child = Forked(work, "testing")
    pid = child.pid
    assert child.join() == (pid, 2) and pid != os.getpid() and seen == {"n": 1}
    assert reaped(pid)


@pytest.mark.parametrize("pieces", [0, 1, 2, 500])
def test_two_ends_give_each_piece_to_exactly_one_of_the_two_processes(tmp_path, pieces):
    ends = TwoEnds(pieces, tmp_path)

    def front():
        taken = []
        for piece in iter(ends.front, None):
            taken.append(piece)
            time.sleep(0.0001 * (piece % 3))  # the two interleave unevenly
        return taken

    child = Forked(front, "testing")
    back = []
    for piece in iter(ends.back, None):
        back.append(piece)
        time.sleep(0.0001 * (piece % 2))
    from_front = child.join()
    ends.close()
    assert from_front == sorted(from_front) and back == sorted(back, reverse=True)  # each from its end, in turn
    assert sorted(from_front + back) == list(range(pieces))  # each piece once
    assert not from_front or not back or max(from_front) < min(back)
    assert list(tmp_path.iterdir()) == []  # the file is unlinked


def test_an_error_of_the_forked_work_is_raised_as_it_was_with_its_traceback_as_a_note():
    def full_disk():
        raise OSError(errno.ENOSPC, "No space left on device", "trace.json")

    child = Forked(full_disk, "testing")
    pid = child.pid
    with pytest.raises(OSError) as error:
        child.join()
    assert (error.value.errno, error.value.strerror, error.value.filename) == (errno.ENOSPC, "No space left on device", "trace.json")
    assert "in full_disk" in error.value.__notes__[0] and reaped(pid)


def test_the_outcome_is_had_before_the_copy_is_reaped_and_join_reaps_it():
    child = Forked(lambda: ("done", os.getpid()), "testing")
    pid = child.pid
    assert child.outcome() == ("done", pid) == child.outcome()  # sent, kept
    assert child.pid == pid  # not reaped yet: it may still be ending
    assert child.join() == ("done", pid) and reaped(pid)
    failing = Forked(lambda: (_ for _ in ()).throw(OSError(errno.ENOSPC, "full")), "testing")
    pid = failing.pid
    with pytest.raises(OSError) as error:
        failing.outcome()
    assert error.value.errno == errno.ENOSPC and reaped(pid)  # an error: the copy has ended, reaped


def test_an_error_that_does_not_pickle_comes_back_as_its_text():
    class Odd(Exception):
        def __init__(self, a, b):
            super().__init__(f"{a} and {b}")

    with pytest.raises(OSError, match="Odd.*1 and 2"):
        Forked(lambda: (_ for _ in ()).throw(Odd(1, 2)), "testing").join()


@pytest.mark.parametrize(("signum", "raised"), [(signal.SIGKILL, "the process writing x .* was killed by SIGKILL"), (signal.SIGINT, None)])
def test_a_copy_killed_by_a_signal_is_an_oserror_or_an_interrupt(signum, raised):
    child = Forked(lambda: os.kill(os.getpid(), signum), "writing x")
    pid = child.pid
    with pytest.raises(OSError if raised else KeyboardInterrupt, match=raised):
        child.join()
    assert reaped(pid)


def test_stop_kills_a_running_copy_and_reaps_it():
    child = Forked(lambda: time.sleep(60), "testing")
    pid = child.pid
    started = time.monotonic()
    child.stop()
    assert time.monotonic() - started < 10 and not running(pid) and reaped(pid)
    child.stop()  # twice: nothing more to do


def test_an_interrupt_while_waiting_stops_the_copy():
    child = Forked(lambda: time.sleep(60), "testing")
    pid = child.pid
    previous = signal.signal(signal.SIGALRM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))
    signal.setitimer(signal.ITIMER_REAL, 0.2)
    try:
        with pytest.raises(KeyboardInterrupt):
            child.join()
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    assert not running(pid) and reaped(pid)


# A parent that forks a copy (which writes its pid, then sleeps) and is killed with SIGKILL: no clean-up runs in it.
ORPHANED = textwrap.dedent("""
    import os, signal, sys, time
    from pathlib import Path
    from npusim.files import Forked

    marker = Path(sys.argv[1])
    Forked(lambda: (marker.write_text(str(os.getpid())), time.sleep(60)), "testing")
    while not marker.exists() or not marker.read_text():
        time.sleep(0.01)
    os.kill(os.getpid(), signal.SIGKILL)
""")


def test_a_copy_dies_with_its_parent(tmp_path):
    if not sys.platform.startswith("linux"):
        pytest.skip("PR_SET_PDEATHSIG is Linux's")
    marker = tmp_path / "child"
    parent = subprocess.run([sys.executable, "-c", ORPHANED, str(marker)], env=dict(os.environ, PYTHONPATH=str(ROOT)), timeout=60)
    assert parent.returncode == -signal.SIGKILL
    pid = int(marker.read_text())
    deadline = time.monotonic() + 10
    while running(pid) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not running(pid)


@pytest.fixture
def forkable(monkeypatch):
    """This process as if it could fork: needs fork and two CPUs, and pretends there is no other
    thread (earlier tests of the suite leave an idle one: dask's offload thread) and memory enough."""
    if not hasattr(os, "fork") or len(os.sched_getaffinity(0)) < 2:
        pytest.skip("needs fork and two CPUs")
    monkeypatch.setenv(FORK, "always")
    monkeypatch.setattr(threading, "active_count", lambda: 1)
    monkeypatch.setattr(files, "memory_for_a_copy", lambda: True)


def test_forking_is_refused_when_turned_off_another_thread_running_or_too_little_memory(forkable, monkeypatch):
    assert can_fork()
    monkeypatch.setenv(FORK, "never")
    assert not can_fork()
    monkeypatch.setenv(FORK, "auto")
    cpus = len(os.sched_getaffinity(0))
    monkeypatch.setattr(files, "busy_cores", lambda: float(cpus))  # every core busy, this process's own included
    assert not can_fork()
    monkeypatch.setattr(files, "busy_cores", lambda: cpus - 1.0)  # a core idle
    assert can_fork()
    monkeypatch.setenv(FORK, "sometimes")
    with pytest.raises(UsageError, match="NPUSIM_FORK='sometimes': choose one of auto, always, never"):
        can_fork()
    monkeypatch.setenv(FORK, "always")
    monkeypatch.setattr(threading, "active_count", lambda: 2)
    assert not can_fork()
    monkeypatch.setattr(threading, "active_count", lambda: 1)
    monkeypatch.setattr(files, "memory_for_a_copy", lambda: False)
    assert not can_fork()


def test_busy_cores_are_the_tasks_runnable_now_else_the_last_minutes_load(tmp_path, monkeypatch):
    """/proc/loadavg's instant count of runnable tasks (its fourth field), not the one-minute
    average that still counts a sweep ended seconds ago; where it cannot be read (not Linux, an
    unexpected layout), the load average."""
    loadavg = tmp_path / "loadavg"
    loadavg.write_text("1.98 1.50 0.70 1/345 12345\n")  # a sweep just ended: the average still says two busy cores
    assert busy_cores(loadavg) == 1.0
    loadavg.write_text("0.10 0.10 0.10 3/345 12345\n")
    assert busy_cores(loadavg) == 3.0
    monkeypatch.setattr(os, "getloadavg", lambda: (1.5, 1.0, 1.0))
    loadavg.write_text("0.10 0.10\n")
    assert busy_cores(loadavg) == 1.5
    assert busy_cores(tmp_path / "absent") == 1.5


def test_a_second_thread_stops_forking():
    before = threading.active_count()
    stop = threading.Event()
    thread = threading.Thread(target=stop.wait)
    thread.start()
    try:
        assert threading.active_count() == before + 1 and not can_fork()
    finally:
        stop.set()
        thread.join()


def test_a_copy_needs_as_much_memory_available_as_this_process_holds(monkeypatch):
    if not Path("/proc/meminfo").exists():
        pytest.skip("reads Linux's /proc/meminfo")
    meminfo = Path("/proc/meminfo").read_text()
    resident_kib = int(Path("/proc/self/statm").read_text().split()[1]) * os.sysconf("SC_PAGE_SIZE") // 1024
    real = Path.read_text

    def available(kib):
        shown = "".join(f"MemAvailable:   {kib} kB\n" if line.startswith("MemAvailable:") else line + "\n" for line in meminfo.splitlines())
        monkeypatch.setattr(Path, "read_text", lambda self, *a, **k: shown if str(self) == "/proc/meminfo" else real(self, *a, **k))

    available(resident_kib * 2)
    assert files.memory_for_a_copy()
    available(resident_kib // 2)
    assert not files.memory_for_a_copy()


class HalfInAChild:
    """A file written on two cores, as the trace is: a copy writes its first half, ``finish`` the second."""

    def __init__(self, path: Path, first) -> None:
        self.path = path
        self.child: Forked | None = Forked(lambda: first(path), f"writing {path.name}")

    def finish(self) -> None:
        assert self.child is not None
        try:
            self.child.join()
            self.child = None
            with open(self.path, "a") as out:
                out.write('"}')
        except BaseException:
            self.abandon()
            raise

    def abandon(self) -> None:
        if self.child is not None:
            self.child.stop()
            self.child = None
        self.path.unlink(missing_ok=True)


def split(token: str, first=None, started=None) -> list[Output]:
    """``outputs`` with trace.json written on two cores (its first half by ``first``; each
    HalfInAChild made appended to ``started``)."""
    first = first or (lambda path: path.write_text(f'{{"run": "{token}", "status": "ok", "simulated_time_us": 1, "x": "'))

    def start(path):
        half = HalfInAChild(path, first)
        if started is not None:
            started.append(half)
        return half

    plain = outputs(token)
    return [Output(NAMES[0], plain[0].write, start=start), *plain[1:]]


def test_a_file_written_on_two_cores_is_whole_and_one_process_writes_it_alone_when_told_to(tmp_path, monkeypatch, forkable):
    out = tmp_path / "run"
    with StagedFolder(out) as folder:
        folder.write(split("two"))
        folder.commit(out)
    assert tokens(out) == {"two"} and json.loads((out / NAMES[0]).read_text())["x"] == ""
    monkeypatch.setenv(FORK, "never")
    with StagedFolder(out) as folder:
        folder.write(split("one", first=lambda path: pytest.fail("started with NPUSIM_FORK=never")))
        folder.commit(out)
    assert tokens(out) == {"one"} and leftovers(tmp_path) == []


def test_a_file_is_written_by_this_process_alone_when_no_copy_can_be_forked(tmp_path, monkeypatch, forkable):

    def no_process():
        raise OSError(errno.EAGAIN, "Resource temporarily unavailable")

    monkeypatch.setattr(os, "fork", no_process)
    out = tmp_path / "run"
    opened = len(os.listdir("/proc/self/fd"))
    with StagedFolder(out) as folder:
        folder.write(split("alone", first=lambda path: pytest.fail("forked")))
        folder.commit(out)
    assert tokens(out) == {"alone"} and len(os.listdir("/proc/self/fd")) == opened  # the pipe closed


def full_disk(path):
    path.write_text("half")
    raise OSError(errno.ENOSPC, "No space left on device")


def sleeps(path):
    path.write_text("half")
    time.sleep(60)


@pytest.mark.parametrize("where", ["copy", "here"])
def test_a_failure_of_the_copy_or_of_this_process_leaves_the_destination_as_it_was_and_no_process(tmp_path, where, forkable):
    out = tmp_path / "run"
    write_run(out, "good")
    started: list[HalfInAChild] = []
    broken = split("bad", first=full_disk if where == "copy" else sleeps, started=started)
    if where == "here":  # the copy still writes when this process fails
        broken[1] = Output(broken[1].name, full_disk)
    with pytest.raises(OSError, match="No space left"), StagedFolder(out) as folder:
        folder.write(broken)
        folder.commit(out, previous=tmp_path / "run.prev")
    assert tokens(out) == {"good"} and not (tmp_path / "run.prev").exists() and leftovers(tmp_path) == []
    (half,) = started
    assert half.child is None  # joined or stopped: reaped


def test_meanwhile_runs_once_the_copy_writes_and_before_this_process_writes_and_its_error_stops_both(tmp_path, forkable):
    out = tmp_path / "run"
    started: list[HalfInAChild] = []
    seen = []
    with StagedFolder(out) as folder:
        folder.write(split("two", started=started), meanwhile=lambda: seen.append((len(started), sorted(set(os.listdir(folder.path)) - {NAMES[0]}))))
        folder.commit(out)
    assert tokens(out) == {"two"} and seen == [(1, [])]  # the copy started (it may be writing its file); none of this process's files yet
    write_run(out, "good")
    started.clear()
    with pytest.raises(KeyboardInterrupt), StagedFolder(out) as folder:
        folder.write(split("bad", first=sleeps, started=started), meanwhile=lambda: (_ for _ in ()).throw(KeyboardInterrupt))
    assert tokens(out) == {"good"} and leftovers(tmp_path) == []
    (half,) = started
    assert half.child is None  # stopped and reaped


def test_long_tables_are_written_in_chunks_as_the_json_module_writes_them(monkeypatch):
    """Tables of rows go to the C encoder ROWS_AT_ONCE rows at a time, columns one call each: the
    bytes are still the json module's indented, sorted form."""
    document = {"ops": [{"name": "shmem_put", "op": i, "start_us": i / 3} for i in range(50)], "run": "chunks", "text": "é\n",
                "tiles": {"op": list(range(30)), "max_us": [i * 0.1 for i in range(30)], "name": ["a\n"] * 30},
                "nested": [{"rows": [{"x": i, "y": None} for i in range(9)]}]}
    monkeypatch.setattr(files, "ROWS_AT_ONCE", 4)  # 13 chunks of ops, 3 of the nested rows
    assert json_bytes(document) == json.dumps(document, indent=2, sort_keys=True).encode() + b"\n"


def test_a_json_file_that_cannot_be_written_fails_the_folder_and_leaves_nothing(tmp_path):
    out = tmp_path / "run"
    write_run(out, "good")
    broken = [*outputs("bad")[:1], Output.json("summary.json", {"run": "bad", "rows": [object()]}), *outputs("bad")[2:]]
    with pytest.raises(TypeError, match="not JSON serializable"), StagedFolder(out) as folder:
        folder.write(broken)
        folder.commit(out)
    assert tokens(out) == {"good"} and leftovers(tmp_path) == []
