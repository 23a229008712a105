"""The command group: every command listed and found, each imported only when it is looked up (not to list it)."""

import gc
import json
import os
import subprocess
import sys

import click
import pytest

from npusim.cli import BLAS_THREAD_VARIABLES, COMMANDS, LazyCommands, cli, lasting_objects, one_blas_thread
from npusim.cli.run import run_collector
from tests.cli.test_run import ROOT, npusim

# Imports the group, looks one command up; prints which command modules were imported.
PROBE = """
import json, sys
from npusim.cli import COMMANDS, cli
before = sorted(m for m in sys.modules if m.startswith("npusim.cli."))
cli.commands["run"]
after = sorted(m for m in sys.modules if m.startswith("npusim.cli."))
print(json.dumps([before, after]))
"""


def test_help_lists_every_command_with_its_own_short_help(tmp_path):
    shown = npusim("--help", cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr
    listed = shown.stdout.split("Commands:\n")[1].splitlines()
    assert [line.split()[0] for line in listed] == sorted(COMMANDS)
    for line in listed:
        name = line.split()[0]
        assert cli.commands[name].get_short_help_str(limit=1000).startswith(line.split(None, 1)[1].removesuffix("..."))


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_each_commands_summary_is_shortened_as_its_own_help_is(name):
    stand_in = LazyCommands(COMMANDS).listed(name)
    command = cli.commands[name]
    assert stand_in is not command and cli.commands.listed(name) is command
    assert [stand_in.get_short_help_str(limit) for limit in range(200)] == [command.get_short_help_str(limit) for limit in range(200)]


def test_listing_the_commands_imports_none_of_them():
    listing = "from click.testing import CliRunner; from npusim.cli import cli; import sys; CliRunner().invoke(cli, ['--help']); "
    listing += "print(sorted(m for m in sys.modules if m.startswith('npusim.cli.')))"
    probe = subprocess.run([sys.executable, "-c", listing], cwd=ROOT, capture_output=True, text=True, timeout=120, check=True)
    assert probe.stdout.strip() == "[]"


def test_an_unknown_command_is_told_with_the_nearest_one(tmp_path):
    wrong = npusim("rn", cwd=tmp_path)
    assert wrong.returncode == 2 and "Error: No such command 'rn'. Did you mean 'run'?" in wrong.stderr


def test_a_command_module_is_imported_only_when_it_is_looked_up():
    probe = subprocess.run([sys.executable, "-c", PROBE], cwd=ROOT, capture_output=True, text=True, timeout=120, check=True)
    before, after = json.loads(probe.stdout)
    assert before == [] and "npusim.cli.run" in after and "npusim.cli.sweep_cmd" not in after


def test_lazy_commands_behave_as_a_mapping_of_commands():
    commands = LazyCommands({"run": COMMANDS["run"]})
    extra = click.Command("extra")
    commands["extra"] = extra
    assert list(commands) == ["run", "extra"] and len(commands) == 2
    assert commands["run"].name == "run" and commands["extra"] is extra
    del commands["extra"]
    assert list(commands) == ["run"]
    with pytest.raises(KeyError):
        commands["missing"]


def test_the_run_collector_keeps_the_session_threshold_and_restores_the_callers():
    thresholds = gc.get_threshold()
    try:
        gc.set_threshold(700, 10, 10)
        with run_collector():
            assert gc.get_threshold()[0] >= 100_000
            gc.freeze()
            assert gc.get_freeze_count() > 0
        assert gc.get_threshold() == (700, 10, 10) and gc.get_freeze_count() == 0
    finally:
        gc.set_threshold(*thresholds)


class Made:
    """An object the garbage collector tracks."""


def test_lasting_objects_are_made_without_collections_and_kept_in_the_oldest_generation():
    collections = []
    gc.callbacks.append(lambda phase, info: collections.append(info["generation"]) if phase == "start" else None)
    try:
        with lasting_objects():
            assert not gc.isenabled()
            made = [Made() for _ in range(3 * gc.get_threshold()[0])]  # enough to start young collections
        assert gc.isenabled() and collections == [] and gc.get_freeze_count() == 0
        oldest = {id(item) for item in gc.get_objects(generation=2)}
        assert all(id(item) in oldest for item in made)
    finally:
        gc.callbacks.pop()


def test_lasting_objects_leave_a_paused_collector_paused():
    gc.disable()
    try:
        with lasting_objects():
            pass
        assert not gc.isenabled()
    finally:
        gc.enable()


# Ends with exit_now(SystemExit(CODE)) after printing without a newline and registering an exit function.
ENDING = """
import atexit, sys, threading
from npusim.cli import exit_now
atexit.register(lambda: print(" and the exit functions ran"))
print("printed", end="")
if sys.argv[2] == "thread":
    threading.Thread(target=lambda: (__import__("time").sleep(0.2), print(" and the thread ended", end="")), daemon=False).start()
exit_now(SystemExit(eval(sys.argv[1])))
"""


@pytest.mark.parametrize(("code", "status"), [("None", 0), ("0", 0), ("3", 3)])
def test_exit_now_ends_with_the_status_after_the_exit_functions_and_flushed_output(code, status):
    ended = subprocess.run([sys.executable, "-c", ENDING, code, "alone"], capture_output=True, text=True, timeout=120)
    assert ended.returncode == status and ended.stdout == "printed and the exit functions ran\n"


def test_exit_now_leaves_a_text_status_and_a_running_thread_to_the_ordinary_exit():
    text = subprocess.run([sys.executable, "-c", ENDING, "'it failed'", "alone"], capture_output=True, text=True, timeout=120)
    assert text.returncode == 1 and text.stderr == "it failed\n" and text.stdout == "printed and the exit functions ran\n"
    threaded = subprocess.run([sys.executable, "-c", ENDING, "4", "thread"], capture_output=True, text=True, timeout=120)
    assert threaded.returncode == 4 and threaded.stdout == "printed and the thread ended and the exit functions ran\n"


# A workload that writes the BLAS thread variables its process runs with, as JSON, to the file its first argument names.
SHOWS_BLAS_THREADS = """
import json, os, sys
from npusim.cli import BLAS_THREAD_VARIABLES
json.dump({name: os.environ.get(name) for name in BLAS_THREAD_VARIABLES}, open(os.environ["SHOWN_TO"], "w"))
"""


@pytest.mark.parametrize("chosen, expected", [
    ({}, {"OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "OMP_NUM_THREADS": None, "GOTO_NUM_THREADS": None}),
    ({"OMP_NUM_THREADS": "2"}, {"OPENBLAS_NUM_THREADS": None, "MKL_NUM_THREADS": None, "OMP_NUM_THREADS": "2", "GOTO_NUM_THREADS": None}),
    ({"OPENBLAS_NUM_THREADS": "4"}, {"OPENBLAS_NUM_THREADS": "4", "MKL_NUM_THREADS": None, "OMP_NUM_THREADS": None, "GOTO_NUM_THREADS": None}),
])
def test_a_run_uses_one_blas_thread_unless_the_user_chose_a_count(tmp_path, chosen, expected):
    workload = tmp_path / "shows.py"
    workload.write_text(SHOWS_BLAS_THREADS)
    env = {name: value for name, value in os.environ.items() if name not in BLAS_THREAD_VARIABLES}
    env.update(chosen, PYTHONPATH=str(ROOT), SHOWN_TO=str(tmp_path / "shown.json"))
    run = subprocess.run([sys.executable, "-m", "npusim", "run", "-c", "a2", str(workload), "--trace", "none", "--out", "out"], cwd=tmp_path,
                         env=env, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    assert json.loads((tmp_path / "shown.json").read_text()) == expected


def test_the_blas_threads_are_set_before_numpy_is_imported():
    """The libraries read the variables when numpy loads them: the command line must not import it first."""
    probe = subprocess.run([sys.executable, "-c", "import sys; import npusim.cli; print('numpy' in sys.modules)"], cwd=ROOT,
                           capture_output=True, text=True, timeout=120, check=True)
    assert probe.stdout.strip() == "False"


def test_one_blas_thread_leaves_a_chosen_count_alone():
    for name in BLAS_THREAD_VARIABLES:
        environ = {name: "3"}
        one_blas_thread(environ)
        assert environ == {name: "3"}
    environ = {"PATH": "/bin"}
    one_blas_thread(environ)
    assert environ == {"PATH": "/bin", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
