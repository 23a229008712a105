"""``npusim bench collectives`` end to end, as a user runs it: the table (nccl-tests' busbw), the
sweep's winner per size, the files, the exit codes; and the collective example."""

import csv

from tests.cli.test_run import ROOT, npusim


def test_an_all_reduce_benchmark_prints_busbw_as_nccl_tests_defines_it(tmp_path):
    run = npusim("bench", "collectives", "-c", "a2", "-b", "1KiB", "-e", "64KiB", "-f", "8", "--check", "--out", tmp_path / "out", cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    assert "busbw = algbw x 2(n-1)/n (nccl-tests)" in run.stdout
    rows = [line.split() for line in run.stdout.splitlines() if line and not line.startswith(("#", "wrote"))]
    assert [int(r[0]) for r in rows] == [1024, 8192, 65536]
    for row in rows:
        size, time_us, algbw, busbw = int(row[0]), float(row[-4]), float(row[-3]), float(row[-2])
        assert row[-1] == "ok" and row[4] == "mesh"
        assert abs(algbw - size / time_us / 1e3) < 0.01 and abs(busbw - algbw * 2 * 7 / 8) < 0.02
    assert {p.name for p in (tmp_path / "out").iterdir()} == {".npusim-folder.json", "bench.csv", "busbw.png"}
    with open(tmp_path / "out" / "bench.csv", newline="") as handle:
        assert [row["correct"] for row in csv.DictReader(handle)] == ["True"] * 3


def test_a_sweep_names_the_fastest_algorithm_per_size(tmp_path):
    run = npusim("bench", "collectives", "-c", "a2", "--set", "shape.nodes=2", "--op", "allgather", "--sizes", "1KiB,16MiB",
                 "--sweep", "level1=ring,rhd", "--out", tmp_path / "out", cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    forced = [line.split()[3] for line in run.stdout.splitlines() if line and line[0] != "#" and not line.startswith("wrote")]
    assert forced == ["auto", "level1=ring", "level1=rhd"] * 2
    assert "# fastest per size (several: within 0.1%): 1.00 KiB " in run.stdout


def test_bad_input_exits_2_with_the_reason(tmp_path):
    run = npusim("bench", "collectives", "-c", "a2", "--sweep", "level9=ring", cwd=tmp_path)
    assert run.returncode == 2 and "--sweep 'level9=ring'" in run.stderr
    run = npusim("bench", "collectives", "-c", "a2", "--ranks", "9", "--sizes", "8", cwd=tmp_path)
    assert run.returncode == 2 and "--ranks 9" in run.stderr
    run = npusim("bench", "collectives", "-c", "a2", "--set", "shape.nodes=2", "--op", "alltoall", "--sizes", "1KiB", "--sweep", "level1=ring", cwd=tmp_path)
    assert run.returncode == 2 and "ring" in run.stderr and "alltoall" in run.stderr.lower()


def test_the_collective_example_checks_its_result(tmp_path):
    run = npusim("run", "-c", "a2", ROOT / "examples" / "hccl_allreduce.py", "--param", "mib=0.25", "--param", "op=reducescatter",
                 "--trace", "none", cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    assert "reducescatter of 256.00 KiB (float16) on 8 ranks: mesh" in run.stdout and "every rank's result is exact" in run.stdout
