"""Whole ``npusim run`` commands with the run folder written on two cores or on one: wall and CPU
seconds and peak memory, each a fresh process, against a baseline checkout in the same run.

    python benchmarks/run_folder.py [--case main] [--case 32pe] [--baseline /path/to/main/checkout]
                                    [--repeat 3] [--scratch /dev/shm] [--writes N]

Cases (timing only, ``--no-data``, the default trace): ``main`` the README's job (the a3
all-gather), ``32pe`` the same on two nodes (``--set shape.nodes=2 --param n_pes=32``),
``moe768`` the MoE dispatch on 768 dies (48 nodes, as benchmarks/scale.py runs it), ``hier768``
the hierarchical all-gather on 768 dies. Variants, run interleaved: ``two cores`` (this checkout
with NPUSIM_FORK=always), ``one core`` (this checkout with NPUSIM_FORK=never) and ``baseline`` (with
``--baseline``). Prints per case and variant the wall and CPU seconds (user + system of the command
and the copy it forks, os.wait4) of every run, min and median, and the ratio wall(one core or
baseline) / wall(two cores); the peak resident memory of the largest process (ru_maxrss) and the
peak memory of the command and its copy together (sampled every 20 ms: the resident memory while
it runs alone, the proportional memory of both, PSS, while it has a copy: shared pages counted
once). The machine must be quiet for the wall times to mean anything (say the load average with
the figures); bytecode is cached first (one untimed run of each variant). ``--writes N``
measures the writing alone instead (:func:`writes_in_process`).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from running_on import running_on

HERE = Path(__file__).resolve().parents[1]
CASES = {
    "main": ["--config", "a3", "examples/shmem_allgather.py"],
    "32pe": ["--config", "a3", "--set", "shape.nodes=2", "examples/shmem_allgather.py", "--param", "n_pes=32"],
    "moe768": ["--config", "a3", "--set", "shape.nodes=48", "examples/moe_dispatch.py", "--param", "ep=16", "--param", "tokens=4",
               "--param", "hidden=4096", "--param", "tile_tokens=4"],
    "hier768": ["--config", "a3", "--set", "shape.nodes=48", "--set", "shmem.signal_window=2MiB", "examples/hierarchical_allgather.py",
                "--param", "rows=4", "--param", "cols=1024"],
}
"""Case -> the arguments of ``npusim run`` before ``--no-data`` (examples/ paths in the checkout measured)."""
SAMPLE_S = 0.02


def memory_kib(pid: int) -> int:
    """The memory of ``pid`` and its children (KiB; 0 once it has ended): its resident memory when
    it runs alone (statm: cheap), the proportional memory of all of them while it has a child
    (smaps_rollup, which walks their page tables: read only then)."""
    try:
        children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
        if not children:
            return int(Path(f"/proc/{pid}/statm").read_text().split()[1]) * (os.sysconf("SC_PAGE_SIZE") // 1024)
    except (OSError, IndexError, ValueError):
        return 0
    total = 0
    for process in [pid, *map(int, children)]:
        with contextlib.suppress(OSError):  # ended meanwhile
            total += sum(int(line.split()[1]) for line in Path(f"/proc/{process}/smaps_rollup").read_text().splitlines() if line.startswith("Pss:"))
    return total


def measure(command: list[str], cwd: Path, env: dict[str, str]) -> dict[str, float]:
    """Wall s, CPU s, peak RSS MB (largest process) and peak PSS MB (all) of ``command`` run to its end."""
    with tempfile.TemporaryFile() as errors:
        started = time.perf_counter()
        process = subprocess.Popen(command, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=errors)
        peak_pss = 0
        while True:
            pid, status, usage = os.wait4(process.pid, os.WNOHANG)
            if pid:
                break
            peak_pss = max(peak_pss, memory_kib(process.pid))
            time.sleep(SAMPLE_S)
        wall = time.perf_counter() - started
        if os.waitstatus_to_exitcode(status) != 0:
            errors.seek(0)
            raise SystemExit(f"{' '.join(command)} failed: {errors.read().decode()[-2000:]}")
    return {"wall": wall, "cpu": usage.ru_utime + usage.ru_stime, "rss": usage.ru_maxrss / 1024, "pss": peak_pss / 1024}


def writes_in_process(case: str, writes: int, scratch: Path | None) -> None:
    """The run folder of ``case`` written ``writes`` times on two cores and as many on one,
    alternately, by this process after one session (as ``npusim run`` writes it: the session's
    objects frozen, gc.freeze): wall seconds of each write, min and median. The min is the figure
    of a moment when the other core was free, which a busy machine gives now and then."""
    import contextlib
    import gc
    import io

    from npusim.cli.run import run_outputs
    from npusim.config import load_config
    from npusim.files import FORK, StagedFolder
    from npusim.frontend.session import session
    from npusim.frontend.workload import read_workload, run_workload_file
    from npusim.trace.selection import TraceSelection

    arguments = CASES[case]
    overrides = [arguments[i + 1] for i, a in enumerate(arguments) if a == "--set"]
    params = dict(arguments[i + 1].split("=") for i, a in enumerate(arguments) if a == "--param")
    workload = HERE / next(a for a in arguments if a.startswith("examples/"))
    loaded = load_config(arguments[arguments.index("--config") + 1], overrides)
    with contextlib.redirect_stdout(io.StringIO()), session(loaded, data=False, params={k: int(v) for k, v in params.items()}) as active:
        run_workload_file(read_workload(workload))
    gc.freeze()
    result = active.result
    metadata = {"config": loaded.name}
    times: dict[str, list[float]] = {"two cores": [], "one core": []}
    with tempfile.TemporaryDirectory(prefix="npusim-run-folder-", dir=scratch) as folder:
        out = Path(folder) / "out"
        for _ in range(writes):
            for name in times:
                os.environ[FORK] = "always" if name == "two cores" else "never"
                started = time.perf_counter()
                with StagedFolder(out) as staged:
                    staged.write(run_outputs(result, loaded, {"status": result.status}, metadata, TraceSelection(), False))
                    staged.commit(out)
                times[name].append(time.perf_counter() - started)
    print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}; {case}: the run folder written in this process")
    for name, walls in times.items():
        print(f"{name:10s} wall s min {min(walls):.3f} median {statistics.median(walls):.3f}")
    print(f"one core / two cores: min {min(times['one core']) / min(times['two cores']):.2f} "
          f"median {statistics.median(times['one core']) / statistics.median(times['two cores']):.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--case", choices=list(CASES), action="append", help="the cases to run (repeatable; default: main)")
    parser.add_argument("--baseline", type=Path, help="a checkout (with its .venv) to compare against, e.g. main's")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--scratch", type=Path, default=None, help="where the run folders go (default: the system's temporary folder)")
    parser.add_argument("--writes", type=int, default=0, help="instead: write the first case's run folder this many times on two cores "
                        "and on one, in this process after one session (min and median wall of the writing)")
    args = parser.parse_args()
    print(running_on())
    cases = args.case or ["main"]
    if args.writes:
        writes_in_process(cases[0], args.writes, args.scratch)
        return
    env = {key: value for key, value in os.environ.items() if key not in ("PYTHONDONTWRITEBYTECODE", "NPUSIM_FORK")}
    variants = {"two cores": (HERE, {**env, "NPUSIM_FORK": "always"}), "one core": (HERE, {**env, "NPUSIM_FORK": "never"})}
    if args.baseline:
        variants["baseline"] = (args.baseline.resolve(), env)
    with tempfile.TemporaryDirectory(prefix="npusim-run-folder-", dir=args.scratch) as folder:
        env["PYTHONPYCACHEPREFIX"] = str(Path(folder) / "pycache")

        def command(root: Path, case: str) -> list[str]:
            arguments = [str(root / a) if a.startswith("examples/") else a for a in CASES[case]]
            return [str(root / ".venv" / "bin" / "npusim"), "run", *arguments, "--no-data", "--out", str(Path(folder) / "out")]

        for root, variant_env in variants.values():
            measure(command(root, "main"), Path(folder), variant_env)  # bytecode cached, files in the page cache
        results: dict[tuple[str, str], list[dict[str, float]]] = {}
        for case in cases:
            for _ in range(args.repeat):
                for name, (root, variant_env) in variants.items():
                    results.setdefault((case, name), []).append(measure(command(root, case), Path(folder), variant_env))
    print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    for case in cases:
        two = [r["wall"] for r in results[(case, "two cores")]]
        for name in variants:
            runs = results[(case, name)]
            wall, cpu = [r["wall"] for r in runs], [r["cpu"] for r in runs]
            ratio = "" if name == "two cores" else f"; wall / two cores' min {min(wall) / min(two):.2f} median {statistics.median(wall) / statistics.median(two):.2f}"
            print(f"{case:8s} {name:10s} wall s {', '.join(f'{x:.2f}' for x in wall)} (min {min(wall):.2f} median {statistics.median(wall):.2f}); "
                  f"CPU s min {min(cpu):.2f} median {statistics.median(cpu):.2f}; peak RSS {max(r['rss'] for r in runs):.0f} MB, "
                  f"both {max(r['pss'] for r in runs):.0f} MB{ratio}")


if __name__ == "__main__":
    main()
