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
