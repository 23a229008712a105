"""``npusim run`` end to end, as a user runs it: outputs, exit codes, errors, determinism."""

import csv
import hashlib
import io
import json
import os
import re
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from npusim.config import load_config
from npusim.files import MARKER
from npusim.trace.summary import records

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "examples" / "vector_add.py"


def npusim(*args, cwd):
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-m", "npusim", *map(str, args)], cwd=cwd, env=env, capture_output=True, text=True, timeout=300)


def test_demo_runs_from_any_folder_with_a_builtin_config(tmp_path):
    run = npusim("run", "--config", "a3", DEMO, cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    assert "output matches numpy: yes" in run.stdout and "simulated" in run.stdout
    out = tmp_path / "traces" / "vector_add-a3"
    summary = json.loads((out / "summary.json").read_text())
    manifest = json.loads((out / "manifest.json").read_text())
    assert summary["status"] == "ok" and summary["simulated_time_us"] > 0
    assert {row["pipe"] for row in records(summary["pipes"])} >= {"MTE2", "VECTOR", "MTE3"}
    assert any(row["resource"] == "die0 HBM" for row in records(summary["bandwidth"]))
    assert manifest["config"] == "a3" and manifest["seed"] == 0 and len(manifest["config_sha256"]) == 64
    assert manifest["npusim_version"] and manifest["command"][:2] == ["npusim", "run"]
    json.loads((out / "trace.json").read_text())


def test_same_run_twice_gives_identical_trace(tmp_path):
    for name in ("a", "b"):
        assert npusim("run", "-c", "a2", DEMO, "--no-data", "--out", tmp_path / name, cwd=tmp_path).returncode == 0
    assert (tmp_path / "a" / "trace.json").read_bytes() == (tmp_path / "b" / "trace.json").read_bytes()


def test_overrides_change_the_result_and_are_recorded(tmp_path):
    base = npusim("run", "-c", "a2", DEMO, "--no-data", "--out", tmp_path / "base", cwd=tmp_path)
    fast = npusim("run", "-c", "a2", DEMO, "--no-data", "--set", "die.hbm.bandwidth=3.2 TB/s", "--out", tmp_path / "fast", cwd=tmp_path)
    assert base.returncode == fast.returncode == 0
    t_base = json.loads((tmp_path / "base" / "summary.json").read_text())["simulated_time_us"]
    t_fast = json.loads((tmp_path / "fast" / "summary.json").read_text())["simulated_time_us"]
    assert t_fast < t_base
    manifest = json.loads((tmp_path / "fast" / "manifest.json").read_text())
    assert manifest["overrides"] == ["die.hbm.bandwidth=3.2 TB/s"]
    config = (tmp_path / "fast" / "config.yaml").read_text()  # the config as simulated, the override applied
    assert "    bandwidth: 3.2 TB/s  # --set die.hbm.bandwidth=3.2 TB/s  [your value]\n" in config
    assert load_config(tmp_path / "fast" / "config.yaml").sha256 == manifest["config_sha256"]  # it runs again as it was


def test_the_run_folder_holds_the_profiler_tables(tmp_path):
    run = npusim("run", "-c", "a2", DEMO, "--no-data", "--out", tmp_path / "out", cwd=tmp_path)
    assert run.returncode == 0 and "config.yaml, op_summary.csv, pipe_utilization.csv in" in run.stdout
    ops = list(csv.DictReader(io.StringIO((tmp_path / "out" / "op_summary.csv").read_text())))
    assert [(row["Op Name"], row["Task Type"], row["Block Dim"]) for row in ops] == [("vector_add#0", "AI_VECTOR_CORE", "48")]
    cores = list(csv.DictReader(io.StringIO((tmp_path / "out" / "pipe_utilization.csv").read_text())))
    assert [row["core"] for row in cores] == [f"aiv{i}" for i in range(48)]


def test_config_error_exits_2_with_a_located_message(tmp_path):
    run = npusim("run", "-c", "a2", DEMO, "--set", "die.hbm.bandwith=1 TB/s", cwd=tmp_path)
    assert run.returncode == 2
    assert "die.hbm.bandwith" in run.stderr and "bandwidth" in run.stderr  # did-you-mean
    assert "Traceback" not in run.stderr and len(run.stderr.strip().splitlines()) <= 3
    assert not (tmp_path / "traces").exists()


def test_unknown_config_and_missing_workload_exit_2(tmp_path):
    run = npusim("run", "-c", "a9", DEMO, cwd=tmp_path)
    assert run.returncode == 2 and "a2" in run.stderr and "a3" in run.stderr
    run = npusim("run", "-c", "a2", tmp_path / "nope.py", cwd=tmp_path)
    assert run.returncode == 2 and "nope.py" in run.stderr and "does not exist" in run.stderr


def test_failing_workload_exits_1_and_keeps_the_trace_up_to_the_failure(tmp_path):
    workload = tmp_path / "fails.py"
    workload.write_text(
        "import numpy as np, npusim\n"
        "from npusim import isa\n"
        "x = npusim.tensor(np.ones(1024, np.float16))\n"
        "k = isa.Kernel('before', die=0)\n"
        "p = k.aiv(0)\n"
        "ub = p.alloc(1024, np.float16)\n"
        "p.copy(ub, isa.gm(x))\n"
        "k.launch()\n"
        "npusim.synchronize()\n"
        "raise RuntimeError('boom in the workload')\n"
    )
    run = npusim("run", "-c", "a2", workload, "--out", tmp_path / "out", cwd=tmp_path)
    assert run.returncode == 1
    assert "boom in the workload" in run.stderr and "Traceback" not in run.stderr
    assert "        at fails.py:10: raise RuntimeError('boom in the workload')\n" in run.stderr  # the workload's file and line
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["status"] == "failed" and "boom" in summary["error"] and summary["events"] == 1
    trace = json.loads((tmp_path / "out" / "trace.json").read_text())
    assert trace["otherData"]["status"] == "failed"
    debug = npusim("run", "-c", "a2", workload, "--out", tmp_path / "out", "--debug", cwd=tmp_path)
    assert debug.returncode == 1 and "Traceback" in debug.stderr


def test_an_error_raised_inside_npusim_names_the_workload_line_that_called_it(tmp_path):
    helper = tmp_path / "helper.py"
    helper.write_text("import numpy as np\nfrom npusim import isa\n\ndef build():\n    k = isa.Kernel('k', die=0)\n    k.aiv(0).alloc(1 << 30, np.float16)\n")
    workload = tmp_path / "uses_helper.py"
    workload.write_text("import helper\n\ndef main():\n    helper.build()\n")
    run = npusim("run", "-c", "a2", workload, "--out", tmp_path / "out", cwd=tmp_path)
    assert run.returncode == 1 and "UB holds 192.00 KiB" in run.stderr and "Traceback" not in run.stderr
    assert "        at helper.py:6 in build: k.aiv(0).alloc(1 << 30, np.float16)\n" in run.stderr  # the innermost line of the user's code


def test_main_function_is_called(tmp_path):
    workload = tmp_path / "with_main.py"
    workload.write_text("def main():\n    print('main was called')\n")
    run = npusim("run", "-c", "a2", workload, "--out", tmp_path / "o", cwd=tmp_path)
    assert run.returncode == 0 and run.stdout.count("main was called") == 1


def test_config_show_and_validate(tmp_path):
    show = npusim("config", "show", "a3", cwd=tmp_path)
    assert show.returncode == 0 and "1.6 TB/s" in show.stdout
    bad = tmp_path / "bad.yaml"
    bad.write_text("extends: a2.yaml\ndie:\n  hbm:\n    bandwidth: 0 TB/s\n")
    run = npusim("config", "validate", bad, cwd=tmp_path)
    assert run.returncode == 2 and "bad.yaml:4" in run.stderr and "die.hbm.bandwidth" in run.stderr


# -- hostile and extreme input: one-line errors, exit 2, nothing written ---------------------------


def assert_config_error(run, tmp_path, starts: str) -> None:
    assert run.returncode == 2, run.stderr
    assert run.stderr.startswith(f"npusim: error: {starts}"), run.stderr
    assert len(run.stderr.strip().splitlines()) == 1 and "Traceback" not in run.stderr
    assert not (tmp_path / "traces").exists()


@pytest.mark.parametrize(
    ("override", "problem"),
    [("die.aicpu.poll_interval=0.1 ps", "'0.1 ps' is 0.1 ps, which rounds to 0"), ("die.hbm.bandwidth=1e400 TB/s", "'1e400 TB/s' is more than 2**53"),
     ("die.cores.aiv.buffers.UB.size=0.1 B", "'0.1 B' is 0.1 bytes, which rounds to 0"), ("die.hbm.size=1e308 TB", "'1e308 TB' is more than 2**53"),
     ("die.clock=1e-300 Hz", "'1e-300 Hz' is more than 2**53 ps per cycle"), ("shape.nodes=true", "must be a valid integer, got True")],
)
def test_an_extreme_config_value_exits_2_naming_the_key(tmp_path, override, problem):
    run = npusim("run", "-c", "a3", DEMO, "--set", override, cwd=tmp_path)
    assert_config_error(run, tmp_path, f"--set {override}: {override.partition('=')[0]}: {problem}")


def test_an_extreme_value_in_a_config_file_is_located_at_its_line(tmp_path):
    config = tmp_path / "slow_poll.yaml"
    config.write_text("extends: a3\ndie:\n  aicpu:\n    poll_interval: 0.1 ps\n")
    run = npusim("run", "-c", config, DEMO, cwd=tmp_path)
    assert_config_error(run, tmp_path, f"{config}:4: die.aicpu.poll_interval: '0.1 ps' is 0.1 ps, which rounds to 0 in the engine's whole ps")


def test_alias_bombs_and_recursive_values_exit_2(tmp_path):
    bomb = "[&a [x, x, x, x, x, x, x, x, x]" + "".join(f", &{c} [{', '.join([f'*{p}'] * 9)}]" for p, c in zip("abcdefgh", "bcdefghi")) + "]"
    config = tmp_path / "bomb.yaml"
    config.write_text(f"extends: a2\nbomb: {bomb}\n")
    assert_config_error(npusim("run", "-c", config, DEMO, cwd=tmp_path), tmp_path, f"{config}:2: bomb.7: aliases expand this value to 48427561 values")
    assert_config_error(npusim("run", "-c", "a2", DEMO, "--set", f"description={bomb}", cwd=tmp_path), tmp_path,
                        f"--set description={bomb}: description.7: aliases expand this value to 48427561 values")
    assert_config_error(npusim("run", "-c", "a2", DEMO, "--set", "die.hbm=&a [*a]", cwd=tmp_path), tmp_path,
                        "--set die.hbm=&a [*a]: die.hbm.0: a value that contains itself (a recursive alias)")


def test_a_config_name_that_would_leave_the_traces_folder_exits_2(tmp_path):
    config = tmp_path / "escape.yaml"
    config.write_text('extends: a2\nname: "/../../../../tmp/escape"\n')
    run = npusim("run", "-c", config, DEMO, "--no-data", cwd=tmp_path)
    assert_config_error(run, tmp_path, f"{config}:2: name: '/../../../../tmp/escape' is not a safe name: the name becomes part of output folders")


def test_the_default_output_folder_keeps_odd_workload_names_inside_traces(tmp_path):
    workload = tmp_path / ".odd name;$(x).py"
    workload.write_text(DEMO.read_text())
    run = npusim("run", "-c", "a2", workload, "--no-data", cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    (folder,) = (tmp_path / "traces").iterdir()
    assert re.fullmatch(r"_odd_name___x_-a2-[0-9a-f]{8}", folder.name)  # -<hash> of --no-data


def test_a_negative_or_too_large_seed_is_a_usage_error(tmp_path):
    for seed in ("-1", str(2**32)):
        run = npusim("run", "-c", "a2", DEMO, "--seed", seed, cwd=tmp_path)
        assert run.returncode == 2 and f"Invalid value for '--seed': {seed} is not in the range 0<=x<=4294967295" in run.stderr
        assert "Traceback" not in run.stderr and not (tmp_path / "traces").exists()


def test_an_all_gather_across_two_a2_servers_fails_naming_the_dies_and_rdma(tmp_path):
    allgather = ROOT / "examples" / "shmem_allgather.py"
    one_server = npusim("run", "-c", "a2", "--set", "shape.nodes=2", allgather, "--param", "n_pes=8", "--no-data", cwd=tmp_path)
    assert one_server.returncode == 0, one_server.stderr  # the PEs of the first server: HCCS only
    across = npusim("run", "-c", "a2", "--set", "shape.nodes=2", allgather, "--param", "n_pes=16", "--no-data", cwd=tmp_path)
    assert across.returncode == 1
    assert "are in different nodes" in across.stderr and "no pod fabric joins the nodes (fabrics.pod)" in across.stderr
    assert "move the data by RDMA, npusim.transfer(..., protocol='rdma')" in across.stderr


def test_trace_none_writes_no_trace_and_the_same_summary(tmp_path):
    full = npusim("run", "-c", "a2", DEMO, "--no-data", "--out", tmp_path / "full", cwd=tmp_path)
    bare = npusim("run", "-c", "a2", DEMO, "--no-data", "--trace", "none", "--out", tmp_path / "bare", cwd=tmp_path)
    assert full.returncode == bare.returncode == 0, bare.stderr
    assert not (tmp_path / "bare" / "trace.json").exists() and "wrote summary.json, manifest.json, config.yaml, op_summary.csv, pipe_utilization.csv in" in bare.stdout
    summaries = [json.loads((tmp_path / name / "summary.json").read_text()) for name in ("full", "bare")]
    for summary in summaries:
        summary.pop("wall_time_s")
    assert summaries[0] == summaries[1]  # the summary and the critical path come from the whole run either way
    assert json.loads((tmp_path / "bare" / "manifest.json").read_text())["trace"]["level"] == "none"


def test_a_long_run_shows_no_progress_line_on_a_non_terminal(tmp_path):
    run = npusim("run", "-c", "a2", DEMO, "--no-data", "--out", tmp_path / "run", cwd=tmp_path)
    assert run.returncode == 0 and "events, wall" not in run.stderr  # the line goes to stderr, on a terminal only


def test_a_network_quantum_is_recorded_and_a_bad_one_refused(tmp_path):
    run = npusim("run", "-c", "a2", DEMO, "--no-data", "--network-quantum", "10ns", "--out", tmp_path / "q", cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    assert json.loads((tmp_path / "q" / "manifest.json").read_text())["network_quantum"] == "10ns"
    assert json.loads((tmp_path / "q" / "trace.json").read_text())["otherData"]["network_quantum"] == "10ns"
    bad = npusim("run", "-c", "a2", DEMO, "--network-quantum", "10", cwd=tmp_path)
    assert bad.returncode == 2 and "network quantum '10': missing unit" in bad.stderr


def test_bad_trace_options_exit_2_before_simulating(tmp_path):
    for option, message in ((("--trace-dies", "0-8"), "outside the dies of the config, 0-7"),
                            (("--trace-window", "5us"), "write START:END"), (("--trace", "none", "--plot"), "drop --plot")):
        run = npusim("run", "-c", "a2", DEMO, *option, "--out", tmp_path, cwd=tmp_path)
        assert run.returncode == 2 and message in run.stderr and not (tmp_path / "summary.json").exists()


# -- the run folder: checked before simulating, replaced whole, a good run never lost ---------------


def folder_bytes(folder: Path) -> dict[str, bytes]:
    return {path.name: path.read_bytes() for path in sorted(folder.iterdir())}


def temporaries(parent: Path) -> list[str]:
    return [path.name for path in parent.iterdir() if ".partial-" in path.name]


FAILS = "import npusim\nx = npusim.param('x', 1)\nraise RuntimeError('the workload broke')\n"


def test_a_failed_run_goes_beside_a_good_one_unless_forced_and_a_good_one_is_kept_as_prev(tmp_path):
    out = tmp_path / "run"
    assert npusim("run", "-c", "a2", DEMO, "--no-data", "--trace", "none", "--out", out, cwd=tmp_path).returncode == 0
    good = folder_bytes(out)
    fails = tmp_path / "fails.py"
    fails.write_text(FAILS)
    failed = npusim("run", "-c", "a2", fails, "--out", out, cwd=tmp_path)
    assert failed.returncode == 1 and "the workload broke" in failed.stderr
    assert f"in {out}.failed" in failed.stdout and "keeps the earlier good run" in failed.stdout
    assert folder_bytes(out) == good and json.loads((tmp_path / "run.failed" / "manifest.json").read_text())["status"] == "failed"
    forced = npusim("run", "-c", "a2", fails, "--out", out, "--force", cwd=tmp_path)
    assert forced.returncode == 1 and json.loads((out / "manifest.json").read_text())["status"] == "failed"
    assert folder_bytes(tmp_path / "run.prev") == good  # the good run moved aside, not lost
    again = npusim("run", "-c", "a2", DEMO, "--no-data", "--trace", "none", "--out", out, cwd=tmp_path)
    assert again.returncode == 0 and folder_bytes(tmp_path / "run.prev") == good  # the failed run it replaced is not kept
    assert temporaries(tmp_path) == []


def test_report_of_a_failed_run_prints_the_stored_error_and_exits_1(tmp_path):
    fails = tmp_path / "fails.py"
    fails.write_text(FAILS)
    assert npusim("run", "-c", "a2", fails, "--out", tmp_path / "run", cwd=tmp_path).returncode == 1
    report = npusim("report", tmp_path / "run", cwd=tmp_path)
    assert report.returncode == 1 and "failed" in report.stdout
    assert report.stderr.strip() == "npusim: this run failed: RuntimeError: the workload broke"


@pytest.mark.parametrize("where", ["file/sub", "notes"])
def test_an_output_folder_that_cannot_be_written_exits_2_before_simulating(tmp_path, where):
    (tmp_path / "file").write_text("a file")
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "mine.txt").write_text("not a run")
    run = npusim("run", "-c", "a2", DEMO, "--out", tmp_path / where, cwd=tmp_path)
    assert run.returncode == 2 and "Traceback" not in run.stderr and len(run.stderr.strip().splitlines()) == 1
    assert ("'file' is a file, not a folder" if where == "file/sub" else "is not an npusim output folder") in run.stderr
    assert "simulated" not in run.stdout and (tmp_path / "notes" / "mine.txt").read_text() == "not a run"
    assert temporaries(tmp_path) == []


def test_a_full_disk_exits_1_leaving_the_earlier_run_and_no_temporary(tmp_path):
    disk = tmp_path / "disk"
    disk.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(disk)], capture_output=True).returncode != 0:
        pytest.skip("cannot mount a tmpfs here (needs root); tests/test_files.py injects the OSError instead")
    try:
        out = disk / "run"
        assert npusim("run", "-c", "a2", DEMO, "--no-data", "--trace", "none", "--out", out, cwd=tmp_path).returncode == 0
        earlier = folder_bytes(out)
        full = npusim("run", "-c", "a2", DEMO, "--no-data", "--out", out, cwd=tmp_path)  # an 800 KB trace on a 256 KB disk
        assert full.returncode == 1 and "No space left on device" in full.stderr and "Traceback" not in full.stderr
        assert folder_bytes(out) == earlier and sorted(p.name for p in disk.iterdir()) == ["run"]
    finally:
        subprocess.run(["umount", str(disk)], check=True)


@pytest.mark.parametrize(("param", "message"), [("tile=abc", "parameter tile='abc': expected a int like its default 16384"),
                                                ("tiles=8", "declares no parameter 'tiles' (did you mean 'tile'?)")])
def test_a_bad_parameter_exits_2_before_simulating_leaving_the_run_folder_untouched(tmp_path, param, message):
    out = tmp_path / "run"
    assert npusim("run", "-c", "a2", DEMO, "--no-data", "--trace", "none", "--out", out, cwd=tmp_path).returncode == 0
    before = folder_bytes(out)
    run = npusim("run", "-c", "a2", DEMO, "--param", param, "--out", out, cwd=tmp_path)
    assert run.returncode == 2 and message in run.stderr and "simulated" not in run.stdout
    assert folder_bytes(out) == before and sorted(p.name for p in tmp_path.iterdir()) == ["run"]


SPINS = """
from pathlib import Path
import numpy as np, npusim
from npusim import isa
x = npusim.tensor(np.ones(1024, np.float16))
Path("started").write_text("simulating")
while True:
    kernel = isa.Kernel("spin", die=0)
    p = kernel.aiv(0)
    p.copy(p.alloc(1024, np.float16), isa.gm(x))
    kernel.launch()
    npusim.synchronize()
"""


@pytest.mark.parametrize(("signum", "status"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_an_interrupted_run_exits_130_saying_how_far_it_got_and_writes_nothing(tmp_path, signum, status, started):
    out = tmp_path / "run"
    assert npusim("run", "-c", "a2", DEMO, "--no-data", "--trace", "none", "--out", out, cwd=tmp_path).returncode == 0
    before = folder_bytes(out)
    spins = tmp_path / "spins.py"
    spins.write_text(SPINS)
    run = started([sys.executable, "-m", "npusim", "run", "-c", "a2", str(spins), "--out", str(out)], cwd=tmp_path,
                  env=dict(os.environ, PYTHONPATH=str(ROOT)), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    while not (tmp_path / "started").exists() and run.poll() is None:
        time.sleep(0.05)
    run.send_signal(signum)
    _, stderr = run.communicate(timeout=120)
    assert run.returncode == status, stderr
    assert re.fullmatch(r"npusim: interrupted at [\d,.]+ us simulated; nothing was written\n", stderr)
    assert folder_bytes(out) == before and temporaries(tmp_path) == []


def test_sys_exit_0_ends_a_workload_normally_and_another_status_fails_it(tmp_path):
    ends = tmp_path / "ends.py"
    ends.write_text("import sys\nprint('before')\nsys.exit(0)\nprint('after')\n")
    run = npusim("run", "-c", "a2", ends, "--out", tmp_path / "ok", cwd=tmp_path)
    assert run.returncode == 0 and "before" in run.stdout and "after" not in run.stdout
    assert json.loads((tmp_path / "ok" / "manifest.json").read_text())["status"] == "ok"
    ends.write_text("import sys\nsys.exit(3)\n")
    run = npusim("run", "-c", "a2", ends, "--out", tmp_path / "bad", cwd=tmp_path)
    assert run.returncode == 1 and "the workload exited with status 3 (sys.exit)" in run.stderr


def test_the_workload_is_read_and_hashed_once_before_it_runs(tmp_path):
    edits = tmp_path / "edits.py"
    source = "from pathlib import Path\nPath(__file__).write_text('raise SystemExit(9)\\n')\n"
    edits.write_text(source)
    run = npusim("run", "-c", "a2", edits, "--out", tmp_path / "edited", cwd=tmp_path)
    manifest = json.loads((tmp_path / "edited" / "manifest.json").read_text())
    assert run.returncode == 0 and manifest["workload_sha256"] == hashlib.sha256(source.encode()).hexdigest()  # of what ran
    deletes = tmp_path / "deletes.py"
    deletes.write_text("import os\nos.remove(__file__)\n")
    run = npusim("run", "-c", "a2", deletes, "--out", tmp_path / "deleted", cwd=tmp_path)
    assert run.returncode == 0 and not deletes.exists() and (tmp_path / "deleted" / "summary.json").is_file()


RACY = """
import numpy as np, npusim
from npusim import isa
x = npusim.tensor(np.ones(4096, np.float16))
kernel = isa.Kernel("scale", die=0)
p = kernel.aiv(0)
ub = p.alloc(4096, np.float16)
p.copy(ub, isa.gm(x))
p.muls(ub, ub, 2.0)  # no flag from MTE2: may compute on UB before the load has filled it
p.set_flag("VECTOR", "MTE3", 0)
p.wait_flag("VECTOR", "MTE3", 0)
p.copy(isa.gm(x), ub)
kernel.launch()
"""


def test_a_racy_kernel_is_a_warning_by_default_and_fails_the_run_with_races_error(tmp_path):
    racy = tmp_path / "racy.py"
    racy.write_text(RACY)
    warned = npusim("run", "-c", "a2", racy, "--out", tmp_path / "warned", cwd=tmp_path)
    assert warned.returncode == 0 and "PipeRaceWarning: pipe race in kernel 'scale' on die 0 aiv0: read after write on UB" in warned.stderr
    summary = json.loads((tmp_path / "warned" / "summary.json").read_text())
    assert [w["name"] for w in summary["warnings"]] == ["pipe race", "pipe race"]  # UB, and GM (the store may overtake the load)
    failed = npusim("run", "-c", "a2", racy, "--races", "error", "--out", tmp_path / "failed", cwd=tmp_path)
    assert failed.returncode == 1 and "error: workload racy.py failed at" in failed.stderr and "(races='error' is set)" in failed.stderr
    assert json.loads((tmp_path / "failed" / "manifest.json").read_text())["races"] == "error"
    off = npusim("run", "-c", "a2", racy, "--races", "off", "--out", tmp_path / "off", cwd=tmp_path)
    assert off.returncode == 0 and "PipeRaceWarning" not in off.stderr


# -- the run folder written on two cores ------------------------------------------------------------

ALLGATHER = ROOT / "examples" / "shmem_allgather.py"  # on a2: 8 PEs, 21 k events, a trace worth writing on two cores


# Runs `npusim run`, the trace writer's events part first saying which process writes it (its pid in WRITER).
WHO_WRITES = textwrap.dedent("""
    import os, sys
    from pathlib import Path
    from npusim.trace import chrome

    events = chrome._Writer._events
    def said(self):
        Path("writer").write_text(str(os.getpid()))
        events(self)

    chrome._Writer._events = said
    from npusim.cli import main
    sys.argv = ["npusim", *sys.argv[1:]]
    main()
""")


def test_a_bad_npusim_fork_exits_2_before_simulating(tmp_path):
    run = subprocess.run([sys.executable, "-m", "npusim", "run", "-c", "a2", str(DEMO), "--out", str(tmp_path / "run")], cwd=tmp_path,
                         env=dict(os.environ, PYTHONPATH=str(ROOT), NPUSIM_FORK="yes"), capture_output=True, text=True, timeout=300)
    assert run.returncode == 2 and run.stderr == "npusim: error: NPUSIM_FORK='yes': choose one of auto, always, never\n"
    assert "simulated" not in run.stdout and not (tmp_path / "run").exists()


@pytest.mark.parametrize(("workload", "copy"), [(DEMO, False), (ALLGATHER, True)])  # 3,744 events; 21,135
def test_a_large_trace_is_written_by_a_copy_and_a_small_one_by_npusim_itself(tmp_path, workload, copy, started):
    run = started([sys.executable, "-c", WHO_WRITES, "run", "-c", "a2", str(workload), "--no-data", "--out", str(tmp_path / "run")],
                  cwd=tmp_path, env=dict(os.environ, PYTHONPATH=str(ROOT), NPUSIM_FORK="always"), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    _, stderr = run.communicate(timeout=300)
    assert run.returncode == 0, stderr
    assert (int((tmp_path / "writer").read_text()) != run.pid) == copy


def test_the_run_folder_is_the_same_written_on_two_cores_or_one(tmp_path):
    folders = {}
    for how, env in [("two", {"NPUSIM_FORK": "always"}), ("one", {"NPUSIM_FORK": "never"})]:
        out = tmp_path / how
        done = subprocess.run([sys.executable, "-m", "npusim", "run", "-c", "a2", str(ALLGATHER), "--no-data", "--out", str(out)],
                              cwd=tmp_path, env=dict(os.environ, PYTHONPATH=str(ROOT), **env), capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr
        folders[how] = folder_bytes(out)
        summary = json.loads(folders[how].pop("summary.json"))
        summary.pop("wall_time_s")
        manifest = json.loads(folders[how].pop("manifest.json"))
        assert manifest["command"][-1] == str(out) and manifest.pop("run_id") == json.loads(folders[how].pop(MARKER))["id"]
        folders[how]["summary"], folders[how]["command"] = summary, manifest.pop("command")[:-1]
        folders[how]["manifest"] = manifest
    assert folders["two"] == folders["one"] and len(folders["two"]["trace.json"]) > 100_000


# Runs `npusim run` with the trace writer's events part (written by the forked copy) stopped:
# it writes its pid to WRITING, then sleeps, so that the test can interrupt the writing.
WRITING_STOPS = textwrap.dedent("""
    import os, sys, time
    from pathlib import Path
    from npusim.trace import chrome

    def events(self):
        Path("writing").write_text(str(os.getpid()))
        time.sleep(120)

    chrome._Writer._events = events
    from npusim.cli import main
    sys.argv = ["npusim", *sys.argv[1:]]
    main()
""")


@pytest.mark.parametrize(("to", "signum", "status"), [("group", signal.SIGINT, 130), ("npusim", signal.SIGTERM, 143)])
def test_interrupting_the_writing_of_the_run_folder_writes_nothing_and_leaves_no_process(tmp_path, to, signum, status, started):
    out = tmp_path / "run"
    assert npusim("run", "-c", "a2", DEMO, "--no-data", "--trace", "none", "--out", out, cwd=tmp_path).returncode == 0
    before = folder_bytes(out)
    run = started([sys.executable, "-c", WRITING_STOPS, "run", "-c", "a2", str(ALLGATHER), "--no-data", "--out", str(out)], cwd=tmp_path,
                  env=dict(os.environ, PYTHONPATH=str(ROOT), NPUSIM_FORK="always"), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    writing = tmp_path / "writing"
    while not (writing.exists() and writing.read_text()) and run.poll() is None:
        time.sleep(0.05)
    copy = int(writing.read_text())
    assert copy != run.pid
    if to == "group":  # Ctrl-C at a terminal: the whole foreground group
        os.killpg(run.pid, signum)
    else:  # kill or timeout: npusim alone
        run.send_signal(signum)
    _, stderr = run.communicate(timeout=60)
    assert run.returncode == status, stderr
    assert stderr == "npusim: interrupted; nothing was written\n"
    assert folder_bytes(out) == before and temporaries(tmp_path) == []
    assert not Path(f"/proc/{copy}").exists() or Path(f"/proc/{copy}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"


def test_a_failure_of_the_copy_writing_the_trace_is_the_run_folders_error(tmp_path):
    out = tmp_path / "run"
    assert npusim("run", "-c", "a2", DEMO, "--no-data", "--trace", "none", "--out", out, cwd=tmp_path).returncode == 0
    before = folder_bytes(out)
    dies = WRITING_STOPS.replace("time.sleep(120)", "os.kill(os.getpid(), 9)")
    run = subprocess.run([sys.executable, "-c", dies, "run", "-c", "a2", str(ALLGATHER), "--no-data", "--out", str(out)], cwd=tmp_path,
                         env=dict(os.environ, PYTHONPATH=str(ROOT), NPUSIM_FORK="always"), capture_output=True, text=True, timeout=300)
    assert run.returncode == 1 and "Traceback" not in run.stderr
    assert re.match(rf"npusim: error: cannot write the run folder '{out}': the process writing trace.json \(pid \d+\) was killed by SIGKILL; "
                    rf"nothing was written and '{out}' is as it was$", run.stderr.splitlines()[0]), run.stderr
    assert folder_bytes(out) == before and temporaries(tmp_path) == []


# -- hostile inputs of the run folder (issue 32) -------------------------------------------------------

TINY = ("import numpy as np, npusim\nfrom pathlib import Path\nPath('ran').write_text('the workload ran')\n"
        "x = npusim.tensor(np.ones(npusim.param('x', 16), np.float16))\n")


@pytest.fixture
def tiny(tmp_path) -> Path:
    """A workload that simulates nothing (a run of it takes no time) and leaves ``ran`` where it runs."""
    workload = tmp_path / "tiny.py"
    workload.write_text(TINY)
    return workload


def run_id(folder: Path) -> str:
    return json.loads((folder / "manifest.json").read_text())["run_id"]


def test_runs_with_different_settings_go_to_different_default_folders_and_say_where(tmp_path, tiny):
    plain = npusim("run", "-c", "a2", tiny, "--trace", "none", cwd=tmp_path)
    fast = npusim("run", "-c", "a2", tiny, "--trace", "none", "--set", "shape.nodes=2", cwd=tmp_path)
    nodata = npusim("run", "-c", "a2", tiny, "--trace", "none", "--no-data", "--param", "x=1", cwd=tmp_path)
    again = npusim("run", "-c", "a2", tiny, "--trace", "none", "--set", "shape.nodes=2", cwd=tmp_path)
    folders = {}
    for name, run in (("plain", plain), ("fast", fast), ("nodata", nodata), ("again", again)):
        assert run.returncode == 0, run.stderr
        folders[name] = re.search(r" in (traces/\S+)$", run.stdout.strip().splitlines()[-1]).group(1)
    assert folders["plain"] == "traces/tiny-a2" and re.fullmatch(r"traces/tiny-a2-[0-9a-f]{8}", folders["fast"])
    assert len({folders["plain"], folders["fast"], folders["nodata"]}) == 3 and folders["again"] == folders["fast"]
    assert sorted(p.name for p in (tmp_path / "traces").iterdir()) == sorted(
        [Path(folders["plain"]).name, Path(folders["fast"]).name, Path(folders["fast"]).name + ".prev", Path(folders["nodata"]).name])
    assert json.loads((tmp_path / folders["fast"] / "manifest.json").read_text())["overrides"] == ["shape.nodes=2"]


def test_a_usage_error_the_workload_meets_exits_2_and_writes_nothing(tmp_path):
    misuse = tmp_path / "misuse.py"
    misuse.write_text("import numpy as np, npusim\nfrom npusim import pypto\nx = npusim.tensor(np.ones((4, 64), np.float32))\n"
                      "pypto.add(x, x)\n")
    run = npusim("run", "-c", "a2", misuse, "--out", tmp_path / "run", cwd=tmp_path)
    assert run.returncode == 2, run.stderr
    assert run.stderr.startswith("npusim: error: workload misuse.py stopped at 0.000 us simulated; nothing was written: pypto.add is "
                                 "called outside a kernel")
    assert "        at misuse.py:4: pypto.add(x, x)\n" in run.stderr and "Traceback" not in run.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["misuse.py"]  # no run folder, no temporary


def test_a_folder_that_merely_holds_a_manifest_is_not_npusims_and_nothing_of_it_is_touched(tmp_path, tiny):
    (tmp_path / "p" / "src").mkdir(parents=True)
    (tmp_path / "p" / "manifest.json").write_text('{"name": "x"}')
    (tmp_path / "p" / "src" / "main.c").write_text("int main;")
    run = npusim("run", "-c", "a2", tiny, "--out", "p", cwd=tmp_path)
    assert run.returncode == 2 and "'p' is not an npusim output folder (it has no .npusim-folder.json" in run.stderr
    assert (tmp_path / "p" / "src" / "main.c").read_text() == "int main;" and not (tmp_path / "p.prev").exists()
    assert not (tmp_path / "ran").exists()  # refused before the workload ran


def test_a_user_folder_named_like_the_previous_run_or_a_run_folder_the_user_added_to_is_never_touched(tmp_path, tiny):
    (tmp_path / "out.prev").mkdir()
    (tmp_path / "out.prev" / "notes.txt").write_text("mine")
    run = npusim("run", "-c", "a2", tiny, "--trace", "none", "--out", "out", cwd=tmp_path)
    assert run.returncode == 2 and "'out.prev' is not an npusim output folder" in run.stderr
    (tmp_path / "out.prev" / "notes.txt").rename(tmp_path / "notes.txt")
    for _ in range(2):  # out, then out.prev, hold runs
        assert npusim("run", "-c", "a2", tiny, "--trace", "none", "--out", "out", cwd=tmp_path).returncode == 0
    (tmp_path / "out.prev" / "notes.txt").write_text("mine")  # the user keeps a note in the earlier run
    run = npusim("run", "-c", "a2", tiny, "--trace", "none", "--out", "out", cwd=tmp_path)
    assert run.returncode == 2 and "'out.prev' holds notes.txt, which npusim did not write there" in run.stderr
    assert (tmp_path / "out.prev" / "notes.txt").read_text() == "mine"


def test_a_run_folder_written_before_markers_is_replaced_and_kept_as_prev(tmp_path, tiny):
    old = tmp_path / "out"
    old.mkdir()
    for name in ("summary.json", "config.yaml", "op_summary.csv", "pipe_utilization.csv"):
        (old / name).write_text("{}")
    (old / "manifest.json").write_text(json.dumps({"npusim_version": "0.1.0", "workload_sha256": "0" * 64, "status": "ok"}))
    run = npusim("run", "-c", "a2", tiny, "--trace", "none", "--out", "out", cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    assert json.loads((tmp_path / "out.prev" / "manifest.json").read_text())["npusim_version"] == "0.1.0" and run_id(tmp_path / "out")


def test_a_workload_that_changes_the_working_folder_does_not_move_its_run(tmp_path):
    (tmp_path / "elsewhere" / "rel" / "run").mkdir(parents=True)
    (tmp_path / "elsewhere" / "rel" / "run" / "keep.txt").write_text("mine")
    moves = tmp_path / "moves.py"
    moves.write_text("import os\nos.chdir('elsewhere')\n" + TINY)
    run = npusim("run", "-c", "a2", moves, "--trace", "none", "--out", "rel/run", cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip().endswith(" in rel/run") and run_id(tmp_path / "rel" / "run")
    assert sorted(p.name for p in (tmp_path / "elsewhere" / "rel" / "run").iterdir()) == ["keep.txt"]
    assert sorted(p.name for p in (tmp_path / "rel").iterdir()) == ["run"]  # no temporary left beside it


@pytest.mark.parametrize(("out", "what"), [(".", "is the working folder"), ("..", "is '[^']+', which holds the working folder"),
                                           ("sub/..", "is the working folder")])
def test_the_working_folder_or_one_above_it_is_refused_as_out_before_simulating(tmp_path, tiny, out, what):
    (tmp_path / "sub").mkdir()
    run = npusim("run", "-c", "a2", tiny, "--out", out, cwd=tmp_path)
    assert run.returncode == 2 and re.match(rf"npusim: error: --out '{re.escape(out)}' {what}: ", run.stderr), run.stderr
    assert "Traceback" not in run.stderr
    assert not (tmp_path / "ran").exists() and sorted(p.name for p in tmp_path.iterdir()) == ["sub", "tiny.py"]


# Two runs that wait for each other (each leaves ready-<pid>, then waits for two of them) before simulating,
# so that they commit to the same fresh --out at about the same moment.
MEETS = textwrap.dedent("""
    import os, time
    from pathlib import Path
    Path(f"ready-{os.getpid()}").touch()
    deadline = time.monotonic() + 60
    while len(list(Path(".").glob("ready-*"))) < 2 and time.monotonic() < deadline:
        time.sleep(0.005)
""") + DEMO.read_text()


def test_two_runs_into_one_fresh_out_at_once_keep_both_good_runs(tmp_path, started):
    meets = tmp_path / "meets.py"
    meets.write_text(MEETS)
    for round in range(2):
        for ready in tmp_path.glob("ready-*"):
            ready.unlink()
        out = tmp_path / f"out{round}"
        runs = [started([sys.executable, "-m", "npusim", "run", "-c", "a2", str(meets), "--no-data", "--trace", "none", "--out", str(out)],
                        cwd=tmp_path, env=dict(os.environ, PYTHONPATH=str(ROOT)), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                for _ in range(2)]
        for run in runs:
            _, stderr = run.communicate(timeout=120)
            assert run.returncode == 0, stderr
        prev = out.with_name(out.name + ".prev")
        assert json.loads((out / "manifest.json").read_text())["status"] == json.loads((prev / "manifest.json").read_text())["status"] == "ok"
        assert run_id(out) != run_id(prev) and temporaries(tmp_path) == []  # both runs kept: neither deleted


def test_out_of_range_times_of_the_trace_window_and_the_network_quantum_exit_2(tmp_path, tiny):
    for option, message in ((("--trace-window", "1e400us:2e400us"), "--trace-window '1e400us:2e400us': '1e400us' is more than 2**53 ps"),
                            (("--network-quantum", "1e300s"), "network quantum '1e300s' is more than 2**53 ps")):
        run = npusim("run", "-c", "a2", tiny, *option, "--out", "run", cwd=tmp_path)
        assert run.returncode == 2 and message in run.stderr and "Traceback" not in run.stderr
    assert not (tmp_path / "ran").exists()


# The workload prints three lines, waits until the reader has closed the pipe, then prints more
# (as `npusim run ... | head -3` goes once head has its lines); the report follows.
PRINTS_PAST_ITS_READER = textwrap.dedent("""
    import time
    from pathlib import Path
    for line in ("one", "two", "three"):
        print(line, flush=True)
    deadline = time.monotonic() + 60
    while not Path("closed").exists() and time.monotonic() < deadline:
        time.sleep(0.005)
    for n in range(2000):
        print("more output the reader no longer reads", n)
""") + TINY


def test_a_closed_stdout_ends_only_the_printing_and_the_run_folder_is_written(tmp_path, started):
    workload = tmp_path / "prints.py"
    workload.write_text(PRINTS_PAST_ITS_READER)
    run = started([sys.executable, "-m", "npusim", "run", "--config", "a2", str(workload), "--out", "x"], cwd=tmp_path,
                  env=dict(os.environ, PYTHONPATH=str(ROOT)), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert [run.stdout.readline() for _ in range(3)] == ["one\n", "two\n", "three\n"]
    run.stdout.close()  # head -3 exits
    (tmp_path / "closed").touch()
    stderr = run.stderr.read()
    assert run.wait(timeout=120) == 0, stderr
    assert stderr == "" and json.loads((tmp_path / "x" / "manifest.json").read_text())["status"] == "ok"
    assert not (tmp_path / "x.failed").exists() and temporaries(tmp_path) == []


def test_races_error_names_the_racing_access_not_the_synchronisation(tmp_path):
    """--races error in a PyPTO program: the all-gather without its waits; the report names both
    accesses' lines, and the CLI points at the access that races (a shmem op of the kernel's file),
    not at the workload's npusim.synchronize() that ran the simulation."""
    examples = Path(__file__).resolve().parents[2] / "examples"
    workload = tmp_path / "racy.py"
    workload.write_text(
        "import sys\n"
        f"sys.path.insert(0, {str(examples)!r})\n"
        "import numpy as np, npusim\n"
        "from shmem_allgather import allgather_kernel\n"
        "xs = [npusim.tensor(np.ones((8, 64), np.float16), device=pe) for pe in range(2)]\n"
        "outs = [npusim.zeros((16, 64), np.float16, device=pe) for pe in range(2)]\n"
        "npusim.launch(allgather_kernel, 2, args=lambda pe: (xs[pe], outs[pe], 'world', 2, 8, 8, False))\n"
        "npusim.synchronize()\n"
    )
    run = npusim("run", "-c", "a2", workload, "--races", "error", "--trace", "none", "--out", tmp_path / "out", cwd=tmp_path)
    assert run.returncode == 1
    assert "data race on shmem tensor #0" in run.stderr and "shmem_allgather.py:" in run.stderr
    at = re.search(r"^\s+at (\S+):(\d+) in allgather_kernel: (.*)$", run.stderr, re.M)
    assert at, run.stderr
    assert at.group(1).endswith("shmem_allgather.py") and ("shmem_put" in at.group(3) or "shmem_load" in at.group(3))
    assert "racy.py:8" not in run.stderr
