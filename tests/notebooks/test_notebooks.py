"""The notebooks in notebooks/ are committed without outputs and run from top to bottom: each is
executed in a Jupyter kernel on the interpreter running the tests, with this repository's npusim."""

import json
import sys
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

ROOT = Path(__file__).parents[2]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
KERNEL = "npusim-tests"
CELL_TIMEOUT_S = 300  # a bound on a hung cell, far above what any cell takes


def test_the_notebooks_are_found():
    assert [path.name for path in NOTEBOOKS] == ["01_timelines.ipynb", "02_pipeline_whatif.ipynb", "03_torch_graph_mode.ipynb",
                                                       "04_next_generation.ipynb"]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda path: path.name)
def test_committed_without_outputs(path):
    notebook = nbformat.read(path, as_version=4)
    executed = [index for index, cell in enumerate(notebook.cells)
                if cell.cell_type == "code" and (cell.outputs or cell.execution_count is not None)]
    assert not executed, (f"{path.name}: code cells {executed} have outputs or execution counts; clear them "
                          f"(jupyter nbconvert --clear-output --inplace notebooks/{path.name})")


@pytest.fixture
def kernel_of_this_interpreter(tmp_path, monkeypatch):
    """A kernelspec that starts ipykernel on ``sys.executable`` with this repository first on the
    path and matplotlib headless; ``JUPYTER_PATH`` puts it before any user-wide kernelspec."""
    spec = tmp_path / "jupyter" / "kernels" / KERNEL
    spec.mkdir(parents=True)
    (spec / "kernel.json").write_text(json.dumps({
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "npusim tests",
        "language": "python",
        "env": {"PYTHONPATH": str(ROOT), "MPLBACKEND": "Agg"},
    }))
    monkeypatch.setenv("JUPYTER_PATH", str(tmp_path / "jupyter"))
    return KERNEL


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda path: path.name)
def test_runs_top_to_bottom(path, kernel_of_this_interpreter):
    notebook = nbformat.read(path, as_version=4)
    client = NotebookClient(notebook, kernel_name=kernel_of_this_interpreter, timeout=CELL_TIMEOUT_S,
                            resources={"metadata": {"path": str(path.parent)}})
    client.execute()  # raises CellExecutionError naming the cell on the first error

    outputs = [output for cell in notebook.cells if cell.cell_type == "code" for output in cell.outputs]
    stderr = [output["text"] for output in outputs if output.get("name") == "stderr"]
    assert not stderr, f"{path.name} wrote to stderr (a warning?):\n" + "\n".join(stderr)
    interpreter = [output["text"] for output in outputs if output.get("name") == "stdout" and "npusim " in output.get("text", "")]
    assert interpreter and str(ROOT / "npusim") in interpreter[0], f"{path.name} did not import this repository's npusim: {interpreter}"
    figures = [output for output in outputs if "image/png" in output.get("data", {})]
    plotting_cells = [cell for cell in notebook.cells if cell.cell_type == "code" and any(
        drawing in cell.source for drawing in ("plot.", "Figure(", "plt."))]  # npusim's plots, a figure of its own, pyplot
    assert len(figures) >= len(plotting_cells), f"{path.name}: {len(plotting_cells)} cells plot but only {len(figures)} figures were shown"
