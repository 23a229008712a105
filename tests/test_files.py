"""Default output folder names: one path component inside traces/ or sweeps/, whatever the names hold."""

from pathlib import Path

import pytest

from npusim.files import default_folder_name


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
