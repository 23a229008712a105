"""A workload with its own __main__ block runs as __main__ (its block decides what runs, main() is
not called); one without runs as before (main() called)."""

import npusim
from npusim.frontend.workload import has_main_block, run_workload_file


def test_a_main_block_is_found_only_at_top_level():
    assert has_main_block('def f():\n    pass\nif __name__ == "__main__":\n    f()\n')
    assert not has_main_block('def f():\n    if __name__ == "__main__":\n        pass\n')
    assert not has_main_block("if __name__ == 'x':\n    pass\n")
    assert not has_main_block("def broken(:\n")


def test_a_script_runs_as_main_and_main_is_not_called_twice(tmp_path):
    script = tmp_path / "script.py"
    script.write_text('calls = []\ndef main():\n    calls.append("main")\nif __name__ == "__main__":\n    main()\n')
    workload = tmp_path / "workload.py"
    workload.write_text('calls = []\ndef main():\n    calls.append(__name__)\n')
    with npusim.session("a2"):
        assert run_workload_file(script)["calls"] == ["main"]
        assert run_workload_file(workload)["calls"] == ["__npusim_workload__"]


def test_a_script_sees_its_own_command_line(tmp_path):
    """``npusim run --config a2 script.py -- -m sim``: the script's argparse sees [script, -m, sim], as
    ``python script.py -m sim`` gives it (the framework's examples parse --run_mode, -t ...)."""
    import subprocess
    import sys

    script = tmp_path / "script.py"
    script.write_text("import argparse, sys\nparser = argparse.ArgumentParser()\nparser.add_argument('-m', default='npu')\n"
                      "if __name__ == '__main__':\n    print(sys.argv[1:], parser.parse_args().m)\n")
    saved = list(sys.argv)
    with npusim.session("a2"):
        run_workload_file(script, ["-m", "sim"])
    assert sys.argv == saved
    run = subprocess.run([sys.executable, "-m", "npusim", "run", "--config", "a2", "--trace", "none", "--out", str(tmp_path / "out"),
                          str(script), "--", "-m", "sim"], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    assert "['-m', 'sim'] sim" in run.stdout
